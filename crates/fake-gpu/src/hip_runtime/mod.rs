//! The HIP runtime symbols (hip_runtime_api.h signatures). Device memory is host memory.
//! The copies are in `memcpy`.

mod memcpy;
use memcpy::copy_now;

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::Ordering;

use crate::faults::{RuntimeCall, RuntimeFault};
use crate::io::{run_async, set_errno};
use crate::memory;
use crate::messages::*;
use crate::state::{fake, Fake, Queued, StreamEntry};

pub use crate::current::HipError;
use crate::current::{current_device, set_current_device};
/// `hipStream_t`: an opaque pointer; null is the default stream.
pub type HipStream = *mut c_void;

const HIP_MEMCPY_HOST_TO_HOST: c_int = 0;
const HIP_MEMCPY_HOST_TO_DEVICE: c_int = 1;
const HIP_MEMCPY_DEVICE_TO_HOST: c_int = 2;
const HIP_MEMCPY_DEVICE_TO_DEVICE: c_int = 3;
const HIP_MEMCPY_DEFAULT: c_int = 4;
const HIP_STREAM_NON_BLOCKING: c_uint = 1;
/// What hipRuntimeGetVersion reports: HIP 6.4.0 in HIP's major*1e7 + minor*1e5 + patch form.
pub const FAKE_RUNTIME_VERSION: c_int = 60_400_000;

thread_local! {
    /// The last failure of a runtime call on this thread, as HIP keeps it for
    /// hipPeekAtLastError (AMD's hipFile wrappers read it after every read and write).
    static LAST_ERROR: Cell<HipError> = const { Cell::new(HIP_SUCCESS) };
}

/// Passes `status` through, keeping it as the thread's last error when it is a failure.
fn record(status: HipError) -> HipError {
    if status != HIP_SUCCESS {
        LAST_ERROR.set(status);
    }
    status
}

/// The thread's last runtime failure, left in place (hipGetLastError would clear it).
#[no_mangle]
pub unsafe extern "C" fn hipPeekAtLastError() -> HipError {
    LAST_ERROR.get()
}

/// hipErrorNoDevice when the fake has no devices, for calls that need one.
fn need_device() -> Result<(), HipError> {
    if fake().devices == 0 {
        Err(HIP_ERROR_NO_DEVICE)
    } else {
        Ok(())
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipInit(_flags: c_uint) -> HipError {
    // SAFETY: the caller keeps hipInit's contract.
    record(unsafe { hip_init(_flags) })
}

unsafe fn hip_init(_flags: c_uint) -> HipError {
    match need_device() {
        Ok(()) => HIP_SUCCESS,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> HipError {
    // SAFETY: the caller keeps hipGetDeviceCount's contract.
    record(unsafe { hip_get_device_count(count) })
}

unsafe fn hip_get_device_count(count: *mut c_int) -> HipError {
    if count.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let devices = fake().devices;
    *count = devices;
    if devices == 0 {
        HIP_ERROR_NO_DEVICE
    } else {
        HIP_SUCCESS
    }
}

#[no_mangle]
pub unsafe extern "C" fn hipSetDevice(device: c_int) -> HipError {
    // SAFETY: the caller keeps hipSetDevice's contract.
    record(unsafe { hip_set_device(device) })
}

unsafe fn hip_set_device(device: c_int) -> HipError {
    if let Err(e) = need_device() {
        return e;
    }
    if device < 0 || device >= fake().devices {
        return HIP_ERROR_INVALID_DEVICE;
    }
    if let Some(RuntimeFault::Code(code)) = runtime_fault(RuntimeCall::SetDevice) {
        // The thread's current device stays what it was.
        return code;
    }
    set_current_device(device);
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    fake().registry().stats.device_threads.insert(tid);
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipGetDevice(device: *mut c_int) -> HipError {
    // SAFETY: the caller keeps hipGetDevice's contract.
    record(unsafe { hip_get_device(device) })
}

unsafe fn hip_get_device(device: *mut c_int) -> HipError {
    if let Err(e) = need_device() {
        return e;
    }
    if device.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    *device = current_device();
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> HipError {
    // SAFETY: the caller keeps hipMalloc's contract.
    record(unsafe { hip_malloc(ptr, size) })
}

unsafe fn hip_malloc(ptr: *mut *mut c_void, size: usize) -> HipError {
    let fake = fake();
    if let Err(e) = need_device() {
        return e;
    }
    if ptr.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    let call = fake.calls.malloc.fetch_add(1, Ordering::SeqCst) + 1;
    if fake.faults.malloc_fails(call, size as u64) {
        *ptr = std::ptr::null_mut();
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    if size == 0 {
        // Like HIP: success with a null pointer.
        *ptr = std::ptr::null_mut();
        return HIP_SUCCESS;
    }
    let Some(addr) = memory::map(size) else {
        *ptr = std::ptr::null_mut();
        return HIP_ERROR_OUT_OF_MEMORY;
    };
    let mut reg = fake.registry();
    reg.device_allocs.insert(addr, size);
    reg.devices.allocated(addr, current_device());
    reg.stats.mallocs += 1;
    reg.stats.max_alloc = reg.stats.max_alloc.max(size as u64);
    *ptr = addr as *mut c_void;
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> HipError {
    // SAFETY: the caller keeps hipFree's contract.
    record(unsafe { hip_free(ptr) })
}

unsafe fn hip_free(ptr: *mut c_void) -> HipError {
    if ptr.is_null() {
        return HIP_SUCCESS;
    }
    let addr = ptr as usize;
    let mut reg = fake().registry();
    let Some(&len) = reg.device_allocs.get(&addr) else {
        reg.misuse(format!(
            "hipFree of {addr:#x}, not a device allocation base"
        ));
        return HIP_ERROR_INVALID_VALUE;
    };
    // One report line per misuse: the addresses joined, not pretty-printed over lines.
    let registered: Vec<String> = reg
        .buffers
        .keys()
        .filter(|&&b| b >= addr && b < addr + len)
        .map(|b| format!("{b:#x}"))
        .collect();
    if !registered.is_empty() {
        reg.misuse(format!(
            "hipFree of {addr:#x} while buffer(s) {} are still registered (refused)",
            registered.join(", ")
        ));
        return HIP_ERROR_INVALID_VALUE;
    }
    reg.device_allocs.remove(&addr);
    reg.devices.freed(addr);
    drop(reg);
    memory::unmap(addr, len);
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipHostMalloc(
    ptr: *mut *mut c_void,
    size: usize,
    _flags: c_uint,
) -> HipError {
    // SAFETY: the caller keeps hipHostMalloc's contract.
    record(unsafe { hip_host_malloc(ptr, size, _flags) })
}

unsafe fn hip_host_malloc(ptr: *mut *mut c_void, size: usize, _flags: c_uint) -> HipError {
    if let Err(e) = need_device() {
        return e;
    }
    if ptr.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    if size == 0 {
        *ptr = std::ptr::null_mut();
        return HIP_SUCCESS;
    }
    let fake = fake();
    if pinning_fails(fake) {
        *ptr = std::ptr::null_mut();
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    let Some(addr) = memory::map(size) else {
        *ptr = std::ptr::null_mut();
        return HIP_ERROR_OUT_OF_MEMORY;
    };
    fake.registry().host_allocs.insert(addr, size);
    *ptr = addr as *mut c_void;
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipHostFree(ptr: *mut c_void) -> HipError {
    // SAFETY: the caller keeps hipHostFree's contract.
    record(unsafe { hip_host_free(ptr) })
}

unsafe fn hip_host_free(ptr: *mut c_void) -> HipError {
    if ptr.is_null() {
        return HIP_SUCCESS;
    }
    let addr = ptr as usize;
    let mut reg = fake().registry();
    let Some(len) = reg.host_allocs.remove(&addr) else {
        reg.misuse(format!(
            "hipHostFree of {addr:#x}, not a pinned host allocation base"
        ));
        return HIP_ERROR_INVALID_VALUE;
    };
    drop(reg);
    memory::unmap(addr, len);
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipHostRegister(
    ptr: *mut c_void,
    size: usize,
    _flags: c_uint,
) -> HipError {
    // SAFETY: the caller keeps hipHostRegister's contract.
    record(unsafe { hip_host_register(ptr, size) })
}

/// Pins nothing (the fake's copies are memcpy), but counts the call for `hostmalloc` rules,
/// and keeps the range so that copies to and from it count as pinned and a range never
/// unregistered is a leak.
unsafe fn hip_host_register(ptr: *mut c_void, size: usize) -> HipError {
    if let Err(e) = need_device() {
        return e;
    }
    if ptr.is_null() || size == 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    // A runtime that cannot pin memory it did not allocate (some drivers and containers).
    if std::env::var_os("AISCP_FAKE_GPU_HOST_REGISTER").is_some_and(|v| v == "refuse") {
        return HIP_ERROR_NOT_SUPPORTED;
    }
    let fake = fake();
    let addr = ptr as usize;
    if fake.registry().host_alloc_holding(addr, size).is_some() {
        fake.registry().misuse(format!(
            "hipHostRegister of {addr:#x} ({size} bytes), already pinned host memory"
        ));
        return HIP_ERROR_INVALID_VALUE;
    }
    if pinning_fails(fake) {
        return HIP_ERROR_OUT_OF_MEMORY;
    }
    fake.registry().host_registrations.insert(addr, size);
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipHostUnregister(ptr: *mut c_void) -> HipError {
    let addr = ptr as usize;
    let mut reg = fake().registry();
    if reg.host_registrations.remove(&addr).is_none() {
        reg.misuse(format!(
            "hipHostUnregister of {addr:#x}, not a registered host range's base"
        ));
        return record(HIP_ERROR_INVALID_VALUE);
    }
    record(HIP_SUCCESS)
}

/// Numbers one pinning of host memory (hipHostMalloc and hipHostRegister count alike) and
/// says whether a `hostmalloc#N=oom` rule fails it.
fn pinning_fails(fake: &Fake) -> bool {
    let call = fake.calls.hostmalloc.fetch_add(1, Ordering::SeqCst) + 1;
    fake.faults.hostmalloc_fails(call)
}

/// Numbers the call of `call` and returns the fault a rule puts on it.
fn runtime_fault(call: RuntimeCall) -> Option<RuntimeFault> {
    let fake = fake();
    fake.calls.runtime_fault(&fake.faults, call)
}

#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithFlags(
    stream: *mut HipStream,
    flags: c_uint,
) -> HipError {
    // SAFETY: the caller keeps hipStreamCreateWithFlags's contract.
    record(unsafe { hip_stream_create_with_flags(stream, flags) })
}

unsafe fn hip_stream_create_with_flags(stream: *mut HipStream, flags: c_uint) -> HipError {
    if let Err(e) = need_device() {
        return e;
    }
    if stream.is_null() || flags & !HIP_STREAM_NON_BLOCKING != 0 {
        return HIP_ERROR_INVALID_VALUE;
    }
    if let Some(RuntimeFault::Code(code)) = runtime_fault(RuntimeCall::StreamCreate) {
        return code;
    }
    let mut reg = fake().registry();
    let id = reg.new_id();
    reg.streams.insert(id, StreamEntry::default());
    *stream = id as HipStream;
    HIP_SUCCESS
}

/// Runs the stream's queued async ops in order. The params they point to are read now,
/// which is what exposes a caller that freed them before synchronizing.
#[no_mangle]
pub unsafe extern "C" fn hipStreamSynchronize(stream: HipStream) -> HipError {
    // SAFETY: the caller keeps hipStreamSynchronize's contract.
    record(unsafe { hip_stream_synchronize(stream) })
}

unsafe fn hip_stream_synchronize(stream: HipStream) -> HipError {
    let ops = {
        let mut reg = fake().registry();
        match reg.streams.get_mut(&(stream as usize)) {
            Some(entry) => {
                let ops = std::mem::take(&mut entry.pending);
                drop(reg);
                if let Some(RuntimeFault::Code(code)) = runtime_fault(RuntimeCall::StreamSync) {
                    // A failed stream: what was queued on it is lost, never run.
                    return code;
                }
                ops
            }
            None => {
                reg.misuse(format!(
                    "hipStreamSynchronize of unknown stream {:#x}",
                    stream as usize
                ));
                return HIP_ERROR_INVALID_HANDLE;
            }
        }
    };
    // The caller reads errno after synchronizing: the first failed file op's, which a later
    // op must not overwrite (waiting on a contended lock leaves EAGAIN there).
    let mut failed_errno = None;
    for op in ops {
        match op {
            Queued::File(op) => {
                if run_async(op) == -1 && failed_errno.is_none() {
                    failed_errno = std::io::Error::last_os_error().raw_os_error();
                }
            }
            Queued::Copy {
                dst,
                src,
                size,
                kind,
                corrupt,
            } => copy_now("hipMemcpyAsync", dst, src, size, kind, corrupt),
            // SAFETY: the launch's addresses are checked against the device allocations.
            Queued::Kernel(launch) => unsafe { crate::kernels::run(launch) },
        }
    }
    if let Some(e) = failed_errno {
        set_errno(e);
    }
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipStreamDestroy(stream: HipStream) -> HipError {
    // SAFETY: the caller keeps hipStreamDestroy's contract.
    record(unsafe { hip_stream_destroy(stream) })
}

unsafe fn hip_stream_destroy(stream: HipStream) -> HipError {
    let id = stream as usize;
    let mut reg = fake().registry();
    if id == 0 {
        return HIP_ERROR_INVALID_HANDLE;
    }
    let Some(entry) = reg.streams.remove(&id) else {
        reg.misuse(format!("hipStreamDestroy of unknown stream {id:#x}"));
        return HIP_ERROR_INVALID_HANDLE;
    };
    if !entry.pending.is_empty() {
        reg.misuse(format!(
            "hipStreamDestroy of stream {id:#x} with {} async op(s) pending (dropped, never run)",
            entry.pending.len()
        ));
    }
    if entry.hipfile_flags.is_some() {
        reg.misuse(format!(
            "hipStreamDestroy of stream {id:#x} still registered with hipFile"
        ));
    }
    HIP_SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn hipGetErrorString(error: HipError) -> *const c_char {
    hip_error_string(error).as_ptr()
}

#[no_mangle]
pub unsafe extern "C" fn hipRuntimeGetVersion(version: *mut c_int) -> HipError {
    // SAFETY: the caller keeps hipRuntimeGetVersion's contract.
    record(unsafe { hip_runtime_get_version(version) })
}

unsafe fn hip_runtime_get_version(version: *mut c_int) -> HipError {
    if version.is_null() {
        return HIP_ERROR_INVALID_VALUE;
    }
    *version = FAKE_RUNTIME_VERSION;
    HIP_SUCCESS
}
