//! What moves a file's data for the copier: [`DataMover`], in this process's engine's
//! place (the staging service, the MPI ranks); [`FileQueue`], files in flight on either.

use super::local_engine::LocalEngine;
use aiscp_engine::{
    Copied, CopyError, DataJob, Engine, Finished, ProgressSink, QueueLimits, QueuedJob, Ticket,
};

/// Copies one file's data, given the engine this process would use.
pub trait DataMover {
    /// Copies a file in turn (its result is needed before the walk goes on).
    fn copy(
        &mut self,
        engine: &mut LocalEngine<'_>,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<Copied, CopyError>;

    /// Whether this process's engine must be up (with its first staging slot) before DEST
    /// is touched, as when it copies the data itself; false while the data goes elsewhere.
    fn needs_engine(&mut self) -> bool {
        true
    }

    /// What the staging service staged through for this run, with its stage times and the
    /// files it copied (for --stats); None for a mover that stages nothing itself.
    fn info(&self) -> Option<(aiscp_engine::EngineInfo, aiscp_engine::StageTimes)> {
        None
    }

    /// Where whole files go to be copied while the walk goes on; None: every file is
    /// copied in turn.
    fn queue(&mut self) -> Option<&mut dyn FileQueue> {
        None
    }
}

/// Where files in flight are copied (this process's engine, or other processes): each
/// comes back with its ticket as its copy ends, in any order; `inflight` restores cp's.
pub trait FileQueue {
    /// How many files (and bytes) may be in flight.
    fn set_limits(&mut self, limits: QueueLimits);
    /// The largest file [`FileQueue::submit`] takes; None: none.
    fn queue_max(&self) -> Option<u64>;
    /// Whether a file of `len` bytes may be queued now.
    fn has_room(&self, len: u64) -> bool;
    /// Queues a whole file; it comes back when it cannot be (copy it in turn then).
    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>>;
    /// A queued file whose copy has ended; with `block`, waits while any is in flight.
    fn next_finished(&mut self, block: bool) -> Option<Finished>;
    /// A finished file's job the caller is done with: where the queue can, its files are
    /// closed off the caller's thread.
    fn retire(&mut self, job: QueuedJob) {
        drop(job);
    }
}

impl FileQueue for Engine {
    fn set_limits(&mut self, limits: QueueLimits) {
        self.set_queue_limits(limits);
    }
    fn queue_max(&self) -> Option<u64> {
        Engine::queue_max(self)
    }
    fn has_room(&self, len: u64) -> bool {
        Engine::has_room(self, len)
    }
    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        Engine::submit(self, job)
    }
    fn next_finished(&mut self, block: bool) -> Option<Finished> {
        Engine::next_finished(self, block)
    }
    fn retire(&mut self, job: QueuedJob) {
        Engine::retire(self, job);
    }
}
