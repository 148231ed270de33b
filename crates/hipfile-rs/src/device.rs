//! One GPU: made current on whichever thread uses it, and the source of its buffers, file
//! handles and streams.

use std::cell::Cell;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::buffer::{DeviceBuffer, PinnedBuffer};
use crate::error::Failure;
use crate::file::FileHandle;
use crate::library::{Driver, Library};
use crate::runtime::Runtime;
use crate::runtime_ops::DeviceContext;
use crate::stream::Stream;
use crate::{sys, Error};

struct DeviceInner {
    lib: Library,
    /// The open I/O driver, for devices that register files, buffers and streams; `None` for
    /// a device used only for staging memory and copies (see [`Library::staging_device`]).
    driver: Option<Driver>,
    index: u32,
    /// Process-unique, for the per-thread "current device" cache.
    id: u64,
    ctx: DeviceContext,
}

// SAFETY: the CUDA context pointer is a process-wide handle that the driver API allows on any
// thread; the HIP variant holds nothing.
unsafe impl Send for DeviceInner {}
// SAFETY: as above; nothing in DeviceInner is mutated after creation.
unsafe impl Sync for DeviceInner {}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // SAFETY: balances the retain in Device::open; every buffer and stream of this device
        // holds a clone of it, so none is alive.
        unsafe { self.lib.runtime().release_context(&self.ctx) };
    }
}

thread_local! {
    /// The `DeviceInner::id` current on this thread (0: unknown).
    static CURRENT_DEVICE: Cell<u64> = const { Cell::new(0) };
}

/// One GPU. `Send + Sync`; every call that needs the device current makes it so itself.
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl Device {
    /// Checks `index` against the device count, retains the device's context (CUDA) and
    /// makes it current on the calling thread.
    pub(crate) fn open(lib: &Library, driver: Option<Driver>, index: u32) -> Result<Device, Error> {
        let count = match lib.device_count() {
            Ok(n) => n,
            Err(e) if e.code() == Some(sys::RUNTIME_NO_DEVICE) => 0,
            Err(e) => return Err(e),
        };
        if index >= count {
            return Err(Error::NoSuchDevice { index, count });
        }
        let ctx = lib.runtime().retain_context(index)?;
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let device = Device {
            inner: Arc::new(DeviceInner {
                lib: lib.clone(),
                driver,
                index,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                ctx,
            }),
        };
        device.make_current()?;
        Ok(device)
    }

    pub fn index(&self) -> u32 {
        self.inner.index
    }

    /// The open I/O driver, when this device came from [`Driver::device`].
    pub fn driver(&self) -> Option<&Driver> {
        self.inner.driver.as_ref()
    }

    pub(crate) fn library(&self) -> &Library {
        &self.inner.lib
    }

    /// The library, if the I/O driver is open for this device: registration needs it.
    /// `call` picks the failing call's name in this flavor's symbol set.
    pub(crate) fn io_library(
        &self,
        call: fn(&sys::IoSymbols) -> &'static str,
    ) -> Result<&Library, Error> {
        match &self.inner.driver {
            Some(driver) => Ok(driver.library()),
            None => {
                let lib = self.library();
                Err(lib.error(
                    call(lib.inner.names),
                    Failure::Op(sys::DRIVER_NOT_INITIALIZED),
                ))
            }
        }
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        self.library().runtime()
    }

    /// Whether `other` is this very device (not merely the same index).
    pub(crate) fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Makes the device current on the calling thread (hipSetDevice / cuCtxSetCurrent are
    /// per thread), unless this crate already made it current there: every call of the crate
    /// goes through here, so a thread that keeps working for the same device pays once.
    pub fn make_current(&self) -> Result<(), Error> {
        if CURRENT_DEVICE.with(Cell::get) == self.inner.id {
            return Ok(());
        }
        self.runtime()
            .set_current(self.inner.index, &self.inner.ctx)?;
        CURRENT_DEVICE.with(|c| c.set(self.inner.id));
        Ok(())
    }

    /// Device memory (hipMalloc / cuMemAlloc_v2), freed on drop.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer, Error> {
        let mut addr = 0usize;
        if len > 0 {
            self.make_current()?;
            addr = self.runtime().malloc(len)?;
        }
        Ok(DeviceBuffer::new(self.clone(), addr, len))
    }

    /// Pinned host memory (hipHostMalloc / cuMemHostAlloc) for the bounce path, freed on drop.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer, Error> {
        let mut ptr = NonNull::dangling();
        if len > 0 {
            self.make_current()?;
            let p = self.runtime().host_alloc(len)?;
            ptr = NonNull::new(p.cast()).expect("host_alloc never returns null");
        }
        Ok(PinnedBuffer::new(self.clone(), ptr, len))
    }

    /// Registers a borrowed fd (descriptor type OpaqueFD); deregistered on drop, which the
    /// borrow forces before the fd can close.
    pub fn register_file<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<FileHandle<'fd>, Error> {
        let lib = self.io_library(|n| n.handle_register)?;
        let raw = lib.handle_register(fd.as_raw_fd())?;
        Ok(FileHandle {
            device: self.clone(),
            raw,
            in_flight: AtomicUsize::new(0),
            _fd: PhantomData,
        })
    }

    /// A non-blocking stream registered with `flags` (sys::STREAM_* bits). The stream borrows
    /// the handles and buffers given to its async ops for `'io`.
    pub fn create_stream<'io>(&self, flags: u32) -> Result<Stream<'io>, Error> {
        let lib = self.io_library(|n| n.stream_register)?;
        if !lib.has_streams() {
            return Err(lib.error(
                lib.inner.names.stream_register,
                Failure::Op(sys::ASYNC_NOT_SUPPORTED),
            ));
        }
        if flags & !sys::STREAM_FLAGS_MASK != 0 {
            return Err(lib.invalid(format!("stream flags {flags:#x} outside mask 0xf")));
        }
        self.make_current()?;
        let raw = self.runtime().stream_create()?;
        // SAFETY: `raw` is the live stream just created.
        if let Err(e) = unsafe { lib.stream_register(raw, flags) } {
            self.destroy_stream(raw);
            return Err(e);
        }
        Ok(Stream::new(self.clone(), raw))
    }

    /// Waits for everything queued on `raw`, a live stream of this device.
    pub(crate) fn sync_stream(&self, raw: sys::StreamRaw) -> Result<(), Error> {
        self.make_current()?;
        // SAFETY: callers pass streams they created on this device and still hold.
        unsafe { self.runtime().stream_synchronize(raw) }
    }

    /// Destroys `raw`, a live stream of this device with nothing in flight, not used after.
    pub(crate) fn destroy_stream(&self, raw: sys::StreamRaw) {
        let _ = self.make_current();
        // SAFETY: as the callers promise above.
        unsafe { self.runtime().stream_destroy(raw) };
    }
}
