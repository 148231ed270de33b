//! The copy of one file over a staging backend: parallel aligned slices, then the
//! sequential tail (or the whole stream), then the exact size.

use crate::backend::{LibraryIo, Staging};
use crate::bounce::{self, Ctx, Names, Reader, Writer};
use crate::chunk_plan::ChunkPlan;
use crate::fileio::{self, MIN_ALIGN};
use crate::quote::quote;
use crate::stages::{Stage, StageClock, StageTimes};
use crate::worker::{run_worker, Handle, Route, Side, Work};
use crate::{CopyError, DataJob, ProgressSink, SourceKind, SparseMode};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Workers' slots (dropped first: buffers go back before the driver closes) and the backend.
pub(crate) struct Pipeline<S: Staging> {
    /// The worker threads: made for the first file that has more than one slice for them,
    /// then reused for every file of the run (each makes the device current again per file,
    /// which is cheap). Idle whenever no copy runs, so dropping them first frees nothing in use.
    pub(crate) threads: Option<rayon::ThreadPool>,
    /// Files in flight (see `queue`): workers holding slots lent from `slots`.
    pub(crate) flight: Option<crate::queue::Flight<S>>,
    /// `streams` per GPU, interleaved: slot `i` is on the staging's device `i % devices`.
    pub(crate) slots: Vec<Option<S::Slot>>,
    /// The slots the current file may use (indices into `slots`; see [`Pipeline::choose`]).
    pub(crate) chosen: Vec<usize>,
    /// False for a slot given up for the run (no memory for it).
    pub(crate) usable: Vec<bool>,
    /// How many of `chosen` the current file's slices run on.
    pub(crate) workers: usize,
    /// Set while copying one part of a file ([`crate::Engine::copy_part`]): its range, and
    /// whether it is the file's last part (the one that takes the tail).
    pub(crate) part: Option<(Range<u64>, bool)>,
    pub(crate) staging: Arc<S>,
    pub(crate) chunk: usize,
    /// `--async`, checked at start to be supported: files whose sides are both direct are
    /// copied with the stream API, one stream per worker.
    pub(crate) async_io: bool,
    /// The stage times of the last file copied, and of the whole run.
    pub(crate) last_stages: StageTimes,
    pub(crate) run_stages: StageTimes,
}

impl<S: Staging> Pipeline<S> {
    pub(crate) fn new(staging: S, chunk: usize, streams: usize) -> Pipeline<S> {
        let n = streams * staging.devices();
        Pipeline {
            threads: None,
            flight: None,
            slots: (0..n).map(|_| None).collect(),
            chosen: (0..n).collect(),
            usable: vec![true; n],
            workers: 1,
            part: None,
            staging: Arc::new(staging),
            chunk,
            async_io: false,
            last_stages: StageTimes::default(),
            run_stages: StageTimes::default(),
        }
    }

    pub(crate) fn copy(
        &mut self,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
        cancel: &AtomicBool,
        diag: &mut dyn FnMut(&str),
    ) -> Result<u64, CopyError> {
        let names = Names {
            src: quote(job.src_name),
            dst: quote(job.dst_name),
        };
        let clock = StageClock::default();
        let cx = Ctx {
            names: &names,
            cancel,
            clock: &clock,
        };
        clock.time(Stage::Open, || self.first_slot(&names.src, diag))?;
        let dst_regular = job.dst.metadata().map_err(|e| names.write(e))?.is_file();
        let len = match (job.src_kind, &self.part) {
            (SourceKind::Regular { .. }, Some((part, _))) => Some(part.end),
            (SourceKind::Regular { len }, None) => Some(len),
            (SourceKind::Stream, _) => None,
        };
        progress.file_started(job.src_name, len);
        // A part leaves DST's size to whoever copies the whole file.
        let dst_regular = dst_regular && self.part.is_none();
        if dst_regular {
            // The cp layer truncates; make sure, since holes are left unwritten.
            job.dst.set_len(0).map_err(|e| names.write(e))?;
        }
        let result = match len {
            Some(len) if dst_regular || self.part.is_some() => {
                self.copy_regular(job, len, &cx, progress, diag)
            }
            _ => {
                diag(&format!("{}: streamed through the bounce route", names.src));
                progress.route("stream", "bounce");
                self.sequential(job, 0, dst_regular, false, &cx, progress)
            }
        };
        // The file's data phase is over either way; a bar must not outlive it.
        progress.file_finished();
        self.last_stages = clock.times();
        self.run_stages.add(&self.last_stages);
        let end = match result {
            Ok(end) => end,
            Err((copied, e)) => {
                if dst_regular {
                    // Never leave DST padded past what was copied; the copy error wins.
                    let _ = job.dst.set_len(copied);
                }
                return Err(e);
            }
        };
        if dst_regular {
            job.dst.set_len(end).map_err(|e| CopyError::Extend {
                name: names.dst.clone(),
                source: e,
            })?;
        }
        Ok(end)
    }

    /// Opens one side for the parallel phase: O_DIRECT, then registration where files take
    /// the library route.
    fn open_side<'fd>(
        &self,
        file: &'fd File,
        want_direct: bool,
        name: &str,
        io_err: impl Fn(io::Error) -> CopyError,
    ) -> Result<(Side<Handle<'fd, S>>, &'static str), CopyError> {
        if !want_direct {
            return Ok((Side::Posix { direct: false }, "small or unaligned"));
        }
        if !fileio::set_direct(file.as_fd()).map_err(&io_err)? {
            return Ok((Side::Posix { direct: false }, "O_DIRECT refused"));
        }
        let Some(library) = self.staging.library() else {
            return Ok((Side::Posix { direct: true }, ""));
        };
        match library.register(file.as_fd()) {
            Ok(Some(handle)) => Ok((Side::Library(handle), "")),
            Ok(None) => {
                fileio::clear_direct(file.as_fd()).map_err(&io_err)?;
                Ok((Side::Posix { direct: false }, "registration refused"))
            }
            Err(e) => {
                let _ = fileio::clear_direct(file.as_fd());
                Err(CopyError::Register {
                    name: name.to_owned(),
                    library: self.staging.name(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// A regular SRC into a regular DST. Returns DST's final size, or the error with the
    /// size DST must be cut back to.
    fn copy_regular(
        &mut self,
        job: &DataJob<'_>,
        len: u64,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
        diag: &mut dyn FnMut(&str),
    ) -> Result<u64, (u64, CopyError)> {
        let (names, cancel) = (cx.names, cx.cancel);
        // A file shorter than the smallest alignment has no slice for direct I/O: skip the
        // two statx calls that would only say how much larger it would have to be.
        let align = if len < MIN_ALIGN {
            MIN_ALIGN
        } else {
            fileio::dio_alignment(job.src.as_fd()).max(fileio::dio_alignment(job.dst.as_fd()))
        };
        let mut extents = match job.sparse {
            SparseMode::Never => std::iter::once(0..len).collect::<Vec<_>>(),
            _ => fileio::data_extents(job.src, len).map_err(|e| (0, names.read(e)))?,
        };
        if let Some((part, _)) = &self.part {
            extents = extents
                .iter()
                .map(|e| e.start.max(part.start)..e.end.min(part.end))
                .filter(|e| e.start < e.end)
                .collect();
        }
        let plan_for = |chunk: usize| {
            let chunk = (chunk as u64) & !(align - 1);
            (
                chunk,
                ChunkPlan::new(len, align, chunk.max(align), &extents),
            )
        };
        let (mut chunk, mut plan) = plan_for(self.chunk);
        let chunk_before = self.chunk;
        let workers = self
            .ensure_slots(self.chosen.len().min(plan.slices.len()), &names.src, diag)
            .map_err(|e| (0, e))?;
        self.workers = workers;
        if self.chunk != chunk_before {
            // Device memory ran short: more, smaller slices (never fewer than workers).
            (chunk, plan) = plan_for(self.chunk);
        }
        // Small files keep O_DIRECT too: buffered I/O below 1 MiB measured slower on both
        // setups tried (BENCHMARKS.md, "Small files").
        let want_direct =
            !plan.slices.is_empty() && chunk >= align && align <= self.staging.slot_alignment();
        // --sparse=always must see the bytes on the host to find zero blocks.
        let dst_direct =
            want_direct && !(job.sparse == SparseMode::Always && self.staging.library().is_some());
        let (src_side, src_why) = cx
            .clock
            .time(Stage::Open, || {
                self.open_side(job.src, want_direct, &names.src, |e| names.read(e))
            })
            .map_err(|e| (0, e))?;
        let dst_side = cx.clock.time(Stage::Open, || {
            self.open_side(job.dst, dst_direct, &names.dst, |e| names.write(e))
        });
        let (dst_side, dst_why) = match dst_side {
            Ok(s) => s,
            Err(e) => {
                let _ = fileio::clear_direct(job.src.as_fd());
                return Err((0, e));
            }
        };
        // The stream API moves bytes between registered files and device memory only: a
        // file with a bouncing side takes the threaded workers.
        let use_async =
            self.async_io && matches!((&src_side, &dst_side), (Side::Library(_), Side::Library(_)));
        diag(&format!(
            "{} -> {}: {} bytes, {} slice(s) aligned to {align}, read {}{}, write {}{}{}",
            names.src,
            names.dst,
            len,
            plan.slices.len(),
            src_side.describe(),
            paren(src_why),
            dst_side.describe(),
            paren(dst_why),
            if use_async { ", async streams" } else { "" },
        ));
        progress.route(src_side.describe(), dst_side.describe());
        // A direct side needs aligned slices; with none, the slices are still aligned (the
        // plan does not care), only the last bytes go to the sequential phase.
        let route = Route {
            src: job.src,
            dst: job.dst,
            src_side: &src_side,
            dst_side: &dst_side,
            cx,
            skip_zeros: job.sparse == SparseMode::Always,
            align: align.max(MIN_ALIGN),
        };
        let work = Work::new(&plan.slices, cancel);
        let mut reported = 0;
        reported += self.run_workers(workers, use_async, &route, &work, progress);
        // Workers are joined: hand the fds back buffered for the tail and for the caller.
        let clear = |side: &Side<_>, file: &File| match side.is_direct() {
            true => fileio::clear_direct(file.as_fd()),
            false => Ok(()),
        };
        let restored = clear(&src_side, job.src)
            .map_err(|e| names.read(e))
            .and_then(|()| clear(&dst_side, job.dst).map_err(|e| names.write(e)));
        drop(src_side);
        drop(dst_side);
        let first_error = work.take_error();
        if let Some((_, e)) = first_error {
            return Err((work.copied_prefix(), e));
        }
        if cancel.load(Ordering::SeqCst) {
            return Err((work.copied_prefix(), CopyError::Interrupted));
        }
        restored.map_err(|e| (work.copied_prefix(), e))?;

        // The tail: what the slices left (the unaligned end, or from where SRC shrank), and
        // anything SRC grew by. Skipped when it lies in a hole.
        let eof_at = work.eof_at();
        let tail_start = plan.tail.start.min(eof_at & !(align - 1));
        // Only a file's last part has a tail; an earlier one ends on an aligned boundary.
        let last_part = self.part.as_ref().is_none_or(|(_, last)| *last);
        let tail_has_data = eof_at != u64::MAX
            || (last_part && job.sparse == SparseMode::Never)
            || extents.iter().any(|e| e.end > tail_start);
        // SRC that grew while the slices ran is copied on to its new EOF, as cp reads until
        // EOF (skipping the tail otherwise keeps a trailing hole a hole).
        let grew = last_part && job.src.metadata().is_ok_and(|m| m.len() > len);
        let end = if tail_has_data || grew {
            let from = if tail_has_data { tail_start } else { len };
            let end = self.sequential(job, from, true, true, cx, progress)?;
            reported += end - from;
            end
        } else {
            len
        };
        if let Some(holes) = end.checked_sub(reported) {
            progress.advanced(holes);
        }
        Ok(end)
    }

    /// Runs the slices on `workers` threads (inline when one). Returns bytes copied.
    fn run_workers(
        &mut self,
        workers: usize,
        use_async: bool,
        route: &Route<'_, Handle<'_, S>>,
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
            crate::streams::run_async_worker::<S>
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
                worker(staging, slot, route, work, &mut |n| {
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
                    worker(staging, slot, route, work, &mut |n| {
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

    /// Copies from `start` to SRC's EOF on this thread through the bounce route of the first chosen slot.
    /// Positional reads when `positional_src`; DST is written at offsets when `dst_regular`.
    /// Returns the end offset, or the error with the size DST must be cut back to.
    fn sequential(
        &mut self,
        job: &DataJob<'_>,
        start: u64,
        dst_regular: bool,
        positional_src: bool,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, (u64, CopyError)> {
        let staging = &*self.staging;
        let slot = self.slots[self.chosen[0]]
            .as_mut()
            .expect("first_slot ran in copy");
        staging
            .enter_worker(slot)
            .map_err(|e| (start, cx.names.read(e)))?;
        let reader = match positional_src {
            true => Reader::At {
                file: job.src,
                direct: false,
            },
            false => Reader::Stream(job.src),
        };
        let writer = match dst_regular {
            true => Writer::At {
                file: job.dst,
                skip_zeros: (job.sparse == SparseMode::Always).then_some(MIN_ALIGN as usize),
            },
            false => Writer::Stream(job.dst),
        };
        // A stream goes a window at a time, so a slow writer into the pipe sees its bytes
        // come out as they arrive; a file a slot at a time.
        let round = match positional_src {
            true => self.chunk,
            false => staging.window_len(slot),
        };
        let mut pos = start;
        loop {
            let got =
                bounce::read_in(staging, slot, &reader, pos, round, cx).map_err(|e| (pos, e))?;
            if got == 0 {
                return Ok(pos);
            }
            bounce::write_out(staging, slot, &writer, pos, got, cx).map_err(|e| (pos, e))?;
            pos += got as u64;
            progress.advanced(got as u64);
        }
    }
}

fn paren(why: &str) -> String {
    if why.is_empty() {
        String::new()
    } else {
        format!(" ({why})")
    }
}
