//! The progress of a file redone in-process after the service was lost mid-copy.

use aiscp_engine::ProgressSink;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The progress of a file the service had begun and this process copies again from its
/// start: the first `shown` bytes were already reported, and the file already started, so
/// neither counts twice in the progress view and --stats.
pub(super) struct Redone<'p> {
    inner: &'p dyn ProgressSink,
    unshown: AtomicU64,
}

impl<'p> Redone<'p> {
    pub(super) fn after(inner: &'p dyn ProgressSink, shown: u64) -> Redone<'p> {
        Redone {
            inner,
            unshown: AtomicU64::new(shown),
        }
    }
}

impl ProgressSink for Redone<'_> {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, bytes: u64) {
        let hidden = match self
            .unshown
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                Some(left.saturating_sub(bytes))
            }) {
            Ok(left) | Err(left) => left.min(bytes),
        };
        if bytes > hidden {
            self.inner.advanced(bytes - hidden);
        }
    }
    fn file_finished(&self) {
        self.inner.file_finished();
    }
    fn route(&self, read: aiscp_engine::Route, write: aiscp_engine::Route) {
        self.inner.route(read, write);
    }
}
