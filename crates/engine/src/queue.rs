//! Many files in flight: whole files handed to workers that each own one staging slot (lent
//! from the pipeline's), so the caller goes on (opens and creates the next files) while bytes
//! move, and several files move at once. A queued file takes the bounce route on one thread:
//! one read into the slot, one trip through GPU memory, one write per slot's worth, with
//! buffered I/O below [`QueueLimits::direct_from`] (the page cache takes a small write at
//! once where an O_DIRECT one waits for the disk) and O_DIRECT for the aligned part from it.
//!
//! The engine knows nothing of the order the caller must report in: results come back as
//! they finish ([`crate::Engine::next_finished`]), each with its [`Ticket`], and the caller
//! orders them. A synchronous [`crate::Engine::copy`] first waits for every queued file
//! (their results are kept for `next_finished`) and takes the slots back.

use crate::backend::Staging;
use crate::bounce::{self, Ctx, Names, Reader, Writer};
use crate::fileio::{self, MIN_ALIGN};
use crate::quote::quote;
use crate::stages::{Stage, StageClock, StageTimes};
use crate::{CopyError, ProgressSink, SparseMode};
use std::collections::VecDeque;
use std::fs::File;
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How much may be queued at once, and how queued files are read and written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Files queued or being copied; 0 turns queueing off (every file is copied in turn).
    pub files: usize,
    /// Bytes of the files queued or being copied (one file is always let in).
    pub bytes: u64,
    /// Files of at least this size read and write their aligned part with O_DIRECT; smaller
    /// ones go through the page cache.
    pub direct_from: u64,
}

impl Default for QueueLimits {
    /// 64 files hold 128 descriptors, well inside the usual 1024. The threshold was measured
    /// with files in flight on the 2-core dev VM's virtio ext4 (BENCHMARKS.md, "Many files in
    /// flight"): buffered I/O won on 8 KiB files (0.129 vs 0.121 GB/s) and on a tree of 1-64
    /// KiB files (0.242 vs 0.201), tied at 32 KiB (0.367 vs 0.383), and O_DIRECT won from 64
    /// KiB (0.379 vs 0.331) on, clearly from 128 KiB (0.659 vs 0.429) and at 32 MiB (0.696 vs
    /// 0.249, where buffered writes of four files at once thrash the page cache).
    fn default() -> QueueLimits {
        QueueLimits {
            files: 64,
            bytes: 256 << 20,
            direct_from: 64 << 10,
        }
    }
}

/// One whole regular file to copy into a regular DST, owned while it is in flight.
pub struct QueuedJob {
    pub src: File,
    pub src_name: PathBuf,
    /// SRC's size when it was opened; the copy goes on to EOF if it grew.
    pub len: u64,
    pub dst: File,
    pub dst_name: PathBuf,
    pub sparse: SparseMode,
    /// DST holds old bytes: cut it to 0 when its copy starts (a copy that never starts, as
    /// when the run is interrupted first, leaves DST as it was).
    pub truncate: bool,
    pub progress: Arc<dyn ProgressSink + Send + Sync>,
}

/// Names a queued file among those in flight, in the order they were queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// A queued file whose copy ended: DST holds its final size (on error, the bytes known to be
/// copied), the files come back to the caller.
pub struct Finished {
    pub ticket: Ticket,
    pub job: QueuedJob,
    pub result: Result<u64, CopyError>,
    /// Whether its copy began (DST cut, data moving): false when the run was cancelled
    /// before the file's turn came, so DST was never touched.
    pub started: bool,
    pub stages: StageTimes,
    /// --debug lines, with the time since the engine started.
    pub(crate) debug: Vec<(Duration, String)>,
}

impl Finished {
    /// A queued file that another process copied (an MPI rank), for a caller that hands
    /// files out itself and reports them as it reports this engine's.
    pub fn elsewhere(
        ticket: Ticket,
        job: QueuedJob,
        result: Result<u64, CopyError>,
        started: bool,
    ) -> Finished {
        Finished {
            ticket,
            job,
            result,
            started,
            stages: StageTimes::default(),
            debug: Vec::new(),
        }
    }
}

/// What the workers need besides their slot.
pub(crate) struct Shared<S> {
    pub(crate) staging: Arc<S>,
    pub(crate) cancel: Arc<AtomicBool>,
    pub(crate) chunk: usize,
    pub(crate) direct_from: u64,
    pub(crate) verify: bool,
    /// The engine's start, for --debug stamps; None without --debug.
    pub(crate) debug: Option<Instant>,
}

/// The workers and what is in flight.
pub(crate) struct Flight<S: Staging> {
    pub(crate) jobs: Option<mpsc::Sender<(Ticket, QueuedJob)>>,
    pub(crate) done: mpsc::Receiver<Finished>,
    pub(crate) workers: Vec<JoinHandle<(usize, S::Slot)>>,
    /// Files and bytes sent and not yet handed back.
    pub(crate) files: usize,
    pub(crate) bytes: u64,
    /// Sizes of the files in flight, to take off `bytes` when they come back.
    pub(crate) sizes: std::collections::HashMap<Ticket, u64>,
}

impl<S: Staging> Flight<S> {
    /// Stops the workers once the queue is empty; returns their slots by index.
    pub(crate) fn land(mut self) -> Vec<(usize, S::Slot)> {
        self.jobs = None;
        std::mem::take(&mut self.workers)
            .into_iter()
            .filter_map(|w| w.join().ok())
            .collect()
    }
}

impl<S: Staging> Drop for Flight<S> {
    fn drop(&mut self) {
        // Workers see the queue closed once it is empty; their slots go back before the
        // staging (held by the pipeline) is dropped.
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Queue state kept by the engine across flights: results already received, and the count.
#[derive(Default)]
pub(crate) struct Landed {
    pub(crate) finished: VecDeque<Finished>,
    pub(crate) next_ticket: u64,
}

/// A worker: copies queued files through its slot until the queue closes; gives the slot back.
pub(crate) fn worker<S: Staging>(
    shared: Shared<S>,
    index: usize,
    mut slot: S::Slot,
    jobs: &Mutex<mpsc::Receiver<(Ticket, QueuedJob)>>,
    done: &mpsc::Sender<Finished>,
) -> (usize, S::Slot) {
    loop {
        let next = jobs.lock().unwrap_or_else(|p| p.into_inner()).recv();
        let Ok((ticket, job)) = next else {
            return (index, slot);
        };
        let clock = StageClock::default();
        let began_at = Instant::now();
        let mut debug = Vec::new();
        // Not started: DST untouched.
        let started = !shared.cancel.load(Ordering::SeqCst);
        let mut result = match started {
            true => copy_whole(&shared, &mut slot, &job, &clock, &mut debug),
            false => Err(CopyError::Interrupted),
        };
        let stages = clock.times();
        if let (Some(engine_start), Ok(end)) = (shared.debug, &result) {
            let secs = began_at.elapsed().as_secs_f64();
            let gpu = match shared.staging.gpu_of(&slot) {
                Some(g) => format!(" on GPU {g}"),
                None => String::new(),
            };
            debug.push((
                engine_start.elapsed(),
                format!(
                    "{}: {end} bytes in {secs:.3} s (slot {index}{gpu}, in flight); thread \
                     time: {}",
                    quote(&job.dst_name),
                    stages.describe()
                ),
            ));
        }
        if shared.verify && result.is_ok() {
            result = crate::verify::verify(&job.src, &job.src_name, &job.dst, &job.dst_name)
                .map(|checked| {
                    if let Some(t0) = shared.debug {
                        debug.push((t0.elapsed(), checked.describe(&job.dst_name)));
                    }
                    result.unwrap_or(0)
                })
                .map_err(CopyError::from);
        }
        let finished = Finished {
            ticket,
            job,
            result,
            started,
            stages,
            debug,
        };
        if done.send(finished).is_err() {
            return (index, slot);
        }
    }
}

/// Copies one queued file through `slot` and sets DST's size: the data extents in turn (the
/// last one on to EOF, should SRC have grown), O_DIRECT for the aligned part of a file of at
/// least `direct_from` bytes. On error DST is cut back to the bytes known to be copied.
fn copy_whole<S: Staging>(
    shared: &Shared<S>,
    slot: &mut S::Slot,
    job: &QueuedJob,
    clock: &StageClock,
    debug: &mut Vec<(Duration, String)>,
) -> Result<u64, CopyError> {
    let names = Names {
        src: quote(&job.src_name),
        dst: quote(&job.dst_name),
    };
    let cx = Ctx {
        names: &names,
        cancel: &shared.cancel,
        clock,
    };
    if job.truncate {
        job.dst.set_len(0).map_err(|e| names.write(e))?;
    }
    let progress = &*job.progress;
    progress.file_started(&job.src_name, Some(job.len));
    let result = copy_extents(shared, slot, job, &cx, debug);
    progress.file_finished();
    match result {
        Ok(end) => {
            job.dst.set_len(end).map_err(|e| CopyError::Extend {
                name: names.dst.clone(),
                source: e,
            })?;
            Ok(end)
        }
        Err((copied, e)) => {
            // Never leave DST padded past what was copied; the copy error wins.
            let _ = job.dst.set_len(copied);
            Err(e)
        }
    }
}

fn copy_extents<S: Staging>(
    shared: &Shared<S>,
    slot: &mut S::Slot,
    job: &QueuedJob,
    cx: &Ctx<'_>,
    debug: &mut Vec<(Duration, String)>,
) -> Result<u64, (u64, CopyError)> {
    let staging = &*shared.staging;
    let names = cx.names;
    cx.check_cancel().map_err(|e| (0, e))?;
    cx.clock
        .time(Stage::Open, || staging.enter_worker(slot))
        .map_err(|e| (0, names.read(e)))?;
    let len = job.len;
    let extents = match job.sparse {
        SparseMode::Never => std::iter::once(0..len).collect(),
        _ => fileio::data_extents(&job.src, len).map_err(|e| (0, names.read(e)))?,
    };
    // O_DIRECT for the aligned part of a large file, where both files take it.
    let (mut split, mut align_used) = (0, 0);
    if len >= shared.direct_from && job.sparse != SparseMode::Always {
        let align =
            fileio::dio_alignment(job.src.as_fd()).max(fileio::dio_alignment(job.dst.as_fd()));
        let aligned = len & !(align - 1);
        if aligned > 0 && align <= staging.slot_alignment() && (shared.chunk as u64) >= align {
            let on = cx.clock.time(Stage::Open, || -> std::io::Result<bool> {
                if !fileio::set_direct(job.src.as_fd())? {
                    return Ok(false);
                }
                if !fileio::set_direct(job.dst.as_fd())? {
                    fileio::clear_direct(job.src.as_fd())?;
                    return Ok(false);
                }
                Ok(true)
            });
            match on {
                Ok(true) => (split, align_used) = (aligned, align),
                Ok(false) => {}
                Err(e) => return Err((0, names.read(e))),
            }
        }
    }
    let route = if split > 0 { "O_DIRECT" } else { "bounce" };
    job.progress.route(route, route);
    if let Some(t0) = shared.debug {
        debug.push((
            t0.elapsed(),
            format!(
                "{} -> {}: {len} bytes, {} extent(s), in flight, read and write {route}{}",
                names.src,
                names.dst,
                extents.len(),
                match split {
                    0 => String::new(),
                    s => format!(" to {s}, then bounce"),
                }
            ),
        ));
    }
    let mut span = Span {
        staging,
        slot,
        job,
        cx,
        chunk: shared.chunk,
    };
    if split > 0 {
        let direct = span.copy(&clip(&extents, 0..split), align_used, None);
        // Buffered again for the tail, and the files go back as they came.
        let cleared = fileio::clear_direct(job.src.as_fd())
            .map_err(|e| names.read(e))
            .and_then(|()| fileio::clear_direct(job.dst.as_fd()).map_err(|e| names.write(e)));
        let stopped = direct?;
        cleared.map_err(|e| (stopped.unwrap_or(split), e))?;
        if let Some(stop) = stopped {
            // SRC shrank: the rest of what it has, buffered.
            return span.copy(&[], 0, Some(stop)).map(|end| end.unwrap_or(stop));
        }
    }
    // On past the last extent to EOF when it reaches SRC's end (SRC may have grown).
    let tail = extents.last().is_none_or(|e| e.end >= len).then_some(len);
    let end = span.copy(&clip(&extents, split..len), 0, tail)?;
    Ok(end.unwrap_or(len))
}

/// `extents` cut to `within`.
fn clip(extents: &[Range<u64>], within: Range<u64>) -> Vec<Range<u64>> {
    extents
        .iter()
        .map(|e| e.start.max(within.start)..e.end.min(within.end))
        .filter(|e| e.start < e.end)
        .collect()
}

/// The slot and files one queued copy moves bytes between.
struct Span<'a, S: Staging> {
    staging: &'a S,
    slot: &'a mut S::Slot,
    job: &'a QueuedJob,
    cx: &'a Ctx<'a>,
    chunk: usize,
}

impl<S: Staging> Span<'_, S> {
    /// Copies `ranges` a slot at a time, then with `tail_from` everything from there to EOF.
    /// `direct`: the alignment of O_DIRECT fds (0: buffered), where a short read writes only
    /// its aligned part. Returns where SRC ended (None when every range was whole and there
    /// was no tail); errors come with the offset DST is good up to.
    fn copy(
        &mut self,
        ranges: &[Range<u64>],
        direct: u64,
        tail_from: Option<u64>,
    ) -> Result<Option<u64>, (u64, CopyError)> {
        let reader = Reader::At {
            file: &self.job.src,
            direct: direct > 0,
        };
        let writer = Writer::At {
            file: &self.job.dst,
            skip_zeros: (self.job.sparse == SparseMode::Always).then_some(MIN_ALIGN as usize),
        };
        let tail = tail_from.map(|from| from..u64::MAX);
        for range in ranges.iter().cloned().chain(tail) {
            let mut pos = range.start;
            while pos < range.end {
                let want = (range.end - pos).min(self.chunk as u64) as usize;
                let got = bounce::read_in(self.staging, self.slot, &reader, pos, want, self.cx)
                    .map_err(|e| (pos, e))?;
                let put = match direct {
                    0 => got,
                    align if got < want => got & !(align as usize - 1),
                    _ => got,
                };
                bounce::write_out(self.staging, self.slot, &writer, pos, put, self.cx)
                    .map_err(|e| (pos, e))?;
                self.job.progress.advanced(put as u64);
                pos += put as u64;
                if got < want {
                    return Ok(Some(pos));
                }
            }
        }
        Ok(None)
    }
}

/// The workers could not be started or have gone: the file is copied in turn instead.
pub(crate) fn no_workers() -> CopyError {
    CopyError::Read {
        name: String::new(),
        source: std::io::Error::other("no file worker thread"),
    }
}
