//! A pinned host window with its own stream: copies between it and device memory are queued
//! (hipMemcpyAsync / cuMemcpy*Async on a non-blocking stream) so that the caller's file I/O on
//! other windows overlaps them, and so that copies of different threads never queue behind
//! one another on the legacy default stream, as synchronous hipMemcpy / cuMemcpy do.

use crate::{sys, Device, DeviceBuffer, Error, Kernel, PinnedBuffer, Pinning};
use std::ffi::c_void;

/// Pinned host memory plus the stream its copies (and any kernels queued between them, see
/// [`CopyWindow::launch`]) run on. Host access ([`CopyWindow::host`]) waits for the queued
/// work first, so the host never touches bytes a copy is moving.
///
/// The device buffers given to [`CopyWindow::upload`] / [`CopyWindow::download`] must stay
/// allocated until the window is waited on or dropped (drop waits): owners keep windows in a
/// field declared before their device buffer, so the window goes first.
pub struct CopyWindow {
    // Declared first: the stream is drained and destroyed before the pinned memory is freed.
    stream: sys::StreamRaw,
    /// Copies or kernels queued since the last wait.
    pending: bool,
    window: PinnedBuffer,
    device: Device,
}

// SAFETY: the stream handle is an opaque token usable from any thread that makes the device
// current (every call here does); the pinned memory is owned like a Box<[u8]>.
unsafe impl Send for CopyWindow {}

impl Device {
    /// `len` bytes of pinned host memory with a non-blocking stream for its copies.
    pub fn alloc_window(&self, len: usize) -> Result<CopyWindow, Error> {
        let window = self.alloc_pinned(len)?;
        let stream = self.runtime().stream_create()?;
        Ok(CopyWindow {
            stream,
            pending: false,
            window,
            device: self.clone(),
        })
    }
}

impl CopyWindow {
    pub fn len(&self) -> usize {
        self.window.len()
    }
    pub fn is_empty(&self) -> bool {
        self.window.is_empty()
    }
    /// How the window's memory was pinned; None for an empty window.
    pub fn pinning(&self) -> Option<Pinning> {
        self.window.pinning()
    }

    /// The window's bytes, once every queued copy has finished.
    pub fn host(&mut self) -> Result<&mut [u8], Error> {
        self.wait()?;
        Ok(self.window.as_mut_slice())
    }

    /// Waits for the queued copies and kernels (a no-op when none are queued).
    pub fn wait(&mut self) -> Result<(), Error> {
        if !self.pending {
            return Ok(());
        }
        // The stream is drained either way: a failed synchronize leaves nothing queued that
        // a later wait could still see finish.
        self.pending = false;
        self.device.sync_stream(self.stream)
    }

    /// Queues a copy of `window[..len]` into `dst` at `dst_off`.
    pub fn upload(
        &mut self,
        len: usize,
        dst: &mut DeviceBuffer,
        dst_off: usize,
    ) -> Result<(), Error> {
        self.queue(len, dst, dst_off, true)
    }

    /// Queues a copy of `len` bytes of `src` at `src_off` into `window[..len]`.
    pub fn download(
        &mut self,
        src: &DeviceBuffer,
        src_off: usize,
        len: usize,
    ) -> Result<(), Error> {
        self.queue(len, src, src_off, false)
    }

    /// Queues `kernel` on the window's stream, after the copies queued before it and before
    /// those queued after: a kernel between an upload and a download needs one wait in all.
    ///
    /// # Safety
    /// As [`Kernel::launch`]: `args` match the kernel's parameters, and the device memory
    /// they name stays valid, and untouched by others, until the window is waited on.
    pub unsafe fn launch(
        &mut self,
        kernel: &Kernel,
        grid: u32,
        block: u32,
        shared: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), Error> {
        // Marked before the call, as for a copy.
        self.pending = true;
        // SAFETY: the window's own live stream on its device; the rest is the caller's.
        unsafe { kernel.launch_on(&self.device, self.stream, grid, block, shared, args) }
    }

    fn queue(
        &mut self,
        len: usize,
        dev: &DeviceBuffer,
        dev_off: usize,
        to_device: bool,
    ) -> Result<(), Error> {
        if len > self.window.len() {
            return Err(self.device.library().invalid(format!(
                "copy of {len} bytes through a window of {}",
                self.window.len()
            )));
        }
        dev.check_range(dev_off, len)?;
        if len == 0 {
            return Ok(());
        }
        self.device.make_current()?;
        let host = self.window.as_mut_slice().as_mut_ptr();
        let dev_addr = dev.addr() + dev_off;
        // Marked before the call: a failed enqueue may still have queued part of the work.
        self.pending = true;
        // SAFETY: both ranges are checked; the host side is pinned memory owned by self, not
        // handed out again before the stream is synchronized (host() waits), and the device
        // side outlives the copy (the type's contract).
        unsafe {
            self.device
                .runtime()
                .memcpy_async(to_device, host, dev_addr, len, self.stream)
        }
    }
}

impl Drop for CopyWindow {
    fn drop(&mut self) {
        // Nothing may still write into the pinned memory when it is freed.
        let _ = self.wait();
        self.device.destroy_stream(self.stream);
    }
}
