//! The chunked copy of one file's data (CONTRACT SKELETON, issue 3 fills it in).
//!
//! The cp layer opens SRC and DST (with the right flags, modes and checks) and hands both
//! files here; the engine moves the bytes through the staging backend and sets DST's size.

use std::fs::File;
use std::path::Path;

/// Which staging backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// hipFile, then cuFile, then host memory (with a warning).
    #[default]
    Auto,
    /// hipFile or cuFile; an error if neither loads.
    Gpu,
    HipFile,
    CuFile,
    Host,
}

/// How holes in SRC are treated (cp's --sparse).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SparseMode {
    #[default]
    Auto,
    Never,
    Always,
}

/// Everything the engine needs to know; built from the command line by `main`.
#[derive(Clone, Debug)]
pub struct Config {
    pub backend: BackendChoice,
    /// Bytes per slice; None = the engine's default.
    pub chunk_size: Option<u64>,
    pub gpu: u32,
    /// Slices in flight; None = the engine's default.
    pub streams: Option<usize>,
    pub async_io: bool,
    pub verify: bool,
    pub debug: bool,
    pub quiet: bool,
}

/// What the source is: a regular file of known size, or a stream read until EOF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    Regular { len: u64 },
    Stream,
}

/// One file's data copy.
pub struct DataJob<'a> {
    pub src: &'a File,
    pub src_name: &'a Path,
    pub src_kind: SourceKind,
    pub dst: &'a File,
    pub dst_name: &'a Path,
    pub sparse: SparseMode,
}

/// Progress events, drained by the binary's progress bar.
pub trait ProgressSink {
    fn file_started(&self, name: &Path, len: Option<u64>);
    fn advanced(&self, bytes: u64);
    fn file_finished(&self);
}

/// A sink that ignores everything.
pub struct NoProgress;
impl ProgressSink for NoProgress {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, _: u64) {}
    fn file_finished(&self) {}
}

/// Failure of one file's copy; Display is cp's message without the program prefix,
/// e.g. "error writing 'y': No space left on device".
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("error reading {name}: {source}")]
    Read {
        name: String,
        source: std::io::Error,
    },
    #[error("error writing {name}: {source}")]
    Write {
        name: String,
        source: std::io::Error,
    },
}

/// Failure to bring up the backend (fatal for the run).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Backend(String),
}

/// The engine: backend, buffers and workers, reused across the files of one run.
pub struct Engine {
    _config: Config,
}

impl Engine {
    /// Brings up the backend. `warn` receives one-line warnings (already filtered by quiet).
    pub fn start(config: Config, _warn: &mut dyn FnMut(&str)) -> Result<Engine, StartError> {
        Ok(Engine { _config: config })
    }

    /// Copies `job.src`'s data into `job.dst` and sets DST's final size. Returns bytes copied.
    pub fn copy(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, CopyError> {
        simple_host_copy(job, progress)
    }
}

/// First, serial host implementation: read a chunk, write it, until EOF; then set the size.
fn simple_host_copy(job: &DataJob<'_>, progress: &dyn ProgressSink) -> Result<u64, CopyError> {
    use std::io::{Read, Write};
    use std::os::unix::fs::FileExt;
    const CHUNK: usize = 1 << 20;
    let read_err = |e| CopyError::Read {
        name: format!("'{}'", job.src_name.display()),
        source: e,
    };
    let write_err = |e| CopyError::Write {
        name: format!("'{}'", job.dst_name.display()),
        source: e,
    };
    let len = match job.src_kind {
        SourceKind::Regular { len } => Some(len),
        SourceKind::Stream => None,
    };
    progress.file_started(job.src_name, len);
    let dst_regular = job.dst.metadata().map_err(write_err)?.is_file();
    let mut buf = vec![0u8; CHUNK];
    let mut off = 0u64;
    loop {
        let n = match job.src_kind {
            SourceKind::Regular { .. } => job.src.read_at(&mut buf, off),
            SourceKind::Stream => (&*job.src).read(&mut buf),
        };
        let n = match n {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read_err(e)),
        };
        if dst_regular {
            job.dst.write_all_at(&buf[..n], off).map_err(write_err)?;
        } else {
            (&*job.dst).write_all(&buf[..n]).map_err(write_err)?;
        }
        off += n as u64;
        progress.advanced(n as u64);
    }
    if dst_regular {
        job.dst.set_len(off).map_err(write_err)?;
    }
    progress.file_finished();
    Ok(off)
}
