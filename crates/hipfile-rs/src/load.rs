//! Finding the libraries and filling the function tables of [`crate::sys`].

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use libloading::Library as DynLib;

use crate::error::LoadError;
use crate::sys;
use crate::Flavor;

/// Exact files to load instead of searching, for non-standard installs and for tests (which
/// point them at a fake library). A path that is set is the only one tried for its library;
/// the program using this crate decides where such paths come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LibraryPaths {
    /// libhipfile / libcufile.
    pub io: Option<PathBuf>,
    /// The GPU runtime: libamdhip64 / libcuda.
    pub runtime: Option<PathBuf>,
}

impl LibraryPaths {
    /// Whether any path is given: then the caller asked for those files, whatever the
    /// machine has.
    pub fn any(&self) -> bool {
        self.io.is_some() || self.runtime.is_some()
    }
}

/// One library to find: names for the loader path and directories to look in after it.
pub(crate) struct Wanted {
    pub(crate) library: &'static str,
    pub(crate) names: &'static [&'static str],
}

pub(crate) const HIPFILE: Wanted = Wanted {
    library: "libhipfile",
    names: &["libhipfile.so.0", "libhipfile.so"],
};
pub(crate) const HIP: Wanted = Wanted {
    library: "libamdhip64",
    names: &[
        "libamdhip64.so.7",
        "libamdhip64.so.6",
        "libamdhip64.so.5",
        "libamdhip64.so",
    ],
};
pub(crate) const CUFILE: Wanted = Wanted {
    library: "libcufile",
    names: &["libcufile.so.0", "libcufile.so"],
};
pub(crate) const CUDA: Wanted = Wanted {
    library: "libcuda",
    names: &["libcuda.so.1", "libcuda.so"],
};

pub(crate) const HIPRTC: Wanted = Wanted {
    library: "libhiprtc",
    names: &[
        "libhiprtc.so.7",
        "libhiprtc.so.6",
        "libhiprtc.so.5",
        "libhiprtc.so",
    ],
};
pub(crate) const NVRTC: Wanted = Wanted {
    library: "libnvrtc",
    names: &[
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "libnvrtc.so.11.2",
        "libnvrtc.so.11.1",
        "libnvrtc.so",
    ],
};

/// Directories searched after the loader path, per flavor.
pub(crate) fn extra_dirs(flavor: Flavor) -> Vec<PathBuf> {
    match flavor {
        Flavor::HipFile => {
            let mut dirs = Vec::new();
            if let Some(root) = std::env::var_os("ROCM_PATH").filter(|r| !r.is_empty()) {
                dirs.push(PathBuf::from(root).join("lib"));
            }
            dirs.push(PathBuf::from("/opt/rocm/lib"));
            // ROCm >= 7.11 installs components under /opt/rocm/core-X.Y; newest first.
            if let Ok(entries) = std::fs::read_dir("/opt/rocm") {
                let mut cores: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("core-"))
                    .map(|e| e.path().join("lib"))
                    .collect();
                cores.sort();
                cores.reverse();
                dirs.extend(cores);
            }
            dirs
        }
        Flavor::CuFile => vec![
            PathBuf::from("/usr/local/cuda/lib64"),
            PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"),
        ],
    }
}

/// A loaded library and where it came from.
pub struct Loaded {
    pub lib: DynLib,
    pub path: PathBuf,
}

/// The candidate list: the exact path alone when given, else loader-path names then
/// directories.
pub(crate) fn candidates(wanted: &Wanted, exact: Option<&Path>, dirs: &[PathBuf]) -> Vec<PathBuf> {
    if let Some(path) = exact {
        return vec![path.to_path_buf()];
    }
    let mut all: Vec<PathBuf> = wanted.names.iter().map(PathBuf::from).collect();
    for dir in dirs {
        all.extend(wanted.names.iter().map(|n| dir.join(n)));
    }
    all
}

fn is_not_found(reason: &str) -> bool {
    reason.contains("No such file") || reason.contains("cannot open shared object file")
}

fn open(wanted: &Wanted, exact: Option<&Path>, dirs: &[PathBuf]) -> Result<Loaded, LoadError> {
    let mut searched = Vec::new();
    let mut refused: Option<(PathBuf, String)> = None;
    for path in candidates(wanted, exact, dirs) {
        searched.push(path.clone());
        // A path with a slash is a file: skip the loader when it plainly is not there, and
        // keep it away from anything but a regular file (opening a FIFO would wait forever
        // for a writer; a directory or device is no library either).
        if path.components().count() > 1 {
            match std::fs::metadata(&path) {
                Err(_) => continue,
                Ok(m) if !m.is_file() => {
                    refused.get_or_insert((path, "not a regular file".to_owned()));
                    continue;
                }
                Ok(_) => {}
            }
        }
        // SAFETY: loading runs the library's initialisers; these are the vendor libraries
        // (or the exact file the caller named), which is what this crate exists to call.
        match unsafe { DynLib::new(OsString::from(path.as_os_str())) } {
            Ok(lib) => return Ok(Loaded { lib, path }),
            Err(e) => {
                let reason = e.to_string();
                if !is_not_found(&reason) || path.exists() {
                    refused.get_or_insert((path, reason));
                }
            }
        }
    }
    Err(match refused {
        Some((path, reason)) => LoadError::Unloadable {
            library: wanted.library,
            path,
            reason,
            searched,
        },
        None => LoadError::NotFound {
            library: wanted.library,
            searched,
        },
    })
}

/// Resolves symbols from one loaded library, naming the library in errors.
struct Resolver<'a> {
    loaded: &'a Loaded,
}

impl Resolver<'_> {
    /// A required symbol.
    ///
    /// # Safety
    /// `T` must be the exact C signature of `name`.
    unsafe fn get<T: Copy>(&self, name: &'static str) -> Result<T, LoadError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.optional(name) }.ok_or_else(|| LoadError::MissingSymbol {
            path: self.loaded.path.clone(),
            symbol: name,
        })
    }

    /// A symbol that older releases lack.
    ///
    /// # Safety
    /// `T` must be the exact C signature of `name`.
    unsafe fn optional<T: Copy>(&self, name: &str) -> Option<T> {
        // SAFETY: the caller vouches for the signature; the copy outlives the `Symbol` borrow,
        // and the library stays loaded for as long as the table (both live in `Inner`).
        unsafe { self.loaded.lib.get::<T>(name.as_bytes()).ok().map(|s| *s) }
    }

    /// The first of `names` that resolves.
    ///
    /// # Safety
    /// `T` must be the exact C signature of every name.
    unsafe fn first<T: Copy>(&self, names: &'static [&'static str]) -> Result<T, LoadError> {
        for name in names {
            // SAFETY: forwarded from the caller.
            if let Some(f) = unsafe { self.optional(name) } {
                return Ok(f);
            }
        }
        Err(LoadError::MissingSymbol {
            path: self.loaded.path.clone(),
            symbol: names[0],
        })
    }
}

fn io_functions(loaded: &Loaded, flavor: Flavor) -> Result<sys::IoFunctions, LoadError> {
    let r = Resolver { loaded };
    let names = match flavor {
        Flavor::HipFile => &sys::HIPFILE_SYMBOLS,
        Flavor::CuFile => &sys::CUFILE_SYMBOLS,
    };
    // SAFETY: each type below is the signature of the named function in hipfile.h 0.2.0 /
    // cufile.h (same shapes).
    unsafe {
        let get_version = match flavor {
            Flavor::HipFile => r.optional(names.get_version).map(sys::VersionFn::HipFile),
            Flavor::CuFile => r.optional(names.get_version).map(sys::VersionFn::CuFile),
        };
        Ok(sys::IoFunctions {
            driver_open: r.get(names.driver_open)?,
            driver_close: r.first(names.driver_close)?,
            handle_register: r.get(names.handle_register)?,
            handle_deregister: r.get(names.handle_deregister)?,
            buf_register: r.get(names.buf_register)?,
            buf_deregister: r.get(names.buf_deregister)?,
            read: r.get(names.read)?,
            write: r.get(names.write)?,
            read_async: r.optional(names.read_async),
            write_async: r.optional(names.write_async),
            stream_register: r.optional(names.stream_register),
            stream_deregister: r.optional(names.stream_deregister),
            get_op_error_string: names.get_op_error_string.and_then(|n| r.optional(n)),
            get_version,
            use_count: r.optional(names.use_count),
            get_stats_l1: r.optional(names.get_stats_l1),
            get_stats_l3: r.optional(names.get_stats_l3),
            set_stats_level: names.set_stats_level.and_then(|n| r.optional(n)),
            stats_start: names.stats_start.and_then(|n| r.optional(n)),
            vector_io: names
                .vector_io
                .and_then(|n| r.optional::<unsafe extern "C" fn()>(n))
                .is_some(),
        })
    }
}

fn hip_functions(loaded: &Loaded) -> Result<sys::HipFunctions, LoadError> {
    let r = Resolver { loaded };
    // SAFETY: signatures from hip_runtime_api.h.
    unsafe {
        Ok(sys::HipFunctions {
            get_device_count: r.get("hipGetDeviceCount")?,
            set_device: r.get("hipSetDevice")?,
            device_get_pci_bus_id: r.optional("hipDeviceGetPCIBusId"),
            device_total_mem: r.optional("hipDeviceTotalMem"),
            malloc: r.get("hipMalloc")?,
            free: r.get("hipFree")?,
            memcpy: r.get("hipMemcpy")?,
            memcpy_async: r.get("hipMemcpyAsync")?,
            host_malloc: r.get("hipHostMalloc")?,
            host_free: r.get("hipHostFree")?,
            host_register: r.get("hipHostRegister")?,
            host_unregister: r.get("hipHostUnregister")?,
            stream_create_with_flags: r.get("hipStreamCreateWithFlags")?,
            stream_synchronize: r.get("hipStreamSynchronize")?,
            stream_destroy: r.get("hipStreamDestroy")?,
            get_error_string: r.get("hipGetErrorString")?,
            runtime_get_version: r.optional("hipRuntimeGetVersion"),
        })
    }
}

fn cuda_functions(loaded: &Loaded) -> Result<sys::CudaFunctions, LoadError> {
    let r = Resolver { loaded };
    // SAFETY: signatures from cuda.h; the `_v2` names are what its macros select, the plain
    // names are the pre-rename exports of the same functions.
    unsafe {
        Ok(sys::CudaFunctions {
            init: r.get("cuInit")?,
            device_get_count: r.get("cuDeviceGetCount")?,
            device_get: r.get("cuDeviceGet")?,
            device_get_pci_bus_id: r.optional("cuDeviceGetPCIBusId"),
            device_total_mem: r.optional("cuDeviceTotalMem_v2"),
            primary_ctx_retain: r.get("cuDevicePrimaryCtxRetain")?,
            primary_ctx_release: r
                .first(&["cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"])?,
            ctx_set_current: r.get("cuCtxSetCurrent")?,
            mem_alloc: r.get("cuMemAlloc_v2")?,
            mem_free: r.get("cuMemFree_v2")?,
            memcpy_htod: r.get("cuMemcpyHtoD_v2")?,
            memcpy_dtoh: r.get("cuMemcpyDtoH_v2")?,
            memcpy_htod_async: r.get("cuMemcpyHtoDAsync_v2")?,
            memcpy_dtoh_async: r.get("cuMemcpyDtoHAsync_v2")?,
            mem_host_alloc: r.get("cuMemHostAlloc")?,
            mem_free_host: r.get("cuMemFreeHost")?,
            mem_host_register: r.get("cuMemHostRegister_v2")?,
            mem_host_unregister: r.get("cuMemHostUnregister")?,
            stream_create: r.get("cuStreamCreate")?,
            stream_synchronize: r.get("cuStreamSynchronize")?,
            stream_destroy: r.first(&["cuStreamDestroy_v2", "cuStreamDestroy"])?,
            get_error_string: r.get("cuGetErrorString")?,
            driver_get_version: r.optional("cuDriverGetVersion"),
        })
    }
}

/// The module and launch calls of the runtime `loaded` (of `flavor`), when it has them all.
pub(crate) fn module_functions(loaded: &Loaded, flavor: Flavor) -> Option<sys::ModuleFunctions> {
    let r = Resolver { loaded };
    let [load_data, get_function, unload, launch_kernel] = match flavor {
        Flavor::HipFile => sys::HIP_MODULE_SYMBOLS,
        Flavor::CuFile => sys::CUDA_MODULE_SYMBOLS,
    };
    // SAFETY: signatures from hip_runtime_api.h / cuda.h (the same shapes; see
    // sys::ModuleFunctions).
    unsafe {
        Some(sys::ModuleFunctions {
            load_data: r.optional(load_data)?,
            get_function: r.optional(get_function)?,
            unload: r.optional(unload)?,
            launch_kernel: r.optional(launch_kernel)?,
            device_get_attribute: match flavor {
                Flavor::HipFile => None,
                Flavor::CuFile => r.optional("cuDeviceGetAttribute"),
            },
            get_device_properties: match flavor {
                Flavor::HipFile => r
                    .optional("hipGetDevicePropertiesR0600")
                    .or_else(|| r.optional("hipGetDeviceProperties")),
                Flavor::CuFile => None,
            },
        })
    }
}

/// Loads the run-time compiler of `flavor` (libhiprtc / libnvrtc) from `exact`, or finds it,
/// and resolves its table.
pub fn load_compiler(
    flavor: Flavor,
    exact: Option<&Path>,
) -> Result<(sys::RtcFunctions, Loaded), LoadError> {
    let (wanted, names) = match flavor {
        Flavor::HipFile => (&HIPRTC, &sys::HIPRTC_SYMBOLS),
        Flavor::CuFile => (&NVRTC, &sys::NVRTC_SYMBOLS),
    };
    let loaded = open(wanted, exact, &extra_dirs(flavor))?;
    let r = Resolver { loaded: &loaded };
    // SAFETY: signatures from hiprtc.h / nvrtc.h (see sys::RtcFunctions).
    let table = unsafe {
        sys::RtcFunctions {
            create_program: r.get(names.create_program)?,
            compile_program: r.get(names.compile_program)?,
            destroy_program: r.get(names.destroy_program)?,
            get_log_size: r.get(names.get_log_size)?,
            get_log: r.get(names.get_log)?,
            get_code_size: r.get(names.get_code_size)?,
            get_code: r.get(names.get_code)?,
            get_error_string: r.get(names.get_error_string)?,
            version: r.optional(names.version),
        }
    };
    Ok((table, loaded))
}

/// Loads the I/O library of `flavor` (libhipfile / libcufile) from `exact`, or finds it, and
/// resolves its table.
pub fn load_io(
    flavor: Flavor,
    exact: Option<&Path>,
) -> Result<(sys::IoFunctions, Loaded), LoadError> {
    let wanted = match flavor {
        Flavor::HipFile => &HIPFILE,
        Flavor::CuFile => &CUFILE,
    };
    let loaded = open(wanted, exact, &extra_dirs(flavor))?;
    Ok((io_functions(&loaded, flavor)?, loaded))
}

/// Loads the GPU runtime of `flavor` (libamdhip64 / libcuda) from `exact`, or finds it, and
/// resolves its table.
pub fn load_runtime(
    flavor: Flavor,
    exact: Option<&Path>,
) -> Result<(sys::RuntimeFunctions, Loaded), LoadError> {
    let wanted = match flavor {
        Flavor::HipFile => &HIP,
        Flavor::CuFile => &CUDA,
    };
    let loaded = open(wanted, exact, &extra_dirs(flavor))?;
    let table = match flavor {
        Flavor::HipFile => sys::RuntimeFunctions::Hip(hip_functions(&loaded)?),
        Flavor::CuFile => sys::RuntimeFunctions::Cuda(cuda_functions(&loaded)?),
    };
    Ok((table, loaded))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set by scripts/vendor-artefacts.sh to the genuine libcufile.so.0 of PyPI nvidia-cufile.
    const VENDOR_CUFILE: &str = "HIPFILE_RS_VENDOR_CUFILE_LIB";

    /// The genuine library fills the whole cuFile table, optional entries included, and the one
    /// call that needs no GPU answers through our signature: no other test reaches the I/O
    /// library alone, since loading a Library needs libcuda first.
    #[test]
    fn genuine_cufile_fills_the_table() {
        let Some(path) = std::env::var_os(VENDOR_CUFILE) else {
            test_support::skip::skip(
                "no vendor artefact",
                &format!("{VENDOR_CUFILE} unset (scripts/vendor-artefacts.sh fetches it)"),
            );
            return;
        };
        let (table, loaded) = load_io(Flavor::CuFile, Some(Path::new(&path)))
            .expect("the genuine libcufile resolves every symbol we load");
        assert_eq!(loaded.path, Path::new(&path));
        assert!(table.read_async.is_some() && table.write_async.is_some());
        assert!(table.stream_register.is_some() && table.stream_deregister.is_some());
        assert!(table.use_count.is_some() && table.get_op_error_string.is_none());
        let Some(sys::VersionFn::CuFile(get_version)) = table.get_version else {
            panic!("cuFileGetVersion missing or of hipFile's shape");
        };
        let mut version = 0;
        // SAFETY: a valid out pointer; cuFileGetVersion needs no driver.
        let e = unsafe { get_version(&mut version) };
        assert_eq!(e, sys::FileError::default());
        assert!(version >= 1150, "cuFile version {version}");
        // Statistics since 1.15; Level 1 with vector I/O counters where cuFileReadv is.
        assert!(table.get_stats_l1.is_some() && table.get_stats_l3.is_some());
        assert!(table.set_stats_level.is_some() && table.stats_start.is_some());
        assert_eq!(table.vector_io, version >= 1190, "cuFile {version}");
        // Without a driver the call answers through our signature: DriverNotInitialized.
        let mut room = vec![0u64; 4096];
        let get = table.get_stats_l1.unwrap();
        // SAFETY: zeroed, writable, larger than the vectored Level 1.
        let e = unsafe { get(room.as_mut_ptr().cast()) };
        assert_eq!(e.err, sys::DRIVER_NOT_INITIALIZED, "{e:?}");
    }
}
