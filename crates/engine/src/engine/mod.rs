//! The engine: the backend, its staging slots and workers, brought up once and reused for
//! every file of a run; the callers' one handle on the crate.

mod diag;
mod flight;
mod parts;
mod state;

pub use diag::Diagnostics;
pub use state::Engine;

use crate::backend::{self, Backend, Loaded, Staging, StreamIo};
use crate::bounce::Stop;
use crate::config::{Config, Verify, DEFAULT_SLOTS_PER_GPU};
use crate::devices;
use crate::error::CopyError;
use crate::file_copy::{self, Timed};
use crate::job::{Copied, DataJob, ProgressSink};
use crate::library_stats::LibraryStats;
use crate::pipeline::{Pipeline, Ran};
use crate::queue::{self, QueueLimits};
use crate::quote::quote;
use crate::stages::StageTimes;
use crate::units;
use diag::Diag;
use state::{with_pipeline, Pipelines};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a run staged through: the backend's name ("hipFile", "cuFile", "host memory"), the
/// library's version text when it tells, and the GPU indices on GPU backends (none on host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineInfo {
    pub backend: Backend,
    pub library: Option<String>,
    pub gpus: Vec<u32>,
    /// How long [`Engine::start`] took: loading the libraries and bringing the GPU up.
    pub startup: Duration,
    /// The I/O library's own counters over the run, or why there are none.
    pub library_stats: LibraryStats,
    /// Whole files whose copy ended well here: a run that staged some files elsewhere says
    /// how many each side copied.
    pub files: u64,
}

/// The process's set-up for a run with `config`, before any other thread: the runtime
/// variables the user left unset (`CUDA_DEVICE_MAX_CONNECTIONS`; nothing for host memory).
///
/// # Safety
/// No other thread may exist yet: setting a variable races with every other thread's reads
/// of the environment. Call it from `main` before starting threads or initialising MPI.
pub unsafe fn prepare_process(config: &Config) {
    // SAFETY: this function's own contract, passed on.
    unsafe { backend::runtime_env::set_defaults(&config.request()) }
}

/// Failure to bring up the backend (fatal for the run).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Backend(#[from] backend::NoBackend),
    #[error("invalid number of streams 0: must be at least 1")]
    SlotsPerGpu,
}

impl Drop for Engine {
    /// Frees the staging memory first and says how long that took (--debug), so a run's
    /// shutdown can be told apart: memory here, the GPU context and libraries after.
    fn drop(&mut self) {
        let said = with_pipeline!(&self.backend, p => {
            let staging = p.staging();
            [staging.digests_computed(), staging.windows_pinned()]
        });
        for line in said.into_iter().flatten() {
            self.diag.debug(&line);
        }
        let freed = with_pipeline!(&mut self.backend, p => p.free_slots());
        let next = match self.backend {
            Pipelines::Host(_) => "",
            Pipelines::Gpu(_) => "; the GPU context and the libraries are released next",
        };
        self.diag.debug(&format!(
            "stopping: staging memory freed in {:.3} s{next}",
            freed.as_secs_f64()
        ));
    }
}

impl Engine {
    /// Brings up the backend. Warnings and (with `config.debug`) --debug lines go to `diag`.
    pub fn start(config: Config, diag: Box<dyn Diagnostics>) -> Result<Engine, StartError> {
        if config.slots_per_gpu == Some(0) {
            return Err(StartError::SlotsPerGpu);
        }
        let mut diag = Diag {
            sink: diag,
            started: Instant::now(),
            debug: config.debug,
        };
        let (loaded, fell_back) = backend::load(&config.request(), &mut |l| diag.debug(l))?;
        if let Some(warning) = fell_back {
            diag.sink.warn(&warning);
        }
        let (backend, spread) = pipelines(loaded, &config, &mut diag);
        let slots_per_gpu = config.slots_per_gpu.unwrap_or(DEFAULT_SLOTS_PER_GPU);
        let gpus = spread.as_ref().map_or(1, devices::Spread::gpus);
        let chunk = with_pipeline!(&backend, p => p.chunk());
        diag.debug(&format!(
            "chunk {}, {slots_per_gpu} slot(s){}: up to {} of staging memory",
            units::size(chunk as u64),
            match gpus {
                1 => String::new(),
                n => format!(" on each of {n} GPUs"),
            },
            units::size((chunk * slots_per_gpu * gpus) as u64)
        ));
        Ok(Engine {
            startup: diag.started.elapsed(),
            backend,
            config,
            diag,
            spread,
            flying_on: None,
            limits: QueueLimits::default(),
            landed: queue::Landed::default(),
            copied: 0,
        })
    }

    /// Sets how many files (and bytes) may be in flight; 0 files copies every file in turn.
    pub fn set_queue_limits(&mut self, limits: QueueLimits) {
        self.limits = limits;
    }

    /// The largest file [`Engine::submit`] takes: a file that fits one slot, on the bounce
    /// route; on a library route that `auto` chose, a file small enough to bounce
    /// ([`crate::probe::LIBRARY_FROM`]). None: nothing is queued (the library route asked
    /// for, and `--async`, copy every file in turn).
    pub fn queue_max(&self) -> Option<u64> {
        let chunk = with_pipeline!(&self.backend, p => p.chunk()) as u64;
        let max = match self.library_in_turn() {
            // None under --async or the library route asked for.
            Some(staging) => staging.bounce_below().map(|b| chunk.min(b - 1)),
            None => Some(chunk),
        };
        max.filter(|_| self.limits.files > 0)
    }

    /// Whether a file larger than [`Engine::queue_max`] may still be queued, on one slot
    /// (the staging service's choice while other clients have work): only where files in
    /// flight take the route a file copied in turn would. On the library route a large file
    /// is the library's, and is copied in turn.
    pub fn flies_large_files(&self) -> bool {
        self.library_in_turn().is_none() && self.queue_max().is_some()
    }

    /// The GPU staging whose library copies files in turn (its route; `--async` is only
    /// ever on where that route is); None where files in turn take the bounce route or
    /// host memory.
    fn library_in_turn(&self) -> Option<&backend::gpu::GpuStaging> {
        match &self.backend {
            Pipelines::Host(_) => None,
            Pipelines::Gpu(p) => p.staging().library(),
        }
    }

    /// Gives the staging memory back (device buffers, pinned windows, host slots) once the
    /// files in flight have landed; the context stays, and the next file allocates again.
    /// For a long-lived engine (the staging service) gone idle.
    pub fn release_staging(&mut self) {
        self.land();
        with_pipeline!(&mut self.backend, p => p.release_slots());
    }

    /// The staging memory held now (see [`Engine::release_staging`]).
    pub fn staging_held(&self) -> u64 {
        with_pipeline!(&self.backend, p => p.held())
    }

    /// The most a slice holds: parts given to [`Engine::copy_part`] begin at multiples of
    /// it.
    pub fn chunk_bytes(&self) -> u64 {
        with_pipeline!(&self.backend, p => p.chunk()) as u64
    }

    /// Where the time of every file copied so far went, stage by stage.
    pub fn run_stages(&self) -> StageTimes {
        with_pipeline!(&self.backend, p => p.run_stages())
    }

    /// The staging backend.
    pub fn backend(&self) -> Backend {
        match &self.backend {
            Pipelines::Host(p) => p.staging().name(),
            Pipelines::Gpu(p) => p.staging().name(),
        }
    }

    /// What the run stages through, for the summary.
    pub fn info(&self) -> EngineInfo {
        let (library, gpus, library_stats) = match &self.backend {
            Pipelines::Host(_) => (
                None,
                Vec::new(),
                Err("host memory: no GPU I/O library".to_owned()),
            ),
            Pipelines::Gpu(p) => (
                p.staging().version().map(str::to_owned),
                p.staging().indices(),
                p.staging().library_stats(),
            ),
        };
        EngineInfo {
            backend: self.backend(),
            library,
            gpus,
            startup: self.startup,
            library_stats,
            files: self.copied,
        }
    }

    /// At the end of a one-off run (not a service's): waits, at most a few seconds and not
    /// past a signal, for the digest kernels' compile still under way, so that later runs
    /// find them in the kernel cache instead of compiling again (--debug says how long).
    pub fn wait_for_digest_compile(&mut self) {
        let cancel = &self.config.cancel;
        let waited =
            with_pipeline!(&self.backend, p => p.staging().wait_for_digest_compile(cancel));
        if let Some(waited) = waited {
            self.diag.debug(&format!(
                "waited {:.3} s for the digest kernels' compile, so that they are kept",
                waited.as_secs_f64()
            ));
        }
    }

    /// Allocates what every copy needs (the first staging slot) for copying `src_name`.
    /// Call it before opening DST: its failure leaves DST as it was. [`Engine::copy`] does
    /// the same itself, so calling this is optional.
    pub fn prepare(&mut self, src_name: &Path) -> Result<(), CopyError> {
        if with_pipeline!(&self.backend, p => p.in_flight()) > 0 {
            return Ok(()); // the slots exist, lent to the files in flight
        }
        let diag = &mut |line: &str| self.diag.debug(line);
        match (&mut self.backend, &self.spread) {
            (Pipelines::Host(p), _) => p.first_slot(src_name, diag),
            (Pipelines::Gpu(p), None) => p.first_slot(src_name, diag),
            // Which GPU the file will use is not known yet: each one's first slot.
            (Pipelines::Gpu(p), Some(spread)) => (0..spread.gpus()).try_for_each(|d| {
                p.choose(&[d]);
                p.first_slot(src_name, diag)
            }),
        }
    }

    /// The --debug line and --verify of a whole file copied here.
    fn conclude(
        &mut self,
        job: &DataJob<'_>,
        copied: Copied,
        started: Instant,
        stages: &StageTimes,
    ) -> Result<Copied, CopyError> {
        let diag = &mut self.diag;
        let result = file_copy::conclude(
            job,
            copied,
            file_copy::Timing {
                secs: started.elapsed().as_secs_f64(),
                stages,
                where_: None,
            },
            file_copy::AtEnd {
                verify: self.config.verify,
                stop: &self.config.cancel,
                debug: self.config.debug,
                pause: self.config.pause,
            },
            &mut |line| diag.debug(&line),
        );
        self.copied += u64::from(result.is_ok());
        result
    }

    /// Copies `job.src`'s data into `job.dst` and sets DST's final size. Returns what DST
    /// got (its final size, and its digest where the job asks for one). On error DST is cut
    /// back to the bytes known to be copied.
    pub fn copy(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<Copied, CopyError> {
        let cancel = Arc::clone(&self.config.cancel);
        self.copy_with(job, progress, Stop::cut_back(&cancel))
            .result
    }

    /// [`Engine::copy`] stopped by `cancel` instead of the run's flag (see
    /// [`Engine::submit_cancellable`]), with the file's stage times. Once `cancel` is set
    /// DST is not touched again, not even cut back: the copy ends as
    /// [`CopyError::Stopped`], saying how much of DST is good, for the file's owner to cut
    /// if it is still there.
    pub fn copy_cancellable(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        cancel: &AtomicBool,
    ) -> Timed<Copied> {
        self.copy_with(job, progress, Stop::leave(cancel))
    }

    fn copy_with(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        stop: Stop<'_>,
    ) -> Timed<Copied> {
        self.land();
        let started = Instant::now();
        let diag = &mut |line: &str| self.diag.debug(line);
        let ran: Ran<Copied> = match (&mut self.backend, &mut self.spread) {
            (Pipelines::Host(p), _) => p.copy(job, progress, stop, diag),
            (Pipelines::Gpu(p), None) => p.copy(job, progress, stop, diag),
            (Pipelines::Gpu(p), Some(spread)) => {
                let (set, why) = spread.place(job);
                p.choose(&set);
                let ran = p.copy(job, progress, stop, diag);
                diag(&format!(
                    "{}: {} ({why})",
                    quote(job.src_name),
                    spread.describe(&ran.devices)
                ));
                ran
            }
        };
        let Timed { result, stages } = ran.timed;
        let result = result.and_then(|copied| self.conclude(job, copied, started, &stages));
        Timed { result, stages }
    }
}

/// The pipeline of the backend `loaded` brought up, with `--async` where it is asked for
/// and the library has streams, and with several GPUs how files are spread over them.
fn pipelines(
    loaded: Loaded,
    config: &Config,
    diag: &mut Diag,
) -> (Pipelines, Option<devices::Spread>) {
    match loaded {
        Loaded::Host(h) => {
            diag.debug("backend host memory");
            if config.async_io {
                diag.sink
                    .warn("--async has no effect with host memory staging; using threads");
            }
            (Pipelines::Host(pipeline(h, true, config)), None)
        }
        Loaded::Gpu(g) => {
            let mut pipeline = pipeline(g, false, config);
            if config.async_io {
                use_async(&mut pipeline, diag);
            }
            let spread = devices::Spread::new(&config.gpu, pipeline.staging());
            (Pipelines::Gpu(pipeline), spread)
        }
    }
}

/// A pipeline of `staging`'s slots as `config` asks: the chunk (`host` memory's default
/// is smaller), slots per GPU, the tests' pauses, and whether --verify reads SOURCE again.
fn pipeline<S: Staging>(staging: S, host: bool, config: &Config) -> Pipeline<S> {
    let chunk = config.chunk(host).bytes() as usize;
    let slots_per_gpu = config.slots_per_gpu.unwrap_or(DEFAULT_SLOTS_PER_GPU);
    let verifies_bytes = config.verify == Some(Verify::Bytes);
    Pipeline::new(
        staging,
        chunk,
        slots_per_gpu,
        (config.pause, verifies_bytes),
    )
}

/// Turns `--async` on where the library has the stream API; warns where it has not.
fn use_async(pipeline: &mut Pipeline<backend::gpu::GpuStaging>, diag: &mut Diag) {
    let Some(library) = pipeline.staging().library() else {
        return;
    };
    match library.check_async() {
        Ok(()) => {
            pipeline.use_async();
            diag.debug(&format!(
                "async: one stream per worker, registered with flags {:#x}",
                backend::gpu_stream::STREAM_FLAGS
            ));
        }
        Err(e) => diag.sink.warn(&format!(
            "--async is not available ({e}); using the threaded engine"
        )),
    }
}
