//! One file's data phase over the staging slots: a regular file's copy runs in
//! [`FileCopy::run`]'s order with the pipeline as its scheduler (`workers`: the slices on
//! the workers, one per slot, then the finish on the first slot); sequential sources go
//! through the first slot's bounce route in order.

use crate::backend::Staging;
use crate::bounce::{Ctx, Pump, Reader, Stop, Writer};
use crate::error::CopyError;
use crate::file_copy::{FileCopy, FinalSize, Setup, Timed};
use crate::fileio::MIN_ALIGN;
use crate::job::{Copied, DataJob, ProgressSink, SourceKind, SparseMode};
use crate::stages::{Stage, StageTimes};
use crate::worker::{PartEnd, PartRan, Phase};
use std::ops::Range;
use std::sync::Arc;

mod flight;
mod slots;
mod state;
mod workers;

pub(crate) use state::Pipeline;

/// A file the pipeline copied (or a part of one): how it ended, where its time went, and
/// the GPUs its slots were on (positions, the first one's first).
pub(crate) struct Ran<T> {
    pub(crate) timed: Timed<T>,
    pub(crate) devices: Vec<usize>,
}

impl<S: Staging> Pipeline<S> {
    pub(crate) fn new(
        staging: S,
        chunk: usize,
        slots_per_gpu: usize,
        (pause, verify): (fn(&'static str), bool),
    ) -> Pipeline<S> {
        let n = slots_per_gpu * staging.devices();
        Pipeline {
            threads: None,
            flight: None,
            slots: (0..n).map(|_| None).collect(),
            chosen: (0..n).collect(),
            usable: vec![true; n],
            workers: 1,
            staging: Arc::new(staging),
            chunk,
            async_io: false,
            run_stages: StageTimes::default(),
            pause,
            verify,
        }
    }

    /// The staging backend the slots are made of.
    pub(crate) fn staging(&self) -> &S {
        &self.staging
    }

    /// Copies files whose sides are both registered with the stream API (`--async`).
    pub(crate) fn use_async(&mut self) {
        self.async_io = true;
    }

    /// Gives every slot back (device memory, pinned windows): the next file allocates
    /// again. The files in flight must have landed (their workers hold slots).
    pub(crate) fn release_slots(&mut self) {
        debug_assert!(self.flight.is_none());
        for slot in &mut self.slots {
            *slot = None;
        }
        // Slots given up for want of memory are tried again with the next file.
        self.usable.iter_mut().for_each(|u| *u = true);
        self.chosen = (0..self.slots.len()).collect();
    }

    /// The staging memory the slots hold now (each slot's chunk; a GPU slot's pinned
    /// windows come on top).
    pub(crate) fn held(&self) -> u64 {
        // Slots lent to the files in flight's workers are held all the same.
        let lent = self.flight.as_ref().map_or(0, |f| f.workers.len());
        (self.slots.iter().flatten().count() + lent) as u64 * self.chunk as u64
    }

    /// Bytes per slot (the run's chunk, halved where device memory ran short).
    pub(crate) fn chunk(&self) -> usize {
        self.chunk
    }

    /// Where the time of every file copied so far went, stage by stage.
    pub(crate) fn run_stages(&self) -> StageTimes {
        self.run_stages
    }

    /// Copies a whole file (a regular SRC into a regular DST, else in order) and sets DST's
    /// size; returns it.
    pub(crate) fn copy(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        stop: Stop<'_>,
        diag: &mut dyn FnMut(&str),
    ) -> Ran<Copied> {
        let mut setup = Setup::new(job.src_name, job.dst_name, job.digest);
        let result = self.copy_whole(job, &mut setup, progress, stop, diag);
        self.ran(result, &setup)
    }

    /// [`Pipeline::copy`] with its set-up made.
    fn copy_whole(
        &mut self,
        job: &DataJob<'_>,
        setup: &mut Setup<'_>,
        progress: &dyn ProgressSink,
        stop: Stop<'_>,
        diag: &mut dyn FnMut(&str),
    ) -> Result<Copied, CopyError> {
        let dst_regular = job
            .dst
            .metadata()
            .map_err(|e| setup.names.write(e))?
            .is_file();
        if !dst_regular {
            // A digest is of a regular DEST, which can be read back for what no slot hashed.
            setup.pieces = None;
        }
        let cx = setup.cx(stop, self.pause);
        let names = cx.names;
        cx.clock
            .time(Stage::Open, || self.first_slot(names.src_path, diag))?;
        let len = match job.src_kind {
            SourceKind::Regular { len } if dst_regular => Some(len),
            _ => None,
        };
        progress.file_started(job.src_name, len);
        let file = FileCopy::of(job, names);
        let result = match len {
            Some(len) => {
                let staging = Arc::clone(&self.staging);
                file.run(&*staging, self, (len, true), &cx, progress, Some(diag))
            }
            None => {
                diag(&format!(
                    "{}: streamed through the bounce route",
                    names.src()
                ));
                progress.route(crate::route::Route::Stream, crate::route::Route::Bounce);
                file.begin(dst_regular, &cx)
                    .and_then(|()| self.copy_sequential(&file, dst_regular, &cx, progress))
                    .map(|size| FinalSize { size, kept: size })
            }
        };
        // The file's data phase is over either way; a bar must not outlive it.
        progress.file_finished();
        result.and_then(|ended| file.copied(ended, &cx))
    }

    /// Copies the aligned slices of `part` of a regular file, as one of several copiers of
    /// the file (MPI ranks): DST is neither cut nor sized, the unaligned tail is not copied;
    /// [`crate::Engine::finish_parts`] ends the file.
    pub(crate) fn copy_part(
        &mut self,
        job: &DataJob<'_>,
        part: Range<u64>,
        progress: &dyn ProgressSink,
        stop: Stop<'_>,
        diag: &mut dyn FnMut(&str),
    ) -> Ran<PartRan> {
        let mut setup = Setup::new(job.src_name, job.dst_name, job.digest);
        let result = (|| {
            let cx = setup.cx(stop, self.pause);
            self.first_slot(cx.names.src_path, diag)?;
            let file = FileCopy::of(job, cx.names);
            let staging = Arc::clone(&self.staging);
            let (phase, _) = file.data_phase(
                &*staging,
                self,
                (part.clone(), false),
                &cx,
                progress,
                Some(diag),
            )?;
            phase.part_end(&part)
        })();
        let result = result.map(|mut ran| {
            ran.end.pieces = setup.pieces.take().map(|p| p.take()).unwrap_or_default();
            ran
        });
        self.ran(result, &setup)
    }

    /// A file's copy as it ended, with its stage times (added to the run's) and the GPUs
    /// its slots were on.
    fn ran<T>(&mut self, result: Result<T, CopyError>, setup: &Setup<'_>) -> Ran<T> {
        let stages = setup.stages();
        self.run_stages.add(&stages);
        Ran {
            timed: Timed { result, stages },
            devices: self.devices_used(),
        }
    }

    /// The file's end after parts copied by [`Pipeline::copy_part`], here or elsewhere.
    pub(crate) fn finish_parts(
        &mut self,
        file: &FileCopy<'_>,
        parts: Vec<Result<PartEnd, CopyError>>,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<FinalSize, CopyError> {
        // The parts' plans' holes: where SOURCE has data there now, the finish copies it.
        let phase = Phase::of_parts(parts);
        let (staging, slot) = self.first_chosen();
        file.finish(phase, None, staging, slot, cx, progress)
    }

    /// The staging and the first chosen slot, which takes every file's finish.
    fn first_chosen(&mut self) -> (&S, &mut S::Slot) {
        let slot = self.slots[self.chosen[0]]
            .as_mut()
            .expect("first_slot ran for the file");
        (&*self.staging, slot)
    }

    /// Copies a sequential source (or into a non-regular DST) from its start to EOF on this thread
    /// through the first chosen slot's bounce route, a window at a time, so a slow writer
    /// into the pipe sees its bytes come out as they arrive. Returns the bytes copied.
    fn copy_sequential(
        &mut self,
        file: &FileCopy<'_>,
        dst_regular: bool,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, CopyError> {
        let (staging, slot) = self.first_chosen();
        staging.enter_worker(slot).map_err(|e| cx.names.read(e))?;
        let pump = Pump {
            reader: Reader::Sequential(file.src),
            writer: match dst_regular {
                true => Writer::At {
                    file: file.dst,
                    skip_zeros: (file.sparse == SparseMode::Always).then_some(MIN_ALIGN as usize),
                },
                false => Writer::Sequential(file.dst),
            },
            round: staging.window_len(slot),
            until: None,
            last_writes: false,
        };
        // DEST was cut to 0 first: where its last bytes were written it ends there.
        let mut written = 0;
        let report = &mut |_, n| progress.advanced(n);
        let result = pump.run(staging, slot, 0, &mut written, cx, report);
        match (result, dst_regular) {
            (Ok((end, _)), true) => file.set_size(end, written == end, cx).map(|()| end),
            (Ok((end, _)), false) => Ok(end),
            (Err((copied, e)), true) => Err(file.cut_back(copied, e, cx)),
            (Err((_, e)), false) => Err(e),
        }
    }
}
