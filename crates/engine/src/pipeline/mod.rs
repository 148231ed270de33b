//! One file's data phase over the staging slots: the slices [`FileCopy`] plans, run on the
//! workers (one per slot), then [`FileCopy::finish`] on the first slot; sequential sources
//! go through the first slot's bounce route in order.

use crate::backend::Staging;
use crate::bounce::{self, Ctx, Names, OnStop, Reader, Writer};
use crate::digest::Pieces;
use crate::error::CopyError;
use crate::file_copy::{opening, Ended, FileCopy, Plan};
use crate::fileio::MIN_ALIGN;
use crate::job::Copied;
use crate::job::DataJob;
use crate::job::ProgressSink;
use crate::job::SourceKind;
use crate::job::SparseMode;
use crate::stages::{Stage, StageClock, StageTimes};
use crate::worker::{run_worker, Endpoints, Handle, PartEnd, Phase, SideRoute, Work};
use std::ops::Range;
use std::sync::atomic::AtomicBool;
use std::sync::{mpsc, Arc};
use std::time::Duration;

mod flight;
mod slots;
mod state;

pub(crate) use state::Pipeline;

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
            last_stages: StageTimes::default(),
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

    /// Whether `--async` is on (checked at start to be supported).
    pub(crate) fn async_io(&self) -> bool {
        self.async_io
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

    /// Where the time of the last file went, and of the whole run, stage by stage.
    pub(crate) fn stages(&self) -> (StageTimes, StageTimes) {
        (self.last_stages, self.run_stages)
    }

    /// Copies a whole file (a regular SRC into a regular DST, else in order) and sets DST's
    /// size; returns it.
    pub(crate) fn copy(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        (cancel, on_stop): (&AtomicBool, OnStop),
        diag: &mut dyn FnMut(&str),
    ) -> Result<Copied, CopyError> {
        let names = Names::of(job.src_name, job.dst_name);
        let dst_regular = job.dst.metadata().map_err(|e| names.write(e))?.is_file();
        // A digest is of a regular DEST, which can be read back for what no slot hashed.
        let pieces = job.digest.filter(|_| dst_regular).map(Pieces::new);
        let clock = StageClock::default();
        let cx = Ctx {
            names: &names,
            cancel,
            on_stop,
            clock: &clock,
            pause: self.pause,
            digest: pieces.as_ref(),
        };
        clock.time(Stage::Open, || self.first_slot(&names.src_path, diag))?;
        let len = match job.src_kind {
            SourceKind::Regular { len } if dst_regular => Some(len),
            _ => None,
        };
        progress.file_started(job.src_name, len);
        let file = FileCopy::of(job, &names);
        let result = match len {
            Some(len) => self.copy_regular(&file, len, &cx, progress, diag),
            None => {
                diag(&format!("{}: streamed through the bounce route", names.src));
                progress.route(crate::route::Route::Stream, crate::route::Route::Bounce);
                file.begin(dst_regular, &cx)
                    .and_then(|()| self.copy_sequential(&file, dst_regular, &cx, progress))
                    .map(|size| Ended { size, kept: size })
            }
        };
        // The file's data phase is over either way; a bar must not outlive it.
        progress.file_finished();
        let result = result.and_then(|ended| file.copied(ended, &cx));
        self.last_stages = clock.times();
        self.run_stages.add(&self.last_stages);
        result
    }

    /// Copies the aligned slices of `part` of a regular file, as one of several copiers of
    /// the file (MPI ranks): DST is neither cut nor sized, the unaligned tail is not copied;
    /// [`crate::Engine::finish_parts`] ends the file.
    pub(crate) fn copy_part(
        &mut self,
        job: &DataJob<'_>,
        part: Range<u64>,
        progress: &dyn ProgressSink,
        (cancel, on_stop): (&AtomicBool, OnStop),
        diag: &mut dyn FnMut(&str),
    ) -> Result<PartEnd, CopyError> {
        let names = Names::of(job.src_name, job.dst_name);
        let pieces = job.digest.map(Pieces::new);
        let clock = StageClock::default();
        let cx = Ctx {
            names: &names,
            cancel,
            on_stop,
            clock: &clock,
            pause: self.pause,
            digest: pieces.as_ref(),
        };
        self.first_slot(&names.src_path, diag)?;
        let file = FileCopy::of(job, &names);
        let result = self.run_plan(&file, part, false, &cx, progress, diag);
        self.last_stages = clock.times();
        self.run_stages.add(&self.last_stages);
        let mut end = result?.0.part_end()?;
        end.pieces = pieces.map(|p| p.take()).unwrap_or_default();
        Ok(end)
    }

    /// The file's end after parts copied by [`Pipeline::copy_part`], here or elsewhere.
    pub(crate) fn finish_parts(
        &mut self,
        file: &FileCopy<'_>,
        parts: Vec<Result<PartEnd, CopyError>>,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<Ended, CopyError> {
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

    /// A regular SRC into a regular DST: the plan's slices on the workers, then the finish.
    fn copy_regular(
        &mut self,
        file: &FileCopy<'_>,
        len: u64,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
        diag: &mut dyn FnMut(&str),
    ) -> Result<Ended, CopyError> {
        let (phase, reported) = self.run_plan(file, 0..len, true, cx, progress, diag)?;
        let (staging, slot) = self.first_chosen();
        file.finish(phase, Some(reported), staging, slot, cx, progress)
    }

    /// Plans `range`, readies the slots, cuts DST (`whole_file`: the file's only data
    /// phase), opens the sides and runs the slices on the workers; hands both files back
    /// buffered. Returns how the data phase ended and the bytes reported to `progress`. An
    /// error here comes before DST was touched.
    fn run_plan(
        &mut self,
        file: &FileCopy<'_>,
        range: Range<u64>,
        whole_file: bool,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
        diag: &mut dyn FnMut(&str),
    ) -> Result<(Phase, u64), CopyError> {
        let names = cx.names;
        let (plan, workers, chunk) = self.plan_with_slots(file, &range, names, diag)?;
        let library = self.staging.library();
        let [(src_side, src_why), (dst_side, dst_why)] = opening(cx, || {
            file.open_sides(&*self.staging, &plan, library, self.verify, whole_file, cx)
        })?;
        // The stream API moves bytes between registered files and device memory only: a
        // file with a bouncing side takes the threaded workers.
        let use_async = self.async_io
            && matches!(
                (&src_side, &dst_side),
                (SideRoute::Library(_), SideRoute::Library(_))
            );
        diag(&format!(
            "{} -> {}: {}, {} slice(s) aligned to {}, read {}{}, write {}{}{}",
            names.src,
            names.dst,
            crate::units::length(range.end - range.start),
            plan.slices.len(),
            crate::units::size(if plan.direct { plan.align } else { 1 }),
            src_side.describe(),
            paren(src_why),
            dst_side.describe(),
            paren(dst_why),
            if use_async { ", async streams" } else { "" },
        ));
        progress.route(src_side.describe(), dst_side.describe());
        let direct = plan.direct;
        let slot_alignment = self.staging.slot_alignment();
        let replan = |r| file.plan(r, chunk, 0, slot_alignment);
        let mut reported = 0;
        let phase = file.in_windows(&range, plan, replan, |plan| {
            let ends = Endpoints {
                src: file.src,
                dst: file.dst,
                src_side: &src_side,
                dst_side: &dst_side,
                cx,
                skip_zeros: file.sparse == SparseMode::Always,
                align: plan.align,
            };
            let work = Work::new(&plan.slices, file.src, cx.cancel);
            reported += self.run_workers(workers, use_async, &ends, &work, progress);
            work.phase(&plan.window)
        });
        // Workers are joined: hand the fds back buffered for the finish and for the caller.
        drop(src_side);
        drop(dst_side);
        let phase = phase.or_failure(file.end_direct(direct).err());
        Ok((phase, reported))
    }

    /// Plans `range` for the slots this file may use, and readies them: device memory (a
    /// smaller chunk, and a new plan, when it runs short) and, where slices bounce, each
    /// worker's pinned windows, all before DST is touched. Returns the plan, how many
    /// workers run it and the chunk it was cut with.
    fn plan_with_slots(
        &mut self,
        file: &FileCopy<'_>,
        range: &Range<u64>,
        names: &Names,
        diag: &mut dyn FnMut(&str),
    ) -> Result<(Plan, usize, usize), CopyError> {
        let slot_alignment = self.staging.slot_alignment();
        let plan_for = |chunk: usize| {
            file.plan(range.clone(), chunk, 0, slot_alignment)
                .map_err(|e| names.read(e))
        };
        let mut chunk = self.chunk;
        let mut plan = plan_for(chunk)?;
        let wanted = self.chosen.len().min(plan.slices.len());
        let granted = self.ensure_slots(wanted, &names.src_path, diag)?;
        if granted.chunk != chunk {
            // Device memory ran short: more, smaller slices (never fewer than workers).
            chunk = granted.chunk;
            plan = plan_for(chunk)?;
        }
        let mut workers = granted.slots;
        if !(self.staging.library().is_some() && plan.direct) {
            // Every slice bounces: each worker's windows must exist before DST is touched.
            workers = self.ready_windows(workers, &names.src_path, diag)?;
        }
        self.workers = workers;
        Ok((plan, workers, chunk))
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
        let reader = Reader::Sequential(file.src);
        let writer = match dst_regular {
            true => Writer::At {
                file: file.dst,
                skip_zeros: (file.sparse == SparseMode::Always).then_some(MIN_ALIGN as usize),
            },
            false => Writer::Sequential(file.dst),
        };
        let round = staging.window_len(slot);
        // `pos`: read so far; `written`: where the last bytes written to DEST end (a DEST
        // cut back there never ends in a hole the copy skipped).
        let mut pos = 0;
        let mut written = 0;
        let result = loop {
            let got = match bounce::read_in(staging, slot, &reader, pos, round, cx) {
                Ok(0) => break Ok(pos),
                Ok(got) => got,
                Err(e) => break Err((pos, e)),
            };
            let piece = cx.take_piece(staging, slot, pos, got);
            let wrote = bounce::write_out(staging, slot, &writer, pos, got, cx);
            cx.add_piece(staging, slot, piece);
            match wrote {
                Ok(ends) if ends > 0 => written = pos + ends as u64,
                Ok(_) => {}
                Err((0, e)) => break Err((written, e)),
                Err((ends, e)) => break Err((pos + ends as u64, e)),
            }
            pos += got as u64;
            progress.advanced(got as u64);
        };
        match (result, dst_regular) {
            // DEST was cut to 0 first: where its last bytes were written it ends there.
            (Ok(end), true) => file.set_size(end, written == end, cx).map(|()| end),
            (Ok(end), false) => Ok(end),
            (Err((copied, e)), true) => Err(file.cut_back(copied, e, cx)),
            (Err((_, e)), false) => Err(e),
        }
    }

    /// Runs the slices on `workers` threads (inline when one). Returns bytes copied.
    fn run_workers(
        &mut self,
        workers: usize,
        use_async: bool,
        ends: &Endpoints<'_, Handle<'_, S>>,
        work: &Work<'_>,
        progress: &dyn ProgressSink,
    ) -> u64 {
        let Pipeline {
            slots,
            chosen,
            staging,
            threads,
            ..
        } = self;
        let staging = &**staging;
        let worker = if use_async {
            crate::async_io::run_async_worker::<S>
        } else {
            run_worker::<S>
        };
        if workers > 1 && threads.is_none() {
            // Without threads (the system refused them) the copy still goes on, inline.
            *threads = rayon::ThreadPoolBuilder::new()
                .num_threads(slots.len())
                .thread_name(|i| format!("aiscp-worker-{i}"))
                .build()
                .ok();
        }
        let chosen = &chosen[..workers];
        let mut slots = slots
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| chosen.contains(i))
            .map(|(_, s)| s.as_mut().expect("allocated"));
        let Some(threads) = threads.as_ref().filter(|_| workers > 1) else {
            let mut total = 0;
            if let Some(slot) = slots.next() {
                worker(staging, slot, ends, work, &mut |n| {
                    total += n;
                    progress.advanced(n);
                });
            }
            return total;
        };
        let (tx, rx) = mpsc::channel::<u64>();
        // The body runs here (it forwards progress); the workers run on the pool's threads.
        threads.in_place_scope(|scope| {
            for slot in slots {
                let tx = tx.clone();
                scope.spawn(move |_| {
                    worker(staging, slot, ends, work, &mut |n| {
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

fn paren(why: &str) -> String {
    if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    }
}
