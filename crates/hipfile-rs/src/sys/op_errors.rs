//! The library's 5000-based error codes (hipFileOpError_t; cuFile's CUfileOpError agrees up
//! to 5038, then differs), and each vendor's name and a meaning for them.

use std::ffi::c_int;

/// `HIPFILE_BASE_ERR`: every library-specific code is above it.
pub const BASE_ERR: c_int = 5000;
pub const SUCCESS: c_int = 0;
pub const DRIVER_NOT_INITIALIZED: c_int = 5001;
pub const DRIVER_INVALID_PROPS: c_int = 5002;
pub const DRIVER_UNSUPPORTED_LIMIT: c_int = 5003;
pub const DRIVER_VERSION_MISMATCH: c_int = 5004;
pub const DRIVER_VERSION_READ_ERROR: c_int = 5005;
pub const DRIVER_CLOSING: c_int = 5006;
pub const PLATFORM_NOT_SUPPORTED: c_int = 5007;
pub const IO_NOT_SUPPORTED: c_int = 5008;
pub const DEVICE_NOT_SUPPORTED: c_int = 5009;
pub const DRIVER_ERROR: c_int = 5010;
/// The runtime failed; `FileError::drv_err` holds its code.
pub const HIP_DRIVER_ERROR: c_int = 5011;
pub const HIP_POINTER_INVALID: c_int = 5012;
pub const HIP_MEMORY_TYPE_INVALID: c_int = 5013;
pub const HIP_POINTER_RANGE_ERROR: c_int = 5014;
pub const HIP_CONTEXT_MISMATCH: c_int = 5015;
pub const INVALID_MAPPING_SIZE: c_int = 5016;
pub const INVALID_MAPPING_RANGE: c_int = 5017;
pub const INVALID_FILE_TYPE: c_int = 5018;
pub const INVALID_FILE_OPEN_FLAG: c_int = 5019;
pub const DIO_NOT_SET: c_int = 5020;
pub const INVALID_VALUE: c_int = 5022;
pub const MEMORY_ALREADY_REGISTERED: c_int = 5023;
pub const MEMORY_NOT_REGISTERED: c_int = 5024;
pub const PERMISSION_DENIED: c_int = 5025;
pub const DRIVER_ALREADY_OPEN: c_int = 5026;
pub const HANDLE_NOT_REGISTERED: c_int = 5027;
pub const HANDLE_ALREADY_REGISTERED: c_int = 5028;
pub const DEVICE_NOT_FOUND: c_int = 5029;
pub const INTERNAL_ERROR: c_int = 5030;
pub const GET_NEW_FD_FAILED: c_int = 5031;
pub const DRIVER_SETUP_ERROR: c_int = 5033;
pub const IO_DISABLED: c_int = 5034;
pub const BATCH_SUBMIT_FAILED: c_int = 5035;
pub const GPU_MEMORY_PINNING_FAILED: c_int = 5036;
pub const BATCH_FULL: c_int = 5037;
pub const ASYNC_NOT_SUPPORTED: c_int = 5038;
/// hipFile's largest code; not returned by calls. cuFile uses 5039 and up for codes of its own.
pub const IO_MAX_ERROR: c_int = 5039;

/// Whose code table to read: the two vendors name a few shared codes differently, and cuFile
/// has codes past hipFile's last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpErrorTable {
    HipFile,
    CuFile,
}

/// The vendor's name for a 5000-based code (its enumerator without the `hipFile` / `CU_FILE_`
/// prefix, in hipFile's spelling) and a one-line meaning in our own words. The meaning is what
/// messages show when the library has no `GetOpErrorString` (cuFile keeps that function inline
/// in its header, so it cannot be loaded).
pub fn op_error_info(table: OpErrorTable, code: c_int) -> Option<(&'static str, &'static str)> {
    if table == OpErrorTable::CuFile {
        if let Some(info) = cufile_only_op_error(code) {
            return Some(info);
        }
    }
    Some(match code {
        SUCCESS => ("Success", "success"),
        DRIVER_NOT_INITIALIZED => ("DriverNotInitialized", "GPU I/O driver is not loaded"),
        DRIVER_INVALID_PROPS => ("DriverInvalidProps", "invalid GPU I/O driver property"),
        DRIVER_UNSUPPORTED_LIMIT => (
            "DriverUnsupportedLimit",
            "driver property value unsupported",
        ),
        DRIVER_VERSION_MISMATCH => (
            "DriverVersionMismatch",
            "library and driver versions differ",
        ),
        DRIVER_VERSION_READ_ERROR => ("DriverVersionReadError", "cannot read the driver version"),
        DRIVER_CLOSING => ("DriverClosing", "GPU I/O driver is closing"),
        PLATFORM_NOT_SUPPORTED => ("PlatformNotSupported", "platform not supported"),
        IO_NOT_SUPPORTED => ("IONotSupported", "GPU I/O not supported on this file"),
        DEVICE_NOT_SUPPORTED => ("DeviceNotSupported", "GPU does not support GPU I/O"),
        DRIVER_ERROR => ("DriverError", "GPU I/O driver error"),
        HIP_DRIVER_ERROR => ("HipDriverError", "GPU runtime error"),
        HIP_POINTER_INVALID => ("HipPointerInvalid", "invalid device pointer"),
        HIP_MEMORY_TYPE_INVALID => ("HipMemoryTypeInvalid", "memory type unusable for GPU I/O"),
        HIP_POINTER_RANGE_ERROR => ("HipPointerRangeError", "range exceeds the allocation"),
        HIP_CONTEXT_MISMATCH => ("HipContextMismatch", "GPU context mismatch"),
        INVALID_MAPPING_SIZE => ("InvalidMappingSize", "access beyond the pinned buffer"),
        INVALID_MAPPING_RANGE => ("InvalidMappingRange", "access beyond the mapped region"),
        INVALID_FILE_TYPE => ("InvalidFileType", "unsupported file type"),
        INVALID_FILE_OPEN_FLAG => ("InvalidFileOpenFlag", "unsupported file open flags"),
        DIO_NOT_SET => ("DIONotSet", "O_DIRECT not set"),
        INVALID_VALUE => ("InvalidValue", "invalid argument"),
        MEMORY_ALREADY_REGISTERED => ("MemoryAlreadyRegistered", "buffer already registered"),
        MEMORY_NOT_REGISTERED => ("MemoryNotRegistered", "buffer not registered"),
        PERMISSION_DENIED => ("PermissionDenied", "permission denied"),
        DRIVER_ALREADY_OPEN => ("DriverAlreadyOpen", "GPU I/O driver already open"),
        HANDLE_NOT_REGISTERED => ("HandleNotRegistered", "file not registered for GPU I/O"),
        HANDLE_ALREADY_REGISTERED => ("HandleAlreadyRegistered", "file already registered"),
        DEVICE_NOT_FOUND => ("DeviceNotFound", "GPU not found"),
        INTERNAL_ERROR => ("InternalError", "internal library error"),
        GET_NEW_FD_FAILED => ("GetNewFDFailed", "cannot obtain a new file descriptor"),
        DRIVER_SETUP_ERROR => ("DriverSetupError", "GPU I/O driver setup failed"),
        IO_DISABLED => ("IODisabled", "configuration forbids GPU I/O on this file"),
        BATCH_SUBMIT_FAILED => ("BatchSubmitFailed", "batch submission failed"),
        GPU_MEMORY_PINNING_FAILED => ("GPUMemoryPinningFailed", "cannot pin GPU memory"),
        BATCH_FULL => ("BatchFull", "batch queue full"),
        ASYNC_NOT_SUPPORTED => ("AsyncNotSupported", "async GPU I/O not supported"),
        IO_MAX_ERROR if table == OpErrorTable::HipFile => ("IOMaxError", "largest error code"),
        _ => return None,
    })
}

/// cuFile's own names: the CUDA and nvidia-fs spellings of shared codes, and its codes past
/// 5038 (cufile.h of cuFile 1.19).
fn cufile_only_op_error(code: c_int) -> Option<(&'static str, &'static str)> {
    Some(match code {
        DRIVER_ERROR => ("NvfsDriverError", "GPU I/O driver error"),
        HIP_DRIVER_ERROR => ("CudaDriverError", "GPU runtime error"),
        HIP_POINTER_INVALID => ("CudaPointerInvalid", "invalid device pointer"),
        HIP_MEMORY_TYPE_INVALID => ("CudaMemoryTypeInvalid", "memory type unusable for GPU I/O"),
        HIP_POINTER_RANGE_ERROR => ("CudaPointerRangeError", "range exceeds the allocation"),
        HIP_CONTEXT_MISMATCH => ("CudaContextMismatch", "GPU context mismatch"),
        DRIVER_SETUP_ERROR => ("NvfsSetupError", "GPU I/O driver setup failed"),
        5039 => ("InternalBatchSetupError", "batch setup failed; retry later"),
        5040 => (
            "InternalBatchSubmitError",
            "batch submission failed; retry later",
        ),
        5041 => (
            "InternalBatchGetStatusError",
            "batch status query failed; retry later",
        ),
        5042 => (
            "InternalBatchCancelError",
            "batch cancel failed; retry later",
        ),
        5043 => ("NoMemError", "library out of memory; retry later"),
        5044 => ("IOError", "I/O error inside the library"),
        5045 => (
            "InternalBufRegisterError",
            "buffer registration failed inside the library",
        ),
        5046 => (
            "HashOprError",
            "hash table operation failed inside the library",
        ),
        5047 => ("InvalidContextError", "invalid GPU context"),
        5048 => ("NvfsInternalDriverError", "GPU I/O driver internal error"),
        5049 => (
            "BatchNoCompatError",
            "batch I/O needs compatibility mode, which is off",
        ),
        5050 => ("IOMaxError", "largest error code"),
        _ => return None,
    })
}

/// `IS_HIPFILE_ERR`: a library code rather than an errno or a runtime status.
pub fn is_op_error(code: i64) -> bool {
    code.unsigned_abs() > BASE_ERR as u64
}
