//! hipMemcpy and hipMemcpyAsync: the copy's checks (each side where the kind says, inside
//! an allocation), its injected fault, then the bytes moved.

use std::ffi::{c_int, c_void};

use super::{need_device, record, runtime_fault, HipError, HipStream};
use super::{HIP_MEMCPY_DEFAULT, HIP_MEMCPY_DEVICE_TO_DEVICE, HIP_MEMCPY_DEVICE_TO_HOST};
use super::{HIP_MEMCPY_HOST_TO_DEVICE, HIP_MEMCPY_HOST_TO_HOST};
use crate::faults::{RuntimeCall, RuntimeFault};
use crate::messages::*;
use crate::state::{fake, Queued, Registry};

#[no_mangle]
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
) -> HipError {
    // SAFETY: the caller keeps hipMemcpy's contract.
    record(unsafe { hip_memcpy(dst, src, size, kind) })
}

unsafe fn hip_memcpy(dst: *mut c_void, src: *const c_void, size: usize, kind: c_int) -> HipError {
    match admit_copy("hipMemcpy", dst, src, size, kind) {
        Ok((dst, src, corrupt)) => {
            copy_now("hipMemcpy", dst, src, size, kind, corrupt);
            HIP_SUCCESS
        }
        Err(e) => e,
    }
}

/// A copy's checks, then its injected fault: the addresses to copy between and whether the
/// bytes are to be corrupted, or the error to answer.
fn admit_copy(
    call: &str,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
) -> Result<(usize, usize, bool), HipError> {
    check_copy(call, dst, src, size, kind)?;
    let (dst, src) = (dst as usize, src as usize);
    match copy_fault(dst, src, size, kind) {
        Some(RuntimeFault::Code(code)) => Err(code),
        Some(RuntimeFault::Corrupt) => Ok((dst, src, true)),
        Some(RuntimeFault::Stall(ms)) => {
            // Without the registry lock: other threads' calls go on meanwhile.
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok((dst, src, false))
        }
        None => Ok((dst, src, false)),
    }
}

/// Queues the copy on `stream` (run by hipStreamSynchronize, so a caller that reads the
/// destination before synchronizing sees stale bytes, as on a GPU); the null stream copies
/// at once.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
    stream: HipStream,
) -> HipError {
    // SAFETY: the caller keeps hipMemcpyAsync's contract.
    record(unsafe { hip_memcpy_async(dst, src, size, kind, stream) })
}

unsafe fn hip_memcpy_async(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
    stream: HipStream,
) -> HipError {
    let (dst, src, corrupt) = match admit_copy("hipMemcpyAsync", dst, src, size, kind) {
        Ok(admitted) => admitted,
        Err(e) => return e,
    };
    if stream.is_null() {
        copy_now("hipMemcpyAsync", dst, src, size, kind, corrupt);
        return HIP_SUCCESS;
    }
    let mut reg = fake().registry();
    let Some(entry) = reg.streams.get_mut(&(stream as usize)) else {
        reg.misuse(format!(
            "hipMemcpyAsync on unknown stream {:#x}",
            stream as usize
        ));
        return HIP_ERROR_INVALID_HANDLE;
    };
    entry.pending.push(Queued::Copy {
        dst,
        src,
        size,
        kind,
        corrupt,
    });
    HIP_SUCCESS
}

/// hipMemcpy's argument checks: a known direction, non-null pointers, and each device side
/// inside one device allocation.
fn check_copy(
    call: &str,
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
) -> Result<(), HipError> {
    need_device()?;
    if !(HIP_MEMCPY_HOST_TO_HOST..=HIP_MEMCPY_DEFAULT).contains(&kind) {
        return Err(HIP_ERROR_INVALID_MEMCPY_DIRECTION);
    }
    if size == 0 {
        return Ok(());
    }
    if dst.is_null() || src.is_null() {
        return Err(HIP_ERROR_INVALID_VALUE);
    }
    let (d, s) = (dst as usize, src as usize);
    let mut reg = fake().registry();
    let (want_dst_dev, want_src_dev) = copy_sides(&reg, d, s, size, kind);
    let dst_dev = reg.device_alloc_holding(d, size).is_some();
    let src_dev = reg.device_alloc_holding(s, size).is_some();
    if (want_dst_dev && !dst_dev) || (want_src_dev && !src_dev) {
        reg.misuse(format!(
            "{call} kind {kind} of {size} bytes {s:#x} -> {d:#x}: device side is not inside one device allocation"
        ));
        return Err(HIP_ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// The fault on a checked copy, numbered among the copies of its direction (host to device
/// or device to host; other directions have no rules).
fn copy_fault(dst: usize, src: usize, size: usize, kind: c_int) -> Option<RuntimeFault> {
    let sides = copy_sides(&fake().registry(), dst, src, size, kind);
    match sides {
        (true, false) => runtime_fault(RuntimeCall::HostToDevice),
        (false, true) => runtime_fault(RuntimeCall::DeviceToHost),
        _ => None,
    }
}

/// Which sides of a copy of `kind` are device memory (hipMemcpyDefault: where they are).
fn copy_sides(reg: &Registry, d: usize, s: usize, size: usize, kind: c_int) -> (bool, bool) {
    match kind {
        HIP_MEMCPY_HOST_TO_DEVICE => (true, false),
        HIP_MEMCPY_DEVICE_TO_HOST => (false, true),
        HIP_MEMCPY_DEVICE_TO_DEVICE => (true, true),
        _ => (
            reg.device_alloc_holding(d, size).is_some(),
            reg.device_alloc_holding(s, size).is_some(),
        ),
    }
}

/// Performs a checked copy and counts its bytes by direction (and by device). A queued copy
/// runs on the thread that synchronizes its stream, which has made the device current.
/// `corrupt` flips every bit of the first byte copied, once it has landed.
pub(super) fn copy_now(
    call: &str,
    dst: usize,
    src: usize,
    size: usize,
    kind: c_int,
    corrupt: bool,
) {
    if size == 0 {
        return;
    }
    {
        let mut reg = fake().registry();
        let (dst_dev, src_dev) = copy_sides(&reg, dst, src, size, kind);
        match (dst_dev, src_dev) {
            (true, false) => reg.stats.htod_bytes += size as u64,
            (false, true) => reg.stats.dtoh_bytes += size as u64,
            _ => {}
        }
        for (addr, on_device) in [(dst, dst_dev), (src, src_dev)] {
            if on_device {
                crate::topology::used(&mut reg, call, addr, size);
            }
        }
    }
    // SAFETY: checked by check_copy when the copy was asked for; the caller keeps both sides
    // alive until the copy has run (at once, or when its stream is synchronized).
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, size) };
    if corrupt {
        // SAFETY: `dst` holds at least `size` > 0 bytes, as above.
        unsafe { *(dst as *mut u8) ^= 0xff };
    }
}
