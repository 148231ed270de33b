//! Files in flight: whole files queued on the pipeline's file workers while the caller goes
//! on, and their results taken back as they end.

use super::state::{with_pipeline, Engine, Pipelines};
use crate::error::CopyError;
use crate::queue::{Finished, QueuedJob, Ticket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl Engine {
    /// Whether a file of `len` bytes may be queued now without going over the limits; when
    /// not, take finished files with [`Engine::next_finished`] first.
    pub fn has_room(&self, len: u64) -> bool {
        self.landed.finished.is_empty()
            && with_pipeline!(&self.backend, p => p.has_room(&self.limits, len))
    }

    /// Files queued whose results have not been taken with [`Engine::next_finished`].
    pub fn in_flight(&self) -> usize {
        self.landed.finished.len() + with_pipeline!(&self.backend, p => p.in_flight())
    }

    /// Queues a whole file (SRC and DST regular, DST empty; usually at most
    /// [`Engine::queue_max`] bytes: a larger one moves slot by slot on one worker, which a
    /// caller sharing the engine between several copiers may prefer to giving it every slot)
    /// to be copied while the caller goes on; its result comes from
    /// [`Engine::next_finished`] with the ticket returned here. Tickets count up in the
    /// order files are queued. The job comes back when it cannot be queued (no worker
    /// thread could be started): copy it with [`Engine::copy`] instead.
    pub fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        self.submit_with(job, None)
    }

    /// [`Engine::submit`] for a file that `cancel` stops instead of the run's flag: a
    /// staging service serving several clients stops one client's files, not the others'.
    /// Once `cancel` is set DST is not touched again (see [`Engine::copy_cancellable`]).
    pub fn submit_cancellable(
        &mut self,
        job: QueuedJob,
        cancel: Arc<AtomicBool>,
    ) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        self.submit_with(job, Some(cancel))
    }

    fn submit_with(
        &mut self,
        job: QueuedJob,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        let ticket = Ticket(self.landed.next_ticket);
        let started = self.config.debug.then_some(self.diag.started);
        let diag = &mut |line: &str| self.diag.debug(line);
        if let (Pipelines::Gpu(p), Some(spread)) = (&mut self.backend, &mut self.spread) {
            // Queued files take the slots of the GPUs nearest their storage (every GPU unless
            // `--gpu auto` knows better). The workers keep their slots for the flight, so a
            // file for other GPUs waits for the flight to land and starts a new one.
            let (set, why) = spread.nearest(&job.src, &job.dst);
            if !p.flying() || self.flying_on.as_ref() != Some(&set) {
                p.land(&mut self.landed.finished);
                p.choose(&set);
                diag(&format!(
                    "files in flight: {} ({why})",
                    spread.describe(&set)
                ));
                self.flying_on = Some(set);
            }
        }
        with_pipeline!(&mut self.backend, p => p.submit((ticket, job, cancel), &self.limits, &self.config, started, diag))?;
        self.landed.next_ticket += 1;
        Ok(ticket)
    }

    /// Takes back a finished file's job once the caller is done with it: its files are
    /// closed (and its names freed) on a file worker, with the next files sent there or
    /// when the flight lands, instead of on the caller's thread. Nothing is written through
    /// them any more, so the moment they close is no effect anyone sees.
    pub fn retire(&mut self, job: QueuedJob) {
        with_pipeline!(&mut self.backend, p => p.retire(job, &self.limits));
    }

    /// A queued file whose copy has ended, in the order they end; with `block`, waits for
    /// one while any is in flight. None when none is (or, without `block`, none has ended).
    pub fn next_finished(&mut self, block: bool) -> Option<Finished> {
        let finished = match self.landed.finished.pop_front() {
            Some(f) => Some(f),
            None => with_pipeline!(&mut self.backend, p => p.receive(block)),
        }?;
        for (at, line) in &finished.debug {
            if self.config.debug {
                self.diag.sink.debug(*at, line);
            }
        }
        self.copied += u64::from(finished.result.is_ok());
        Some(finished)
    }
}
