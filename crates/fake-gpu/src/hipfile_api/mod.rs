//! The hipFile symbols, with the signatures of hipfile.h 0.2.0 (the statistics calls of 0.5
//! are in `lib_stats`). The reads and writes are in `io_calls`.

mod io_calls;

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::Ordering;

use crate::faults::FaultPlan;
use crate::io::{
    HIPFILE_INVALID_VALUE, HIPFILE_MEMORY_NOT_REGISTERED, HIPFILE_POINTER_RANGE_ERROR,
};
use crate::lib_stats::{Level, Registration};
use crate::messages::hipfile_error_string;
use crate::state::{fake, BufferEntry, HandleEntry};

const HIPFILE_DRIVER_NOT_INITIALIZED: i32 = 5001;
const HIPFILE_MEMORY_TYPE_INVALID: i32 = 5013;
const HIPFILE_MEMORY_ALREADY_REGISTERED: i32 = 5023;
const HIPFILE_HANDLE_ALREADY_REGISTERED: i32 = 5028;
const HIPFILE_HANDLE_TYPE_OPAQUE_FD: c_int = 1;
const STREAM_FIXED_BUF_OFFSET: c_uint = 1;
const STREAM_FIXED_FILE_OFFSET: c_uint = 2;
const STREAM_FIXED_FILE_SIZE: c_uint = 4;
const STREAM_PAGE_ALIGNED_INPUTS: c_uint = 8;
const STREAM_FLAGS_MASK: c_uint = 0xf;

/// `hipFileError_t`: 8 bytes, returned by value.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct HipFileError {
    pub err: c_int,
    pub hip_drv_err: c_int,
}

impl HipFileError {
    const SUCCESS: HipFileError = HipFileError::code(0);

    const fn code(err: i32) -> HipFileError {
        HipFileError {
            err,
            hip_drv_err: 0,
        }
    }
}

impl From<(i32, i32)> for HipFileError {
    fn from((err, hip_drv_err): (i32, i32)) -> HipFileError {
        HipFileError { err, hip_drv_err }
    }
}

/// `hipFileDescr_t`: 24 bytes {type @0, handle union @8, fs_ops @16}.
#[repr(C)]
pub struct HipFileDescr {
    pub handle_type: c_int,
    pub handle: HipFileDescrHandle,
    pub fs_ops: *const c_void,
}

#[repr(C)]
pub union HipFileDescrHandle {
    pub fd: c_int,
    pub h_file: *mut c_void,
}

/// `hipFileHandle_t`.
pub type HipFileHandle = *mut c_void;

#[no_mangle]
pub unsafe extern "C" fn hipFileDriverOpen() -> HipFileError {
    let fake = fake();
    if let Err(e) = fake.driver_open_fault() {
        return e.into();
    }
    let mut reg = fake.registry();
    reg.driver_refs += 1;
    reg.explicit_opens += 1;
    HipFileError::SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFileDriverClose() -> HipFileError {
    let mut reg = fake().registry();
    if reg.driver_refs == 0 {
        reg.misuse("hipFileDriverClose with the driver not open".into());
        return HipFileError::code(HIPFILE_DRIVER_NOT_INITIALIZED);
    }
    reg.driver_refs -= 1;
    reg.explicit_opens -= 1;
    if reg.driver_refs == 0 && (!reg.handles.is_empty() || !reg.buffers.is_empty()) {
        let (h, b) = (reg.handles.len(), reg.buffers.len());
        reg.misuse(format!(
            "hipFileDriverClose closed the driver with {h} handle(s) and {b} buffer(s) still registered"
        ));
    }
    HipFileError::SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFileUseCount() -> i64 {
    fake().registry().driver_refs
}

#[no_mangle]
pub unsafe extern "C" fn hipFileHandleRegister(
    fh: *mut HipFileHandle,
    descr: *mut HipFileDescr,
) -> HipFileError {
    registered(Registration::Handle, handle_register(fh, descr))
}

/// Counts a registration call by its result, and returns the result.
fn registered(what: Registration, e: HipFileError) -> HipFileError {
    fake().registry().lib_stats.registered(what, e.err == 0);
    e
}

unsafe fn handle_register(fh: *mut HipFileHandle, descr: *mut HipFileDescr) -> HipFileError {
    let fake = fake();
    let call = fake.calls.register.fetch_add(1, Ordering::SeqCst) + 1;
    if fh.is_null() || descr.is_null() {
        fake.registry()
            .misuse("hipFileHandleRegister with a null pointer".into());
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    if let Some(code) = FaultPlan::code_fault(&fake.faults.register, call) {
        return HipFileError::code(code);
    }
    let descr = &*descr;
    if descr.handle_type != HIPFILE_HANDLE_TYPE_OPAQUE_FD {
        fake.registry().misuse(format!(
            "hipFileHandleRegister with handle type {}, not OpaqueFD (1)",
            descr.handle_type
        ));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    let fd = descr.handle.fd;
    if fd < 0 || libc::fcntl(fd, libc::F_GETFL) == -1 {
        fake.registry().misuse(format!(
            "hipFileHandleRegister of fd {fd}, not an open file"
        ));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    let mut reg = fake.registry();
    if reg.handles.values().any(|h| h.fd == fd) {
        reg.misuse(format!(
            "hipFileHandleRegister of fd {fd}, already registered"
        ));
        return HipFileError::code(HIPFILE_HANDLE_ALREADY_REGISTERED);
    }
    if let Err(e) = reg.implicit_open(fake) {
        return e.into();
    }
    let id = reg.new_id();
    let file = fd_identity(fd).unwrap_or((0, 0));
    reg.handles.insert(
        id,
        HandleEntry {
            fd,
            file,
            in_flight: 0,
        },
    );
    reg.stats.handles += 1;
    *fh = id as HipFileHandle;
    HipFileError::SUCCESS
}

/// Like the real library, a handle with I/O in flight is silently kept; here that is
/// also recorded as misuse, since the caller should have joined its workers first.
#[no_mangle]
pub unsafe extern "C" fn hipFileHandleDeregister(fh: HipFileHandle) {
    let id = fh as usize;
    let mut reg = fake().registry();
    match reg.handles.get(&id) {
        None => reg.misuse(format!(
            "hipFileHandleDeregister of unregistered handle {id:#x}"
        )),
        Some(h) if h.in_flight > 0 => {
            let (fd, n) = (h.fd, h.in_flight);
            reg.misuse(format!(
                "hipFileHandleDeregister of handle {id:#x} (fd {fd}) with {n} I/O call(s) in flight (kept)"
            ));
        }
        Some(h) => {
            let fd = h.fd;
            if fd_identity(fd) != Some(h.file) {
                reg.misuse(format!(
                    "hipFileHandleDeregister of handle {id:#x} after its fd {fd} was closed"
                ));
            }
            reg.handles.remove(&id);
        }
    }
}

/// (device, inode) of the file open on `fd`, or None if `fd` is not open.
fn fd_identity(fd: i32) -> Option<(u64, u64)> {
    // SAFETY: fstat fills the zeroed struct or fails.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipFileBufRegister(
    buffer_base: *const c_void,
    length: usize,
    flags: c_int,
) -> HipFileError {
    registered(
        Registration::Buffer,
        buf_register(buffer_base, length, flags),
    )
}

unsafe fn buf_register(buffer_base: *const c_void, length: usize, _flags: c_int) -> HipFileError {
    let fake = fake();
    let call = fake.calls.bufregister.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(code) = FaultPlan::code_fault(&fake.faults.bufregister, call) {
        return HipFileError::code(code);
    }
    let base = buffer_base as usize;
    let mut reg = fake.registry();
    if base == 0 || length == 0 {
        reg.misuse(format!(
            "hipFileBufRegister of {base:#x} with length {length}"
        ));
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    if reg.buffers.contains_key(&base) {
        reg.misuse(format!(
            "hipFileBufRegister of {base:#x}, already registered"
        ));
        return HipFileError::code(HIPFILE_MEMORY_ALREADY_REGISTERED);
    }
    if reg.device_alloc_holding(base, 1).is_none() {
        let kind = if reg.host_alloc_holding(base, 1).is_some() {
            "pinned host memory"
        } else {
            "not device memory"
        };
        reg.misuse(format!("hipFileBufRegister of {base:#x}: {kind}"));
        return HipFileError::code(HIPFILE_MEMORY_TYPE_INVALID);
    }
    if reg.device_alloc_holding(base, length).is_none() {
        reg.misuse(format!(
            "hipFileBufRegister of {base:#x} for {length} bytes runs past its allocation"
        ));
        return HipFileError::code(HIPFILE_POINTER_RANGE_ERROR);
    }
    if let Err(e) = reg.implicit_open(fake) {
        return e.into();
    }
    reg.buffers.insert(
        base,
        BufferEntry {
            len: length,
            in_flight: 0,
        },
    );
    HipFileError::SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFileBufDeregister(buffer_base: *const c_void) -> HipFileError {
    let base = buffer_base as usize;
    let mut reg = fake().registry();
    match reg.buffers.get(&base) {
        None => {
            reg.misuse(format!(
                "hipFileBufDeregister of unregistered buffer {base:#x}"
            ));
            HipFileError::code(HIPFILE_MEMORY_NOT_REGISTERED)
        }
        Some(b) if b.in_flight > 0 => {
            let n = b.in_flight;
            reg.misuse(format!(
                "hipFileBufDeregister of buffer {base:#x} with {n} I/O call(s) in flight (refused)"
            ));
            HipFileError::code(HIPFILE_INVALID_VALUE)
        }
        Some(_) => {
            reg.buffers.remove(&base);
            HipFileError::SUCCESS
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipFileGetOpErrorString(status: c_int) -> *const c_char {
    hipfile_error_string(status).as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn hipFileGetVersion(
    major: *mut c_uint,
    minor: *mut c_uint,
    patch: *mut c_uint,
) -> HipFileError {
    for (out, value) in [(major, 0), (minor, 2), (patch, 0)] {
        if !out.is_null() {
            *out = value;
        }
    }
    HipFileError::SUCCESS
}

/// hipFile 0.5's statistics calls: what the fake did (see `lib_stats`).
unsafe fn get_stats(stats: *mut c_void, level: Level) -> HipFileError {
    if stats.is_null() {
        return HipFileError::code(HIPFILE_INVALID_VALUE);
    }
    let fake = fake();
    fake.registry()
        .lib_stats
        .write(stats.cast(), level, fake.devices);
    HipFileError::SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFileGetStatsL1(stats: *mut c_void) -> HipFileError {
    get_stats(stats, Level::Basic)
}

#[no_mangle]
pub unsafe extern "C" fn hipFileGetStatsL2(stats: *mut c_void) -> HipFileError {
    get_stats(stats, Level::Histograms)
}

#[no_mangle]
pub unsafe extern "C" fn hipFileGetStatsL3(stats: *mut c_void) -> HipFileError {
    get_stats(stats, Level::PerGpu)
}
