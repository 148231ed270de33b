//! One file's running order, written once for every scheduler: what the copy is run with
//! ([`Setup`]), its data phase ([`FileCopy::data_phase`]: plan, open the sides, report the
//! route, the --debug line, the slices window by window, the files handed back buffered)
//! and, for a whole file, the finish after it ([`FileCopy::run`]). Which slots the slices
//! run on, and on how many threads, is the [`Scheduler`]'s.

use super::finish::FinalSize;
use super::plan::Plan;
use super::state::FileCopy;
use crate::backend::Staging;
use crate::bounce::{Ctx, Names, Stop};
use crate::digest::{Algorithm, Pieces};
use crate::error::CopyError;
use crate::job::{ProgressSink, SparseMode};
use crate::stages::{Stage, StageClock, StageTimes};
use crate::worker::{Handle, Phase, SideRoute, SliceIo, Work};
use std::io;
use std::ops::Range;
use std::path::Path;

/// What one file's copy is run with, set up once whatever schedules it: both names (for
/// messages), the pieces of its digest (--sums), and the clock its stages add to.
pub(crate) struct Setup<'p> {
    pub(crate) names: Names<'p>,
    pub(crate) pieces: Option<Pieces>,
    pub(crate) clock: StageClock,
}

impl<'p> Setup<'p> {
    /// The set-up of a copy from `src` to `dst` taking a digest by `digest` (None: none).
    pub(crate) fn new(src: &'p Path, dst: &'p Path, digest: Option<Algorithm>) -> Setup<'p> {
        Setup {
            names: Names::of(src, dst),
            pieces: digest.map(Pieces::new),
            clock: StageClock::default(),
        }
    }

    /// The context the copy's steps take: stopped by `stop`; `pause`, the tests' pause
    /// points ([`crate::Config::pause`]).
    pub(crate) fn cx<'a>(&'a self, stop: Stop<'a>, pause: fn(&'static str)) -> Ctx<'a> {
        Ctx {
            names: &self.names,
            cancel: stop.cancel,
            give_way: stop.give_way,
            on_stop: stop.on_stop,
            clock: &self.clock,
            pause,
            digest: self.pieces.as_ref(),
        }
    }

    /// Where the copy's time went so far, stage by stage.
    pub(crate) fn stages(&self) -> StageTimes {
        self.clock.times()
    }
}

/// One copy's result, with where its time went.
pub struct Timed<T> {
    pub result: Result<T, CopyError>,
    pub stages: StageTimes,
}

/// How a file's slices are spread: the pipeline's (many slots, a worker thread on each) or
/// a file worker's (its one slot, on its own thread). Everything around it is the running
/// order's ([`FileCopy::data_phase`]), the same for both.
pub(crate) trait Scheduler<S: Staging> {
    /// Readies the staging `range` needs (slots, pinned windows) and plans its first window
    /// for it, before DEST is touched: an error here leaves DEST as it was.
    fn ready(
        &mut self,
        file: &FileCopy<'_>,
        range: &Range<u64>,
        cx: &Ctx<'_>,
        diag: &mut dyn FnMut(&str),
    ) -> Result<Planned, CopyError>;

    /// The library both sides are registered with (None: they bounce), and whether
    /// --verify reads SOURCE again (it is then read through the page cache).
    fn opening(&self) -> (Option<&S::Library>, bool);

    /// The scheduler's word for the file's --debug line, given its sides ("async streams",
    /// "in flight"), if it has one.
    fn how(
        &self,
        src: &SideRoute<Handle<'_, S>>,
        dst: &SideRoute<Handle<'_, S>>,
    ) -> Option<&'static str>;

    /// The sides are open and the data is about to move (a file worker shows its file as
    /// started only now: the file may have waited in the queue before).
    fn moving(&mut self, _progress: &dyn ProgressSink) {}

    /// Runs one window's slices; returns the bytes they reported to `progress`.
    fn run(
        &mut self,
        io: &SliceIo<'_, Handle<'_, S>>,
        work: &Work<'_>,
        progress: &dyn ProgressSink,
    ) -> u64;

    /// The slot the file's finish reads through (the scheduler's first).
    fn finish_slot(&mut self) -> &mut S::Slot;
}

/// The plan of a data phase's first window, and how its next windows are cut.
pub(crate) struct Planned {
    pub(crate) plan: Plan,
    pub(crate) cut: Cut,
}

/// How a file's windows are cut ([`FileCopy::plan`]'s terms): the chunk the slots hold,
/// the size from which O_DIRECT is used, and the alignment of the slots' memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    pub(crate) chunk: usize,
    pub(crate) direct_from: u64,
    pub(crate) slot_alignment: u64,
}

impl Cut {
    /// The plan of `file`'s bytes in the first window of `range`.
    pub(crate) fn plan(&self, file: &FileCopy<'_>, range: Range<u64>) -> io::Result<Plan> {
        file.plan(range, self.chunk, self.direct_from, self.slot_alignment)
    }
}

impl FileCopy<'_> {
    /// Copies a whole regular file of `len` bytes (its size at open) with `scheduler`: its
    /// data phase, DEST cut first where `cut` says it holds old bytes, then the finish on
    /// the scheduler's first slot. Returns DEST's final size and the prefix the data phase
    /// still stands for. --debug lines go to `diag` (None without --debug: none is made).
    pub(crate) fn run<S: Staging>(
        &self,
        staging: &S,
        scheduler: &mut impl Scheduler<S>,
        (len, cut): (u64, bool),
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
        diag: Option<&mut dyn FnMut(&str)>,
    ) -> Result<FinalSize, CopyError> {
        let (phase, reported) =
            self.data_phase(staging, scheduler, (0..len, cut), cx, progress, diag)?;
        let slot = scheduler.finish_slot();
        self.finish(phase, Some(reported), staging, slot, cx, progress)
    }

    /// The data phase of `range`: the scheduler readies its slots and plans, both sides are
    /// opened (DEST cut to 0 first where `cut` says it holds old bytes), the route is
    /// reported and the --debug line written (to `diag`, where given), the slices run window
    /// by window, and both files are handed back buffered. Returns how the phase ended and
    /// the bytes reported to `progress`. An error here comes before DEST was touched.
    pub(crate) fn data_phase<S: Staging>(
        &self,
        staging: &S,
        scheduler: &mut impl Scheduler<S>,
        (range, cut): (Range<u64>, bool),
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
        diag: Option<&mut dyn FnMut(&str)>,
    ) -> Result<(Phase, u64), CopyError> {
        let debug = diag.is_some();
        let mut quiet = |_: &str| {};
        let diag: &mut dyn FnMut(&str) = match diag {
            Some(diag) => diag,
            None => &mut quiet,
        };
        let Planned { plan, cut: cutting } = scheduler.ready(self, &range, cx, diag)?;
        let (library, rereads) = scheduler.opening();
        let [src, dst] = opening(cx, || {
            self.open_sides(staging, &plan, library, rereads, cut, cx)
        })?;
        let how = scheduler.how(&src.0, &dst.0);
        scheduler.moving(progress);
        progress.route(src.0.describe(), dst.0.describe());
        if debug {
            diag(&self.route_line(&range, &plan, [(&src.0, src.1), (&dst.0, dst.1)], how));
        }
        let direct = plan.direct;
        let mut reported = 0;
        let replan = |r| cutting.plan(self, r);
        let phase = self.in_windows(&range, plan, replan, |plan| {
            let io = SliceIo {
                src: self.src,
                dst: self.dst,
                src_side: &src.0,
                dst_side: &dst.0,
                cx,
                skip_zeros: self.sparse == SparseMode::Always,
                align: plan.align,
            };
            let work = Work::new(&plan.slices, self.src, (cx.cancel, cx.give_way));
            reported += scheduler.run(&io, &work, progress);
            work.phase(&plan.window)
        });
        // The slices have ended: hand the fds back buffered, for the finish and the caller.
        drop((src, dst));
        let phase = phase.or_failure(self.end_direct(direct).err());
        Ok((phase, reported))
    }

    /// The --debug line of a data phase, one wording whatever schedules it: "'a' -> 'b':
    /// 4.77 MiB (5000000 bytes), 5 slice(s) aligned to 4.00 KiB, read bounce (why), write
    /// direct, in flight".
    fn route_line<H>(
        &self,
        range: &Range<u64>,
        plan: &Plan,
        [(src, src_why), (dst, dst_why)]: [(&SideRoute<H>, &str); 2],
        how: Option<&str>,
    ) -> String {
        let why = |why: &str| match why {
            "" => String::new(),
            why => format!(" ({why})"),
        };
        format!(
            "{} -> {}: {}, {} slice(s) aligned to {}, read {}{}, write {}{}{}",
            self.names.src(),
            self.names.dst(),
            crate::units::length(range.end - range.start),
            plan.slices.len(),
            crate::units::size(if plan.direct { plan.align } else { 1 }),
            src.describe(),
            why(src_why),
            dst.describe(),
            why(dst_why),
            how.map(|how| format!(", {how}")).unwrap_or_default(),
        )
    }
}

/// Times `f` as the open stage on `cx`'s clock.
pub(crate) fn opening<T>(cx: &Ctx<'_>, f: impl FnOnce() -> T) -> T {
    cx.clock.time(Stage::Open, f)
}
