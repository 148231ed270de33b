//! Raw layer: the `#[repr(C)]` types of hipfile.h 0.2.0 (cufile.h has the same layout) and the
//! function tables resolved from the loaded libraries.
//!
//! Nothing here is safe to call directly; the crate root wraps every pointer in a type whose
//! `Drop` gives back what it holds. The layouts are pinned by `tests/it/abi_layout.rs`.

use std::ffi::{c_char, c_int, c_uint, c_void};

// ---------------------------------------------------------------------------------------------
// Scalar types
// ---------------------------------------------------------------------------------------------

/// `hipFileHandle_t` / `CUfileHandle_t`: an opaque token the library hands out at registration.
pub type FileHandleRaw = *mut c_void;
/// `hipStream_t` / `CUstream`: an opaque stream pointer.
pub type StreamRaw = *mut c_void;
/// `hoff_t` / `off_t` on Linux.
pub type Offset = i64;
/// `hipError_t` / `CUresult`.
pub type RuntimeStatus = c_int;
/// `CUdeviceptr`: device addresses are integers in the CUDA driver API.
pub type CuDevicePtr = u64;
/// `CUdevice`: an ordinal handle.
pub type CuDevice = c_int;
/// `CUcontext`.
pub type CuContext = *mut c_void;

// ---------------------------------------------------------------------------------------------
// Error codes (hipFileOpError_t; cuFile's CUfileOpError agrees up to 5038, then differs)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------------------------

/// `hipFileError_t` / `CUfileError_t`: 8 bytes, returned by value (in a register on x86_64).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileError {
    /// A `hipFileOpError_t` (0 on success).
    pub err: c_int,
    /// The runtime's `hipError_t` / `CUresult` when `err` is [`HIP_DRIVER_ERROR`].
    pub drv_err: RuntimeStatus,
}

/// `hipFileHandleTypeOpaqueFD`: the descriptor carries a POSIX fd.
pub const HANDLE_TYPE_OPAQUE_FD: c_int = 1;
pub const HANDLE_TYPE_OPAQUE_WIN32: c_int = 2;
pub const HANDLE_TYPE_USERSPACE_FS: c_int = 3;

/// The `handle` union of `hipFileDescr_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrHandle {
    pub fd: c_int,
    pub h_file: *mut c_void,
}

/// `hipFileDescr_t` / `CUfileDescr_t`: what `HandleRegister` reads.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FileDescr {
    /// One of the `HANDLE_TYPE_*` values.
    pub handle_type: c_int,
    pub handle: DescrHandle,
    /// `const hipFileFSOps_t *`; null for plain fds.
    pub fs_ops: *const c_void,
}

impl FileDescr {
    /// A descriptor for a plain POSIX fd.
    pub fn from_fd(fd: c_int) -> FileDescr {
        FileDescr {
            handle_type: HANDLE_TYPE_OPAQUE_FD,
            handle: DescrHandle { fd },
            fs_ops: std::ptr::null(),
        }
    }
}

/// The `nvfs` part of `hipFileDriverProps_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DriverPropsNvfs {
    pub major_version: c_uint,
    pub minor_version: c_uint,
    pub poll_thresh_size: u64,
    pub max_direct_io_size: u64,
    pub driver_status_flags: c_uint,
    pub driver_control_flags: c_uint,
}

/// `hipFileDriverProps_t` (72 bytes). A stub on AMD; kept for completeness of the ABI.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct DriverProps {
    pub nvfs: DriverPropsNvfs,
    pub feature_flags: c_uint,
    pub max_device_cache_size: u64,
    pub per_buffer_cache_size: u64,
    pub max_device_pinned_mem_size: u64,
    pub max_batch_io_count: c_uint,
    pub max_batch_io_timeout_msecs: c_uint,
}

/// `hipFileBatchRead` / `hipFileBatchWrite`.
pub const BATCH_READ: c_int = 0;
pub const BATCH_WRITE: c_int = 1;
/// `hipFileBatch`: the only batch mode.
pub const BATCH_MODE: c_int = 1;

/// `hipFileStatus_t` bits reported in [`IoEvents::status`].
pub const STATUS_WAITING: c_int = 1;
pub const STATUS_PENDING: c_int = 1 << 1;
pub const STATUS_INVALID: c_int = 1 << 2;
pub const STATUS_CANCELED: c_int = 1 << 3;
pub const STATUS_COMPLETE: c_int = 1 << 4;
pub const STATUS_TIMEOUT: c_int = 1 << 5;
pub const STATUS_FAILED: c_int = 1 << 6;

/// The `u.batch` member of `hipFileIOParams_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoParamsBatch {
    pub dev_ptr_base: *mut c_void,
    pub file_offset: i64,
    pub dev_ptr_offset: i64,
    pub size: usize,
}

/// `hipFileIOParams_t` (64 bytes): one batch request.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoParams {
    pub mode: c_int,
    pub batch: IoParamsBatch,
    pub fh: FileHandleRaw,
    pub opcode: c_int,
    pub cookie: *mut c_void,
}

/// `hipFileIOEvents_t` (24 bytes): one batch completion.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IoEvents {
    pub cookie: *mut c_void,
    pub status: c_int,
    pub ret: usize,
}

// ---------------------------------------------------------------------------------------------
// Statistics (cufile.h 1.15 and later; hipfile.h 0.5 and later): the structs are in `stats`
// ---------------------------------------------------------------------------------------------

mod stats;
pub use stats::*;

/// The statistics levels `cuFileSetStatsLevel` takes: 3 counts per GPU (and by path).
pub const STATS_LEVEL_PER_GPU: c_int = 3;

/// `GetStatsL1` / `GetStatsL3`: fill the caller's struct (its size is the library
/// release's, so callers pass room to spare: see `io_ops`).
pub type GetStatsFn = unsafe extern "C" fn(*mut c_void) -> FileError;

// ---------------------------------------------------------------------------------------------
// Stream registration flags
// ---------------------------------------------------------------------------------------------

pub const STREAM_FIXED_BUF_OFFSET: u32 = 1;
pub const STREAM_FIXED_FILE_OFFSET: u32 = 2;
pub const STREAM_FIXED_FILE_SIZE: u32 = 4;
pub const STREAM_PAGE_ALIGNED_INPUTS: u32 = 8;
pub const STREAM_FLAGS_MASK: u32 = 0xf;
/// Linux MAX_RW_COUNT: one read/write moves at most this many bytes.
pub const MAX_IO_BYTES: usize = 0x7fff_f000;

// ---------------------------------------------------------------------------------------------
// Runtime constants
// ---------------------------------------------------------------------------------------------

/// `hipErrorInvalidValue` / `CUDA_ERROR_INVALID_VALUE`: why `-1` with errno 0 is a runtime error.
pub const RUNTIME_INVALID_VALUE: RuntimeStatus = 1;
/// `hipErrorOutOfMemory` / `CUDA_ERROR_OUT_OF_MEMORY`.
pub const RUNTIME_OUT_OF_MEMORY: RuntimeStatus = 2;
/// `hipErrorNoDevice` / `CUDA_ERROR_NO_DEVICE`.
pub const RUNTIME_NO_DEVICE: RuntimeStatus = 100;
/// `hipMemcpyHostToDevice`.
pub const HIP_MEMCPY_HOST_TO_DEVICE: c_int = 1;
/// `hipMemcpyDeviceToHost`.
pub const HIP_MEMCPY_DEVICE_TO_HOST: c_int = 2;
/// `hipStreamNonBlocking` / `CU_STREAM_NON_BLOCKING`.
pub const STREAM_NON_BLOCKING: c_uint = 1;
/// `hipHostMallocDefault` / no `CU_MEMHOSTALLOC_*` flag.
pub const HOST_ALLOC_DEFAULT: c_uint = 0;

// ---------------------------------------------------------------------------------------------
// Function tables
// ---------------------------------------------------------------------------------------------

/// How the I/O library reports its version: the two vendors differ here.
#[derive(Clone, Copy)]
pub enum VersionFn {
    HipFile(HipFileVersionFn),
    CuFile(CuFileVersionFn),
}

/// `hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch)`.
pub type HipFileVersionFn =
    unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint) -> FileError;
/// `cuFileGetVersion(int *version)` (e.g. 1150 for 1.15.0).
pub type CuFileVersionFn = unsafe extern "C" fn(*mut c_int) -> FileError;

/// The hipFile / cuFile calls, one table for both symbol sets (same shapes).
/// `Option` fields are symbols that older releases lack; a missing one disables the feature
/// instead of failing the load.
#[derive(Clone, Copy)]
pub struct IoFunctions {
    pub driver_open: unsafe extern "C" fn() -> FileError,
    pub driver_close: unsafe extern "C" fn() -> FileError,
    pub handle_register: unsafe extern "C" fn(*mut FileHandleRaw, *mut FileDescr) -> FileError,
    pub handle_deregister: unsafe extern "C" fn(FileHandleRaw),
    pub buf_register: unsafe extern "C" fn(*const c_void, usize, c_int) -> FileError,
    pub buf_deregister: unsafe extern "C" fn(*const c_void) -> FileError,
    pub read: unsafe extern "C" fn(FileHandleRaw, *mut c_void, usize, Offset, Offset) -> isize,
    pub write: unsafe extern "C" fn(FileHandleRaw, *const c_void, usize, Offset, Offset) -> isize,
    pub read_async: Option<AsyncIoFn>,
    pub write_async: Option<AsyncIoFn>,
    pub stream_register: Option<unsafe extern "C" fn(StreamRaw, c_uint) -> FileError>,
    pub stream_deregister: Option<unsafe extern "C" fn(StreamRaw) -> FileError>,
    /// `hipFileGetOpErrorString`; cuFile has no exported equivalent.
    pub get_op_error_string: Option<unsafe extern "C" fn(c_int) -> *const c_char>,
    pub get_version: Option<VersionFn>,
    /// `hipFileUseCount` (int64_t) / `cuFileUseCount` (long).
    pub use_count: Option<unsafe extern "C" fn() -> i64>,
    /// `GetStatsL1` / `GetStatsL3` (cuFile 1.15, hipFile 0.5 and later).
    pub get_stats_l1: Option<GetStatsFn>,
    pub get_stats_l3: Option<GetStatsFn>,
    /// `cuFileSetStatsLevel(int)`; hipFile takes its level from `HIPFILE_STATS_LEVEL` only.
    pub set_stats_level: Option<unsafe extern "C" fn(c_int) -> FileError>,
    /// `cuFileStatsStart()`; hipFile counts from its first call on.
    pub stats_start: Option<unsafe extern "C" fn() -> FileError>,
    /// Whether the library exports `cuFileReadv`, whose release appends [`StatsVectorIo`]
    /// to Level 1: which layout the statistics calls fill.
    pub vector_io: bool,
}

/// `ReadAsync` / `WriteAsync`: `(fh, base, *size, *file_offset, *buf_offset, *bytes, stream)`.
/// The pointed-to values are read when the stream reaches the op.
pub type AsyncIoFn = unsafe extern "C" fn(
    FileHandleRaw,
    *mut c_void,
    *mut usize,
    *mut Offset,
    *mut Offset,
    *mut isize,
    StreamRaw,
) -> FileError;

/// The AMD HIP runtime (libamdhip64).
#[derive(Clone, Copy)]
pub struct HipFunctions {
    pub get_device_count: unsafe extern "C" fn(*mut c_int) -> RuntimeStatus,
    pub set_device: unsafe extern "C" fn(c_int) -> RuntimeStatus,
    /// `hipDeviceGetPCIBusId(char *id, int len, int device)`: "DDDD:BB:DD.F".
    pub device_get_pci_bus_id:
        Option<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> RuntimeStatus>,
    /// `hipDeviceTotalMem(size_t *bytes, hipDevice_t device)`: needs no context.
    pub device_total_mem: Option<unsafe extern "C" fn(*mut usize, c_int) -> RuntimeStatus>,
    pub malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> RuntimeStatus,
    pub free: unsafe extern "C" fn(*mut c_void) -> RuntimeStatus,
    pub memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> RuntimeStatus,
    pub memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, StreamRaw) -> RuntimeStatus,
    pub host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> RuntimeStatus,
    pub host_free: unsafe extern "C" fn(*mut c_void) -> RuntimeStatus,
    pub stream_create_with_flags: unsafe extern "C" fn(*mut StreamRaw, c_uint) -> RuntimeStatus,
    pub stream_synchronize: unsafe extern "C" fn(StreamRaw) -> RuntimeStatus,
    pub stream_destroy: unsafe extern "C" fn(StreamRaw) -> RuntimeStatus,
    pub get_error_string: unsafe extern "C" fn(RuntimeStatus) -> *const c_char,
    pub runtime_get_version: Option<unsafe extern "C" fn(*mut c_int) -> RuntimeStatus>,
}

/// The CUDA driver API (libcuda). HIP on NVIDIA is header-only, so this is what runs there.
#[derive(Clone, Copy)]
pub struct CudaFunctions {
    pub init: unsafe extern "C" fn(c_uint) -> RuntimeStatus,
    pub device_get_count: unsafe extern "C" fn(*mut c_int) -> RuntimeStatus,
    pub device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> RuntimeStatus,
    /// `cuDeviceGetPCIBusId(char *id, int len, CUdevice dev)`: "DDDD:BB:DD.F".
    pub device_get_pci_bus_id:
        Option<unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> RuntimeStatus>,
    /// `cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)`: needs no context.
    pub device_total_mem: Option<unsafe extern "C" fn(*mut usize, CuDevice) -> RuntimeStatus>,
    pub primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> RuntimeStatus,
    pub primary_ctx_release: unsafe extern "C" fn(CuDevice) -> RuntimeStatus,
    pub ctx_set_current: unsafe extern "C" fn(CuContext) -> RuntimeStatus,
    pub mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> RuntimeStatus,
    pub mem_free: unsafe extern "C" fn(CuDevicePtr) -> RuntimeStatus,
    pub memcpy_htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> RuntimeStatus,
    pub memcpy_dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> RuntimeStatus,
    pub memcpy_htod_async:
        unsafe extern "C" fn(CuDevicePtr, *const c_void, usize, StreamRaw) -> RuntimeStatus,
    pub memcpy_dtoh_async:
        unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, StreamRaw) -> RuntimeStatus,
    pub mem_host_alloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> RuntimeStatus,
    pub mem_free_host: unsafe extern "C" fn(*mut c_void) -> RuntimeStatus,
    pub stream_create: unsafe extern "C" fn(*mut StreamRaw, c_uint) -> RuntimeStatus,
    pub stream_synchronize: unsafe extern "C" fn(StreamRaw) -> RuntimeStatus,
    pub stream_destroy: unsafe extern "C" fn(StreamRaw) -> RuntimeStatus,
    pub get_error_string: unsafe extern "C" fn(RuntimeStatus, *mut *const c_char) -> RuntimeStatus,
    pub driver_get_version: Option<unsafe extern "C" fn(*mut c_int) -> RuntimeStatus>,
}

/// The GPU runtime of either flavor.
#[derive(Clone, Copy)]
pub enum RuntimeFunctions {
    Hip(HipFunctions),
    Cuda(CudaFunctions),
}

/// Symbol names for [`IoFunctions`], per flavor: `(required, optional)` resolution lists.
pub struct IoSymbols {
    pub driver_open: &'static str,
    /// Tried in order (cuFile renamed DriverClose to `_v2` and exports both).
    pub driver_close: &'static [&'static str],
    pub handle_register: &'static str,
    pub handle_deregister: &'static str,
    pub buf_register: &'static str,
    pub buf_deregister: &'static str,
    pub read: &'static str,
    pub write: &'static str,
    pub read_async: &'static str,
    pub write_async: &'static str,
    pub stream_register: &'static str,
    pub stream_deregister: &'static str,
    pub get_op_error_string: Option<&'static str>,
    pub get_version: &'static str,
    pub use_count: &'static str,
    pub get_stats_l1: &'static str,
    pub get_stats_l3: &'static str,
    pub set_stats_level: Option<&'static str>,
    pub stats_start: Option<&'static str>,
    /// Looked up only for its presence (see [`IoFunctions::vector_io`]).
    pub vector_io: Option<&'static str>,
}

impl IoSymbols {
    /// Every name the loader may resolve from this set, for checks against the vendor's
    /// headers and libraries. Destructured so that a new field cannot be left out.
    pub fn names(&self) -> Vec<&'static str> {
        let IoSymbols {
            driver_open,
            driver_close,
            handle_register,
            handle_deregister,
            buf_register,
            buf_deregister,
            read,
            write,
            read_async,
            write_async,
            stream_register,
            stream_deregister,
            get_op_error_string,
            get_version,
            use_count,
            get_stats_l1,
            get_stats_l3,
            set_stats_level,
            stats_start,
            vector_io,
        } = self;
        let mut all = vec![*driver_open];
        all.extend_from_slice(driver_close);
        all.extend([
            *handle_register,
            *handle_deregister,
            *buf_register,
            *buf_deregister,
            *read,
            *write,
            *read_async,
            *write_async,
            *stream_register,
            *stream_deregister,
        ]);
        all.extend(*get_op_error_string);
        all.extend([*get_version, *use_count, *get_stats_l1, *get_stats_l3]);
        all.extend(*set_stats_level);
        all.extend(*stats_start);
        all.extend(*vector_io);
        all
    }
}

pub const HIPFILE_SYMBOLS: IoSymbols = IoSymbols {
    driver_open: "hipFileDriverOpen",
    driver_close: &["hipFileDriverClose"],
    handle_register: "hipFileHandleRegister",
    handle_deregister: "hipFileHandleDeregister",
    buf_register: "hipFileBufRegister",
    buf_deregister: "hipFileBufDeregister",
    read: "hipFileRead",
    write: "hipFileWrite",
    read_async: "hipFileReadAsync",
    write_async: "hipFileWriteAsync",
    stream_register: "hipFileStreamRegister",
    stream_deregister: "hipFileStreamDeregister",
    get_op_error_string: Some("hipFileGetOpErrorString"),
    get_version: "hipFileGetVersion",
    use_count: "hipFileUseCount",
    get_stats_l1: "hipFileGetStatsL1",
    get_stats_l3: "hipFileGetStatsL3",
    set_stats_level: None,
    stats_start: None,
    vector_io: None,
};

pub const CUFILE_SYMBOLS: IoSymbols = IoSymbols {
    driver_open: "cuFileDriverOpen",
    driver_close: &["cuFileDriverClose_v2", "cuFileDriverClose"],
    handle_register: "cuFileHandleRegister",
    handle_deregister: "cuFileHandleDeregister",
    buf_register: "cuFileBufRegister",
    buf_deregister: "cuFileBufDeregister",
    read: "cuFileRead",
    write: "cuFileWrite",
    read_async: "cuFileReadAsync",
    write_async: "cuFileWriteAsync",
    stream_register: "cuFileStreamRegister",
    stream_deregister: "cuFileStreamDeregister",
    get_op_error_string: None,
    get_version: "cuFileGetVersion",
    use_count: "cuFileUseCount",
    get_stats_l1: "cuFileGetStatsL1",
    get_stats_l3: "cuFileGetStatsL3",
    set_stats_level: Some("cuFileSetStatsLevel"),
    stats_start: Some("cuFileStatsStart"),
    vector_io: Some("cuFileReadv"),
};

// ---------------------------------------------------------------------------------------------
// Run-time compilation (hiprtc / NVRTC) and modules (hipModule* / cuModule*)
// ---------------------------------------------------------------------------------------------

/// `hiprtcProgram` / `nvrtcProgram`: an opaque program handle.
pub type RtcProgram = *mut c_void;
/// `hiprtcResult` / `nvrtcResult`: 0 is success in both.
pub type RtcStatus = c_int;
/// `HIPRTC_ERROR_COMPILATION` / `NVRTC_ERROR_COMPILATION`: the source did not compile (the
/// program's log says why).
pub const RTC_ERROR_COMPILATION: RtcStatus = 6;
/// `hipModule_t` / `CUmodule`.
pub type ModuleRaw = *mut c_void;
/// `hipFunction_t` / `CUfunction`.
pub type FunctionRaw = *mut c_void;
/// `CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR` / `_MINOR`.
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: c_int = 75;
pub const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: c_int = 76;

/// The run-time compiler: hiprtc (libhiprtc) or NVRTC (libnvrtc), one table for both
/// symbol sets (same shapes; hiprtc was modelled on NVRTC).
#[derive(Clone, Copy)]
pub struct RtcFunctions {
    /// `CreateProgram(prog*, src, name, numHeaders, headers, includeNames)`.
    pub create_program: unsafe extern "C" fn(
        *mut RtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> RtcStatus,
    /// `CompileProgram(prog, numOptions, options)`.
    pub compile_program: unsafe extern "C" fn(RtcProgram, c_int, *const *const c_char) -> RtcStatus,
    pub destroy_program: unsafe extern "C" fn(*mut RtcProgram) -> RtcStatus,
    pub get_log_size: unsafe extern "C" fn(RtcProgram, *mut usize) -> RtcStatus,
    pub get_log: unsafe extern "C" fn(RtcProgram, *mut c_char) -> RtcStatus,
    /// `hiprtcGetCodeSize` / `nvrtcGetCUBINSize`: the loadable image.
    pub get_code_size: unsafe extern "C" fn(RtcProgram, *mut usize) -> RtcStatus,
    pub get_code: unsafe extern "C" fn(RtcProgram, *mut c_char) -> RtcStatus,
    pub get_error_string: unsafe extern "C" fn(RtcStatus) -> *const c_char,
    /// `Version(int *major, int *minor)`.
    pub version: Option<unsafe extern "C" fn(*mut c_int, *mut c_int) -> RtcStatus>,
}

/// Symbol names for [`RtcFunctions`], per flavor.
pub struct RtcSymbols {
    pub create_program: &'static str,
    pub compile_program: &'static str,
    pub destroy_program: &'static str,
    pub get_log_size: &'static str,
    pub get_log: &'static str,
    pub get_code_size: &'static str,
    pub get_code: &'static str,
    pub get_error_string: &'static str,
    pub version: &'static str,
}

pub const HIPRTC_SYMBOLS: RtcSymbols = RtcSymbols {
    create_program: "hiprtcCreateProgram",
    compile_program: "hiprtcCompileProgram",
    destroy_program: "hiprtcDestroyProgram",
    get_log_size: "hiprtcGetProgramLogSize",
    get_log: "hiprtcGetProgramLog",
    get_code_size: "hiprtcGetCodeSize",
    get_code: "hiprtcGetCode",
    get_error_string: "hiprtcGetErrorString",
    version: "hiprtcVersion",
};

/// NVRTC 11.1 and later: a CUBIN for the device's own architecture (no PTX JIT, so no
/// dependence on the driver accepting the compiler's PTX version).
pub const NVRTC_SYMBOLS: RtcSymbols = RtcSymbols {
    create_program: "nvrtcCreateProgram",
    compile_program: "nvrtcCompileProgram",
    destroy_program: "nvrtcDestroyProgram",
    get_log_size: "nvrtcGetProgramLogSize",
    get_log: "nvrtcGetProgramLog",
    get_code_size: "nvrtcGetCUBINSize",
    get_code: "nvrtcGetCUBIN",
    get_error_string: "nvrtcGetErrorString",
    version: "nvrtcVersion",
};

/// Modules and kernel launches in the GPU runtime: hipModule* (libamdhip64) or cuModule* /
/// cuLaunchKernel (libcuda), same shapes. Resolved optionally: a runtime without them
/// still stages copies.
#[derive(Clone, Copy)]
pub struct ModuleFunctions {
    pub load_data: unsafe extern "C" fn(*mut ModuleRaw, *const c_void) -> RuntimeStatus,
    pub get_function:
        unsafe extern "C" fn(*mut FunctionRaw, ModuleRaw, *const c_char) -> RuntimeStatus,
    pub unload: unsafe extern "C" fn(ModuleRaw) -> RuntimeStatus,
    /// `LaunchKernel(f, gridX, gridY, gridZ, blockX, blockY, blockZ, sharedBytes, stream,
    /// kernelParams, extra)`.
    #[allow(clippy::type_complexity)]
    pub launch_kernel: unsafe extern "C" fn(
        FunctionRaw,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        c_uint,
        StreamRaw,
        *mut *mut c_void,
        *mut *mut c_void,
    ) -> RuntimeStatus,
    /// `cuDeviceGetAttribute(int *value, attribute, CUdevice)`: CUDA only, for the target
    /// architecture (hiprtc compiles for the current device by default).
    pub device_get_attribute:
        Option<unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> RuntimeStatus>,
}

/// Symbol names for [`ModuleFunctions`]: `(load_data, get_function, unload, launch_kernel)`.
pub const HIP_MODULE_SYMBOLS: [&str; 4] = [
    "hipModuleLoadData",
    "hipModuleGetFunction",
    "hipModuleUnload",
    "hipModuleLaunchKernel",
];
pub const CUDA_MODULE_SYMBOLS: [&str; 4] = [
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuLaunchKernel",
];
