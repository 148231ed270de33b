//! A file's slices all on one slot, on the calling thread: how a file worker (the queue's,
//! which owns one slot) runs a file in flight, through [`FileCopy::run`].

use crate::backend::Staging;
use crate::bounce::{ready_windows, Ctx};
use crate::error::CopyError;
use crate::file_copy::{opening, Cut, FileCopy, Planned, Scheduler};
use crate::job::ProgressSink;
use crate::worker::{run_worker, Handle, SideRoute, SliceIo, Work};
use std::ops::Range;
use std::path::Path;

/// The scheduler of a file in flight: every slice on `slot`, in order, on this thread.
pub(crate) struct OneSlot<'a, S: Staging> {
    pub(crate) staging: &'a S,
    pub(crate) slot: &'a mut S::Slot,
    /// The chunk the slot holds, and the size from which a file is read and written with
    /// O_DIRECT (smaller ones go through the page cache).
    pub(crate) chunk: usize,
    pub(crate) direct_from: u64,
    /// --verify reads SOURCE again (it is then read through the page cache).
    pub(crate) rereads: bool,
    /// The file's name and length, shown as started once its data moves.
    pub(crate) shown_as: (&'a Path, u64),
    /// Whether the file was shown as started (then it is shown as finished too).
    pub(crate) shown: bool,
}

impl<S: Staging> OneSlot<'_, S> {
    /// Shows the file as finished, where it was shown as started.
    pub(crate) fn finished(&self, progress: &dyn ProgressSink) {
        if self.shown {
            progress.file_finished();
        }
    }
}

impl<S: Staging> Scheduler<S> for OneSlot<'_, S> {
    /// The slot's windows (the bounce route's), then the plan, cut by the slot's chunk.
    fn ready(
        &mut self,
        file: &FileCopy<'_>,
        range: &Range<u64>,
        cx: &Ctx<'_>,
        _diag: &mut dyn FnMut(&str),
    ) -> Result<Planned, CopyError> {
        let names = cx.names;
        // No look at the stop here: the worker has just counted the file as begun
        // (queue.rs), and a stop seen now would end it before DEST is cut, its -v line
        // out and DEST as it was. The first window looks.
        opening(cx, || {
            self.staging
                .enter_worker(self.slot)
                .map_err(|e| names.read(e))?;
            ready_windows(self.staging, self.slot, names.src_path)
        })?;
        let cut = Cut {
            chunk: self.chunk,
            direct_from: self.direct_from,
            slot_alignment: self.staging.slot_alignment(),
        };
        let plan = cut.plan(file, range.clone()).map_err(|e| names.read(e))?;
        Ok(Planned { plan, cut })
    }

    /// Files in flight take no library: they bounce.
    fn opening(&self) -> (Option<&S::Library>, bool) {
        (None, self.rereads)
    }

    fn how(
        &self,
        _: &SideRoute<Handle<'_, S>>,
        _: &SideRoute<Handle<'_, S>>,
    ) -> Option<&'static str> {
        Some("in flight")
    }

    fn moving(&mut self, progress: &dyn ProgressSink) {
        let (name, len) = self.shown_as;
        progress.file_started(name, Some(len));
        self.shown = true;
    }

    fn run(
        &mut self,
        io: &SliceIo<'_, Handle<'_, S>>,
        work: &Work<'_>,
        progress: &dyn ProgressSink,
    ) -> u64 {
        let mut reported = 0;
        run_worker(self.staging, self.slot, io, work, &mut |n| {
            reported += n;
            progress.advanced(n);
        });
        reported
    }

    fn finish_slot(&mut self) -> &mut S::Slot {
        self.slot
    }
}
