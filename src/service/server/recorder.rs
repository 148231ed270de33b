//! What a client hears of a file while the engine copies it: its progress (for a file
//! copied in turn), and the route and result that make its answer.

use crate::service::wire::{self, Failure, Outcome, Reply, Stages, WireDigest};
use aiscp_engine::{Copied, CopyError, ProgressSink, Route};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The route the engine reports for a file, kept for its answer; for a file copied in turn,
/// also its progress, sent to the client every [`PROGRESS_EVERY`].
#[derive(Default)]
pub(super) struct Recorder {
    pub(super) route: Mutex<Option<(Route, Route)>>,
    pub(super) progress: Option<ProgressTo>,
}

/// Where a file's progress goes, and what has not been sent yet.
pub(super) struct ProgressTo {
    sock: Arc<OwnedFd>,
    id: u64,
    unreported: Mutex<(Instant, u64)>,
}

/// How often a file copied in turn reports its progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);
/// Progress is held back (and added to the next report) while this much sent to the client
/// is still unread, so a client that is busy or stopped (Ctrl-Z) finds room for its answers.
const PROGRESS_ROOM: usize = 16 << 10;

impl ProgressSink for Recorder {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, bytes: u64) {
        let Some(to) = &self.progress else {
            return;
        };
        let mut unreported = to.unreported.lock().unwrap_or_else(|p| p.into_inner());
        unreported.1 += bytes;
        let room = || wire::unread(to.sock.as_fd()).is_ok_and(|n| n < PROGRESS_ROOM);
        if unreported.0.elapsed() >= PROGRESS_EVERY && room() {
            let reply = Reply::Progress {
                id: to.id,
                bytes: unreported.1,
            };
            // Never waits for the client (this is an engine thread); what could not be sent
            // goes with the next report. A client that is gone stops the copy through its
            // cancel flag, not here.
            if wire::send_now(to.sock.as_fd(), &reply).is_ok() {
                *unreported = (Instant::now(), 0);
            }
        }
    }
    fn file_finished(&self) {}
    fn route(&self, read: Route, write: Route) {
        *self.route.lock().unwrap_or_else(|p| p.into_inner()) = Some((read, write));
    }
}

impl Recorder {
    pub(super) fn outcome(
        &self,
        result: Result<Copied, CopyError>,
        started: bool,
        stages: Stages,
    ) -> Outcome {
        match result {
            Ok(copied) => {
                let route = *self.route.lock().unwrap_or_else(|p| p.into_inner());
                Outcome::Copied {
                    end: copied.size,
                    route,
                    stages,
                    digest: copied.digest.as_ref().map(WireDigest::from),
                }
            }
            Err(CopyError::Interrupted) => Outcome::Interrupted { started },
            Err(CopyError::Stopped { good }) => Outcome::Stopped { good },
            Err(e) => Outcome::Failed {
                failure: Failure::of(&e),
            },
        }
    }
}

/// Where the progress of file `id` of the client on `sock` goes: its first bytes are
/// reported at once (the client's view shows the file moving), then every PROGRESS_EVERY.
pub(super) fn progress_to(sock: &Arc<OwnedFd>, id: u64) -> ProgressTo {
    let long_ago = Instant::now().checked_sub(PROGRESS_EVERY);
    ProgressTo {
        sock: Arc::clone(sock),
        id,
        unreported: Mutex::new((long_ago.unwrap_or_else(Instant::now), 0)),
    }
}
