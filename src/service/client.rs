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
mod reach;
mod redone;
mod send;

use reach::wait_readable;
pub use reach::{status, NoStatus};
use redone::Redone;
use send::{request, Unsent};

use super::wire::{self, FileDone, Handover, Inbox, Outcome, Reply, Request, Welcome, WireError};
use super::Choice;
use crate::copy::{DataMover, FileQueue, LocalEngine};
use crate::messages;
use aiscp_engine::quote::quote;
use aiscp_engine::{
    Config, Copied, CopyError, DataJob, EngineInfo, Finished, ProgressSink, QueueLimits, QueuedJob,
    ReadBackPool, SourceKind, StageTimes, Ticket,
};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a client stopping on a signal waits for the service to say its files stopped
/// (it stops each within one write of at most 64 MiB per worker; a library call that
/// stalls holds it longer). Past this the client dies anyway, with a warning that those
/// DESTs may still change.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// Silence from the service, while this client waits on it, after which it is asked for its
/// status: the thread reading this client answers at once unless the service is stuck
/// (stopped, frozen).
const SILENCE: Duration = Duration::from_secs(1);
/// How long that status answer may take before the service counts as stuck: its files
/// fail (they are not copied again here, where it may still write them), and the rest of
/// the run copies in-process.
const ANSWER_LIMIT: Duration = Duration::from_secs(5);
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

/// Why a wait for an answer ended without one.
enum Lost {
    /// The service is gone or spoke nonsense: redo its files here.
    Gone(String),
    /// The service neither answers nor closes (why): its files fail, never redone here
    /// while it may still write them.
    Stuck(String),
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
            messages::to_stderr_raw(&format!("aiscp: debug: {line}\n"));
        }
    }

    /// Waits (up to `wait`; None: until one comes) for the next answer. After SIGINT, sends
    /// Cancel once and waits for the files' answers up to [`STOP_WAIT`]; a service silent
    /// for [`SILENCE`] is asked for its status, and one that does not answer within
    /// [`ANSWER_LIMIT`] is given up as stuck.
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
            if got.is_ok() {
                self.heard_at = Instant::now();
                self.pinged_at = None;
            }
            match got {
                Ok((Reply::Done { files }, _)) => self.arrived.extend(
                    files
                        .into_iter()
                        .map(|FileDone { id, outcome }| Answer::Done(id, outcome)),
                ),
                Ok((Reply::Progress { id, bytes }, _)) => return Some(Answer::Progress(id, bytes)),
                Ok((Reply::Status(_), _)) => {}
                Ok((Reply::Refused { why }, _)) => self.lose(Lost::Gone(why)),
                Ok(_) => self.lose(Lost::Gone("unexpected answer".into())),
                Err(WireError::Closed) => self.lose(Lost::Gone("it went away".into())),
                Err(e) => self.lose(Lost::Gone(e.to_string())),
            }
        }
    }

    /// Why the service counts as stuck now, if it does: it has not said its files stopped
    /// within [`STOP_WAIT`] of Cancel, or has not answered a status request within
    /// [`ANSWER_LIMIT`].
    fn overdue(&self) -> Option<Lost> {
        let State::Up(up) = &self.state else {
            return None;
        };
        let pid = up.welcome.pid;
        let late = |t: Option<Instant>, limit: Duration| t.is_some_and(|t| t.elapsed() > limit);
        if late(self.cancelled_at, STOP_WAIT) {
            return Some(Lost::Stuck(format!(
                "the staging service (pid {pid}) did not stop within {} s",
                STOP_WAIT.as_secs()
            )));
        }
        if late(self.pinged_at, ANSWER_LIMIT) {
            return Some(Lost::Stuck(format!(
                "the staging service (pid {pid}) did not answer within {} s",
                ANSWER_LIMIT.as_secs()
            )));
        }
        None
    }

    /// Tells the signal handlers whether the service is writing this run's files now.
    fn note_writing(&self) {
        let up = matches!(self.state, State::Up(_));
        crate::signals::service_writing(up && (self.in_turn || !self.out.is_empty()));
    }

    /// The connection is over: files in flight there are redone here (DEST cut back first)
    /// or, after SIGINT, end as interrupted; a stuck service's files fail, untouched.
    fn lose(&mut self, how: Lost) {
        let interrupted = self.config.cancel.load(Ordering::SeqCst);
        match &how {
            Lost::Gone(why) if !interrupted => {
                let pid = match &self.state {
                    State::Up(up) => up.welcome.pid,
                    _ => 0,
                };
                let why = format!("service (pid {pid}) lost: {why}");
                self.warn(&why);
            }
            Lost::Stuck(why) if interrupted => {
                if !self.config.quiet {
                    messages::own_warning(&format!(
                        "{why}; the files it was writing may still change"
                    ));
                }
            }
            Lost::Stuck(why) => self.warn(why),
            Lost::Gone(_) => {}
        }
        if let (Lost::Stuck(why), State::Up(up)) = (&how, &self.state) {
            // Told, should it wake up: nothing more comes from this client.
            let _ =
                nix::sys::socket::shutdown(up.sock.as_raw_fd(), nix::sys::socket::Shutdown::Both);
            self.stuck = Some(why.clone());
        }
        self.state = State::Down;
        // Files never sent end as never begun (not moved, or interrupted); every file it
        // had, answered or not, is redone (or ends) here.
        for id in self.unsent.take() {
            let why = match interrupted {
                true => CopyError::Interrupted,
                false => CopyError::NotMoved,
            };
            self.end_unsent(id, why);
        }
        self.arrived.clear();
        for (id, job) in std::mem::take(&mut self.out) {
            let (result, started) = match (&how, interrupted) {
                // Cut back at once (as cp's O_TRUNC would leave it should this process fail
                // too), then copied again in turn from its start (see `copy::inflight`),
                // which reports the file's start and end itself.
                (Lost::Gone(_), false) => {
                    let _ = job.dst.set_len(0);
                    (Err(CopyError::NotMoved), true)
                }
                // A stuck service may still write DEST: it fails, left as it is.
                (Lost::Stuck(why), false) => {
                    job.progress.file_finished();
                    (Err(stuck_error(&job.dst_name, why)), true)
                }
                // Interrupted, and no word from the service: a DEST it has not written to
                // yet is taken as never begun (one this run made goes again, as in-process).
                _ => {
                    let begun = job.dst.metadata().map_or(true, |m| m.len() > 0);
                    if begun {
                        job.progress.file_finished();
                    }
                    (Err(CopyError::Interrupted), begun)
                }
            };
            self.landed
                .push_back(Finished::elsewhere(Ticket(id), job, result, started));
        }
        self.out_bytes = 0;
        self.note_writing();
    }
}

/// A file a stuck service had, failed in cp's words: writing DEST did not finish.
fn stuck_error(dst_name: &Path, why: &str) -> CopyError {
    CopyError::Write {
        path: dst_name.to_path_buf(),
        source: std::io::Error::other(why.to_owned()),
    }
}

impl FileQueue for ServiceClient {
    fn set_limits(&mut self, limits: QueueLimits) {
        self.limits = limits;
    }

    fn queue_max(&self) -> Option<u64> {
        match &self.state {
            State::Up(up) if self.limits.files > 0 => up.welcome.queue_max,
            _ => None,
        }
    }

    fn has_room(&self, len: u64) -> bool {
        self.out.len() + self.reading_back() < self.limits.files
            && (self.out.is_empty() || self.out_bytes + len <= self.limits.bytes)
    }

    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        if !matches!(self.state, State::Up(_)) {
            return Err(Box::new((job, CopyError::NotMoved)));
        }
        let id = self.next_id;
        self.next_id += 1;
        job.progress.file_started(&job.src_name, Some(job.len));
        self.out_bytes += job.len;
        let len = job.len;
        self.out.insert(id, job);
        if self.unsent.add(id, len) {
            self.flush();
        }
        Ok(Ticket(id))
    }

    fn next_finished(&mut self, block: bool) -> Option<Finished> {
        if block {
            self.flush();
        }
        let f = self.next_ended(block)?;
        self.copied += u64::from(f.result.is_ok());
        Some(f)
    }
}

impl ServiceClient {
    /// [`FileQueue::next_finished`]: files answered, lost or read back, as they end.
    fn next_ended(&mut self, block: bool) -> Option<Finished> {
        loop {
            if let Some(f) = self.landed.pop_front() {
                return Some(f);
            }
            if let Some(f) = self.read_back(false) {
                return Some(f);
            }
            // Only files sent can have been answered (after a wait, every file is sent).
            if self.out.len() == self.unsent.len() {
                return self.read_back(block);
            }
            // While files are read back, answers are awaited in short waits, so a read-back
            // that ends meanwhile is taken at once.
            let wait = match (block, self.reading_back()) {
                (false, _) => Some(Duration::ZERO),
                (true, 0) => None,
                (true, _) => Some(Duration::from_millis(1)),
            };
            match self.next_reply(wait) {
                Some(Answer::Done(id, outcome)) => {
                    if let Some(f) = self.finished(id, outcome) {
                        return Some(f);
                    }
                }
                Some(Answer::Progress(..)) => {}
                None if !block => return self.landed.pop_front(),
                None => {}
            }
        }
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
