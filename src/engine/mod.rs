//! The chunked copy of one file's data.
//!
//! The cp layer opens SRC and DST (with the right flags, modes and checks) and hands both
//! files here; the engine moves the bytes through the staging backend and sets DST's size.
//!
//! A regular file is cut into aligned slices ([`chunk_plan`]) that N workers copy in
//! parallel, each through its own staging slot (device memory on GPU backends), by the
//! direct route (O_DIRECT + hipFile/cuFile) or the bounce route (POSIX I/O + copies to and
//! from the slot); the unaligned tail and streams go through the bounce route on the
//! calling thread; the exact size is set last. The library, its driver, the slots and the
//! worker threads are made once and reused for every file of the run.
//!
//! With `--async` (GPU backends whose library has the stream API), a file whose SRC and DST
//! are both registered is copied by workers that each queue ReadAsync then WriteAsync on
//! their own stream and synchronize once per slice; everything else is as above.

pub mod chunk_plan;
pub mod fileio;
mod pipeline;
mod transfer;
pub mod verify;

use crate::backend::{self, Loaded};
use crate::quote::quote;
use pipeline::Pipeline;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// Bytes per slice unless configured: measured on the H200 machine, 64 MiB slices beat the
/// reference's 2 GiB by 1.2-1.5x (bigger bounce windows did not help).
pub const DEFAULT_CHUNK: u64 = 64 << 20;
/// Slices in flight on GPU backends unless configured. Two keep one slice reading while the
/// other writes; on the H200 machine (8 GiB, cold) two beat four on both disks (virtio 0.876
/// vs 0.825 GB/s, RAM-backed ext4 1.73 vs 1.52 and 1.80 vs 1.63), and eight did not help.
pub const DEFAULT_GPU_STREAMS: usize = 2;
/// Slices in flight with host memory staging unless configured. Without device copies in
/// between, a deeper queue pays: four beat two and one on the dev VM's virtio disk (0.401 vs
/// 0.284 vs 0.309 GB/s) and matched dd on the H200's RAM disk. BENCHMARKS.md has the runs.
pub const DEFAULT_HOST_STREAMS: usize = 4;
/// Largest slice: one read or write call moves at most this much on Linux.
pub const MAX_CHUNK: u64 = hipfile::sys::MAX_IO_BYTES as u64;

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

/// How data moves between the files and GPU memory on GPU backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RouteChoice {
    /// The library's route where it can DMA between storage and GPU memory (hipFile; cuFile
    /// with nvidia-fs), aiscp's own bounce route where the library would only emulate it
    /// (cuFile in compatibility mode does POSIX I/O plus copies itself, one request at a time).
    #[default]
    Auto,
    /// Always hipFileRead/hipFileWrite on registered files.
    Library,
    /// Always aiscp's own: O_DIRECT POSIX I/O into pinned host memory, copied to and from the
    /// device buffer, pipelined over the slices in flight.
    Bounce,
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
    /// Bytes per slice; None = the engine's default. Rounded up to 4096 (and to each file's
    /// direct-I/O alignment); must be in 1..=[`MAX_CHUNK`].
    pub chunk_size: Option<u64>,
    pub gpu: u32,
    /// Library DMA or aiscp's own bounce route (GPU backends only).
    pub route: RouteChoice,
    /// Slices in flight; None = the engine's default.
    pub streams: Option<usize>,
    pub async_io: bool,
    pub verify: bool,
    pub debug: bool,
    pub quiet: bool,
    /// Set (by a signal handler) to stop the copy between slices: [`CopyError::Interrupted`].
    pub cancel: Arc<AtomicBool>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            backend: BackendChoice::Auto,
            chunk_size: None,
            gpu: 0,
            route: RouteChoice::Auto,
            streams: None,
            async_io: false,
            verify: false,
            debug: false,
            quiet: false,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }
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
    /// The file's data phase ended, successfully or not (called before any error returns).
    fn file_finished(&self);
    /// How the file's bytes are read and written: "direct" (library I/O), "O_DIRECT" or
    /// "bounce" (POSIX I/O through the host window), "stream" (read until EOF).
    fn route(&self, _read: &'static str, _write: &'static str) {}
}

/// What a run staged through: the backend's name ("hipFile", "cuFile", "host memory"), the
/// library's version text when it tells, and the GPU index on GPU backends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineInfo {
    pub backend: &'static str,
    pub library: Option<String>,
    pub gpu: Option<u32>,
}

/// A sink that ignores everything.
pub struct NoProgress;
impl ProgressSink for NoProgress {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, _: u64) {}
    fn file_finished(&self) {}
}

/// Failure of one file's copy; Display is cp's message without the program prefix,
/// e.g. "error writing 'y': No space left on device". Names are already quoted.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    #[error("error reading {name}: {}", os_text(source))]
    Read { name: String, source: io::Error },
    #[error("error writing {name}: {}", os_text(source))]
    Write { name: String, source: io::Error },
    /// Setting DST's final size failed.
    #[error("failed to extend {name}: {}", os_text(source))]
    Extend { name: String, source: io::Error },
    /// The GPU library refused the file in a way the bounce route cannot serve.
    #[error("cannot register {name} with {library}: {message}")]
    Register {
        name: String,
        library: &'static str,
        message: String,
    },
    /// No staging memory for the copy of `name`: `bytes` asked for, and retried down to
    /// `smallest` when the engine shrank the chunk.
    #[error(
        "cannot allocate {bytes} bytes of {memory}{} to copy {name}: {message}",
        smallest.map(|s| format!(" (nor down to {s})")).unwrap_or_default()
    )]
    Alloc {
        name: String,
        bytes: usize,
        smallest: Option<usize>,
        memory: &'static str,
        message: String,
    },
    /// [`Config::cancel`] was set; in-flight I/O finished and DST holds what was copied.
    #[error("interrupted")]
    Interrupted,
    /// --verify found DST different from SRC, or could not read them back.
    #[error(transparent)]
    Verify(#[from] verify::VerifyError),
}

/// An OS error's text as cp prints it: strerror, without std's " (os error N)".
pub fn os_text(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .map(str::to_owned)
            .unwrap_or(text),
        None => text,
    }
}

/// Failure to bring up the backend (fatal for the run).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Backend(String),
    #[error("invalid chunk size {0}: must be between 1 and {MAX_CHUNK} bytes")]
    ChunkSize(u64),
    #[error("invalid number of streams 0: must be at least 1")]
    Streams,
}

/// Where --debug lines go.
type Diag = Box<dyn FnMut(&str) + Send>;

/// One --debug line on stderr, stamped with the seconds since the engine started.
fn debug_print(started: Instant, line: &str) {
    eprintln!(
        "aiscp: debug: +{:.3}s {line}",
        started.elapsed().as_secs_f64()
    );
}

enum Backend {
    Host(Pipeline<backend::host::HostStaging>),
    Gpu(Pipeline<backend::gpu::GpuStaging>),
}

/// The engine: backend, buffers and workers, reused across the files of one run.
pub struct Engine {
    backend: Backend,
    config: Config,
    diag: Option<Diag>,
}

impl Engine {
    /// Brings up the backend. `warn` receives one-line warnings (already filtered by quiet).
    /// With `config.debug`, diagnostics go to stderr as `aiscp: debug: +S.SSSs ...` (seconds
    /// since this call, so start-up costs show where they are paid) unless
    /// [`Engine::set_diag`] redirects them.
    pub fn start(config: Config, warn: &mut dyn FnMut(&str)) -> Result<Engine, StartError> {
        let chunk = config.chunk_size.unwrap_or(DEFAULT_CHUNK);
        if chunk == 0 || chunk > MAX_CHUNK {
            return Err(StartError::ChunkSize(chunk));
        }
        // MAX_CHUNK is a multiple of 4096, so rounding up stays within it.
        let chunk = chunk.div_ceil(fileio::MIN_ALIGN) * fileio::MIN_ALIGN;
        if config.streams == Some(0) {
            return Err(StartError::Streams);
        }
        let started = Instant::now();
        let mut diag: Option<Diag> = None;
        let mut debug_line = |line: &str| {
            if config.debug {
                debug_print(started, line);
            }
        };
        let loaded = backend::load(&config, warn, &mut debug_line)?;
        let chunk = chunk as usize;
        let streams = config.streams.unwrap_or(match loaded {
            Loaded::Host(_) => DEFAULT_HOST_STREAMS,
            Loaded::Gpu(_) => DEFAULT_GPU_STREAMS,
        });
        let backend = match loaded {
            Loaded::Host(h) => {
                debug_line("backend host memory");
                if config.async_io {
                    warn("--async has no effect with host memory staging; using threads");
                }
                Backend::Host(Pipeline::new(h, chunk, streams))
            }
            Loaded::Gpu(g) => {
                let mut pipeline = Pipeline::new(g, chunk, streams);
                if config.async_io {
                    match pipeline.staging.check_async() {
                        Ok(()) => {
                            pipeline.async_io = true;
                            debug_line(&format!(
                                "async: one stream per worker, registered with flags {:#x}",
                                backend::gpu::STREAM_FLAGS
                            ));
                        }
                        Err(e) => warn(&format!(
                            "--async is not available ({e}); using the threaded engine"
                        )),
                    }
                }
                Backend::Gpu(pipeline)
            }
        };
        debug_line(&format!(
            "chunk {chunk} bytes, {streams} stream(s): up to {} bytes of staging memory",
            chunk * streams
        ));
        if config.debug {
            diag = Some(Box::new(move |line: &str| debug_print(started, line)));
        }
        Ok(Engine {
            backend,
            config,
            diag,
        })
    }

    /// Sends --debug lines to `f` instead of stderr (only when `config.debug` is set).
    pub fn set_diag(&mut self, f: Box<dyn FnMut(&str) + Send>) {
        if self.config.debug {
            self.diag = Some(f);
        }
    }

    /// The staging backend's name: "hipFile", "cuFile" or "host memory".
    pub fn backend_name(&self) -> &'static str {
        use crate::backend::Staging;
        match &self.backend {
            Backend::Host(p) => p.staging.name(),
            Backend::Gpu(p) => p.staging.name(),
        }
    }

    /// What the run stages through, for the summary.
    pub fn info(&self) -> EngineInfo {
        match &self.backend {
            Backend::Host(_) => EngineInfo {
                backend: self.backend_name(),
                library: None,
                gpu: None,
            },
            Backend::Gpu(p) => EngineInfo {
                backend: self.backend_name(),
                library: p.staging.version().map(str::to_owned),
                gpu: Some(self.config.gpu),
            },
        }
    }

    /// Allocates what every copy needs (the first staging slot) for copying `src_name`.
    /// Call it before opening DST: its failure leaves DST as it was. [`Engine::copy`] does
    /// the same itself, so calling this is optional.
    pub fn prepare(&mut self, src_name: &Path) -> Result<(), CopyError> {
        let mut no_diag = |_: &str| {};
        let diag: &mut dyn FnMut(&str) = match &mut self.diag {
            Some(d) => d,
            None => &mut no_diag,
        };
        match &mut self.backend {
            Backend::Host(p) => p.first_slot(&quote(src_name), diag),
            Backend::Gpu(p) => p.first_slot(&quote(src_name), diag),
        }
    }

    /// Copies `job.src`'s data into `job.dst` and sets DST's final size. Returns bytes copied
    /// (DST's final size). On error DST is cut back to the bytes known to be copied.
    pub fn copy(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, CopyError> {
        let cancel = &*self.config.cancel;
        let started = Instant::now();
        let mut no_diag = |_: &str| {};
        let diag: &mut dyn FnMut(&str) = match &mut self.diag {
            Some(d) => d,
            None => &mut no_diag,
        };
        let end = match &mut self.backend {
            Backend::Host(p) => p.copy(job, progress, cancel, diag),
            Backend::Gpu(p) => p.copy(job, progress, cancel, diag),
        }?;
        if self.config.debug {
            let secs = started.elapsed().as_secs_f64();
            diag(&format!(
                "{}: {end} bytes in {secs:.3} s ({}/s)",
                quote(job.dst_name),
                humansize::format_size((end as f64 / secs.max(1e-9)) as u64, humansize::BINARY)
            ));
        }
        if self.config.verify {
            let checked = verify::verify(job.src, job.src_name, job.dst, job.dst_name)?;
            diag(&checked.describe(job.dst_name));
        }
        Ok(end)
    }
}
