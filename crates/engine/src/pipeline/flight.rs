//! Files in flight on the pipeline's slots: the pipeline lends its slots to the queue's
//! workers (see `queue`) and takes them back when the flight lands.

use super::state::Pipeline;
use crate::backend::Staging;
use crate::config::Config;
use crate::error::CopyError;
use crate::queue::jobs;
use crate::queue::{
    no_workers, read_back_one, worker, Batch, Finished, Flight, QueueLimits, QueuedJob, Sent,
    Shared,
};
use crate::read_back::{Checking, ReadBacks};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

impl<S> Pipeline<S>
where
    S: Staging + Send + 'static,
    S::Slot: 'static,
{
    /// Whether the flight has room for a file of `len` bytes.
    pub(crate) fn has_room(&self, limits: &QueueLimits, len: u64) -> bool {
        match &self.flight {
            None => limits.files > 0,
            Some(f) => {
                f.files < limits.files
                    && (f.files == 0 || f.bytes.saturating_add(len) <= limits.bytes)
            }
        }
    }

    /// Whether file workers are running (they keep their slots until landed).
    pub(crate) fn flying(&self) -> bool {
        self.flight.is_some()
    }

    pub(crate) fn in_flight(&self) -> usize {
        self.flight.as_ref().map_or(0, |f| f.files)
    }

    /// Sends `job` to the workers, starting them (with every slot that can be had) first.
    pub(crate) fn submit(
        &mut self,
        (ticket, job, cancel): Sent,
        limits: &QueueLimits,
        config: &Config,
        debug_since: Option<Instant>,
        diag: &mut dyn FnMut(&str),
    ) -> Result<(), Box<(QueuedJob, CopyError)>> {
        if self.flight.is_none() {
            let started = self.start_flight(&job.src_name, limits, (config, debug_since), diag);
            if let Err(e) = started {
                return Err(Box::new((job, e)));
            }
        }
        let flight = self.flight.as_mut().expect("started above");
        let len = job.len;
        send((ticket, job, cancel), flight, limits)?;
        flight.files += 1;
        flight.bytes += len;
        flight.sizes.insert(ticket, len);
        Ok(())
    }

    /// Starts the file workers, each on a slot lent from the pipeline's (every slot that
    /// can be had, for copying `src_name` first), and with --verify the read-back threads.
    fn start_flight(
        &mut self,
        src_name: &Path,
        limits: &QueueLimits,
        (config, debug_since): (&Config, Option<Instant>),
        diag: &mut dyn FnMut(&str),
    ) -> Result<(), CopyError> {
        let want = self.chosen.len();
        let n = self.ensure_slots(want, src_name, diag)?.slots;
        let (jobs_tx, jobs_rx) = jobs::channel::<Batch>();
        let (done_tx, done_rx) = mpsc::channel();
        let read_backs = config.verify.and_then(|verify| {
            let checking = Checking {
                verify,
                pause: config.pause,
                debug: debug_since,
                stop: Arc::clone(&config.cancel),
            };
            ReadBacks::start(&done_tx, read_back_one, checking)
        });
        let shared = || Shared {
            staging: Arc::clone(&self.staging),
            cancel: Arc::clone(&config.cancel),
            chunk: self.chunk,
            direct_from: limits.direct_from,
            verify: config.verify,
            read_backs: read_backs.as_ref().and_then(ReadBacks::sender),
            pause: config.pause,
            debug: debug_since,
        };
        let shared: Vec<_> = (0..n).map(|_| shared()).collect();
        let workers = self.spawn_workers(shared, (jobs_rx, done_tx), diag);
        if workers.is_empty() {
            // Slots lost with the refused threads are made again on the next copy.
            return Err(no_workers());
        }
        diag(&format!("{} file worker(s) started", workers.len()));
        self.flight = Some(Flight {
            jobs: Some(jobs_tx),
            held: Vec::new(),
            retired: Vec::new(),
            unsent: VecDeque::new(),
            done: done_rx,
            workers,
            read_backs,
            files: 0,
            bytes: 0,
            sizes: Default::default(),
        });
        Ok(())
    }

    /// One worker thread per `shared`, on the next chosen slot, taking files from `jobs`
    /// and handing them to `done`. A thread the system refuses is one worker fewer.
    fn spawn_workers(
        &mut self,
        shared: Vec<Shared<S>>,
        (jobs, done): (jobs::Receiver<Batch>, mpsc::Sender<Finished>),
        diag: &mut dyn FnMut(&str),
    ) -> Vec<JoinHandle<(usize, S::Slot)>> {
        let mut workers = Vec::new();
        for (&i, shared) in self.chosen.iter().zip(shared) {
            let Some(slot) = self.slots[i].take() else {
                continue;
            };
            let (rx, tx) = (jobs.clone(), done.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("aiscp-file-{i}"))
                .spawn(move || worker(shared, i, slot, &rx, &tx));
            match spawned {
                Ok(w) => workers.push(w),
                // The slot went with the closure; the system refused a thread: fewer workers.
                Err(e) => diag(&format!("file worker {i}: {e}")),
            }
        }
        workers
    }

    /// The next file whose copy ended: waits for one when `block` and files are in flight.
    pub(crate) fn receive(&mut self, block: bool) -> Option<Finished> {
        let flight = self.flight.as_mut()?;
        if flight.files == 0 {
            return None;
        }
        if block {
            flight.send_held();
        }
        let got = match flight.unsent.pop_front() {
            Some(f) => Some(f),
            None if block => flight.done.recv().ok(),
            None => flight.done.try_recv().ok(),
        };
        let f = got?;
        flight.files -= 1;
        flight.bytes -= flight.sizes.remove(&f.ticket).unwrap_or(0);
        self.run_stages.add(&f.stages);
        Some(f)
    }

    /// Takes a job the caller is done with, to close its files on a worker with the next
    /// files sent (at once where no flight runs; sent alone once `limits.files` wait).
    pub(crate) fn retire(&mut self, job: QueuedJob, limits: &QueueLimits) {
        let Some(flight) = self.flight.as_mut() else {
            return;
        };
        flight.retired.push(job);
        if flight.retired.len() >= limits.files.max(1) {
            flight.send_all();
        }
    }

    /// Waits for every file in flight (their results appended to `into`), stops the workers
    /// and takes their slots back, so the pipeline has them all again.
    pub(crate) fn land(&mut self, into: &mut VecDeque<Finished>) {
        if self.flight.is_none() {
            return;
        }
        while let Some(f) = self.receive(true) {
            into.push_back(f);
        }
        let flight = self.flight.take().expect("checked above");
        for (i, slot) in flight.land() {
            self.slots[i] = Some(slot);
        }
    }

    /// Stops every worker (the file workers once their files have landed), then frees every
    /// slot (GPU buffers, pinned windows, streams), in the order a drop would; the backend
    /// stays up. Returns how long the freeing took, not the wait for files still copying.
    pub(crate) fn free_slots(&mut self) -> Duration {
        self.threads = None;
        self.land(&mut VecDeque::new());
        let freeing = Instant::now();
        self.slots.iter_mut().for_each(|slot| *slot = None);
        freeing.elapsed()
    }
}

/// Sends one file to the workers: held with the small files before it until a batch is
/// full ([`QueueLimits::batch`]), else at once, after those held. The job comes back where
/// every worker has ended.
fn send<S: Staging>(
    sent: Sent,
    flight: &mut Flight<S>,
    limits: &QueueLimits,
) -> Result<(), Box<(QueuedJob, CopyError)>> {
    if limits.batch > 1 && sent.1.len < limits.direct_from {
        flight.held.push(sent);
        if flight.held.len() >= limits.batch {
            flight.send_held();
        }
        return Ok(());
    }
    flight.send_held();
    let Some(tx) = flight.jobs.as_ref() else {
        unreachable!("the queue is open while the flight is");
    };
    let batch = Batch {
        files: vec![sent],
        retired: std::mem::take(&mut flight.retired),
    };
    if let Err(mut batch) = tx.send(batch) {
        // Every worker has ended (a panic): the caller copies the file itself.
        let (_, job, _) = batch.files.remove(0);
        return Err(Box::new((job, no_workers())));
    }
    Ok(())
}
