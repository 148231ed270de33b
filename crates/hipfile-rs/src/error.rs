//! One error type for every failure of the GPU I/O stack, and the pure decoding of the return
//! conventions of hipFile/cuFile, kept free of the library so every convention is unit-tested.

use std::path::PathBuf;

use crate::sys;

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Loading a library or resolving a symbol failed; lists what was searched.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No candidate could be opened; `searched` is every name or path tried, in order.
    #[error("{library} not found (searched: {})", join_paths(searched))]
    NotFound {
        library: &'static str,
        searched: Vec<PathBuf>,
    },
    /// The library loaded but lacks a symbol this crate cannot work without.
    #[error("{path}: missing symbol {symbol}", path = path.display())]
    MissingSymbol { path: PathBuf, symbol: &'static str },
    /// A candidate exists but the dynamic loader refused it (wrong architecture, a missing
    /// dependency such as libmount, ...), and no other candidate loaded.
    #[error("{library}: cannot load {path}: {reason} (searched: {})", join_paths(searched), path = path.display())]
    Unloadable {
        library: &'static str,
        path: PathBuf,
        reason: String,
        searched: Vec<PathBuf>,
    },
}

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `-1` with errno set, or an errno-bearing failure.
    #[error("{0}")]
    Os(std::io::Error),
    /// A 5000-based hipFile/cuFile code.
    #[error("{text} ({name} {code})")]
    Library {
        code: i32,
        name: &'static str,
        text: String,
    },
    /// A GPU runtime error (hipError_t / CUresult) from `call`.
    #[error("{call}: {text} (error {code})")]
    Runtime {
        call: &'static str,
        code: i32,
        text: String,
    },
    #[error("GPU {index} does not exist: {count} device(s) found")]
    NoSuchDevice { index: u32, count: u32 },
    /// The run-time compiler (hiprtc / NVRTC) failed in `call`; `log` is the program's
    /// compilation log (empty when there is none).
    #[error("{call}: {text} (error {code}){}", if log.is_empty() { String::new() } else { format!(": {log}") })]
    Compile {
        call: &'static str,
        code: i32,
        text: String,
        log: String,
    },
}

impl Error {
    /// The errno, when the failure is an operating-system error.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Error::Os(e) => e.raw_os_error(),
            _ => None,
        }
    }

    /// The library code (5001..5039) or the runtime status (hipError_t / CUresult).
    pub fn code(&self) -> Option<i32> {
        match self {
            Error::Library { code, .. } | Error::Runtime { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Builds the error for a decoded [`Failure`]. `op_text` and `runtime_text` look up the
    /// library's own descriptions (None when it has none); `call` names the function for
    /// runtime statuses; `table` is the vendor whose names the library codes take.
    pub fn from_failure(
        table: sys::OpErrorTable,
        call: &'static str,
        failure: Failure,
        op_text: impl Fn(i32) -> Option<String>,
        runtime_text: impl Fn(i32) -> Option<String>,
    ) -> Error {
        match failure {
            Failure::Errno(errno) => Error::Os(std::io::Error::from_raw_os_error(errno)),
            Failure::Op(code) => {
                let info = sys::op_error_info(table, code);
                let text = op_text(code)
                    .filter(|t| !t.is_empty())
                    .or_else(|| info.map(|(_, t)| t.to_owned()))
                    .unwrap_or_else(|| format!("unknown {call} error"));
                Error::Library {
                    code,
                    name: info.map_or("Unknown", |(n, _)| n),
                    text,
                }
            }
            Failure::Runtime(code) => Error::Runtime {
                call,
                code,
                text: runtime_text(code)
                    .filter(|t| !t.is_empty())
                    .unwrap_or_else(|| "unknown runtime error".to_owned()),
            },
        }
    }
}

impl From<Error> for std::io::Error {
    /// Keeps the errno where there is one (so `ENOSPC` stays `ENOSPC`); otherwise `Other` with
    /// the full text.
    fn from(e: Error) -> std::io::Error {
        match e {
            Error::Os(os) => os,
            other => std::io::Error::other(other.to_string()),
        }
    }
}

/// What a failed call reported, before any text is looked up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A POSIX errno.
    Errno(i32),
    /// A 5000-based library code (positive).
    Op(i32),
    /// A runtime status (hipError_t / CUresult, positive).
    Runtime(i32),
}

/// Decodes the return of a synchronous Read/Write. `errno` is the value read right after the
/// call, having been set to 0 right before it.
///
/// - `>= 0`: bytes moved (possibly short).
/// - `-1` with errno set: a POSIX error. `-1` with errno still 0 is `-(hipErrorInvalidValue)`.
/// - `abs > 5000`: `-(library code)`.
/// - other negatives: `-(hipError_t)` (AMD returns runtime statuses this way).
///
/// The byte counts async ops store at completion follow the same conventions; for them
/// `errno` is the value read right after the stream synchronization.
pub fn decode_io_result(ret: isize, errno: i32) -> Result<usize, Failure> {
    if ret >= 0 {
        return Ok(ret as usize);
    }
    let magnitude = ret.unsigned_abs() as u64;
    if ret == -1 {
        return Err(if errno != 0 {
            Failure::Errno(errno)
        } else {
            Failure::Runtime(sys::RUNTIME_INVALID_VALUE)
        });
    }
    let code = i32::try_from(magnitude).unwrap_or(i32::MAX);
    if sys::is_op_error(magnitude as i64) {
        Err(Failure::Op(code))
    } else {
        Err(Failure::Runtime(code))
    }
}

/// Decodes a `hipFileError_t` / `CUfileError_t`: success, a library code, or (for
/// [`sys::HIP_DRIVER_ERROR`]) the runtime status it carries.
pub fn decode_file_error(e: sys::FileError) -> Result<(), Failure> {
    match e.err {
        sys::SUCCESS => Ok(()),
        sys::HIP_DRIVER_ERROR if e.drv_err != 0 => Err(Failure::Runtime(e.drv_err)),
        code => Err(Failure::Op(code.abs())),
    }
}

/// Decodes a runtime status (`hipError_t` / `CUresult`): 0 is success.
pub fn decode_runtime_status(status: sys::RuntimeStatus) -> Result<(), Failure> {
    if status == 0 {
        Ok(())
    } else {
        Err(Failure::Runtime(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HIP: sys::OpErrorTable = sys::OpErrorTable::HipFile;

    fn no_text(_: i32) -> Option<String> {
        None
    }

    #[test]
    fn byte_counts_pass_through() {
        for n in [0isize, 1, 4095, 4096, 4097, 0x7fff_f000, isize::MAX] {
            assert_eq!(decode_io_result(n, 0), Ok(n as usize));
            // A stale errno never turns a count into an error.
            assert_eq!(decode_io_result(n, libc::EIO), Ok(n as usize));
        }
    }

    #[test]
    fn minus_one_with_errno_is_posix() {
        for e in [
            libc::EIO,
            libc::ENOSPC,
            libc::EINVAL,
            libc::EDQUOT,
            libc::EINTR,
        ] {
            assert_eq!(decode_io_result(-1, e), Err(Failure::Errno(e)));
        }
    }

    #[test]
    fn minus_one_without_errno_is_hip_invalid_value() {
        assert_eq!(decode_io_result(-1, 0), Err(Failure::Runtime(1)));
    }

    #[test]
    fn library_codes_are_recognised() {
        for code in 5001..=5039 {
            assert_eq!(decode_io_result(-code, 0), Err(Failure::Op(code as i32)));
            assert_eq!(
                decode_io_result(-code, libc::EIO),
                Err(Failure::Op(code as i32))
            );
        }
        // Beyond the table is still a library code (IS_HIPFILE_ERR is abs > 5000).
        assert_eq!(decode_io_result(-6000, 0), Err(Failure::Op(6000)));
    }

    #[test]
    fn small_negatives_are_runtime_statuses() {
        for code in [2isize, 100, 700, 5000] {
            assert_eq!(
                decode_io_result(-code, 0),
                Err(Failure::Runtime(code as i32))
            );
        }
        assert_eq!(
            decode_io_result(isize::MIN, 0),
            Err(Failure::Op(i32::MAX)),
            "no overflow on absurd values"
        );
    }

    #[test]
    fn file_error_structs() {
        assert_eq!(decode_file_error(sys::FileError::default()), Ok(()));
        let e = sys::FileError {
            err: 5027,
            drv_err: 0,
        };
        assert_eq!(decode_file_error(e), Err(Failure::Op(5027)));
        let e = sys::FileError {
            err: 5011,
            drv_err: 2,
        };
        assert_eq!(decode_file_error(e), Err(Failure::Runtime(2)));
        let e = sys::FileError {
            err: 5011,
            drv_err: 0,
        };
        assert_eq!(decode_file_error(e), Err(Failure::Op(5011)));
        assert_eq!(decode_runtime_status(0), Ok(()));
        assert_eq!(decode_runtime_status(100), Err(Failure::Runtime(100)));
    }

    #[test]
    fn errors_name_code_and_text() {
        let e = Error::from_failure(HIP, "hipFileRead", Failure::Op(5027), no_text, no_text);
        assert_eq!(e.code(), Some(5027));
        assert_eq!(e.errno(), None);
        let text = e.to_string();
        assert!(
            text.contains("HandleNotRegistered") && text.contains("5027"),
            "{text}"
        );

        let e = Error::from_failure(
            HIP,
            "hipFileRead",
            Failure::Op(5030),
            |c| Some(format!("library says {c}")),
            no_text,
        );
        assert!(e.to_string().contains("library says 5030"), "{e}");

        let e = Error::from_failure(HIP, "hipFileRead", Failure::Op(5999), no_text, no_text);
        assert!(e.to_string().contains("Unknown") && e.to_string().contains("5999"));

        let e = Error::from_failure(HIP, "hipMalloc", Failure::Runtime(2), no_text, |_| {
            Some("out of memory".into())
        });
        assert_eq!(e.code(), Some(2));
        assert_eq!(e.to_string(), "hipMalloc: out of memory (error 2)");

        let e = Error::from_failure(
            HIP,
            "hipFileWrite",
            Failure::Errno(libc::ENOSPC),
            no_text,
            no_text,
        );
        assert_eq!(e.errno(), Some(libc::ENOSPC));
        assert_eq!(e.code(), None);
        let io: std::io::Error = e.into();
        assert_eq!(io.raw_os_error(), Some(libc::ENOSPC));
    }

    #[test]
    fn cufile_codes_take_cufile_names() {
        let cu = sys::OpErrorTable::CuFile;
        let e = Error::from_failure(cu, "cuFileRead", Failure::Op(5043), no_text, no_text);
        assert!(e.to_string().contains("(NoMemError 5043)"), "{e}");
        let e = Error::from_failure(cu, "cuFileRead", Failure::Op(5011), no_text, no_text);
        assert!(e.to_string().contains("(CudaDriverError 5011)"), "{e}");
        // 5039 is hipFile's end marker but a real cuFile failure.
        let e = Error::from_failure(cu, "cuFileRead", Failure::Op(5039), no_text, no_text);
        assert!(e.to_string().contains("InternalBatchSetupError"), "{e}");
        let e = Error::from_failure(HIP, "hipFileRead", Failure::Op(5043), no_text, no_text);
        assert!(e.to_string().contains("(Unknown 5043)"), "{e}");
    }

    #[test]
    fn non_errno_errors_become_other_io_errors() {
        let e = Error::from_failure(HIP, "hipFileRead", Failure::Op(5014), no_text, no_text);
        let text = e.to_string();
        let io: std::io::Error = e.into();
        assert_eq!(io.kind(), std::io::ErrorKind::Other);
        assert_eq!(io.raw_os_error(), None);
        assert_eq!(io.to_string(), text);

        let e = Error::NoSuchDevice { index: 3, count: 1 };
        assert_eq!(e.to_string(), "GPU 3 does not exist: 1 device(s) found");
    }

    #[test]
    fn load_errors_list_what_was_searched() {
        let e = LoadError::NotFound {
            library: "libhipfile",
            searched: vec![
                "libhipfile.so.0".into(),
                "/opt/rocm/lib/libhipfile.so.0".into(),
            ],
        };
        assert_eq!(
            e.to_string(),
            "libhipfile not found (searched: libhipfile.so.0, /opt/rocm/lib/libhipfile.so.0)"
        );
    }
}
