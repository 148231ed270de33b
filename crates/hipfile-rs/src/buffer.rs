//! Memory: device buffers, their registered form, and pinned host memory. Each gives back
//! what it holds on drop, in the order the library requires.

use std::ffi::c_void;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::device::Device;
use crate::host_pages::HostPages;
use crate::Error;

impl Device {
    /// Device memory (hipMalloc / cuMemAlloc_v2), freed on drop.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer, Error> {
        let mut addr = 0usize;
        if len > 0 {
            self.make_current()?;
            addr = self.runtime().malloc(len)?;
        }
        Ok(DeviceBuffer::new(self.clone(), addr, len))
    }

    /// Pinned host memory for the bounce path: our own mapping on huge pages, pinned with
    /// hipHostRegister / cuMemHostRegister (`HostPages`). Where the runtime will not pin it
    /// (a driver or container that does not allow it; ROCm 5 answers "out of memory" for any
    /// refusal), the runtime's own pinned memory instead (hipHostMalloc / cuMemHostAlloc),
    /// whose failure is the file's: slower reads, the same copy. Given back on drop.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer, Error> {
        let memory = if len == 0 {
            Pinned::Empty
        } else {
            self.make_current()?;
            let pages = HostPages::new(len)?;
            // SAFETY: the pages stay mapped until PinnedBuffer's drop, which unpins them
            // first.
            match unsafe {
                self.runtime()
                    .host_register(pages.start().as_ptr().cast(), len)
            } {
                Ok(()) => Pinned::Registered(pages),
                Err(refusal) => {
                    drop(pages);
                    let p = self.runtime().host_alloc(len)?;
                    Pinned::Allocated {
                        start: NonNull::new(p.cast()).expect("host_alloc never returns null"),
                        refusal: refusal.to_string(),
                    }
                }
            }
        };
        Ok(PinnedBuffer {
            device: self.clone(),
            memory,
            len,
        })
    }
}

/// Device memory. `Send`. Freed on drop.
pub struct DeviceBuffer {
    device: Device,
    /// Device address (a `void*` on HIP, a `CUdeviceptr` on CUDA); 0 when `len` is 0.
    addr: usize,
    len: usize,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.addr == 0 {
            return;
        }
        // CUDA refuses calls without a current context; a failure leaves us nothing to do.
        let _ = self.device.make_current();
        // SAFETY: allocated by Device::alloc and no longer registered (RegisteredBuffer
        // deregisters first, or leaks when I/O may still be in flight).
        unsafe { self.device.runtime().free(self.addr) };
    }
}

impl DeviceBuffer {
    /// Takes ownership of `len` bytes at `addr` allocated on `device` (0 when `len` is 0).
    pub(crate) fn new(device: Device, addr: usize, len: usize) -> DeviceBuffer {
        DeviceBuffer { device, addr, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device address of the allocation's start, as a kernel takes it (a `CUdeviceptr`
    /// / `void*` argument of 8 bytes).
    pub fn device_address(&self) -> u64 {
        self.addr as u64
    }

    /// The device address of the allocation's start.
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }

    /// Registers the buffer for I/O; the returned guard deregisters before the memory is freed.
    /// On failure the buffer comes back, so the caller can fall back to a bounce path.
    pub fn register(self) -> Result<RegisteredBuffer, (DeviceBuffer, Error)> {
        let lib = match self.device.io_library(|n| n.buf_register) {
            Ok(lib) => lib,
            Err(e) => return Err((self, e)),
        };
        // SAFETY: the whole live allocation, registered once; deregistered in
        // RegisteredBuffer.
        match unsafe { lib.buf_register(self.addr, self.len) } {
            Ok(()) => Ok(RegisteredBuffer {
                buf: ManuallyDrop::new(self),
                in_flight: AtomicUsize::new(0),
            }),
            Err(err) => Err((self, err)),
        }
    }

    pub(crate) fn check_range(&self, offset: usize, len: usize) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.device.library().invalid(format!(
                "range {offset}+{len} exceeds device buffer of {} bytes",
                self.len
            ))),
        }
    }

    /// hipMemcpy host to device at `offset`.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), Error> {
        self.check_range(offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.device.make_current()?;
        // SAFETY: range checked against this live allocation.
        unsafe {
            self.device
                .runtime()
                .memcpy_to_device(self.addr + offset, src)
        }
    }

    /// hipMemcpy device to host from `offset`.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.check_range(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.device.make_current()?;
        // SAFETY: range checked against this live allocation.
        unsafe {
            self.device
                .runtime()
                .memcpy_to_host(dst, self.addr + offset)
        }
    }
}

/// A registered device buffer: owns the [`DeviceBuffer`]; on drop deregisters, then frees.
pub struct RegisteredBuffer {
    buf: ManuallyDrop<DeviceBuffer>,
    /// Async ops submitted on a stream and not yet synchronized. Non-zero at drop means a
    /// stream was leaked with I/O in flight: then the memory is leaked too, never freed under
    /// the library's feet.
    pub(crate) in_flight: AtomicUsize,
}

impl Drop for RegisteredBuffer {
    fn drop(&mut self) {
        if self.in_flight.load(Ordering::Acquire) != 0 {
            return;
        }
        let _ = self.deregister_raw();
        // SAFETY: dropped once, here; the field is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.buf) };
    }
}

impl RegisteredBuffer {
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        &mut self.buf
    }
    pub fn len(&self) -> usize {
        self.buffer().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn deregister_raw(&self) -> Result<(), Error> {
        let lib = self.buf.device.library();
        // SAFETY: the base pointer registered in DeviceBuffer::register; nothing in flight.
        unsafe { lib.buf_deregister(self.buf.addr) }
    }

    /// Deregisters explicitly, reporting a failure the drop would have to ignore, and gives
    /// the memory back.
    pub fn deregister(self) -> Result<DeviceBuffer, Error> {
        let mut this = ManuallyDrop::new(self);
        if this.in_flight.load(Ordering::Acquire) != 0 {
            // Leaked on purpose: see `in_flight`.
            return Err(this.buf.device.library().invalid(
                "buffer deregistered with async I/O in flight (a stream was leaked)".into(),
            ));
        }
        let result = this.deregister_raw();
        // SAFETY: `this` is never dropped, so the buffer is moved out exactly once.
        let buf = unsafe { ManuallyDrop::take(&mut this.buf) };
        result.map(|()| buf)
    }
}

/// Where a [`PinnedBuffer`]'s bytes are.
enum Pinned {
    /// `len` is 0.
    Empty,
    /// Our own mapping, registered with the runtime.
    Registered(HostPages),
    /// The runtime's own allocation, and why ours was not pinned.
    Allocated { start: NonNull<u8>, refusal: String },
}

/// How a [`PinnedBuffer`]'s memory was pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinning {
    /// Our own mapping, registered with hipHostRegister / cuMemHostRegister; `huge_pages`:
    /// it is large enough to have asked the kernel for 2 MiB pages (a hint the kernel may
    /// not follow).
    Registered { huge_pages: bool },
    /// hipHostMalloc / cuMemHostAlloc's memory, because the runtime refused to register
    /// ours (the refusal as the runtime gave it, naming the call).
    Allocated { refusal: String },
}

/// Pinned host memory, usable as a byte slice.
pub struct PinnedBuffer {
    device: Device,
    memory: Pinned,
    len: usize,
}

// SAFETY: plain host memory owned by this value; slices follow the usual borrow rules.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer {}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Pinned::Empty = self.memory {
            return;
        }
        let _ = self.device.make_current();
        let runtime = self.device.runtime();
        match std::mem::replace(&mut self.memory, Pinned::Empty) {
            Pinned::Empty => {}
            Pinned::Registered(pages) => {
                // SAFETY: registered by Device::alloc_pinned; no slice or copy outlives self.
                let unpinned = unsafe { runtime.host_unregister(pages.start().as_ptr().cast()) };
                // Pages the runtime may still pin stay mapped: a later mapping at the same
                // address must not meet the driver's stale pinning.
                if !unpinned {
                    std::mem::forget(pages);
                }
            }
            // SAFETY: allocated by Device::alloc_pinned; no slice or copy outlives self.
            Pinned::Allocated { start, .. } => unsafe {
                runtime.host_free(start.as_ptr().cast::<c_void>())
            },
        }
    }
}

impl PinnedBuffer {
    fn start(&self) -> *mut u8 {
        match &self.memory {
            Pinned::Empty => NonNull::dangling().as_ptr(),
            Pinned::Registered(pages) => pages.start().as_ptr(),
            Pinned::Allocated { start, .. } => start.as_ptr(),
        }
    }

    /// How the memory was pinned; None for an empty buffer.
    pub fn pinning(&self) -> Option<Pinning> {
        match &self.memory {
            Pinned::Empty => None,
            Pinned::Registered(pages) => Some(Pinning::Registered {
                huge_pages: pages.huge(),
            }),
            Pinned::Allocated { refusal, .. } => Some(Pinning::Allocated {
                refusal: refusal.clone(),
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` mapped bytes (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.start(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.start(), self.len) }
    }
}
