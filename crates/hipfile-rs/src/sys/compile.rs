//! Run-time compilation (hiprtc / NVRTC) and modules (hipModule* / cuModule*): the types
//! and the function tables, one for both symbol sets.

use super::scalars::{CuDevice, RuntimeStatus, StreamRaw};
use std::ffi::{c_char, c_int, c_uint, c_void};

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
    /// `hipGetDeviceProperties(hipDeviceProp_t *prop, int device)` (ROCm 6's
    /// `hipGetDevicePropertiesR0600`, else the older symbol): HIP only, for the
    /// architecture's name (`gcnArchName`). The struct's layout differs between ROCm
    /// releases, so the caller passes a buffer larger than any of them and finds the name by
    /// its form, not by its offset.
    pub get_device_properties: Option<unsafe extern "C" fn(*mut c_void, c_int) -> RuntimeStatus>,
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
