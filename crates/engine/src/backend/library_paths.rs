//! aiscp's own variables naming the GPU libraries' exact files. They are read here, where a
//! backend is brought up, and handed to hipfile-rs as paths, so that crate stays a library any
//! program can use.

use hipfile::{Flavor, LibraryPaths};
use std::path::PathBuf;

/// Exact path of libhipfile (only that path is tried).
pub const ENV_HIPFILE_LIB: &str = "AISCP_HIPFILE_LIB";
/// Exact path of the HIP runtime (libamdhip64).
pub const ENV_HIP_LIB: &str = "AISCP_HIP_LIB";
/// Exact path of libcufile.
pub const ENV_CUFILE_LIB: &str = "AISCP_CUFILE_LIB";
/// Exact path of the CUDA driver library (libcuda).
pub const ENV_CUDA_LIB: &str = "AISCP_CUDA_LIB";

/// The (I/O library, runtime) variables of `flavor`.
fn variables(flavor: Flavor) -> [&'static str; 2] {
    match flavor {
        Flavor::HipFile => [ENV_HIPFILE_LIB, ENV_HIP_LIB],
        Flavor::CuFile => [ENV_CUFILE_LIB, ENV_CUDA_LIB],
    }
}

/// The exact files the environment names for `flavor`; an empty variable names none.
pub fn library_paths(flavor: Flavor) -> LibraryPaths {
    let path = |var: &str| {
        std::env::var_os(var)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    let [io, runtime] = variables(flavor);
    LibraryPaths {
        io: path(io),
        runtime: path(runtime),
    }
}

/// Exact path of hiprtc (the HIP flavor's run-time compiler, for digests on the GPU).
pub const ENV_HIPRTC_LIB: &str = "AISCP_HIPRTC_LIB";
/// Exact path of NVRTC (the CUDA flavor's run-time compiler).
pub const ENV_NVRTC_LIB: &str = "AISCP_NVRTC_LIB";

/// The exact file of `flavor`'s run-time compiler the environment names, if any.
pub fn compiler_path(flavor: Flavor) -> Option<PathBuf> {
    let var = match flavor {
        Flavor::HipFile => ENV_HIPRTC_LIB,
        Flavor::CuFile => ENV_NVRTC_LIB,
    };
    std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
}
