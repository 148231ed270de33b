//! A file's failure on the service's wire: what went wrong and on which side, without the
//! words. The client words it with its own paths, in its own locale, as it words a failure
//! of its own.

use aiscp_engine::{Backend, CopyError, Side};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// An OS error: its errno where it has one, else its text (a GPU library's decoded error).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsError {
    pub errno: Option<i32>,
    pub text: String,
}

impl OsError {
    fn of(e: &io::Error) -> OsError {
        OsError {
            errno: e.raw_os_error(),
            text: e.to_string(),
        }
    }

    fn error(self) -> io::Error {
        match self.errno {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::other(self.text),
        }
    }
}

/// Why a file's copy failed in the service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Failure {
    /// Reading SOURCE.
    Read { error: OsError },
    /// Writing DEST (a full disk across files in flight is then handled as in-process).
    Write { error: OsError },
    /// Setting DEST's final size.
    Extend { error: OsError },
    /// The GPU library refused the file on `side`.
    Register {
        side: Side,
        library: Backend,
        message: String,
    },
    /// No staging memory for the copy.
    Alloc {
        bytes: usize,
        smallest: Option<usize>,
        memory: String,
        message: String,
    },
    /// A failure that names neither file, in the service's words.
    Other { message: String },
}

impl Failure {
    /// What `e` keeps, less the paths (the client has its own).
    pub fn of(e: &CopyError) -> Failure {
        match e {
            CopyError::Read { source, .. } => Failure::Read {
                error: OsError::of(source),
            },
            CopyError::Write { source, .. } => Failure::Write {
                error: OsError::of(source),
            },
            CopyError::Extend { source, .. } => Failure::Extend {
                error: OsError::of(source),
            },
            CopyError::Register {
                side,
                library,
                message,
                ..
            } => Failure::Register {
                side: *side,
                library: *library,
                message: message.clone(),
            },
            CopyError::Alloc {
                bytes,
                smallest,
                memory,
                message,
                ..
            } => Failure::Alloc {
                bytes: *bytes,
                smallest: *smallest,
                memory: memory.clone(),
                message: message.clone(),
            },
            other => Failure::Other {
                message: other.to_string(),
            },
        }
    }

    /// The failure as the client's own error, about its `src` and `dst`.
    pub fn into_error(self, src: &Path, dst: &Path) -> CopyError {
        match self {
            Failure::Read { error } => CopyError::Read {
                path: src.to_path_buf(),
                source: error.error(),
            },
            Failure::Write { error } => CopyError::Write {
                path: dst.to_path_buf(),
                source: error.error(),
            },
            Failure::Extend { error } => CopyError::Extend {
                path: dst.to_path_buf(),
                source: error.error(),
            },
            Failure::Register {
                side,
                library,
                message,
            } => CopyError::Register {
                path: match side {
                    Side::Source => src,
                    Side::Dest => dst,
                }
                .to_path_buf(),
                side,
                library,
                message,
            },
            Failure::Alloc {
                bytes,
                smallest,
                memory,
                message,
            } => CopyError::Alloc {
                path: src.to_path_buf(),
                bytes,
                smallest,
                memory,
                message,
            },
            Failure::Other { message } => CopyError::Elsewhere(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    /// Every kind that names a file comes back as the same error about the client's paths:
    /// worded by the client, however the service would have quoted them.
    #[test]
    fn failures_round_trip_with_the_clients_paths() {
        let src = Path::new(OsStr::from_bytes(b"s\xffrc"));
        let dst = Path::new("d'st");
        let errors = [
            CopyError::Read {
                path: src.into(),
                source: io::Error::from_raw_os_error(libc::EIO),
            },
            CopyError::Write {
                path: dst.into(),
                source: io::Error::from_raw_os_error(libc::ENOSPC),
            },
            CopyError::Extend {
                path: dst.into(),
                source: io::Error::other("no errno here"),
            },
            CopyError::Register {
                path: dst.into(),
                side: Side::Dest,
                library: Backend::CuFile,
                message: "refused".into(),
            },
            CopyError::Alloc {
                path: src.into(),
                bytes: 1 << 26,
                smallest: Some(1 << 20),
                memory: "GPU memory".into(),
                message: "out of memory".into(),
            },
        ];
        for e in errors {
            let json = serde_json::to_string(&Failure::of(&e)).unwrap();
            let back: Failure = serde_json::from_str(&json).unwrap();
            let again = back.into_error(src, dst);
            assert_eq!(again.to_string(), e.to_string(), "{json}");
            assert_eq!(again.side(), e.side());
            assert_eq!(again.is_disk_full(), e.is_disk_full());
        }
    }
}
