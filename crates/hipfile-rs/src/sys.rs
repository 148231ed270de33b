//! Raw layer: the `#[repr(C)]` types of hipfile.h 0.2.0 (cufile.h has the same layout) and the
//! function tables resolved from the loaded libraries.
//!
//! Nothing here is safe to call directly; the crate root wraps every pointer in a type whose
//! `Drop` gives back what it holds. The layouts are pinned by `tests/it/abi_layout.rs`.

use std::ffi::{c_char, c_int, c_uint, c_void};

// ---------------------------------------------------------------------------------------------
// Scalar types: in `scalars`
// ---------------------------------------------------------------------------------------------

mod scalars;
pub use scalars::*;

// ---------------------------------------------------------------------------------------------
// Error codes (hipFileOpError_t; cuFile's CUfileOpError agrees up to 5038, then differs), and
// each vendor's name and meaning for them: in `op_errors`
// ---------------------------------------------------------------------------------------------

mod op_errors;
pub use op_errors::*;

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
/// `hipHostRegisterDefault` / no `CU_MEMHOSTREGISTER_*` flag.
pub const HOST_REGISTER_DEFAULT: c_uint = 0;

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
    pub host_register: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> RuntimeStatus,
    pub host_unregister: unsafe extern "C" fn(*mut c_void) -> RuntimeStatus,
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
    pub mem_host_register: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> RuntimeStatus,
    pub mem_host_unregister: unsafe extern "C" fn(*mut c_void) -> RuntimeStatus,
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
// Run-time compilation (hiprtc / NVRTC) and modules (hipModule* / cuModule*): in `compile`
// ---------------------------------------------------------------------------------------------

mod compile;
pub use compile::*;
