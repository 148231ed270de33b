//! The copier's side: a [`DataMover`] that hands each regular file's data phase to the
//! staging service, as SOURCE and DEST descriptors, and takes back how it ended. The walk,
//! every cp decision, messages, attributes and the exit status stay in this process (the
//! copier's files-in-flight machinery orders the answers as it orders its own engine's).
//!
//! The service is never a point of failure: when it cannot be reached, refuses, or is of
//! another version, the run copies in-process from the start; when it goes away mid-run
//! (killed, crashed), one warning says so, every file it had is cut back to empty and copied
//! again here from its start, and the rest of the run is in-process. `--verify` reads the
//! files back here, in the client, whoever copied them: files in flight on the engine's
//! read-back threads, as an in-process run reads its own, a file copied in turn at once.

mod answers;
mod lost;
mod queue;
mod reach;
mod redone;
mod send;

use lost::{stuck_error, Lost};
use reach::wait_readable;
pub use reach::{status, NoStatus};
use redone::Redone;
use send::{request, Unsent};

use super::local_engine::LocalEngine;
use super::mover::{DataMover, FileQueue};
use crate::service::wire::{
    self, FileDone, Handover, Inbox, Outcome, Reply, Request, Welcome, WireError,
};
use crate::service::Choice;
use crate::sys::messages;
use aiscp_engine::quote::quote;
use aiscp_engine::{
    Config, Copied, CopyError, DataJob, EngineInfo, Finished, ProgressSink, QueueLimits, QueuedJob,
    ReadBackPool, SourceKind, StageTimes,
};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Silence from the service, while this client waits on it, after which it is asked for its
/// status: the thread reading this client answers at once unless the service is stuck
/// (stopped, frozen).
const SILENCE: Duration = Duration::from_secs(1);
/// Where the connection stands.
enum State {
    /// Not tried yet (a run with no file data never connects).
    Untried,
    Up(Up),
    /// Never reached, or gone: everything is copied in-process.
    Down,
}

struct Up {
    sock: OwnedFd,
    inbox: Inbox,
    welcome: Welcome,
    /// How long connecting took (shown where an in-process run shows its start-up).
    connected_in: Duration,
}

/// What the service said about a file.
enum Answer {
    Done(u64, Outcome),
    /// Bytes of a file copied in turn, since the last report.
    Progress(u64, u64),
}

pub struct ServiceClient {
    choice: Choice,
    config: Config,
    state: State,
    next_id: u64,
    /// Files in flight in the service, by id (the descriptors stay here too, for what
    /// follows the data and for a redo).
    out: HashMap<u64, QueuedJob>,
    out_bytes: u64,
    /// Files of `out` not sent yet: they go together (see [`Unsent`]), or before this
    /// process waits for anything.
    unsent: Unsent,
    /// Answers that came in one message with the one taken.
    arrived: VecDeque<Answer>,
    /// Answers taken while waiting for another.
    landed: VecDeque<Finished>,
    limits: QueueLimits,
    /// When Cancel was sent (after SIGINT).
    cancelled_at: Option<Instant>,
    /// When the service last said anything, and when it was asked for its status since.
    heard_at: Instant,
    pinged_at: Option<Instant>,
    /// A file copied in turn is with the service now.
    in_turn: bool,
    /// Why the service counts as stuck, once it does.
    stuck: Option<String>,
    /// Whether any file went through the service (for --stats).
    served: bool,
    /// Files whose copy there ended well (for --stats, beside those copied in-process).
    copied: u64,
    /// The service reached and how long connecting took, kept once it is lost (for --stats).
    reached: Option<(Welcome, Duration)>,
    /// --verify: files in flight the service copied, being read back (started on first use).
    read_backs: Option<ReadBackPool>,
    stages: StageTimes,
    /// Only one warning per run.
    warned: bool,
}

impl ServiceClient {
    /// A client for `choice`, or None when this run should not look for a service at all
    /// (`off`, or the default socket is not there).
    pub fn new(choice: Choice, config: &Config) -> Option<ServiceClient> {
        match &choice {
            Choice::Off => return None,
            Choice::WhenThere(p) if std::fs::symlink_metadata(p).is_err() => return None,
            _ => {}
        }
        Some(ServiceClient {
            choice,
            config: config.clone(),
            state: State::Untried,
            next_id: 0,
            out: HashMap::new(),
            out_bytes: 0,
            unsent: Unsent::default(),
            arrived: VecDeque::new(),
            landed: VecDeque::new(),
            limits: QueueLimits::default(),
            cancelled_at: None,
            heard_at: Instant::now(),
            pinged_at: None,
            in_turn: false,
            stuck: None,
            served: false,
            copied: 0,
            reached: None,
            read_backs: None,
            stages: StageTimes::default(),
            warned: false,
        })
    }

    /// The socket (a client is never made for `off`).
    fn path(&self) -> &Path {
        self.choice.socket().unwrap_or(Path::new(""))
    }

    fn warn(&mut self, why: &str) {
        if !self.warned && !self.config.quiet {
            messages::own_warning(&format!(
                "staging service at {}: {why}; copying in-process",
                quote(self.path())
            ));
        }
        self.warned = true;
    }

    fn debug(&self, line: &str) {
        if self.config.debug {
            messages::debug(line);
        }
    }

    /// Waits (up to `wait`; None: until one comes) for the next answer. After SIGINT, sends
    /// Cancel once and waits for the files' answers up to [`lost::STOP_WAIT`]; a service
    /// silent for [`SILENCE`] is asked for its status, and one that does not answer within
    /// [`lost::ANSWER_LIMIT`] is given up as stuck.
    fn next_reply(&mut self, wait: Option<Duration>) -> Option<Answer> {
        let until = wait.map(|w| Instant::now() + w);
        loop {
            if let Some(a) = self.arrived.pop_front() {
                return Some(a);
            }
            let stopping = self.config.cancel.load(Ordering::SeqCst);
            if stopping && self.cancelled_at.is_none() {
                self.drop_unsent();
            }
            if let Some(stuck) = self.overdue() {
                self.lose(stuck);
                return None;
            }
            let State::Up(up) = &mut self.state else {
                return None;
            };
            if stopping && self.cancelled_at.is_none() {
                self.cancelled_at = Some(Instant::now());
                // Never waits: a service that takes nothing is found out by the wait below.
                let _ = wire::send_now(up.sock.as_fd(), &Request::Cancel);
            }
            // Nothing to wait for: one look, no poll.
            let got = if wait == Some(Duration::ZERO) {
                match up.inbox.receive_now::<Reply>(up.sock.as_fd()) {
                    Ok(None) => return None,
                    Ok(Some(got)) => Ok(got),
                    Err(e) => Err(e),
                }
            } else {
                let slice = match until {
                    Some(u) => u
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(50)),
                    None => Duration::from_millis(50),
                };
                if !wait_readable(&up.sock, slice) {
                    if self.heard_at.elapsed() >= SILENCE && self.pinged_at.is_none() {
                        self.pinged_at = Some(Instant::now());
                        let _ = wire::send_now(up.sock.as_fd(), &Request::Status);
                    }
                    if until.is_some_and(|u| Instant::now() >= u) {
                        return None;
                    }
                    continue;
                }
                up.inbox.receive::<Reply>(up.sock.as_fd())
            };
            if let Some(progress) = self.take_reply(got.map(|(reply, _)| reply)) {
                return Some(progress);
            }
        }
    }

    /// What the service sent: files' answers kept in order (returned one at a time by
    /// [`ServiceClient::next_reply`]), a file's progress returned at once; a refusal,
    /// nonsense or the end of the connection loses the service.
    fn take_reply(&mut self, got: Result<Reply, WireError>) -> Option<Answer> {
        if got.is_ok() {
            self.heard_at = Instant::now();
            self.pinged_at = None;
        }
        match got {
            Ok(Reply::Done { files }) => self.arrived.extend(
                files
                    .into_iter()
                    .map(|FileDone { id, outcome }| Answer::Done(id, outcome)),
            ),
            Ok(Reply::Progress { id, bytes }) => return Some(Answer::Progress(id, bytes)),
            Ok(Reply::Status(_)) => {}
            Ok(Reply::Refused { why }) => self.lose(Lost::Gone(why)),
            Ok(_) => self.lose(Lost::Gone("unexpected answer".into())),
            Err(WireError::Closed) => self.lose(Lost::Gone("it went away".into())),
            Err(e) => self.lose(Lost::Gone(e.to_string())),
        }
        None
    }

    /// Tells the signal handlers whether the service is writing this run's files now.
    fn note_writing(&self) {
        let up = matches!(self.state, State::Up(_));
        crate::sys::signals::service_writing(up && (self.in_turn || !self.out.is_empty()));
    }
}

impl DataMover for ServiceClient {
    fn needs_engine(&mut self) -> bool {
        !self.ensure()
    }

    fn queue(&mut self) -> Option<&mut dyn FileQueue> {
        // Once the service is gone and its files are all answered, the copier's own engine
        // takes files in flight again.
        let up = matches!(self.state, State::Up(_));
        let waiting = !self.out.is_empty() || !self.landed.is_empty() || self.reading_back() > 0;
        (up || waiting).then_some(self as _)
    }

    fn copy(
        &mut self,
        engine: &mut LocalEngine<'_>,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<Copied, CopyError> {
        if !self.ensure() {
            return engine.get().copy(job, progress);
        }
        let len = match job.src_kind {
            SourceKind::Regular { len } => Some(len),
            SourceKind::Sequential => None,
        };
        // Files queued before this one go first: this process waits now.
        self.flush();
        // Only regular files cross (a pipe or a device could hold the service's thread).
        let regular = |f: &File| f.metadata().is_ok_and(|m| m.is_file());
        if !regular(job.src) || !regular(job.dst) {
            return engine.get().copy(job, progress);
        }
        let id = self.next_id;
        self.next_id += 1;
        let request = request(
            id,
            (job.src_name, job.dst_name),
            job.sparse,
            job.digest,
            Handover::InTurn { len },
        );
        match self.post(&[(request, [job.src.as_raw_fd(), job.dst.as_raw_fd()])]) {
            Ok(misfits) if misfits.is_empty() => {}
            _ => return engine.get().copy(job, progress),
        }
        progress.file_started(job.src_name, len);
        self.in_turn = true;
        self.note_writing();
        let result = self.wait_in_turn(id, engine, job, progress);
        self.in_turn = false;
        self.note_writing();
        result
    }

    fn info(&self) -> Option<(EngineInfo, StageTimes)> {
        let (w, connected_in) = self.reached.as_ref().filter(|_| self.served)?;
        let backend = w.backend;
        let info = EngineInfo {
            backend,
            library: Some(format!(
                "the staging service (pid {}, {})",
                w.pid,
                w.library.as_deref().unwrap_or(backend.name())
            )),
            gpus: w.gpus.clone(),
            startup: *connected_in,
            library_stats: Err(format!(
                "the data went through the staging service (pid {}), whose library counters \
                 cover every client it serves",
                w.pid
            )),
            files: self.copied,
        };
        Some((info, self.stages))
    }
}

impl ServiceClient {
    /// Waits for the answer to file `id`, copied in turn by the service: its progress
    /// shown, other files' answers kept; copied again here from its start when the service
    /// is lost (not when it is stuck: it may still write DEST).
    fn wait_in_turn(
        &mut self,
        id: u64,
        engine: &mut LocalEngine<'_>,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<Copied, CopyError> {
        let mut shown = 0;
        loop {
            match self.next_reply(None) {
                Some(Answer::Progress(got, bytes)) if got == id => {
                    shown += bytes;
                    progress.advanced(bytes);
                }
                Some(Answer::Progress(..)) => {}
                Some(Answer::Done(got, outcome)) if got == id => {
                    let names = (job.src_name, job.dst_name);
                    let dst = (job.dst, job.digest);
                    let (result, _, _) = self.conclude(outcome, names, dst, shown, progress);
                    let result = result.and_then(|copied| self.verify_in_turn(job, copied));
                    self.copied += u64::from(result.is_ok());
                    return result;
                }
                Some(Answer::Done(got, outcome)) => {
                    if let Some(f) = self.finished(got, outcome) {
                        self.landed.push_back(f);
                    }
                }
                None if self.config.cancel.load(Ordering::SeqCst) => {
                    progress.file_finished();
                    return Err(CopyError::Interrupted);
                }
                None => {
                    if let Some(why) = &self.stuck {
                        progress.file_finished();
                        return Err(stuck_error(job.dst_name, why));
                    }
                    // Gone mid-copy: DEST cut back at once (as cp's O_TRUNC would leave it
                    // should this process fail too), then this file again, here, from its
                    // start. The bytes the service's reports already showed are not shown
                    // twice.
                    job.dst.set_len(0).map_err(|e| CopyError::Write {
                        path: job.dst_name.to_path_buf(),
                        source: e,
                    })?;
                    let again = Redone::after(progress, shown);
                    return engine.get().copy(job, &again);
                }
            }
        }
    }
}

pub fn gpus_text(gpus: &[u32]) -> String {
    match gpus {
        [] => String::new(),
        [g] => format!(" on GPU {g}"),
        _ => format!(
            " on GPUs {}",
            gpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}
