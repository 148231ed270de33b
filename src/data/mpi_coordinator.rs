//! Rank 0's side: whole files handed to the other ranks as files in flight, and large files
//! cut into parts that every rank, rank 0 included, copies in turn.
//!
//! Whole files go through the copier's files-in-flight machinery (`copy::inflight`), which
//! already puts their endings, messages and exit status in cp's order: rank 0 opens and
//! creates both files, this queue sends their paths to the least loaded rank and keeps the
//! descriptors, and when the rank answers, the copier applies the attributes on rank 0 as
//! for a file its own engine copied. So every cp decision that follows the data (-p,
//! --preserve=links, backups, --atomic, --fsync) stays where it is made in one process;
//! files that need one before the next file starts are not queued, and are copied in turn.

mod handout;

use super::local_engine::LocalEngine;
use super::mover::{DataMover, FileQueue};
use crate::ranks::wire::{Files, Outcome, Reply, Task, DONE, TASK};
use crate::ranks::Nap;
use crate::sys::messages;
use aiscp_engine::{
    digest, quote::quote, Copied, CopyError, DataJob, Engine, Finished, ProgressSink, QueueLimits,
    QueuedJob, SourceKind, Ticket,
};
use handout::{Handout, PartResult};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct Coordinator {
    world: SimpleCommunicator,
    size: i32,
    /// Bytes per part; larger files are cut into parts.
    piece: u64,
    debug: bool,
    cancel: Arc<AtomicBool>,
    /// Files and bytes in flight on each rank at once (each rank's own engine limits).
    limits: QueueLimits,
    /// Whole files in flight on each rank (by rank; rank 0 keeps none): files and bytes.
    load: Vec<(usize, u64)>,
    /// Whole files in flight, by task id.
    out: HashMap<u64, Away>,
    /// Whole files whose answers came in while waiting for something else.
    landed: VecDeque<Finished>,
    next_id: u64,
    /// The rank last given a whole file.
    last: i32,
}

/// A whole file on another rank: rank 0 keeps its descriptors for what follows the data.
struct Away {
    rank: i32,
    job: QueuedJob,
    /// Where the rank was told to find them.
    files: Files,
}

impl Coordinator {
    pub fn new(world: SimpleCommunicator, piece: u64, config: &aiscp_engine::Config) -> Self {
        let size = world.size();
        Coordinator {
            world,
            size,
            piece,
            debug: config.debug,
            cancel: config.cancel.clone(),
            limits: QueueLimits::default(),
            load: vec![(0, 0); size as usize],
            out: HashMap::new(),
            landed: VecDeque::new(),
            next_id: 0,
            last: 0,
        }
    }

    /// The rank with the fewest whole files in flight that has room for `len` more bytes;
    /// among equals, the next after the one last given a file, so that every rank gets
    /// work even when each is done before the walk has the next file.
    fn least_loaded(&self, len: u64) -> Option<i32> {
        let others = self.size - 1;
        (0..others)
            .map(|k| 1 + (self.last + k) % others)
            .filter(|&r| {
                let (files, bytes) = self.load[r as usize];
                files == 0 || (files < self.limits.files && bytes + len <= self.limits.bytes)
            })
            .min_by_key(|&r| self.load[r as usize])
    }

    /// Waits for one answer from any rank.
    fn receive(&self) -> (i32, Reply) {
        let mut nap = Nap::default();
        while self
            .world
            .any_process()
            .immediate_probe_with_tag(DONE)
            .is_none()
        {
            nap.take();
        }
        let (bytes, status) = self.world.any_process().receive_vec_with_tag::<u8>(DONE);
        (status.source_rank(), Reply::decode(&bytes))
    }

    /// An answer to a whole file, as the copier takes it from a queue.
    fn whole_ended(&mut self, rank: i32, reply: Reply) -> Finished {
        let away = self
            .out
            .remove(&reply.id)
            .expect("a rank answers a whole file it was given");
        debug_assert_eq!(away.rank, rank);
        let load = &mut self.load[rank as usize];
        load.0 -= 1;
        load.1 = load.1.saturating_sub(away.job.len);
        let (result, started) = match reply.outcome {
            Outcome::Copied(end) => {
                away.job.progress.advanced(end);
                (copied(&away.job, end), true)
            }
            Outcome::Failed(why) => (Err(CopyError::Elsewhere(why)), true),
            Outcome::Part(_) => (
                Err(CopyError::Elsewhere(format!(
                    "rank {rank}: a part's answer to a whole file"
                ))),
                true,
            ),
            Outcome::Interrupted { started } => (Err(CopyError::Interrupted), started),
            Outcome::NoEngine(why) => no_engine(rank, &why),
            // Copied here in turn (see `copy::inflight`): nothing was written to DST.
            Outcome::Moved(_) if !in_place(&away.files) => (Err(CopyError::NotMoved), false),
            Outcome::Moved(why) => (Err(CopyError::Elsewhere(why)), true),
        };
        away.job.progress.file_finished();
        Finished::elsewhere(Ticket(reply.id), away.job, result, started)
    }

    /// Sends a whole file's task to `rank`, taking in answers meanwhile. A message above
    /// MPI's eager limit (4 KiB between processes of one node with Open MPI: a task whose
    /// paths are long) is delivered only once its receiver takes it, and that rank may be
    /// blocked sending rank 0 a long answer (a failure naming long paths) at that moment.
    fn send_task(&mut self, rank: i32, bytes: &[u8]) {
        mpi::request::scope(|scope| {
            let to = self.world.process_at_rank(rank);
            let mut sending = to.immediate_send_with_tag(scope, bytes, TASK);
            let mut nap = Nap::default();
            loop {
                match sending.test() {
                    Ok(_) => return,
                    Err(still) => sending = still,
                }
                let any = self.world.any_process();
                if any.immediate_probe_with_tag(DONE).is_some() {
                    let (r, reply) = self.receive();
                    let finished = self.whole_ended(r, reply);
                    self.landed.push_back(finished);
                } else {
                    nap.take();
                }
            }
        });
    }

    /// Waits for every whole file in flight (their endings kept for `next_finished`), as
    /// the engine does before it copies a file in turn: what is copied next may read or
    /// write what they write.
    fn land(&mut self) {
        while !self.out.is_empty() {
            let (rank, reply) = self.receive();
            let finished = self.whole_ended(rank, reply);
            self.landed.push_back(finished);
        }
    }
}

impl FileQueue for Coordinator {
    fn set_limits(&mut self, limits: QueueLimits) {
        self.limits = limits;
    }

    /// Files of at most one part go whole; a larger one is cut into parts, in turn.
    fn queue_max(&self) -> Option<u64> {
        (self.limits.files > 0).then_some(self.piece)
    }

    fn has_room(&self, len: u64) -> bool {
        self.least_loaded(len).is_some()
    }

    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        let files = match shared_files(&job.src, &job.src_name, &job.dst, &job.dst_name) {
            Some(mut files) => {
                files.sparse = job.sparse;
                files
            }
            // Not to be opened elsewhere: copied here, in turn.
            None => return Err(Box::new((job, CopyError::NotMoved))),
        };
        let Some(rank) = self.least_loaded(job.len) else {
            return Err(Box::new((job, CopyError::NotMoved)));
        };
        let id = self.next_id;
        self.next_id += 1;
        let task = Task::Whole {
            id,
            files: files.clone(),
            len: job.len,
            truncate: job.truncate,
        };
        self.send_task(rank, &task.encode());
        if self.debug {
            messages::debug(&format!(
                "{}: {} bytes, whole, to rank {rank}",
                quote(&job.src_name),
                job.len
            ));
        }
        job.progress.file_started(&job.src_name, Some(job.len));
        self.last = rank;
        let load = &mut self.load[rank as usize];
        load.0 += 1;
        load.1 += job.len;
        self.out.insert(id, Away { rank, job, files });
        Ok(Ticket(id))
    }

    fn next_finished(&mut self, block: bool) -> Option<Finished> {
        if let Some(f) = self.landed.pop_front() {
            return Some(f);
        }
        if self.out.is_empty() {
            return None;
        }
        let any = self.world.any_process();
        if !block && any.immediate_probe_with_tag(DONE).is_none() {
            return None;
        }
        let (rank, reply) = self.receive();
        Some(self.whole_ended(rank, reply))
    }
}

/// What a rank's copy of `job` gave DEST, `size` bytes: its digest, where the job takes
/// one, read back here (the rank's pieces stay with it).
fn copied(job: &QueuedJob, size: u64) -> Result<Copied, CopyError> {
    let digest = job.digest.map(|a| digest::of_dest(a, &job.dst, size));
    let digest = digest.transpose().map_err(|e| CopyError::Digest {
        name: quote(&job.dst_name),
        source: e,
    })?;
    Ok(Copied { size, digest })
}

impl DataMover for Coordinator {
    fn queue(&mut self) -> Option<&mut dyn FileQueue> {
        Some(self)
    }

    fn copy(
        &mut self,
        engine: &mut LocalEngine<'_>,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<Copied, CopyError> {
        let engine = engine.get();
        self.land();
        let (SourceKind::Regular { len }, Ok(dst_meta)) = (job.src_kind, job.dst.metadata()) else {
            return engine.copy(job, progress);
        };
        if len <= self.piece || !dst_meta.is_file() {
            return engine.copy(job, progress);
        }
        let Some(mut files) = shared_files(job.src, job.src_name, job.dst, job.dst_name) else {
            return engine.copy(job, progress);
        };
        files.sparse = job.sparse;
        // DST is cut, once the staging its end needs exists; the parts copy their slices,
        // and the engine ends the file as one process does.
        engine.begin_parts(job)?;
        let parts: Vec<Range<u64>> = (0..len)
            .step_by(self.piece as usize)
            .map(|start| start..(start + self.piece).min(len))
            .collect();
        progress.file_started(job.src_name, Some(len));
        let results = self.copy_parts(engine, job, &files, &parts, progress);
        progress.file_finished();
        let ends = results
            .into_iter()
            .map(|r| r.unwrap_or(Err(CopyError::Interrupted)))
            .collect();
        engine.finish_parts(job, ends)
    }
}

impl Coordinator {
    /// Hands `parts` to whichever rank is free, rank 0 copying one whenever none is, until
    /// all are copied or one fails. No whole file is in flight meanwhile.
    fn copy_parts(
        &mut self,
        engine: &mut Engine,
        job: &DataJob<'_>,
        files: &Files,
        parts: &[Range<u64>],
        progress: &dyn ProgressSink,
    ) -> Vec<PartResult> {
        let mut handout = Handout::new(parts, self.size);
        loop {
            handout.stop |= self.cancel.load(Ordering::SeqCst);
            self.send_parts(&mut handout, files);
            if handout.more() {
                let i = handout.take(0);
                let r = engine.copy_part(job, parts[i].clone());
                handout.record(i, r, progress);
            } else if handout.busy == 0 {
                break;
            }
            self.take_answers(&mut handout, (engine, job), files, progress);
        }
        if self.debug {
            self.debug_shares(job, parts.len(), &handout.by_rank);
        }
        handout.results
    }

    /// Sends the next parts to the idle ranks.
    fn send_parts(&self, handout: &mut Handout<'_>, files: &Files) {
        while handout.more() {
            let Some(r) = handout.idle.pop() else { break };
            let next = handout.take(r);
            // A plain send: the rank is idle, so it is not sending rank 0 anything.
            let task = Task::Part {
                id: next as u64,
                files: files.clone(),
                part: handout.parts[next].clone(),
            };
            self.world
                .process_at_rank(r)
                .send_with_tag(&task.encode()[..], TASK);
            handout.busy += 1;
        }
    }

    /// Records the ranks' answers that have come back; when rank 0 has no part left to
    /// copy, waits for one. A part a rank could not reach (`Moved`) is copied here.
    fn take_answers(
        &mut self,
        handout: &mut Handout<'_>,
        (engine, job): (&mut Engine, &DataJob<'_>),
        files: &Files,
        progress: &dyn ProgressSink,
    ) {
        while handout.busy > 0
            && (!handout.more()
                || self
                    .world
                    .any_process()
                    .immediate_probe_with_tag(DONE)
                    .is_some())
        {
            let (rank, reply) = self.receive();
            handout.idle.push(rank);
            handout.busy -= 1;
            let i = reply.id as usize;
            let r = match reply.outcome {
                Outcome::Part(end) => Ok(end),
                // A part's answer is a part's end; anything else is a rank's bug.
                Outcome::Copied(_) => Err(CopyError::Elsewhere(format!(
                    "rank {rank}: a whole file's answer to a part"
                ))),
                Outcome::Failed(why) => Err(CopyError::Elsewhere(why)),
                Outcome::Interrupted { .. } => Err(CopyError::Interrupted),
                Outcome::NoEngine(why) => no_engine(rank, &why),
                Outcome::Moved(_) if !in_place(files) => {
                    handout.by_rank[rank as usize] -= 1;
                    handout.by_rank[0] += 1;
                    engine.copy_part(job, handout.parts[i].clone())
                }
                Outcome::Moved(why) => Err(CopyError::Elsewhere(why)),
            };
            handout.record(i, r, progress);
            if handout.more() {
                break;
            }
        }
    }

    /// --debug: how many of a file's `count` parts each rank copied.
    fn debug_shares(&self, job: &DataJob<'_>, count: usize, by_rank: &[usize]) {
        let shares: Vec<String> = by_rank
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("rank {r}: {n}"))
            .collect();
        messages::debug(&format!(
            "{}: {count} parts of {} bytes ({})",
            quote(job.src_name),
            self.piece,
            shares.join(", ")
        ));
    }
}

/// A rank's backend could not start: as in one process, that ends the run.
fn no_engine(rank: i32, why: &str) -> ! {
    messages::error(&format!("rank {rank}: {why}"));
    messages::exit(1)
}

/// SOURCE and DEST as another rank can open them: the paths the kernel has for rank 0's
/// descriptors (the ranks share one filesystem namespace) and their inodes. None where they
/// cannot be opened elsewhere: an unlinked or anonymous file, a SOURCE this user may not
/// read by name or a DEST it may not write by name (one created read-only, written here
/// through the descriptor that created it).
fn shared_files(src: &File, src_name: &Path, dst: &File, dst_name: &Path) -> Option<Files> {
    let src_path = fd_path(src, libc::R_OK)?;
    let dst_path = fd_path(dst, libc::W_OK)?;
    Some(Files {
        src_path,
        dst_path,
        src_name: src_name.to_owned(),
        dst_name: dst_name.to_owned(),
        src_ino: src.metadata().ok()?.ino(),
        dst_ino: dst.metadata().ok()?.ino(),
        sparse: Default::default(),
    })
}

/// Whether SOURCE and DEST are still at the paths a rank was given, as rank 0 sees them:
/// if so, a rank that did not find them there sees another filesystem.
fn in_place(files: &Files) -> bool {
    [
        (&files.src_path, files.src_ino),
        (&files.dst_path, files.dst_ino),
    ]
    .iter()
    .all(|(path, ino)| std::fs::symlink_metadata(path).is_ok_and(|m| m.ino() == *ino))
}

/// The path the kernel has for an open file, where this user may open it for `access`.
fn fd_path(f: &File, access: libc::c_int) -> Option<PathBuf> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())).ok()?;
    if !link.is_absolute() {
        return None;
    }
    let c = CString::new(link.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let ok = unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), access, libc::AT_EACCESS) };
    // "(deleted)" names and the like are not found.
    (ok == 0).then_some(link)
}
