//! A rank other than 0: copies what rank 0 hands it until told to stop, then exits. Its
//! failures go back to rank 0 with the task, in cp's words; rank 0 prints them.
//!
//! Whole files small enough go into this rank's own files in flight (the engine's queue),
//! several at once, as one process copies a tree; larger whole files and parts are copied
//! in turn. New tasks are taken while files are in flight, so rank 0 keeps the queue full.

use super::wire::{Files, Outcome, Reply, Task, DONE, HELLO, TASK};
use super::Nap;
use crate::sys::messages;
use aiscp_engine::{
    quote::quote, Config, CopyError, DataJob, Engine, NoProgress, QueueLimits, QueuedJob,
    SourceKind, Ticket,
};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Starts this rank's engine, says so to rank 0, and serves tasks until told to stop.
pub fn serve(world: &SimpleCommunicator, rank: i32, config: &Config, limits: QueueLimits) -> ! {
    let diag = messages::EngineLines::new(config.quiet, format!("rank {rank}: "));
    let engine = Engine::start(config.clone(), diag).map_err(|e| e.to_string());
    let hello = match &engine {
        Ok(_) => Outcome::Copied(0),
        Err(why) => Outcome::NoEngine(why.clone()),
    };
    world
        .process_at_rank(0)
        .send_with_tag(&hello.encode()[..], HELLO);
    match engine {
        Ok(mut engine) => {
            // Each file is sent at once: the loop polls for files that ended without waiting.
            engine.set_queue_limits(QueueLimits { batch: 1, ..limits });
            let mut server = Server {
                world,
                rank,
                config,
                engine,
                waiting: VecDeque::new(),
                tickets: HashMap::new(),
            };
            server.run();
            // The engine gives its GPU resources back before the process exits.
            drop(server);
        }
        Err(why) => loop {
            // Rank 0 ends the run on hearing this; answer anything sent meanwhile the same.
            let (bytes, _) = world.process_at_rank(0).receive_vec_with_tag::<u8>(TASK);
            let id = match Task::decode(&bytes) {
                Task::Stop => break,
                Task::Part { id, .. } | Task::Whole { id, .. } => id,
            };
            reply(world, id, Outcome::NoEngine(why.clone()));
        },
    }
    messages::exit(0)
}

fn reply(world: &SimpleCommunicator, id: u64, outcome: Outcome) {
    let bytes = Reply { id, outcome }.encode();
    world.process_at_rank(0).send_with_tag(&bytes[..], DONE);
}

struct Server<'w> {
    world: &'w SimpleCommunicator,
    rank: i32,
    config: &'w Config,
    engine: Engine,
    /// Whole files opened, waiting for room in the engine's queue.
    waiting: VecDeque<(u64, QueuedJob)>,
    /// Task ids of the files in the engine's queue.
    tickets: HashMap<Ticket, u64>,
}

impl Server<'_> {
    fn run(&mut self) {
        let mut nap = Nap::default();
        loop {
            let mut moved = false;
            let to_rank_0 = self.world.process_at_rank(0);
            // Nothing in flight: wait for a task. Then take every one already sent.
            if self.tickets.is_empty() && self.waiting.is_empty() {
                let mut idle = Nap::default();
                while to_rank_0.immediate_probe_with_tag(TASK).is_none() {
                    idle.take();
                }
            }
            while self
                .world
                .process_at_rank(0)
                .immediate_probe_with_tag(TASK)
                .is_some()
            {
                if !self.take_task() {
                    return;
                }
                moved = true;
            }
            while let Some((_, job)) = self.waiting.front() {
                if !self.engine.has_room(job.len) {
                    break;
                }
                let (id, job) = self.waiting.pop_front().expect("front exists");
                match self.engine.submit(job) {
                    Ok(ticket) => {
                        self.tickets.insert(ticket, id);
                    }
                    Err(refused) => {
                        let outcome = self.copy_in_turn(refused.0);
                        reply(self.world, id, outcome);
                    }
                }
                moved = true;
            }
            while let Some(f) = self.engine.next_finished(false) {
                let id = self
                    .tickets
                    .remove(&f.ticket)
                    .expect("a file this rank queued");
                let outcome = match f.result {
                    Ok(copied) => Outcome::Copied(copied.size),
                    Err(CopyError::Interrupted) => Outcome::Interrupted { started: f.started },
                    Err(e) => Outcome::Failed(e.to_string()),
                };
                // Closed before rank 0 sets DEST's attributes (close-to-open filesystems).
                drop(f.job);
                reply(self.world, id, outcome);
                moved = true;
            }
            // Files in flight and nothing new: look again shortly.
            if moved {
                nap = Nap::default();
            } else {
                nap.take();
            }
        }
    }

    /// Receives one task and starts it; false when it says stop.
    fn take_task(&mut self) -> bool {
        let (bytes, _) = self
            .world
            .process_at_rank(0)
            .receive_vec_with_tag::<u8>(TASK);
        match Task::decode(&bytes) {
            Task::Stop => {
                // Rank 0 has ended the run: whatever is still in flight stops.
                self.config.cancel.store(true, Ordering::SeqCst);
                return false;
            }
            Task::Part { id, files, part } => {
                let outcome = match self.open(&files) {
                    Err(outcome) => outcome,
                    Ok((src, dst)) => {
                        let job = DataJob {
                            src: &src,
                            src_name: &files.src_name,
                            src_kind: SourceKind::Regular { len: part.end },
                            dst: &dst,
                            dst_name: &files.dst_name,
                            sparse: files.sparse,
                            digest: None,
                        };
                        match self.engine.copy_part(&job, part) {
                            Ok(end) => Outcome::Part(end),
                            Err(e) => outcome(Err(e)),
                        }
                    }
                };
                reply(self.world, id, outcome);
            }
            Task::Whole {
                id,
                files,
                len,
                truncate,
            } => match self.open(&files) {
                Err(outcome) => reply(self.world, id, outcome),
                Ok((src, dst)) => {
                    let job = QueuedJob {
                        src,
                        src_name: files.src_name,
                        len,
                        dst,
                        dst_name: files.dst_name,
                        sparse: files.sparse,
                        may_have_holes: true,
                        digest: None,
                        truncate,
                        progress: Arc::new(NoProgress),
                    };
                    if self.engine.queue_max().is_some_and(|max| len <= max) {
                        self.waiting.push_back((id, job));
                    } else {
                        let outcome = self.copy_in_turn(job);
                        reply(self.world, id, outcome);
                    }
                }
            },
        }
        true
    }

    /// A whole file copied now, as one process copies a file it does not queue (the engine
    /// cuts DEST once its staging exists).
    fn copy_in_turn(&mut self, job: QueuedJob) -> Outcome {
        outcome(
            self.engine
                .copy(&job.data_job(), &NoProgress)
                .map(|c| c.size),
        )
    }

    /// Opens SOURCE and DEST by the paths rank 0 opened them by, and checks they are the
    /// same files. Errors in cp's words (DEST's as cp words a DEST it cannot open); a file
    /// not found there, or another one found, is [`Outcome::Moved`].
    fn open(&self, files: &Files) -> Result<(File, File), Outcome> {
        let rank = self.rank;
        let open = |path: &Path, name: &Path, ino: u64, write: bool| {
            let file = OpenOptions::new()
                .read(!write)
                .write(write)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY)
                .open(path)
                .map_err(|e| {
                    let (name, why) = (quote(name), messages::os_text(&e));
                    let why = match write {
                        false => format!("cannot open {name} for reading: {why}"),
                        true => format!("cannot create regular file {name}: {why}"),
                    };
                    match e.raw_os_error() {
                        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP) => Outcome::Moved(why),
                        _ => Outcome::Failed(why),
                    }
                })?;
            match file.metadata() {
                Ok(m) if m.ino() == ino => Ok(file),
                _ => Err(Outcome::Moved(format!(
                    "rank {rank}: {} is not the file rank 0 opened \
                     (the ranks must share one filesystem namespace)",
                    quote(name)
                ))),
            }
        };
        let src = open(&files.src_path, &files.src_name, files.src_ino, false)?;
        let dst = open(&files.dst_path, &files.dst_name, files.dst_ino, true)?;
        Ok((src, dst))
    }
}

fn outcome(result: Result<u64, CopyError>) -> Outcome {
    match result {
        Ok(size) => Outcome::Copied(size),
        Err(CopyError::Interrupted) => Outcome::Interrupted { started: true },
        Err(e) => Outcome::Failed(e.to_string()),
    }
}
