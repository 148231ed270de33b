//! When the service goes away or stops answering: a service gone has its files redone
//! here; a stuck one (it may still write DEST) has them fail, untouched.

use super::{ServiceClient, State};
use crate::sys::messages;
use aiscp_engine::{Copied, CopyError, Finished, QueuedJob, Ticket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long a client stopping on a signal waits for the service to say its files stopped
/// (it stops each within one write of at most 64 MiB per worker; a library call that
/// stalls holds it longer). Past this the client dies anyway, with a warning that those
/// DESTs may still change.
pub(super) const STOP_WAIT: Duration = Duration::from_secs(10);
/// How long that status answer may take before the service counts as stuck: its files
/// fail (they are not copied again here, where it may still write them), and the rest of
/// the run copies in-process.
pub(super) const ANSWER_LIMIT: Duration = Duration::from_secs(5);
/// Why a wait for an answer ended without one.
pub(super) enum Lost {
    /// The service is gone or spoke nonsense: redo its files here.
    Gone(String),
    /// The service neither answers nor closes (why): its files fail, never redone here
    /// while it may still write them.
    Stuck(String),
}

impl ServiceClient {
    /// Why the service counts as stuck now, if it does: it has not said its files stopped
    /// within [`STOP_WAIT`] of Cancel, or has not answered a status request within
    /// [`ANSWER_LIMIT`].
    pub(super) fn overdue(&self) -> Option<Lost> {
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

    /// The connection is over: files in flight there are redone here (DEST cut back first)
    /// or, after SIGINT, end as interrupted; a stuck service's files fail, untouched.
    pub(super) fn lose(&mut self, how: Lost) {
        let interrupted = self.config.cancel.load(Ordering::SeqCst);
        self.say_lost(&how, interrupted);
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
            let (result, started) = left_with(&job, &how, interrupted);
            self.landed
                .push_back(Finished::elsewhere(Ticket(id), job, result, started));
        }
        self.out_bytes = 0;
        self.note_writing();
    }

    /// The one warning a lost service gets: none for one gone after SIGINT (the run is
    /// ending anyway), and a stuck one's files named as still changing.
    fn say_lost(&mut self, how: &Lost, interrupted: bool) {
        match how {
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
    }
}

/// How a file the service had when it was lost (`how`) ends here: its result, and whether
/// its copy began.
fn left_with(job: &QueuedJob, how: &Lost, interrupted: bool) -> (Result<Copied, CopyError>, bool) {
    match (how, interrupted) {
        // Cut back at once (as cp's O_TRUNC would leave it should this process fail too),
        // then copied again in turn from its start (see `copy::inflight`), which reports
        // the file's start and end itself.
        (Lost::Gone(_), false) => {
            let _ = job.dst.set_len(0);
            (Err(CopyError::NotMoved), true)
        }
        // A stuck service may still write DEST: it fails, left as it is.
        (Lost::Stuck(why), false) => {
            job.progress.file_finished();
            (Err(stuck_error(&job.dst_name, why)), true)
        }
        // Interrupted, and no word from the service: a DEST it has not written to yet is
        // taken as never begun (one this run made goes again, as in-process).
        _ => {
            let begun = job.dst.metadata().map_or(true, |m| m.len() > 0);
            if begun {
                job.progress.file_finished();
            }
            (Err(CopyError::Interrupted), begun)
        }
    }
}

/// A file a stuck service had, failed in cp's words: writing DEST did not finish.
pub(super) fn stuck_error(dst_name: &Path, why: &str) -> CopyError {
    CopyError::Write {
        path: dst_name.to_path_buf(),
        source: std::io::Error::other(why.to_owned()),
    }
}
