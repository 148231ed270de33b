//! What the caller hands the engine for one file, and where the engine reports its progress.

use crate::digest::{Algorithm, Digest};
use std::fs::File;
use std::path::Path;

/// How holes in SRC are treated (cp's --sparse).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SparseMode {
    #[default]
    Auto,
    Never,
    Always,
}

/// What the source is: a regular file of known size, or a sequential source (a pipe, FIFO,
/// terminal, device or /proc file) read in order until EOF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Regular { len: u64 },
    Sequential,
}

/// One file's data copy.
pub struct DataJob<'a> {
    pub src: &'a File,
    pub src_name: &'a Path,
    pub src_kind: SourceKind,
    pub dst: &'a File,
    pub dst_name: &'a Path,
    pub sparse: SparseMode,
    /// The digest to take of what DEST receives (--sums); None: none.
    pub digest: Option<Algorithm>,
}

/// What one file's copy gave DEST.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Copied {
    /// DEST's final size.
    pub size: u64,
    /// The digest of DEST's bytes, where the job asked for one and DEST is a regular file.
    pub digest: Option<Digest>,
}

/// Progress events, drained by the binary's progress bar.
pub trait ProgressSink {
    fn file_started(&self, name: &Path, len: Option<u64>);
    fn advanced(&self, bytes: u64);
    /// The file's data phase ended, successfully or not (called before any error returns).
    fn file_finished(&self);
    /// How the file's bytes are read and written.
    fn route(&self, _read: crate::route::Route, _write: crate::route::Route) {}
}

/// A sink that ignores everything.
pub struct NoProgress;
impl ProgressSink for NoProgress {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, _: u64) {}
    fn file_finished(&self) {}
}
