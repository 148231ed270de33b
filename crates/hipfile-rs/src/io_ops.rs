//! Every call into the I/O library (hipFile* / cuFile*: one table, two symbol sets), each
//! written once with its `unsafe` block and its error decoding (cudarc's `result` layer). The
//! RAII types above call these.
//!
//! Functions taking registered handles, device addresses or streams are `unsafe`: what they
//! point at is the caller's to keep valid, and each caller says why it is.

use std::ffi::{c_int, c_void};
use std::os::fd::RawFd;

use crate::error::{decode_file_error, decode_io_result};
use crate::library::Library;
use crate::runtime_ops::c_text;
use crate::{sys, Error};

/// The parameters of one async op. The library reads them through pointers when the stream
/// reaches the op, and writes `bytes_done` at completion, so the block lives on the heap, at a
/// fixed address, until the stream is synchronized.
#[repr(C)]
pub(crate) struct AsyncParams {
    pub size: usize,
    pub file_offset: sys::Offset,
    pub buf_offset: sys::Offset,
    pub bytes_done: isize,
}

fn errno_location() -> *mut c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

/// Clears errno, so that what a call leaves there is its own.
pub(crate) fn clear_errno() {
    // SAFETY: errno is thread-local and writable.
    unsafe { *errno_location() = 0 };
}

pub(crate) fn errno() -> c_int {
    // SAFETY: errno is thread-local and readable.
    unsafe { *errno_location() }
}

impl Library {
    /// "hipFile 0.2.0" style text, when the library can tell.
    pub fn version(&self) -> Option<String> {
        match self.inner.io.get_version? {
            sys::VersionFn::HipFile(f) => {
                let (mut major, mut minor, mut patch) = (0, 0, 0);
                // SAFETY: valid out pointers.
                let e = unsafe { f(&mut major, &mut minor, &mut patch) };
                decode_file_error(e).ok()?;
                Some(format!("hipFile {major}.{minor}.{patch}"))
            }
            sys::VersionFn::CuFile(f) => {
                let mut v: c_int = 0;
                // SAFETY: valid out pointer.
                let e = unsafe { f(&mut v) };
                decode_file_error(e).ok()?;
                Some(format!(
                    "cuFile {}.{}.{}",
                    v / 1000,
                    (v % 1000) / 10,
                    v % 10
                ))
            }
        }
    }

    /// The library's driver reference count (hipFileUseCount / cuFileUseCount), if exported.
    pub fn use_count(&self) -> Option<i64> {
        // SAFETY: no arguments.
        self.inner.io.use_count.map(|f| unsafe { f() })
    }

    /// The library's text for a 5000-based code (hipFileGetOpErrorString), if it has one.
    pub(crate) fn op_text(&self, code: c_int) -> Option<String> {
        // SAFETY: returns a static string for any value.
        self.inner
            .io
            .get_op_error_string
            .and_then(|f| c_text(unsafe { f(code) }))
    }

    /// DriverOpen.
    pub(crate) fn driver_open(&self) -> Result<(), Error> {
        // SAFETY: no arguments.
        let e = unsafe { (self.inner.io.driver_open)() };
        self.check_file_error(self.inner.names.driver_open, e)
    }

    /// DriverClose; a failing close cannot be acted on.
    ///
    /// # Safety
    /// Balances a [`Library::driver_open`], with nothing registered any more.
    pub(crate) unsafe fn driver_close(&self) {
        // SAFETY: forwarded from the caller.
        let _ = unsafe { (self.inner.io.driver_close)() };
    }

    /// HandleRegister of `fd` as an OpaqueFD descriptor.
    pub(crate) fn handle_register(&self, fd: RawFd) -> Result<sys::FileHandleRaw, Error> {
        let mut descr = sys::FileDescr::from_fd(fd);
        let mut handle: sys::FileHandleRaw = std::ptr::null_mut();
        // SAFETY: valid pointers; the descriptor is only read during the call.
        let e = unsafe { (self.inner.io.handle_register)(&mut handle, &mut descr) };
        self.check_file_error(self.inner.names.handle_register, e)?;
        Ok(handle)
    }

    /// HandleDeregister.
    ///
    /// # Safety
    /// `handle` came from [`Library::handle_register`], has no I/O in flight, and is not used
    /// afterwards.
    pub(crate) unsafe fn handle_deregister(&self, handle: sys::FileHandleRaw) {
        // SAFETY: forwarded from the caller.
        unsafe { (self.inner.io.handle_deregister)(handle) };
    }

    /// BufRegister of a whole device allocation.
    ///
    /// # Safety
    /// `addr` is the base of a live device allocation of `len` bytes.
    pub(crate) unsafe fn buf_register(&self, addr: usize, len: usize) -> Result<(), Error> {
        // SAFETY: forwarded from the caller.
        let e = unsafe { (self.inner.io.buf_register)(addr as *const c_void, len, 0) };
        self.check_file_error(self.inner.names.buf_register, e)
    }

    /// BufDeregister.
    ///
    /// # Safety
    /// `addr` was registered with [`Library::buf_register`] and has no I/O in flight.
    pub(crate) unsafe fn buf_deregister(&self, addr: usize) -> Result<(), Error> {
        // SAFETY: forwarded from the caller.
        let e = unsafe { (self.inner.io.buf_deregister)(addr as *const c_void) };
        self.check_file_error(self.inner.names.buf_deregister, e)
    }

    /// Read (or Write, when `write`): `len` bytes between the file at `file_offset` and the
    /// registered buffer at `base` + `buf_offset`, with errno cleared before the call so a
    /// -1 result is decoded with the call's own errno.
    ///
    /// # Safety
    /// `handle` is registered, `base` is a registered buffer's base, and the range is inside
    /// that buffer.
    pub(crate) unsafe fn file_io(
        &self,
        write: bool,
        handle: sys::FileHandleRaw,
        base: usize,
        len: usize,
        file_offset: i64,
        buf_offset: i64,
    ) -> Result<usize, Error> {
        let io = &self.inner.io;
        clear_errno();
        // SAFETY: forwarded from the caller.
        let (ret, call) = unsafe {
            if write {
                let r = (io.write)(handle, base as *const c_void, len, file_offset, buf_offset);
                (r, self.inner.names.write)
            } else {
                let r = (io.read)(handle, base as *mut c_void, len, file_offset, buf_offset);
                (r, self.inner.names.read)
            }
        };
        decode_io_result(ret, errno()).map_err(|fail| self.error(call, fail))
    }

    /// Whether the library has the stream calls (StreamRegister/Deregister, Read/WriteAsync).
    pub(crate) fn has_streams(&self) -> bool {
        let io = &self.inner.io;
        io.stream_register.is_some()
            && io.stream_deregister.is_some()
            && io.read_async.is_some()
            && io.write_async.is_some()
    }

    /// StreamRegister with `flags` (sys::STREAM_* bits); the library has the stream calls.
    ///
    /// # Safety
    /// `stream` is a live runtime stream.
    pub(crate) unsafe fn stream_register(
        &self,
        stream: sys::StreamRaw,
        flags: u32,
    ) -> Result<(), Error> {
        let register = self
            .inner
            .io
            .stream_register
            .expect("checked by has_streams");
        // SAFETY: forwarded from the caller.
        let e = unsafe { register(stream, flags) };
        self.check_file_error(self.inner.names.stream_register, e)
    }

    /// StreamDeregister; a failure cannot be acted on.
    ///
    /// # Safety
    /// `stream` was registered and has nothing in flight.
    pub(crate) unsafe fn stream_deregister(&self, stream: sys::StreamRaw) {
        if let Some(deregister) = self.inner.io.stream_deregister {
            // SAFETY: forwarded from the caller.
            let _ = unsafe { deregister(stream) };
        }
    }

    /// The name of ReadAsync (or WriteAsync, when `write`) in this flavor, for messages.
    pub(crate) fn async_call(&self, write: bool) -> &'static str {
        if write {
            self.inner.names.write_async
        } else {
            self.inner.names.read_async
        }
    }

    /// ReadAsync (or WriteAsync, when `write`): queues the op `params` describes on `stream`.
    ///
    /// # Safety
    /// `handle` and the buffer at `base` are registered and stay so, and `params` stays at its
    /// address, until `stream` is synchronized; `stream` is registered.
    pub(crate) unsafe fn submit_async(
        &self,
        write: bool,
        handle: sys::FileHandleRaw,
        base: usize,
        params: *mut AsyncParams,
        stream: sys::StreamRaw,
    ) -> Result<(), Error> {
        let io = &self.inner.io;
        let f = if write { io.write_async } else { io.read_async };
        let f = f.expect("checked by has_streams");
        let p = params;
        // SAFETY: forwarded from the caller.
        let e = unsafe {
            f(
                handle,
                base as *mut c_void,
                &raw mut (*p).size,
                &raw mut (*p).file_offset,
                &raw mut (*p).buf_offset,
                &raw mut (*p).bytes_done,
                stream,
            )
        };
        decode_file_error(e).map_err(|fail| self.error(self.async_call(write), fail))
    }
}

impl Library {
    /// Whether the library has the statistics calls (cuFile 1.15, hipFile 0.5 and later).
    pub(crate) fn has_stats(&self) -> bool {
        self.inner.io.get_stats_l1.is_some()
    }

    /// Whether Level 1 has cuFile 1.19's vector I/O counters appended (see `sys`).
    pub(crate) fn stats_vector_io(&self) -> bool {
        self.inner.io.vector_io
    }

    /// The name of GetStatsL1, for messages.
    pub(crate) fn stats_call(&self) -> &'static str {
        self.inner.names.get_stats_l1
    }

    /// SetStatsLevel(`level`) and StatsStart, where the library has them (cuFile); hipFile
    /// has neither and counts from its first call.
    pub(crate) fn stats_start(&self, level: c_int) -> Result<(), Error> {
        let io = &self.inner.io;
        let names = self.inner.names;
        if let (Some(f), Some(name)) = (io.set_stats_level, names.set_stats_level) {
            // SAFETY: takes a plain int.
            self.check_file_error(name, unsafe { f(level) })?;
        }
        if let (Some(f), Some(name)) = (io.stats_start, names.stats_start) {
            // SAFETY: no arguments.
            self.check_file_error(name, unsafe { f() })?;
        }
        Ok(())
    }

    /// GetStatsL3 (or GetStatsL1, when not `per_gpu`) into `out`; the library has them.
    ///
    /// # Safety
    /// `out` points at zeroed, writable memory larger than this release's struct.
    pub(crate) unsafe fn get_stats(&self, per_gpu: bool, out: *mut c_void) -> Result<(), Error> {
        let io = &self.inner.io;
        let names = self.inner.names;
        let (f, name) = match per_gpu {
            true => (io.get_stats_l3, names.get_stats_l3),
            false => (io.get_stats_l1, names.get_stats_l1),
        };
        let f = f.ok_or_else(|| self.invalid(format!("{name} is not exported")))?;
        // SAFETY: forwarded from the caller.
        self.check_file_error(name, unsafe { f(out) })
    }
}
