//! What the engine is asked for: the [`Config`] `main` builds from the command line, and the
//! slice size, checked in one place ([`ChunkSize`]).

use crate::backend::{self, BackendChoice, GpuChoice, RouteChoice};
use crate::fileio;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Slices in flight unless configured, on every backend: the bounce route's copies to and
/// from the GPU overlap the I/O, so the GPU route wants the host route's queue depth, and
/// four beat two and eight on the H200 and on the dev VM (bench/results/HISTORY.md, "H200
/// run 1: the bounce route written once, four slots", and "H200 runs 6–9": eight slots
/// measured and not kept).
pub const DEFAULT_SLOTS_PER_GPU: usize = 4;
/// Largest slice: one read or write call moves at most this much on Linux.
pub const MAX_CHUNK: u64 = hipfile::sys::MAX_IO_BYTES as u64;

/// Bytes per slice: between 1 and [`MAX_CHUNK`], rounded up to 4096 (and, for a file whose
/// direct-I/O alignment is larger, down to a multiple of it when its copy is planned). The
/// one place a chunk size is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSize(u64);

impl ChunkSize {
    /// 64 MiB: on the H200 machine 64 MiB slices beat the reference's 2 GiB by 1.2-1.5x
    /// (bigger bounce windows did not help).
    pub const DEFAULT: ChunkSize = ChunkSize(64 << 20);
    /// 16 MiB on host memory, where a slot is only a bounce buffer: a quarter of the GPU's
    /// memory at the same speed within the noise (a 4 GiB copy between two RAM ext4s: 1.73 s
    /// against 1.67 s at 64 MiB, 70 MiB RSS against 261; BENCHMARKS.md, "Memory").
    pub const HOST_DEFAULT: ChunkSize = ChunkSize(16 << 20);

    pub fn new(bytes: u64) -> Result<ChunkSize, ChunkSizeError> {
        if bytes == 0 || bytes > MAX_CHUNK {
            return Err(ChunkSizeError(bytes));
        }
        // MAX_CHUNK is a multiple of 4096, so rounding up stays within it.
        Ok(ChunkSize(
            bytes.div_ceil(fileio::MIN_ALIGN) * fileio::MIN_ALIGN,
        ))
    }

    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl Default for ChunkSize {
    fn default() -> ChunkSize {
        ChunkSize::DEFAULT
    }
}

/// As sizes are written on the command line: 64M, 1G, or bytes.
impl std::fmt::Display for ChunkSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            b if b % (1 << 30) == 0 => write!(f, "{}G", b >> 30),
            b if b % (1 << 20) == 0 => write!(f, "{}M", b >> 20),
            b if b % (1 << 10) == 0 => write!(f, "{}K", b >> 10),
            b => write!(f, "{b}"),
        }
    }
}

/// A chunk size outside 1..=[`MAX_CHUNK`].
#[derive(Debug, thiserror::Error)]
#[error("must be between 1 and {MAX_CHUNK} (0x{MAX_CHUNK:x}) bytes")]
pub struct ChunkSizeError(pub u64);

/// How `--verify` checks a file it reads back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verify {
    /// SOURCE and DEST read back and compared byte for byte.
    Bytes,
    /// DEST read back alone, its digest compared with the one taken of the staged bytes
    /// while copying (the job must take a digest).
    Sums,
}

/// Everything the engine needs to know; built from the command line by `main`.
#[derive(Clone, Debug)]
pub struct Config {
    pub backend: BackendChoice,
    /// `--chunk-size`; None: the backend's own ([`Config::chunk`]).
    pub chunk_size: Option<ChunkSize>,
    /// Which GPU(s) stage the data (GPU backends only).
    pub gpu: GpuChoice,
    /// Library DMA or aiscp's own bounce route (GPU backends only).
    pub route: RouteChoice,
    /// Staging slots per GPU (`--streams`), each one slice in flight; None = the engine's
    /// default.
    pub slots_per_gpu: Option<usize>,
    pub async_io: bool,
    /// Read each file back once written (`--verify`), and how it is checked.
    pub verify: Option<Verify>,
    pub debug: bool,
    pub quiet: bool,
    /// Ask the I/O library to keep its own statistics for [`crate::EngineInfo`]
    /// (`--stats`): cuFile counts per GPU only when asked, at a cost.
    pub library_stats: bool,
    /// Set (by a signal handler) to stop the copy between slices: [`crate::CopyError::Interrupted`].
    pub cancel: Arc<AtomicBool>,
    /// Called at named points of a file's copy ("slice": before a worker's first slice,
    /// "between-slices": after it, "finish": before the finishing reads, "verify": before
    /// --verify reads the files back), so that tests can change the files there; does
    /// nothing by default.
    pub pause: fn(&'static str),
}

impl Config {
    /// What the backend is asked for.
    pub(crate) fn request(&self) -> backend::Request {
        backend::Request {
            backend: self.backend,
            route: self.route,
            gpu: self.gpu.clone(),
            async_io: self.async_io,
            library_stats: self.library_stats,
        }
    }
}

impl Config {
    /// The chunk a backend uses: the one asked for, else [`ChunkSize::DEFAULT`] on a GPU and
    /// [`ChunkSize::HOST_DEFAULT`] on host memory.
    pub fn chunk(&self, host: bool) -> ChunkSize {
        self.chunk_size.unwrap_or(match host {
            true => ChunkSize::HOST_DEFAULT,
            false => ChunkSize::DEFAULT,
        })
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            backend: BackendChoice::Auto,
            chunk_size: None,
            gpu: GpuChoice::default(),
            route: RouteChoice::Auto,
            slots_per_gpu: None,
            async_io: false,
            verify: None,
            debug: false,
            library_stats: false,
            quiet: false,
            cancel: Arc::new(AtomicBool::new(false)),
            pause: |_| {},
        }
    }
}
