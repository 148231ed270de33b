//! The counters every view and the summary read: what is done, what the totals are so
//! far, the file being copied, and the routes the engine reported.

use super::line::Snapshot;
use aiscp_engine::Route;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// The counters every view and the summary read.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) bytes_done: AtomicU64,
    pub(super) bytes_total: AtomicU64,
    pub(super) files_done: AtomicU64,
    pub(super) files_total: AtomicU64,
    /// Set while the counting thread still walks a tree: the totals are lower bounds.
    pub(super) counting: AtomicBool,
    /// Files counted with no size (sequential sources): the byte total is unknown.
    pub(super) sizeless: AtomicU64,
    /// The run is over: the view shows the run's average rate, no ETA and no name.
    pub(super) ended: AtomicBool,
    /// Asks the counting thread and the line writer to stop.
    pub(super) stop: AtomicBool,
    /// The file being copied, as given on the command line or found in a tree.
    pub(super) current: Mutex<String>,
    /// Files per (read, write) route, as the engine reported them.
    pub(super) routes: Mutex<BTreeMap<(Route, Route), u64>>,
}

impl Counters {
    pub(super) fn current(&self) -> std::sync::MutexGuard<'_, String> {
        // A poisoned lock only means a panic elsewhere; a name is still a name.
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The totals shown: never below what is already done (a file the walk has not reached
    /// yet, or a sequential source, adds to done first).
    pub(super) fn totals(&self) -> (u64, u64) {
        let bytes = self.bytes_total.load(Relaxed);
        let files = self.files_total.load(Relaxed);
        (
            bytes.max(self.bytes_done.load(Relaxed)),
            files.max(self.files_done.load(Relaxed)),
        )
    }
}

impl Snapshot {
    pub(super) fn take(c: &Counters, rate: Option<f64>) -> Snapshot {
        let (bytes_total, files_total) = c.totals();
        let ended = c.ended.load(Relaxed);
        Snapshot {
            bytes_done: c.bytes_done.load(Relaxed),
            bytes_total,
            files_done: c.files_done.load(Relaxed),
            files_total,
            counting: c.counting.load(Relaxed),
            sizeless: c.sizeless.load(Relaxed) > 0,
            rate,
            ended,
            // The last line is about the run, not one file.
            name: match ended {
                true => String::new(),
                false => c.current().clone(),
            },
        }
    }
}
