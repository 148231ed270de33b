//! How one file's copy fails, in cp's words.

use crate::backend::Backend;
use crate::quote::{os_text, quote};
use crate::verify;
use std::io;
use std::path::PathBuf;

/// Which file of a copy a failure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Source,
    Dest,
}

/// Failure of one file's copy; Display is cp's message without the program prefix,
/// e.g. "error writing 'y': No space left on device". It keeps the paths and the OS's
/// error, and quotes the paths only when it is rendered, in the locale of the process that
/// renders it (a staging service's client words its own failures).
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("error reading {}: {}", quote(path), os_text(source))]
    Read { path: PathBuf, source: io::Error },
    #[error("error writing {}: {}", quote(path), os_text(source))]
    Write { path: PathBuf, source: io::Error },
    /// Setting DST's final size failed.
    #[error("failed to extend {}: {}", quote(path), os_text(source))]
    Extend { path: PathBuf, source: io::Error },
    /// The GPU library refused the file on `side` in a way the bounce route cannot serve.
    #[error("cannot register {} with {library}: {message}", quote(path))]
    Register {
        path: PathBuf,
        side: Side,
        library: Backend,
        message: String,
    },
    /// No staging memory for the copy of `name`: `bytes` asked for, and retried down to
    /// `smallest` when the engine shrank the chunk.
    #[error(
        "cannot allocate {bytes} bytes of {memory}{} to copy {}: {message}",
        smallest.map(|s| format!(" (nor down to {s})")).unwrap_or_default(),
        quote(path)
    )]
    Alloc {
        /// SOURCE's path.
        path: PathBuf,
        bytes: usize,
        smallest: Option<usize>,
        memory: String,
        message: String,
    },
    /// [`crate::Config::cancel`] was set; in-flight I/O finished and DST holds what was copied.
    #[error("interrupted")]
    Interrupted,
    /// Stopped by the file's owner ([`crate::Engine::copy_cancellable`],
    /// [`crate::Engine::submit_cancellable`]): DST was left as the last write left it, its
    /// size untouched since the stop, and holds SRC's bytes on `[0, good)`; an owner still
    /// there cuts it to `good` to leave what an interrupted cp leaves.
    #[error("interrupted")]
    Stopped { good: u64 },
    /// A failure another process met copying part of the file (an MPI rank), already in
    /// cp's words.
    #[error("{0}")]
    Elsewhere(String),
    /// Not copied where it was to go (another process could not take the file, or no longer
    /// found it by name): nothing was written, and the caller, who still holds the files,
    /// copies it itself.
    #[error("not copied where it was sent")]
    NotMoved,
    /// DEST could not be read back for its digest (--sums).
    #[error("cannot take the digest of {name}: {}", os_text(source))]
    Digest { name: String, source: io::Error },
    /// --verify found DST different from SRC, or could not read them back.
    #[error(transparent)]
    Verify(verify::VerifyError),
}

impl CopyError {
    /// The file the failure is about, for the kinds that name one.
    pub fn side(&self) -> Option<Side> {
        match self {
            CopyError::Read { .. } | CopyError::Alloc { .. } => Some(Side::Source),
            CopyError::Write { .. } | CopyError::Extend { .. } => Some(Side::Dest),
            CopyError::Register { side, .. } => Some(*side),
            _ => None,
        }
    }

    /// A write that failed because DEST's filesystem is full or the user's quota is spent:
    /// DEST then keeps the longest prefix that fits, as cp leaves it.
    pub fn is_disk_full(&self) -> bool {
        match self {
            CopyError::Write { source, .. } => {
                matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
            }
            _ => false,
        }
    }
}

impl From<verify::VerifyError> for CopyError {
    /// A read-back stopped by a signal is the copy interrupted, as a stopped copy is.
    fn from(e: verify::VerifyError) -> CopyError {
        match e {
            verify::VerifyError::Stopped => CopyError::Interrupted,
            e => CopyError::Verify(e),
        }
    }
}
