//! Texts for `hipGetErrorString` and `hipFileGetOpErrorString`.
//!
//! The HIP texts are the runtime's own wording for the codes this double returns, so a
//! caller's messages read the same here as on a real machine.

use std::ffi::CStr;

pub const HIP_SUCCESS: i32 = 0;
pub const HIP_ERROR_INVALID_VALUE: i32 = 1;
pub const HIP_ERROR_OUT_OF_MEMORY: i32 = 2;
pub const HIP_ERROR_INVALID_MEMCPY_DIRECTION: i32 = 21;
pub const HIP_ERROR_NO_DEVICE: i32 = 100;
pub const HIP_ERROR_INVALID_DEVICE: i32 = 101;
pub const HIP_ERROR_INVALID_HANDLE: i32 = 400;

pub fn hip_error_string(code: i32) -> &'static CStr {
    match code {
        0 => c"no error",
        1 => c"invalid argument",
        2 => c"out of memory",
        3 => c"initialization error",
        4 => c"driver shutting down",
        17 => c"invalid device pointer",
        21 => c"invalid copy direction for memcpy",
        100 => c"no ROCm-capable device is detected",
        101 => c"invalid device ordinal",
        400 => c"invalid resource handle",
        600 => c"device not ready",
        700 => c"an illegal memory access was encountered",
        801 => c"operation not supported",
        _ => c"unknown error",
    }
}

pub fn hipfile_error_string(code: i32) -> &'static CStr {
    match code {
        0 => c"hipFile success",
        5001 => c"GPU IO driver is not loaded",
        5002 => c"invalid GPU IO driver property",
        5003 => c"GPU IO driver property value is unsupported",
        5004 => c"hipFile version does not match the GPU IO driver version",
        5005 => c"cannot read the GPU IO driver version",
        5006 => c"GPU IO driver is closing",
        5007 => c"hipFile is not supported on this platform",
        5008 => c"hipFile I/O is not supported on this file",
        5009 => c"this GPU does not support hipFile",
        5010 => c"GPU IO driver error",
        5011 => c"HIP driver error",
        5012 => c"invalid GPU pointer",
        5013 => c"memory type is not usable with hipFile",
        5014 => c"pointer range exceeds the allocation",
        5015 => c"GPU context mismatch",
        5016 => c"access beyond the pinned buffer",
        5017 => c"access beyond the mapped region",
        5018 => c"unsupported file type",
        5019 => c"unsupported file open flags",
        5020 => c"O_DIRECT is not set",
        5022 => c"invalid argument",
        5023 => c"memory is already registered",
        5024 => c"memory is not registered",
        5025 => c"permission denied",
        5026 => c"GPU IO driver is already open",
        5027 => c"file handle is not registered",
        5028 => c"file handle is already registered",
        5029 => c"device not found",
        5030 => c"internal hipFile error",
        5031 => c"cannot obtain a new file descriptor",
        5033 => c"GPU IO driver setup error",
        5034 => c"GPU IO is disabled for this file by configuration",
        5035 => c"batch submission failed",
        5036 => c"GPU memory pinning failed",
        5037 => c"batch queue is full",
        5038 => c"hipFile async I/O is not supported",
        5039 => c"largest hipFile error code",
        _ => c"unknown hipFile error",
    }
}
