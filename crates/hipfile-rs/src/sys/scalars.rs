//! The scalar types of both APIs: opaque handles, offsets, status codes.

use std::ffi::{c_int, c_void};

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
