//! A file whose parts several copiers share (MPI ranks, a staging service's turns): the
//! parts copied one at a time, the file begun before them and ended after them here.

use super::state::{with_pipeline, Engine, Pipelines};
use crate::bounce::{GiveWay, Stop};
use crate::error::CopyError;
use crate::file_copy::{FileCopy, Setup, Timed};
use crate::job::{Copied, DataJob, NoProgress, ProgressSink};
use crate::worker::{PartEnd, PartRan};
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

impl Engine {
    /// Copies the aligned slices of `part` of a regular file (its offsets aligned to the
    /// chunk size, except where it ends at EOF), as one of several copiers of the same file
    /// (MPI ranks): DST is neither cut nor sized and the unaligned tail is left, since the
    /// copier that owns the file ends it with [`Engine::begin_parts`] before the parts and
    /// [`Engine::finish_parts`] after them.
    pub fn copy_part(&mut self, job: &DataJob<'_>, part: Range<u64>) -> Result<PartEnd, CopyError> {
        let cancel = Arc::clone(&self.config.cancel);
        self.copy_part_with(job, part, &NoProgress, Stop::cut_back(&cancel))
            .result
            .map(|ran| ran.end)
    }

    /// [`Engine::copy_part`] of a file copied in turns (a staging service gives other
    /// clients theirs between its parts), its progress shown, stopped by `cancel` as
    /// [`Engine::copy_cancellable`] is; with the part's stage times. Once `give_way` says so
    /// no further slice begins, and the part ends where the slices begun end: a long part
    /// stays as responsive to another client as a short one, without a short one's pause
    /// for the pipeline to drain and fill (BENCHMARKS.md, "Pinned windows on huge pages").
    pub fn copy_part_cancellable(
        &mut self,
        job: &DataJob<'_>,
        part: Range<u64>,
        progress: &dyn ProgressSink,
        (cancel, give_way): (&AtomicBool, Option<GiveWay<'_>>),
    ) -> Timed<PartRan> {
        let stop = Stop {
            give_way,
            ..Stop::leave(cancel)
        };
        self.copy_part_with(job, part, progress, stop)
    }

    fn copy_part_with(
        &mut self,
        job: &DataJob<'_>,
        part: Range<u64>,
        progress: &dyn ProgressSink,
        stop: Stop<'_>,
    ) -> Timed<PartRan> {
        self.land();
        let diag = &mut |line: &str| self.diag.debug(line);
        with_pipeline!(&mut self.backend, p => p.copy_part(job, part, progress, stop, diag)).timed
    }

    /// Readies a file whose parts other copiers share: the staging its end needs, then DST
    /// cut to 0 (only then, so a copy that cannot start leaves DST as it was).
    pub fn begin_parts(&mut self, job: &DataJob<'_>) -> Result<(), CopyError> {
        self.land();
        self.prepare(job.src_name)?;
        let setup = Setup::new(job.src_name, job.dst_name, None);
        let cx = setup.cx(Stop::cut_back(&self.config.cancel), self.config.pause);
        FileCopy::of(job, &setup.names).begin(true, &cx)
    }

    /// Ends a file whose parts were copied by [`Engine::copy_part`] (here or by other
    /// copiers), as one copier ends a whole file: `parts` in file order, each as it ended.
    /// Returns what DST got; its digest, where the job asks for one, is read back from DEST
    /// (the parts' pieces stayed with their copiers).
    pub fn finish_parts(
        &mut self,
        job: &DataJob<'_>,
        parts: Vec<Result<PartEnd, CopyError>>,
    ) -> Result<Copied, CopyError> {
        let cancel = Arc::clone(&self.config.cancel);
        self.finish_parts_with(job, parts, &NoProgress, Stop::cut_back(&cancel))
    }

    /// [`Engine::finish_parts`] of a file copied by [`Engine::copy_part_cancellable`].
    pub fn finish_parts_cancellable(
        &mut self,
        job: &DataJob<'_>,
        parts: Vec<Result<PartEnd, CopyError>>,
        progress: &dyn ProgressSink,
        cancel: &AtomicBool,
    ) -> Result<Copied, CopyError> {
        self.finish_parts_with(job, parts, progress, Stop::leave(cancel))
    }

    fn finish_parts_with(
        &mut self,
        job: &DataJob<'_>,
        mut parts: Vec<Result<PartEnd, CopyError>>,
        progress: &dyn ProgressSink,
        stop: Stop<'_>,
    ) -> Result<Copied, CopyError> {
        self.land();
        let started = Instant::now();
        let setup = Setup::new(job.src_name, job.dst_name, job.digest);
        // The parts' pieces: each counts where DEST still holds it once the file ends.
        for end in parts.iter_mut().flatten() {
            let taken = std::mem::take(&mut end.pieces);
            if let Some(pieces) = &setup.pieces {
                pieces.extend(taken);
            }
        }
        let cx = setup.cx(stop, self.config.pause);
        let file = FileCopy::of(job, &setup.names);
        let ended =
            with_pipeline!(&mut self.backend, p => p.finish_parts(&file, parts, &cx, progress))?;
        let copied = file.copied(ended, &cx)?;
        self.conclude(job, copied, started, &setup.stages())
    }
}
