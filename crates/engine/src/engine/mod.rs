//! The engine: the backend, its staging slots and workers, brought up once and reused for
//! every file of a run; the callers' one handle on the crate.

use crate::backend::{self, Backend, Loaded, Staging, StreamIo};
use crate::bounce;
use crate::config::{Config, Verify, DEFAULT_SLOTS_PER_GPU};
use crate::devices;
use crate::error::CopyError;
use crate::job::{Copied, DataJob, NoProgress, ProgressSink};
use crate::library_stats::LibraryStats;
use crate::pipeline::Pipeline;
use crate::queue::{self, Finished, QueueLimits, QueuedJob, Ticket};
use crate::quote::quote;
use crate::stages::StageTimes;
use crate::units;
use crate::worker::PartEnd;
use crate::{digest, file_copy, stages};
use std::ops::Range;
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

/// Where the engine's messages go: the caller shows them (the engine never prints).
pub trait Diagnostics: Send {
    /// A one-line warning (no GPU library, so host memory; --async unavailable).
    fn warn(&mut self, line: &str);
    /// A --debug line (only with [`Config::debug`]); `since_start` is the time since
    /// [`Engine::start`] was called, so start-up costs show where they are paid.
    fn debug(&mut self, since_start: Duration, line: &str);
}

/// The caller's [`Diagnostics`] with the engine's start time, for --debug stamps.
struct Diag {
    sink: Box<dyn Diagnostics>,
    started: Instant,
    debug: bool,
}

impl Diag {
    fn debug(&mut self, line: &str) {
        if self.debug {
            self.sink.debug(self.started.elapsed(), line);
        }
    }
}

/// The pipeline of the backend brought up, whichever it is.
enum Pipelines {
    Host(Pipeline<backend::host::HostStaging>),
    Gpu(Pipeline<backend::gpu::GpuStaging>),
}

/// The engine: backend, buffers and workers, reused across the files of one run.
pub struct Engine {
    backend: Pipelines,
    config: Config,
    diag: Diag,
    /// With several GPUs: how files are placed on them.
    spread: Option<devices::Spread>,
    /// How long the start took (reported in the run's summary).
    startup: Duration,
    /// The GPUs (positions) the file workers of the current flight have slots on.
    flying_on: Option<Vec<usize>>,
    /// Files in flight: the limits, and results received while landing the flight.
    limits: QueueLimits,
    landed: queue::Landed,
    /// Whole files whose copy ended well (see [`EngineInfo::files`]).
    copied: u64,
}

/// Runs `$body` with `$p` bound to the backend's pipeline, whichever it is.
macro_rules! with_pipeline {
    ($backend:expr, $p:ident => $body:expr) => {
        match $backend {
            Pipelines::Host($p) => $body,
            Pipelines::Gpu($p) => $body,
        }
    };
}

impl Drop for Engine {
    /// Frees the staging memory first and says how long that took (--debug), so a run's
    /// shutdown can be told apart: memory here, the GPU context and libraries after.
    fn drop(&mut self) {
        if let Some(line) = with_pipeline!(&self.backend, p => p.staging().digests_computed()) {
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
        let chunk = |host| config.chunk(host).bytes() as usize;
        let slots_per_gpu = config.slots_per_gpu.unwrap_or(DEFAULT_SLOTS_PER_GPU);
        let mut spread = None;
        let backend = match loaded {
            Loaded::Host(h) => {
                diag.debug("backend host memory");
                if config.async_io {
                    diag.sink
                        .warn("--async has no effect with host memory staging; using threads");
                }
                Pipelines::Host(Pipeline::new(
                    h,
                    chunk(true),
                    slots_per_gpu,
                    (config.pause, config.verify == Some(Verify::Bytes)),
                ))
            }
            Loaded::Gpu(g) => {
                let mut pipeline = Pipeline::new(
                    g,
                    chunk(false),
                    slots_per_gpu,
                    (config.pause, config.verify == Some(Verify::Bytes)),
                );
                if let (true, Some(library)) = (config.async_io, pipeline.staging().library()) {
                    match library.check_async() {
                        Ok(()) => {
                            pipeline.use_async();
                            diag.debug(&format!(
                                "async: one stream per worker, registered with flags {:#x}",
                                backend::gpu::STREAM_FLAGS
                            ));
                        }
                        Err(e) => diag.sink.warn(&format!(
                            "--async is not available ({e}); using the threaded engine"
                        )),
                    }
                }
                spread = devices::Spread::new(&config.gpu, pipeline.staging());
                Pipelines::Gpu(pipeline)
            }
        };
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
    /// route (the library route and `--async` copy files in turn). None: nothing is queued.
    pub fn queue_max(&self) -> Option<u64> {
        let library = match &self.backend {
            Pipelines::Host(_) => false,
            Pipelines::Gpu(p) => p.staging().library().is_some() || p.async_io(),
        };
        let chunk = with_pipeline!(&self.backend, p => p.chunk());
        (self.limits.files > 0 && !library).then_some(chunk as u64)
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

    /// Whether a file of `len` bytes may be queued now without going over the limits; when
    /// not, take finished files with [`Engine::next_finished`] first.
    pub fn has_room(&self, len: u64) -> bool {
        self.landed.finished.is_empty()
            && with_pipeline!(&self.backend, p => p.has_room(&self.limits, len))
    }

    /// Files queued whose results have not been taken with [`Engine::next_finished`].
    pub fn in_flight(&self) -> usize {
        self.landed.finished.len() + with_pipeline!(&self.backend, p => p.in_flight())
    }

    /// Queues a whole file (SRC and DST regular, DST empty; usually at most
    /// [`Engine::queue_max`] bytes: a larger one moves slot by slot on one worker, which a
    /// caller sharing the engine between several copiers may prefer to giving it every slot)
    /// to be copied while the caller goes on; its result comes from
    /// [`Engine::next_finished`] with the ticket returned here. Tickets count up in the
    /// order files are queued. The job comes back when it cannot be queued (no worker
    /// thread could be started): copy it with [`Engine::copy`] instead.
    pub fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        self.submit_with(job, None)
    }

    /// [`Engine::submit`] for a file that `cancel` stops instead of the run's flag: a
    /// staging service serving several clients stops one client's files, not the others'.
    /// Once `cancel` is set DST is not touched again (see [`Engine::copy_cancellable`]).
    pub fn submit_cancellable(
        &mut self,
        job: QueuedJob,
        cancel: Arc<AtomicBool>,
    ) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        self.submit_with(job, Some(cancel))
    }

    fn submit_with(
        &mut self,
        job: QueuedJob,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        let ticket = Ticket(self.landed.next_ticket);
        let started = self.config.debug.then_some(self.diag.started);
        let diag = &mut |line: &str| self.diag.debug(line);
        if let (Pipelines::Gpu(p), Some(spread)) = (&mut self.backend, &mut self.spread) {
            // Queued files take the slots of the GPUs nearest their storage (every GPU unless
            // `--gpu auto` knows better). The workers keep their slots for the flight, so a
            // file for other GPUs waits for the flight to land and starts a new one.
            let (set, why) = spread.nearest(&job.src, &job.dst);
            if !p.flying() || self.flying_on.as_ref() != Some(&set) {
                p.land(&mut self.landed.finished);
                p.choose(&set);
                diag(&format!(
                    "files in flight: {} ({why})",
                    spread.describe(&set)
                ));
                self.flying_on = Some(set);
            }
        }
        with_pipeline!(&mut self.backend, p => p.submit((ticket, job, cancel), &self.limits, &self.config, started, diag))?;
        self.landed.next_ticket += 1;
        Ok(ticket)
    }

    /// A queued file whose copy has ended, in the order they end; with `block`, waits for
    /// one while any is in flight. None when none is (or, without `block`, none has ended).
    pub fn next_finished(&mut self, block: bool) -> Option<Finished> {
        let finished = match self.landed.finished.pop_front() {
            Some(f) => Some(f),
            None => with_pipeline!(&mut self.backend, p => p.receive(block)),
        }?;
        for (at, line) in &finished.debug {
            if self.config.debug {
                self.diag.sink.debug(*at, line);
            }
        }
        self.copied += u64::from(finished.result.is_ok());
        Some(finished)
    }

    /// Waits for the files in flight and takes their slots back (results kept for
    /// [`Engine::next_finished`]), before a copy that needs the slots itself.
    fn land(&mut self) {
        let into = &mut self.landed.finished;
        with_pipeline!(&mut self.backend, p => p.land(into));
    }

    /// Where the time of the last file copied went, stage by stage.
    pub fn last_stages(&self) -> StageTimes {
        with_pipeline!(&self.backend, p => p.stages().0)
    }

    /// Where the time of every file copied so far went, stage by stage.
    pub fn run_stages(&self) -> StageTimes {
        with_pipeline!(&self.backend, p => p.stages().1)
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

    /// Copies the aligned slices of `part` of a regular file (its offsets aligned to the
    /// chunk size, except where it ends at EOF), as one of several copiers of the same file
    /// (MPI ranks): DST is neither cut nor sized and the unaligned tail is left, since the
    /// copier that owns the file ends it with [`Engine::begin_parts`] before the parts and
    /// [`Engine::finish_parts`] after them.
    pub fn copy_part(&mut self, job: &DataJob<'_>, part: Range<u64>) -> Result<PartEnd, CopyError> {
        let cancel = Arc::clone(&self.config.cancel);
        self.copy_part_with(job, part, &NoProgress, (&cancel, bounce::OnStop::CutBack))
    }

    /// [`Engine::copy_part`] of a file copied in turns (a staging service gives other
    /// clients theirs between its parts), its progress shown, stopped by `cancel` as
    /// [`Engine::copy_cancellable`] is.
    pub fn copy_part_cancellable(
        &mut self,
        job: &DataJob<'_>,
        part: Range<u64>,
        progress: &dyn ProgressSink,
        cancel: &AtomicBool,
    ) -> Result<PartEnd, CopyError> {
        self.copy_part_with(job, part, progress, (cancel, bounce::OnStop::Leave))
    }

    fn copy_part_with(
        &mut self,
        job: &DataJob<'_>,
        part: Range<u64>,
        progress: &dyn ProgressSink,
        stop: (&AtomicBool, bounce::OnStop),
    ) -> Result<PartEnd, CopyError> {
        self.land();
        let diag = &mut |line: &str| self.diag.debug(line);
        with_pipeline!(&mut self.backend, p => p.copy_part(job, part, progress, stop, diag))
    }

    /// Readies a file whose parts other copiers share: the staging its end needs, then DST
    /// cut to 0 (only then, so a copy that cannot start leaves DST as it was).
    pub fn begin_parts(&mut self, job: &DataJob<'_>) -> Result<(), CopyError> {
        self.land();
        self.prepare(job.src_name)?;
        let names = bounce::Names::of(job.src_name, job.dst_name);
        let cx = bounce::Ctx {
            names: &names,
            cancel: &self.config.cancel,
            on_stop: bounce::OnStop::CutBack,
            clock: &stages::StageClock::default(),
            pause: self.config.pause,
            digest: None,
        };
        file_copy::FileCopy::of(job, &names).begin(true, &cx)
    }

    /// Ends a file whose parts were copied by [`Engine::copy_part`] (here or by other
    /// copiers), as one copier ends a whole file: `parts` in file order, each as it ended.
    /// Returns what DST got; its digest, where the job asks for one, is read back from DEST
    /// (the parts' pieces stayed with their copiers).
    pub fn finish_parts(
        &mut self,
        job: &DataJob<'_>,
        parts: Vec<Result<PartEnd, CopyError>>,
    ) -> Result<Copied, CopyError> {
        let cancel = Arc::clone(&self.config.cancel);
        self.finish_parts_with(job, parts, &NoProgress, (&cancel, bounce::OnStop::CutBack))
    }

    /// [`Engine::finish_parts`] of a file copied by [`Engine::copy_part_cancellable`].
    pub fn finish_parts_cancellable(
        &mut self,
        job: &DataJob<'_>,
        parts: Vec<Result<PartEnd, CopyError>>,
        progress: &dyn ProgressSink,
        cancel: &AtomicBool,
    ) -> Result<Copied, CopyError> {
        self.finish_parts_with(job, parts, progress, (cancel, bounce::OnStop::Leave))
    }

    fn finish_parts_with(
        &mut self,
        job: &DataJob<'_>,
        mut parts: Vec<Result<PartEnd, CopyError>>,
        progress: &dyn ProgressSink,
        (cancel, on_stop): (&AtomicBool, bounce::OnStop),
    ) -> Result<Copied, CopyError> {
        self.land();
        let started = Instant::now();
        let names = bounce::Names::of(job.src_name, job.dst_name);
        let clock = stages::StageClock::default();
        let pieces = job.digest.map(digest::Pieces::new);
        // The parts' pieces: each counts where DEST still holds it once the file ends.
        for end in parts.iter_mut().flatten() {
            let taken = std::mem::take(&mut end.pieces);
            if let Some(pieces) = &pieces {
                pieces.extend(taken);
            }
        }
        let cx = bounce::Ctx {
            names: &names,
            cancel,
            on_stop,
            clock: &clock,
            pause: self.config.pause,
            digest: pieces.as_ref(),
        };
        let file = file_copy::FileCopy::of(job, &names);
        let ended =
            with_pipeline!(&mut self.backend, p => p.finish_parts(&file, parts, &cx, progress))?;
        let copied = file.copied(ended, &cx)?;
        self.conclude(job, copied, started, clock.times())
    }

    /// The --debug line and --verify of a whole file copied here.
    fn conclude(
        &mut self,
        job: &DataJob<'_>,
        copied: Copied,
        started: Instant,
        stages: StageTimes,
    ) -> Result<Copied, CopyError> {
        let ends = file_copy::Ends {
            src: job.src,
            src_name: job.src_name,
            dst: job.dst,
            dst_name: job.dst_name,
        };
        let diag = &mut self.diag;
        let result = file_copy::conclude(
            &ends,
            copied,
            file_copy::Timing {
                secs: started.elapsed().as_secs_f64(),
                stages: &stages,
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
        self.copy_with(job, progress, (&cancel, bounce::OnStop::CutBack))
    }

    /// [`Engine::copy`] stopped by `cancel` instead of the run's flag (see
    /// [`Engine::submit_cancellable`]). Once `cancel` is set DST is not touched again, not
    /// even cut back: the copy ends as [`CopyError::Stopped`], saying how much of DST is
    /// good, for the file's owner to cut if it is still there.
    pub fn copy_cancellable(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        cancel: &AtomicBool,
    ) -> Result<Copied, CopyError> {
        self.copy_with(job, progress, (cancel, bounce::OnStop::Leave))
    }

    fn copy_with(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        stop: (&AtomicBool, bounce::OnStop),
    ) -> Result<Copied, CopyError> {
        self.land();
        let started = Instant::now();
        let diag = &mut |line: &str| self.diag.debug(line);
        let (end, stages) = match (&mut self.backend, &mut self.spread) {
            (Pipelines::Host(p), _) => (p.copy(job, progress, stop, diag), p.stages().0),
            (Pipelines::Gpu(p), None) => (p.copy(job, progress, stop, diag), p.stages().0),
            (Pipelines::Gpu(p), Some(spread)) => {
                let (set, why) = spread.place(job);
                p.choose(&set);
                let end = p.copy(job, progress, stop, diag);
                diag(&format!(
                    "{}: {} ({why})",
                    quote(job.src_name),
                    spread.describe(&p.devices_used())
                ));
                (end, p.stages().0)
            }
        };
        self.conclude(job, end?, started, stages)
    }
}
