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
use crate::bounce::{OnStop, Stop};
use crate::config::Verify;
use crate::digest::Algorithm;
use crate::error::CopyError;
use crate::file_copy::{conclude, read_back, AtEnd, FileCopy, Setup, Timing};
use crate::job::Copied;
use crate::job::DataJob;
use crate::job::ProgressSink;
use crate::job::SourceKind;
use crate::job::SparseMode;
use crate::one_slot::OneSlot;
use crate::read_back::{Checking, ReadBacks};
use crate::stages::StageTimes;
use crate::verify::Buffers;
use std::collections::VecDeque;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) mod jobs;

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
    /// Files smaller than `direct_from` handed to the workers together: up to this many are
    /// held and sent to one worker in one message, so that a tree of small files wakes a
    /// worker once a batch rather than once a file (1: each file at once). What is held is
    /// sent before the engine waits for a file ([`crate::Engine::next_finished`] with
    /// `block`) and when the flight lands; a caller that only ever polls without waiting
    /// must keep 1.
    pub batch: usize,
}

impl Default for QueueLimits {
    /// 64 files hold 128 descriptors, well inside the usual 1024. The O_DIRECT threshold was
    /// measured with files in flight on the dev VM (bench/results/HISTORY.md, "2026-12-01,
    /// dev VM: many files in flight"): the page cache wins below 32 KiB, ties there, and
    /// O_DIRECT wins from 64 KiB on, most at 32 MiB, where buffered writes of four files at
    /// once thrash the page cache.
    fn default() -> QueueLimits {
        QueueLimits {
            files: 64,
            bytes: 256 << 20,
            direct_from: 64 << 10,
            batch: 1,
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
    /// SOURCE may hold holes: its blocks cover less than its size (cp's test, `st_blocks *
    /// 512 < st_size`). Only then are its extents looked up (SEEK_DATA, SEEK_HOLE); a file
    /// whose blocks cover it is read as one run of data, two system calls fewer a file.
    /// True where the caller does not know.
    pub may_have_holes: bool,
    /// The digest to take of what DEST receives (--sums).
    pub digest: Option<Algorithm>,
    /// DST holds old bytes: cut it to 0 when its copy starts (a copy that never starts, as
    /// when the run is interrupted first, leaves DST as it was).
    pub truncate: bool,
    pub progress: Arc<dyn ProgressSink + Send + Sync>,
}

/// A queued file as the workers receive it: its ticket, the job, and the flag that stops it
/// when it is not the run's own ([`crate::Engine::submit_cancellable`]).
pub(crate) type Sent = (Ticket, QueuedJob, Option<Arc<AtomicBool>>);

/// What one message to the workers carries: files to copy, and jobs the caller is done
/// with ([`crate::Engine::retire`]), whose files the worker closes after copying.
pub(crate) struct Batch {
    pub(crate) files: Vec<Sent>,
    pub(crate) retired: Vec<QueuedJob>,
}

impl QueuedJob {
    /// The job as one copied in turn ([`crate::Engine::copy`], which cuts DEST once the
    /// staging exists): a regular SOURCE of `len` bytes, or read to EOF where it claimed 0
    /// (/proc files).
    pub fn data_job(&self) -> DataJob<'_> {
        DataJob {
            src: &self.src,
            src_name: &self.src_name,
            src_kind: match self.len {
                0 => SourceKind::Sequential,
                len => SourceKind::Regular { len },
            },
            dst: &self.dst,
            dst_name: &self.dst_name,
            sparse: self.sparse,
            digest: self.digest,
        }
    }
}

/// Names a queued file among those in flight, in the order they were queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ticket(pub u64);

/// A queued file whose copy ended: DST holds its final size (on error, the bytes known to be
/// copied), the files come back to the caller.
pub struct Finished {
    pub ticket: Ticket,
    pub job: QueuedJob,
    pub result: Result<Copied, CopyError>,
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
        result: Result<Copied, CopyError>,
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

    /// Its --debug lines (a read-back's, for a file copied elsewhere).
    pub fn debug_lines(&self) -> impl Iterator<Item = &str> {
        self.debug.iter().map(|(_, line)| line.as_str())
    }
}

/// What the workers need besides their slot.
pub(crate) struct Shared<S> {
    pub(crate) staging: Arc<S>,
    pub(crate) cancel: Arc<AtomicBool>,
    pub(crate) chunk: usize,
    pub(crate) direct_from: u64,
    pub(crate) verify: Option<Verify>,
    /// With --verify, where a file whose data is written goes to be read back (None: the
    /// worker reads it back itself).
    pub(crate) read_backs: Option<mpsc::Sender<Finished>>,
    pub(crate) pause: fn(&'static str),
    /// The engine's start, for --debug stamps; None without --debug.
    pub(crate) debug: Option<Instant>,
}

impl<S> Shared<S> {
    /// What a read-back of one of these workers' files needs.
    pub(crate) fn checking(&self) -> Checking {
        Checking {
            verify: self.verify.unwrap_or(Verify::Bytes),
            pause: self.pause,
            debug: self.debug,
            stop: Arc::clone(&self.cancel),
        }
    }
}

/// The workers and what is in flight.
pub(crate) struct Flight<S: Staging> {
    pub(crate) jobs: Option<jobs::Sender<Batch>>,
    /// Small files submitted and not yet sent ([`QueueLimits::batch`]).
    pub(crate) held: Vec<Sent>,
    /// Jobs the caller is done with, closed by the worker that takes the next files sent.
    pub(crate) retired: Vec<QueuedJob>,
    /// Files of a batch that could not be sent (every worker gone), handed back as not
    /// copied ([`CopyError::NotMoved`]).
    pub(crate) unsent: VecDeque<Finished>,
    pub(crate) done: mpsc::Receiver<Finished>,
    pub(crate) workers: Vec<JoinHandle<(usize, S::Slot)>>,
    /// With --verify, the threads that read the workers' files back (stopped after them).
    pub(crate) read_backs: Option<ReadBacks<Finished>>,
    /// Files and bytes sent and not yet handed back.
    pub(crate) files: usize,
    pub(crate) bytes: u64,
    /// Sizes of the files in flight, to take off `bytes` when they come back.
    pub(crate) sizes: std::collections::HashMap<Ticket, u64>,
}

impl<S: Staging> Flight<S> {
    /// Sends the files held to one worker, with the jobs retired so far; where every worker
    /// is gone they come back as not copied (and the retired are closed here).
    pub(crate) fn send_held(&mut self) {
        if !self.held.is_empty() {
            self.send_all();
        }
    }

    /// [`Flight::send_held`], also when only retired jobs are held.
    pub(crate) fn send_all(&mut self) {
        if self.held.is_empty() && self.retired.is_empty() {
            return;
        }
        let batch = Batch {
            files: std::mem::take(&mut self.held),
            retired: std::mem::take(&mut self.retired),
        };
        let unsent = match &self.jobs {
            Some(tx) => tx.send(batch).err().map(|b| b.files),
            None => Some(batch.files),
        };
        for (ticket, job, _) in unsent.into_iter().flatten() {
            self.unsent.push_back(Finished {
                ticket,
                job,
                result: Err(CopyError::NotMoved),
                started: false,
                stages: StageTimes::default(),
                debug: Vec::new(),
            });
        }
    }

    /// Stops the workers once the queue is empty; returns their slots by index.
    pub(crate) fn land(mut self) -> Vec<(usize, S::Slot)> {
        self.send_all();
        self.jobs = None;
        let slots = std::mem::take(&mut self.workers)
            .into_iter()
            .filter_map(|w| w.join().ok())
            .collect();
        self.read_backs = None;
        slots
    }
}

impl<S: Staging> Drop for Flight<S> {
    fn drop(&mut self) {
        // Workers see the queue closed once it is empty; their slots go back before the
        // staging (held by the pipeline) is dropped. Files held go first, so each ends as
        // a sent one does (not begun, when the run was stopped).
        self.send_all();
        self.jobs = None;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        self.read_backs = None;
    }
}

/// Queue state kept by the engine across flights: results already received, and the count.
#[derive(Default)]
pub(crate) struct Landed {
    pub(crate) finished: VecDeque<Finished>,
    pub(crate) next_ticket: u64,
}

/// Where a file in flight was copied, for its --debug line: "slot 2 on GPU 0, in flight".
fn where_in_flight<S: Staging>(staging: &S, slot: &S::Slot, index: usize) -> String {
    let gpu = match staging.gpu_of(slot) {
        Some(g) => format!(" on GPU {g}"),
        None => String::new(),
    };
    format!("slot {index}{gpu}, in flight")
}

/// A worker: copies queued files through its slot until the queue closes; gives the slot back.
pub(crate) fn worker<S: Staging>(
    shared: Shared<S>,
    index: usize,
    mut slot: S::Slot,
    jobs: &jobs::Receiver<Batch>,
    done: &mpsc::Sender<Finished>,
) -> (usize, S::Slot) {
    loop {
        let Some(batch) = jobs.recv() else {
            return (index, slot);
        };
        for sent in batch.files {
            if !copy_queued(&shared, index, &mut slot, sent, done) {
                return (index, slot);
            }
        }
        // The caller's thread bounds a tree of small files: their closes are made here.
        drop(batch.retired);
    }
}

/// Copies one queued file through `slot` (worker `index`'s) and hands it on; false when the
/// caller is gone.
fn copy_queued<S: Staging>(
    shared: &Shared<S>,
    index: usize,
    slot: &mut S::Slot,
    (ticket, job, own_cancel): Sent,
    done: &mpsc::Sender<Finished>,
) -> bool {
    // A file with a stop of its own belongs to an owner who may be writing DEST again
    // by the time it stops: it is left as it is.
    let on_stop = match own_cancel {
        Some(_) => OnStop::Leave,
        None => OnStop::CutBack,
    };
    let cancel = own_cancel.unwrap_or_else(|| Arc::clone(&shared.cancel));
    let setup = Setup::new(&job.src_name, &job.dst_name, job.digest);
    let began_at = Instant::now();
    let mut debug = Vec::new();
    // Not started: DST untouched. Once started, nothing looks at the flag again before DST
    // is cut (OneSlot::ready): the file counts as begun, and its -v line goes out.
    let started = !cancel.load(Ordering::SeqCst);
    let mut result = match started {
        true => {
            (shared.pause)("file-started");
            let stop = Stop {
                cancel: &cancel,
                on_stop,
                give_way: None,
            };
            copy_whole(shared, stop, slot, &job, &setup, &mut debug)
        }
        false => Err(CopyError::Interrupted),
    };
    let stages = setup.stages();
    // With read-back threads, --verify is theirs: the worker goes on to the next file.
    let reads_back = shared.verify.filter(|_| shared.read_backs.is_none());
    if let Ok(copied) = result {
        result = conclude(
            &job.data_job(),
            copied,
            Timing {
                secs: began_at.elapsed().as_secs_f64(),
                stages: &stages,
                // Named only for the --debug line that shows it.
                where_: shared
                    .debug
                    .map(|_| where_in_flight(&*shared.staging, slot, index)),
            },
            AtEnd {
                verify: reads_back,
                stop: &cancel,
                debug: shared.debug.is_some(),
                pause: shared.pause,
            },
            &mut |line| debug.push((shared.debug.map(|t| t.elapsed()).unwrap_or_default(), line)),
        );
    }
    let finished = Finished {
        ticket,
        job,
        result,
        started,
        stages,
        debug,
    };
    hand_on(shared, finished, done)
}

/// Hands a file whose copy ended on: to the read-back threads when it is to be read back
/// there (its writeback started first), else to the caller. False when the caller is gone.
fn hand_on<S>(shared: &Shared<S>, finished: Finished, done: &mpsc::Sender<Finished>) -> bool {
    let finished = match (&shared.read_backs, &finished.result) {
        (Some(read_backs), Ok(_)) => {
            crate::verify::start_writeback(&finished.job.dst);
            match read_backs.send(finished) {
                Ok(()) => return true,
                // The read-back threads are gone: read it back here.
                Err(mpsc::SendError(mut f)) => {
                    read_back_one(&mut f, &shared.checking(), &mut Buffers::default());
                    f
                }
            }
        }
        _ => finished,
    };
    done.send(finished).is_ok()
}

/// Reads back a queued file whose copy succeeded; a failure replaces its result.
pub(crate) fn read_back_one(f: &mut Finished, c: &Checking, buffers: &mut Buffers) {
    let Ok(copied) = &f.result else {
        return;
    };
    let copied = copied.clone();
    let job = f.job.data_job();
    let debug = &mut f.debug;
    let line = &mut |line| debug.push((c.debug.map(|t| t.elapsed()).unwrap_or_default(), line));
    let debug = c.debug.is_some();
    let how = (c.verify, &copied);
    f.result = read_back(&job, how, (debug, c.pause), (buffers, &c.stop), line).map(|()| copied);
}

/// Copies one queued file through `slot` and sets DST's size, in [`FileCopy::run`]'s order
/// with the slot as its scheduler ([`OneSlot`]); O_DIRECT for a file of at least
/// `direct_from` bytes. DST is cut (when it held old bytes) only once the slot's windows
/// exist.
fn copy_whole<S: Staging>(
    shared: &Shared<S>,
    stop: Stop<'_>,
    slot: &mut S::Slot,
    job: &QueuedJob,
    setup: &Setup<'_>,
    debug: &mut Vec<(Duration, String)>,
) -> Result<Copied, CopyError> {
    let cx = setup.cx(stop, shared.pause);
    let staging = &*shared.staging;
    let file = FileCopy {
        src: &job.src,
        dst: &job.dst,
        names: &setup.names,
        sparse: job.sparse,
        may_have_holes: job.may_have_holes,
    };
    let mut one = OneSlot {
        staging,
        slot,
        chunk: shared.chunk,
        direct_from: shared.direct_from,
        rereads: shared.verify == Some(Verify::Bytes),
        shown_as: (&job.src_name, job.len),
        shown: false,
    };
    let progress = &*job.progress;
    let line = &mut |line: &str| {
        if let Some(t0) = shared.debug {
            debug.push((t0.elapsed(), line.to_owned()));
        }
    };
    let diag = shared
        .debug
        .is_some()
        .then_some(line as &mut dyn FnMut(&str));
    let ended = file.run(
        staging,
        &mut one,
        (job.len, job.truncate),
        &cx,
        progress,
        diag,
    );
    one.finished(progress);
    file.copied(ended?, &cx)
}

/// The workers could not be started or have gone: the file is copied in turn instead.
pub(crate) fn no_workers() -> CopyError {
    CopyError::Read {
        path: PathBuf::new(),
        source: std::io::Error::other("no file worker thread"),
    }
}
