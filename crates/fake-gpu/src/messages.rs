//! Texts for `hipGetErrorString` and `hipFileGetOpErrorString`.
//!
//! The HIP texts are the runtime's own wording for the codes this double returns, and the
//! hipFile texts are hipfile.h's description of each code (scripts/abi-check.py compares them
//! with AMD's wrappers, which carry the header's descriptions), so a caller's messages read the
//! same here as on a real machine.

use std::ffi::CStr;

pub const HIP_SUCCESS: i32 = 0;
pub const HIP_ERROR_INVALID_VALUE: i32 = 1;
pub const HIP_ERROR_OUT_OF_MEMORY: i32 = 2;
pub const HIP_ERROR_INVALID_MEMCPY_DIRECTION: i32 = 21;
pub const HIP_ERROR_NO_DEVICE: i32 = 100;
pub const HIP_ERROR_INVALID_DEVICE: i32 = 101;
pub const HIP_ERROR_INVALID_HANDLE: i32 = 400;
pub const HIP_ERROR_NOT_SUPPORTED: i32 = 801;

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
        0 => c"hipFile operation completed successfully",
        5001 => c"GPU IO driver is not loaded",
        5002 => c"Invalid GPU IO driver property provided",
        5003 => c"GPU IO Driver property value is unsupported",
        5004 => c"hipFile version does not match GPU IO driver version",
        5005 => c"Unable to read the GPU IO driver version",
        5006 => c"GPU IO driver is closing and not accepting new requests",
        5007 => c"hipFile is not supported on the current platform",
        5008 => c"hipFile is not supported on the selected file",
        5009 => c"The selected GPU does not support hipFile",
        5010 => c"GPU IO driver error",
        5011 => c"GPU driver error: Inspect the hipError_t value for additional information",
        5012 => c"Invalid GPU pointer",
        5013 => c"Memory type backing pointer is incompatible with hipFile",
        5014 => c"Pointer range exceeds allocated memory region",
        5015 => c"GPU driver context mismatch",
        5016 => c"Accessing memory beyond pinned memory buffer",
        5017 => c"Accessing memory beyond mapped memory region",
        5018 => c"Unsupported file type",
        5019 => c"Unsupported file open flags",
        5020 => c"O_DIRECT flag not set",
        5022 => c"One or more arguments have an invalid value",
        5023 => c"Device pointer is already registered",
        5024 => c"Device pointer is not registered",
        5025 => c"Permission error on device or file access",
        5026 => c"GPU IO driver is already open",
        5027 => c"File handle for GPU IO is not registered",
        5028 => c"File handle for GPU IO is already registered",
        5029 => c"Selected device not found",
        5030 => c"Internal GPU IO library error",
        5031 => c"Unable to obtain a new file descriptor",
        5033 => c"GPU IO Driver initialization error",
        5034 => c"GPU IO config file prohibits GPU IO on specified file",
        5035 => c"Failed to submit request for batch operation",
        5036 => c"Failed to allocated pinned device memory",
        5037 => c"Batch operation queue is full",
        5038 => c"hipFile async IO is not supported",
        5039 => c"Internal flag to mark largest hipFile error code",
        _ => c"unknown hipFile error",
    }
}
