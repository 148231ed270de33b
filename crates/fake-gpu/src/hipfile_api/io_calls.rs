//! hipFileRead/Write and their stream forms: a call checked and moved at once, or queued on
//! its stream (registered with the stream flags) until the stream is synchronized.

use std::ffi::{c_uint, c_void};

use super::STREAM_PAGE_ALIGNED_INPUTS;
use super::{HipFileError, HipFileHandle, STREAM_FLAGS_MASK};
use super::{STREAM_FIXED_BUF_OFFSET, STREAM_FIXED_FILE_OFFSET, STREAM_FIXED_FILE_SIZE};
use crate::faults::IoOp;
use crate::hip_runtime::HipStream;
use crate::io::{transfer, IoRequest};
use crate::io::{
    HIPFILE_HANDLE_NOT_REGISTERED, HIPFILE_INVALID_VALUE, HIPFILE_MEMORY_NOT_REGISTERED,
};
use crate::state::{fake, AsyncOp, Queued};

#[no_mangle]
pub unsafe extern "C" fn hipFileRead(
    fh: HipFileHandle,
    buffer_base: *mut c_void,
    size: usize,
    file_offset: i64,
    buffer_offset: i64,
) -> isize {
    transfer(IoRequest {
        op: IoOp::Read,
        fh: fh as usize,
        base: buffer_base as usize,
        size,
        file_offset,
        buffer_offset,
    })
}

#[no_mangle]
pub unsafe extern "C" fn hipFileWrite(
    fh: HipFileHandle,
    buffer_base: *const c_void,
    size: usize,
    file_offset: i64,
    buffer_offset: i64,
) -> isize {
    transfer(IoRequest {
        op: IoOp::Write,
        fh: fh as usize,
        base: buffer_base as usize,
        size,
        file_offset,
        buffer_offset,
    })
}

/// Queues an async op on `stream`; it runs when the stream is synchronized.
#[allow(clippy::too_many_arguments)]
unsafe fn enqueue(
    op: IoOp,
    fh: HipFileHandle,
    buffer_base: *const c_void,
    size_p: *mut usize,
    file_offset_p: *mut i64,
    buffer_offset_p: *mut i64,
    bytes_p: *mut isize,
    stream: HipStream,
) -> HipFileError {
    let name = op.name();
    if size_p.is_null() || file_offset_p.is_null() || buffer_offset_p.is_null() || bytes_p.is_null()
    {
        fake()
            .registry()
            .misuse(format!("async {name} with a null parameter pointer"));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    let (fh, base, stream) = (fh as usize, buffer_base as usize, stream as usize);
    let mut reg = fake().registry();
    if !reg.handles.contains_key(&fh) {
        reg.misuse(format!("async {name} on unregistered file handle {fh:#x}"));
        return HipFileError::code(HIPFILE_HANDLE_NOT_REGISTERED);
    }
    if !reg.buffers.contains_key(&base) {
        reg.misuse(format!("async {name} into unregistered buffer {base:#x}"));
        return HipFileError::code(HIPFILE_MEMORY_NOT_REGISTERED);
    }
    let Some(entry) = reg.streams.get_mut(&stream) else {
        reg.misuse(format!("async {name} on unknown stream {stream:#x}"));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    };
    let flags = entry.hipfile_flags.unwrap_or(0);
    let fixed = |flag: c_uint| flags & flag != 0;
    let op = AsyncOp {
        op,
        fh,
        base,
        size_p: size_p as usize,
        file_offset_p: file_offset_p as usize,
        buffer_offset_p: buffer_offset_p as usize,
        bytes_p: bytes_p as usize,
        fixed_size: fixed(STREAM_FIXED_FILE_SIZE).then(|| *size_p),
        fixed_file_offset: fixed(STREAM_FIXED_FILE_OFFSET).then(|| *file_offset_p),
        fixed_buffer_offset: fixed(STREAM_FIXED_BUF_OFFSET).then(|| *buffer_offset_p),
        page_aligned: fixed(STREAM_PAGE_ALIGNED_INPUTS),
    };
    entry.pending.push(Queued::File(op));
    HipFileError::SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFileReadAsync(
    fh: HipFileHandle,
    buffer_base: *mut c_void,
    size_p: *mut usize,
    file_offset_p: *mut i64,
    buffer_offset_p: *mut i64,
    bytes_read_p: *mut isize,
    stream: HipStream,
) -> HipFileError {
    enqueue(
        IoOp::Read,
        fh,
        buffer_base,
        size_p,
        file_offset_p,
        buffer_offset_p,
        bytes_read_p,
        stream,
    )
}

#[no_mangle]
pub unsafe extern "C" fn hipFileWriteAsync(
    fh: HipFileHandle,
    buffer_base: *mut c_void,
    size_p: *mut usize,
    file_offset_p: *mut i64,
    buffer_offset_p: *mut i64,
    bytes_written_p: *mut isize,
    stream: HipStream,
) -> HipFileError {
    enqueue(
        IoOp::Write,
        fh,
        buffer_base,
        size_p,
        file_offset_p,
        buffer_offset_p,
        bytes_written_p,
        stream,
    )
}

#[no_mangle]
pub unsafe extern "C" fn hipFileStreamRegister(stream: HipStream, flags: c_uint) -> HipFileError {
    let id = stream as usize;
    let mut reg = fake().registry();
    if flags & !STREAM_FLAGS_MASK != 0 {
        reg.misuse(format!(
            "hipFileStreamRegister with unknown flags {flags:#x}"
        ));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    let Some(entry) = reg.streams.get_mut(&id) else {
        reg.misuse(format!("hipFileStreamRegister of unknown stream {id:#x}"));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    };
    if entry.hipfile_flags.is_some() {
        reg.misuse(format!(
            "hipFileStreamRegister of stream {id:#x}, already registered"
        ));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    entry.hipfile_flags = Some(flags);
    HipFileError::SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFileStreamDeregister(stream: HipStream) -> HipFileError {
    let id = stream as usize;
    let mut reg = fake().registry();
    let Some(entry) = reg
        .streams
        .get_mut(&id)
        .filter(|e| e.hipfile_flags.is_some())
    else {
        reg.misuse(format!(
            "hipFileStreamDeregister of unregistered stream {id:#x}"
        ));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    };
    entry.hipfile_flags = None;
    let pending = std::mem::take(&mut entry.pending).len();
    if pending > 0 {
        reg.misuse(format!(
            "hipFileStreamDeregister of stream {id:#x} with {pending} async op(s) pending (dropped, never run)"
        ));
    }
    HipFileError::SUCCESS
}
