//! The pipeline as a file's [`Scheduler`]: the plan cut for the slots the file may use, and
//! its slices spread over the workers, one slot and one thread each (streams with
//! `--async`).

use super::state::Pipeline;
use crate::backend::Staging;
use crate::bounce::Ctx;
use crate::error::CopyError;
use crate::file_copy::{Cut, FileCopy, Planned, Scheduler};
use crate::job::ProgressSink;
use crate::worker::{run_worker, Handle, SideRoute, SliceIo, Work};
use std::ops::Range;
use std::sync::mpsc;
use std::time::Duration;

impl<S: Staging> Pipeline<S> {
    /// Whether a file with these sides goes through the stream API (`--async`): it moves
    /// bytes between registered files and device memory only, so a file with a bouncing
    /// side takes the threaded workers.
    fn streams(&self, src: &SideRoute<Handle<'_, S>>, dst: &SideRoute<Handle<'_, S>>) -> bool {
        self.async_io && matches!((src, dst), (SideRoute::Library(_), SideRoute::Library(_)))
    }
}

impl<S: Staging> Scheduler<S> for Pipeline<S> {
    /// Plans `range` for the slots this file may use, and readies them: device memory (a
    /// smaller chunk, and a new plan, when it runs short) and, where slices bounce, each
    /// worker's pinned windows, all before DST is touched.
    fn ready(
        &mut self,
        file: &FileCopy<'_>,
        range: &Range<u64>,
        cx: &Ctx<'_>,
        diag: &mut dyn FnMut(&str),
    ) -> Result<Planned, CopyError> {
        let names = cx.names;
        let mut cut = Cut {
            chunk: self.chunk,
            direct_from: 0,
            slot_alignment: self.staging.slot_alignment(),
        };
        let plan_for = |cut: &Cut| cut.plan(file, range.clone()).map_err(|e| names.read(e));
        let mut plan = plan_for(&cut)?;
        let wanted = self.chosen.len().min(plan.slices.len());
        let granted = self.ensure_slots(wanted, names.src_path, diag)?;
        if granted.chunk != cut.chunk {
            // Device memory ran short: more, smaller slices (never fewer than workers).
            cut.chunk = granted.chunk;
            plan = plan_for(&cut)?;
        }
        let mut workers = granted.slots;
        if !(self.staging.library().is_some() && plan.direct) {
            // Every slice bounces: each worker's windows must exist before DST is touched.
            workers = self.ready_windows(workers, names.src_path, diag)?;
        }
        self.workers = workers;
        Ok(Planned { plan, cut })
    }

    fn opening(&self) -> (Option<&S::Library>, bool) {
        (self.staging.library(), self.verify)
    }

    fn how(
        &self,
        src: &SideRoute<Handle<'_, S>>,
        dst: &SideRoute<Handle<'_, S>>,
    ) -> Option<&'static str> {
        self.streams(src, dst).then_some("async streams")
    }

    /// Runs the slices on the workers the plan readied, a thread each (inline when one).
    fn run(
        &mut self,
        io: &SliceIo<'_, Handle<'_, S>>,
        work: &Work<'_>,
        progress: &dyn ProgressSink,
    ) -> u64 {
        let worker: Worker<S> = match self.streams(io.src_side, io.dst_side) {
            true => crate::async_io::run_async_worker::<S>,
            false => run_worker::<S>,
        };
        let workers = self.workers;
        if workers > 1 && self.threads.is_none() {
            // Without threads (the system refused them) the copy still goes on, inline.
            self.threads = rayon::ThreadPoolBuilder::new()
                .num_threads(self.slots.len())
                .thread_name(|i| format!("aiscp-worker-{i}"))
                .build()
                .ok();
        }
        let Pipeline {
            slots,
            chosen,
            staging,
            threads,
            ..
        } = self;
        let chosen = &chosen[..workers];
        let mut slots = slots
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| chosen.contains(i))
            .map(|(_, s)| s.as_mut().expect("allocated"));
        let (staging, run) = (&**staging, Run { worker, io, work });
        match threads.as_ref().filter(|_| workers > 1) {
            Some(threads) => run.on_threads(staging, threads, slots, progress),
            None => slots
                .next()
                .map_or(0, |slot| run.inline(staging, slot, progress)),
        }
    }

    fn finish_slot(&mut self) -> &mut S::Slot {
        self.first_chosen().1
    }
}

/// The loop a worker runs on one slot: the threaded one, or `--async`'s.
type Worker<S> =
    fn(&S, &mut <S as Staging>::Slot, &SliceIo<'_, Handle<'_, S>>, &Work<'_>, &mut dyn FnMut(u64));

/// One window's slices, and the loop that runs them on a slot.
struct Run<'r, 'e, 'h, S: Staging> {
    worker: Worker<S>,
    io: &'r SliceIo<'e, Handle<'h, S>>,
    work: &'r Work<'r>,
}

impl<S: Staging> Run<'_, '_, '_, S> {
    /// The slices on this thread, through `slot`; returns the bytes reported.
    fn inline(&self, staging: &S, slot: &mut S::Slot, progress: &dyn ProgressSink) -> u64 {
        let mut total = 0;
        (self.worker)(staging, slot, self.io, self.work, &mut |n| {
            total += n;
            progress.advanced(n);
        });
        total
    }

    /// The slices on `threads`, a worker on each of `slots`; this thread forwards their
    /// progress until they have all ended. Returns the bytes reported.
    fn on_threads<'s>(
        &self,
        staging: &S,
        threads: &rayon::ThreadPool,
        slots: impl Iterator<Item = &'s mut S::Slot>,
        progress: &dyn ProgressSink,
    ) -> u64
    where
        S: 's,
    {
        let (tx, rx) = mpsc::channel::<u64>();
        let (worker, io, work) = (self.worker, self.io, self.work);
        threads.in_place_scope(|scope| {
            for slot in slots {
                let tx = tx.clone();
                scope.spawn(move |_| {
                    worker(staging, slot, io, work, &mut |n| {
                        let _ = tx.send(n);
                    })
                });
            }
            drop(tx);
            let mut total = 0;
            loop {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(n) => {
                        total += n;
                        progress.advanced(n);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break total,
                }
            }
        })
    }
}
