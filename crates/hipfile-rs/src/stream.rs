//! Registered streams and the async reads and writes queued on them.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::buffer::RegisteredBuffer;
use crate::device::Device;
use crate::error::{decode_io_result, Failure};
use crate::file::FileHandle;
use crate::io_ops::{clear_errno, errno, AsyncParams};
use crate::{sys, Error};

impl Device {
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
}

struct PendingOp<'io> {
    /// From `Box::into_raw`; turned back into a Box only after synchronization. A raw pointer,
    /// not a Box, because the library writes through it while we hold it.
    params: NonNull<AsyncParams>,
    buf_in_flight: &'io AtomicUsize,
    file_in_flight: &'io AtomicUsize,
    /// A WriteAsync (else a ReadAsync), for the error message.
    write: bool,
}

/// A registered non-blocking stream. Async ops keep their parameter blocks alive inside the
/// stream until [`Stream::synchronize`]; dropping synchronizes before deregistering.
///
/// The file handles and buffers given to the ops are borrowed for `'io`, which outlives the
/// stream, so the borrow checker keeps them alive (and registered) while ops are in flight.
/// Buffers are borrowed shared: ops on one stream run in order, so reading into a buffer and
/// then writing it out is the intended use; [`crate::DeviceBuffer::copy_from_host`] (which
/// needs `&mut`) cannot race with them. Should a stream be leaked (`mem::forget`) with ops in
/// flight, the buffers and handles it used are leaked rather than freed.
pub struct Stream<'io> {
    device: Device,
    raw: sys::StreamRaw,
    ops: Vec<PendingOp<'io>>,
}

// SAFETY: the stream pointer may be used from any thread (the device is made current first);
// the pending ops hold heap blocks owned by the stream and shared references to atomics.
unsafe impl Send for Stream<'_> {}

impl<'io> Stream<'io> {
    /// Takes ownership of `raw`, a stream of `device` already registered with the library.
    pub(crate) fn new(device: Device, raw: sys::StreamRaw) -> Stream<'io> {
        Stream {
            device,
            raw,
            ops: Vec::new(),
        }
    }

    /// Operations submitted since the last synchronize.
    pub fn pending(&self) -> usize {
        self.ops.len()
    }

    fn submit(
        &mut self,
        write: bool,
        file: &'io FileHandle<'_>,
        buf: &'io RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        file.check_io(buf.buffer(), len, file_offset, buf_offset)?;
        let lib = self.device.library();
        if !self.device.same(buf.buffer().device()) {
            return Err(lib.invalid("buffer is on another device than the stream".into()));
        }
        let params = NonNull::from(Box::leak(Box::new(AsyncParams {
            size: len,
            file_offset: file_offset as i64,
            buf_offset: buf_offset as i64,
            bytes_done: 0,
        })));
        // SAFETY: registered handle and buffer base; the parameter block stays at this address
        // until synchronize; `'io` keeps the handle and buffer alive that long.
        let submitted = unsafe {
            lib.submit_async(
                write,
                file.raw,
                buf.buffer().addr(),
                params.as_ptr(),
                self.raw,
            )
        };
        if let Err(e) = submitted {
            // SAFETY: refused at submission, so the library holds no pointer into the block.
            drop(unsafe { Box::from_raw(params.as_ptr()) });
            return Err(e);
        }
        buf.in_flight.fetch_add(1, Ordering::AcqRel);
        file.in_flight.fetch_add(1, Ordering::AcqRel);
        self.ops.push(PendingOp {
            params,
            buf_in_flight: &buf.in_flight,
            file_in_flight: &file.in_flight,
            write,
        });
        Ok(self.ops.len() - 1)
    }

    /// hipFileReadAsync: queues a read of `len` bytes at `file_offset` into `buf` at
    /// `buf_offset`. Returns the op's index in the next [`Stream::synchronize`] result.
    pub fn read_async(
        &mut self,
        file: &'io FileHandle<'_>,
        buf: &'io RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.submit(false, file, buf, len, file_offset, buf_offset)
    }

    /// hipFileWriteAsync: queues a write of `len` bytes from `buf` at `buf_offset` to
    /// `file_offset`. Returns the op's index in the next [`Stream::synchronize`] result.
    pub fn write_async(
        &mut self,
        file: &'io FileHandle<'_>,
        buf: &'io RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.submit(true, file, buf, len, file_offset, buf_offset)
    }

    /// Waits for every queued op and returns their byte counts in submission order. The first
    /// failed op is the error (all ops are complete either way). If the stream itself fails to
    /// synchronize, the ops stay pending: their memory is then never freed under the library.
    pub fn synchronize(&mut self) -> Result<Vec<usize>, Error> {
        self.synchronize_each()?.into_iter().collect()
    }

    /// Like [`Stream::synchronize`], but with every op's own result, in submission order, so
    /// that a caller can tell which op failed (a read or the write queued after it). The outer
    /// error is the stream's own synchronization failing (the ops then stay pending).
    pub fn synchronize_each(&mut self) -> Result<Vec<Result<usize, Error>>, Error> {
        // Ops that run inside the synchronization (compatibility paths) leave errno behind
        // with a stored -1, as a synchronous call would.
        self.device.make_current()?;
        clear_errno();
        self.device.sync_stream(self.raw)?;
        let errno = errno();
        let lib = self.device.library();
        let mut results = Vec::with_capacity(self.ops.len());
        for op in self.ops.drain(..) {
            // SAFETY: the stream is synchronized, so the library is done with the block.
            let params = unsafe { Box::from_raw(op.params.as_ptr()) };
            op.buf_in_flight.fetch_sub(1, Ordering::AcqRel);
            op.file_in_flight.fetch_sub(1, Ordering::AcqRel);
            results.push(
                decode_io_result(params.bytes_done, errno)
                    .map_err(|fail| lib.error(lib.async_call(op.write), fail)),
            );
        }
        Ok(results)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        if !self.ops.is_empty() && self.synchronize_each().is_err() {
            // Could not synchronize: the library may still use the stream and the blocks.
            return;
        }
        let _ = self.device.make_current();
        // SAFETY: registered in create_stream; nothing in flight.
        unsafe { self.device.library().stream_deregister(self.raw) };
        self.device.destroy_stream(self.raw);
    }
}
