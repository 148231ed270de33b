//! Files registered with the I/O library, and their synchronous reads and writes.

use std::marker::PhantomData;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::buffer::{DeviceBuffer, RegisteredBuffer};
use crate::device::Device;
use crate::{sys, Error};

impl Device {
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
}

/// A file registered with hipFile/cuFile. `Sync`: workers on several threads share one.
///
/// Sharing is sound because the handle is an opaque token the library looks up on every call
/// and both libraries document Read/Write as safe to call concurrently on one handle; this
/// type never mutates it, and deregistration needs ownership (drop), which cannot happen while
/// another thread still holds a `&FileHandle`.
pub struct FileHandle<'fd> {
    pub(crate) device: Device,
    pub(crate) raw: sys::FileHandleRaw,
    /// Async ops not yet synchronized (see [`RegisteredBuffer`]).
    pub(crate) in_flight: AtomicUsize,
    pub(crate) _fd: PhantomData<BorrowedFd<'fd>>,
}

// SAFETY: see the type's documentation.
unsafe impl Send for FileHandle<'_> {}
// SAFETY: see the type's documentation.
unsafe impl Sync for FileHandle<'_> {}

impl Drop for FileHandle<'_> {
    fn drop(&mut self) {
        if self.in_flight.load(Ordering::Acquire) != 0 {
            // A stream with I/O on this handle was leaked: keep the registration rather than
            // pull it from under the library.
            return;
        }
        // SAFETY: registered in Device::register_file; no I/O in flight on it.
        unsafe { self.device.library().handle_deregister(self.raw) };
    }
}

impl FileHandle<'_> {
    /// Checks one transfer of `len` bytes between this file at `file_offset` and `buf` at
    /// `buf_offset`, and makes the buffer's device current.
    pub(crate) fn check_io(
        &self,
        buf: &DeviceBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<(), Error> {
        let lib = self.device.library();
        if !Arc::ptr_eq(&lib.inner, &buf.device().library().inner) {
            return Err(lib.invalid("buffer and file belong to different libraries".into()));
        }
        buf.check_range(buf_offset, len)?;
        if i64::try_from(file_offset).is_err() {
            return Err(lib.invalid(format!("file offset {file_offset} beyond off_t")));
        }
        buf.device().make_current()
    }

    /// hipFileRead: up to `len` bytes at `file_offset` into `buf` at `buf_offset`.
    /// May return a short count (EOF, the 0x7ffff000 per-call cap).
    pub fn read(
        &self,
        buf: &mut RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.transfer(false, buf, len, file_offset, buf_offset)
    }

    /// hipFileWrite: up to `len` bytes from `buf` at `buf_offset` to `file_offset`.
    pub fn write(
        &self,
        buf: &RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.transfer(true, buf, len, file_offset, buf_offset)
    }

    fn transfer(
        &self,
        write: bool,
        buf: &RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.check_io(buf.buffer(), len, file_offset, buf_offset)?;
        let base = buf.buffer().addr();
        // SAFETY: registered handle and the registered base pointer; range checked above.
        unsafe {
            self.device.library().file_io(
                write,
                self.raw,
                base,
                len,
                file_offset as i64,
                buf_offset as i64,
            )
        }
    }
}
