//! One file's slices on the workers: the state they share ([`Work`]), how each side of the
//! copy moves its bytes ([`SideRoute`], [`SliceIo`]), and the loop each worker runs: take a
//! slice, read it into the slot, write it out (by the library or the bounce route).

use crate::backend::{LibraryIo, Staging};
use crate::bounce::{self, Ctx, GiveWay, PieceToAdd, Reader, Writer};
use crate::digest::Piece;
use crate::error::CopyError;
use crate::fileio;
use crate::stages::Stage;
use crate::transfer::{self, Way};
use std::fs::File;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A registered file of backend `S`.
pub(crate) type Handle<'fd, S> = <<S as Staging>::Library as LibraryIo>::Handle<'fd>;

/// How one side (SOURCE or DEST) of a copy moves its bytes: that side's route.
pub(crate) enum SideRoute<H> {
    /// Library I/O on a registered O_DIRECT fd, straight into device memory.
    Library(H),
    /// POSIX I/O through the host window; `direct` when O_DIRECT is set (host backend).
    Posix { direct: bool },
}

impl<H> SideRoute<H> {
    pub(crate) fn is_direct(&self) -> bool {
        matches!(
            self,
            SideRoute::Library(_) | SideRoute::Posix { direct: true }
        )
    }
    /// The route, for --debug lines and the progress sink.
    pub(crate) fn describe(&self) -> crate::route::Route {
        match self {
            SideRoute::Library(_) => crate::route::Route::Direct,
            SideRoute::Posix { direct: true } => crate::route::Route::ODirect,
            SideRoute::Posix { direct: false } => crate::route::Route::Bounce,
        }
    }
}

/// How a scheduler's data phase ended.
#[derive(Debug)]
pub(crate) struct Phase {
    /// DEST holds SOURCE's bytes (or holes SOURCE had) on `[0, good)`: the end of the last
    /// slice of the leading run of whole slices (None: not even the first one is whole).
    pub(crate) good: Option<u64>,
    /// Every slice was copied whole (DEST holds nothing past `good` that needs cutting).
    pub(crate) whole: bool,
    /// The first failure, at the lowest offset.
    pub(crate) error: Option<CopyError>,
    /// The ranges the plan left to no slice (the finish looks at those before `good` again),
    /// as SOURCE had them when the plan was made.
    pub(crate) holes: Vec<Range<u64>>,
    /// It ended early because it was asked to give way ([`crate::bounce::Stop::give_way`]):
    /// every slice begun was copied whole, and none after them was begun.
    pub(crate) gave_way: bool,
}

/// How one part of a file's data phase ended, for schedulers that split a file between
/// processes (MPI ranks) or turns (a staging service) and end it with
/// [`crate::Engine::finish_parts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartEnd {
    /// The end of the last whole slice in the part's leading run; None when there was none.
    pub good: Option<u64>,
    /// Every slice of the part was copied whole.
    pub whole: bool,
    /// The ranges of the part that its plan found no data in (holes, or past SOURCE's end
    /// when it was cut short): the finish looks at them again, as at a whole file's. DEST's
    /// own holes cannot say where they are: a filesystem whose SEEK_DATA calls every byte
    /// data (ramfs, NFSv3) has none.
    pub holes: Vec<Range<u64>>,
    /// The digest pieces of the part's slices, where the job takes a digest (the file's
    /// end counts those DEST still holds).
    pub pieces: Vec<Piece>,
}

impl Phase {
    /// The phase of a file whose parts ended as `parts` (in file order; an error ends it),
    /// with the holes their plans left.
    pub(crate) fn of_parts(parts: Vec<Result<PartEnd, CopyError>>) -> Phase {
        let mut good = None;
        let mut holes = Vec::new();
        for part in parts {
            match part {
                Ok(end) => {
                    good = end.good.or(good);
                    holes.extend(end.holes);
                    if !end.whole {
                        return Phase {
                            good,
                            whole: false,
                            error: None,
                            holes,
                            gave_way: false,
                        };
                    }
                }
                Err(e) => {
                    return Phase {
                        good,
                        whole: false,
                        error: Some(e),
                        holes,
                        gave_way: false,
                    }
                }
            }
        }
        Phase {
            good,
            whole: true,
            error: None,
            holes,
            gave_way: false,
        }
    }

    /// The phase with `failure` as its error when it had none (a failure after the data
    /// moved, such as handing the files back buffered).
    pub(crate) fn or_failure(mut self, failure: Option<CopyError>) -> Phase {
        if self.error.is_none() {
            self.error = failure;
        }
        self
    }

    /// This phase (of a window that ended whole) followed by the next window's.
    pub(crate) fn then(mut self, next: Phase) -> Phase {
        self.holes.extend(next.holes);
        Phase {
            good: next.good.or(self.good),
            whole: next.whole,
            error: next.error,
            holes: self.holes,
            gave_way: next.gave_way,
        }
    }

    /// How the copy of `part` ended, as [`Phase::of_parts`] takes it back. A part that gave
    /// way stands for its leading run alone, `part.start..upto`, copied whole: the holes its
    /// plan saw past that are planned again with the rest of the file.
    pub(crate) fn part_end(self, part: &Range<u64>) -> Result<PartRan, CopyError> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let (upto, holes) = match self.gave_way {
            false => (part.end, self.holes),
            true => {
                let upto = self.good.unwrap_or(part.start);
                let holes = self
                    .holes
                    .into_iter()
                    .filter(|h| h.start < upto)
                    .map(|h| h.start..h.end.min(upto))
                    .collect();
                (upto, holes)
            }
        };
        Ok(PartRan {
            end: PartEnd {
                good: self.good,
                whole: self.whole || self.gave_way,
                holes,
                pieces: Vec::new(),
            },
            upto,
        })
    }
}

/// A part's copy that may have been asked to give way: how it ended, and how far it
/// reached (the part's end, or where it gave way, which is where the next part begins).
#[derive(Debug)]
pub struct PartRan {
    pub end: PartEnd,
    pub upto: u64,
}

/// State the workers of one file share.
pub(crate) struct Work<'a> {
    slices: &'a [Range<u64>],
    next: AtomicUsize,
    /// Per slice: fully copied.
    done: Vec<AtomicBool>,
    stop: AtomicBool,
    cancel: &'a AtomicBool,
    /// Set: no slice begins any more, and the copy ends where the slices begun end.
    give_way: Option<GiveWay<'a>>,
    error: Mutex<Option<(u64, CopyError)>>,
    /// Lowest offset where a slice found SOURCE ending (u64::MAX: none did). A failure at or
    /// past it is not the copy's: a serial copy would have stopped at SOURCE's end first (a
    /// library may fail a read past a new EOF instead of answering short).
    eof_at: AtomicU64,
    /// SOURCE, whose size says whether a failed read asked past its end.
    src: &'a File,
}

impl<'a> Work<'a> {
    /// No slice taken yet of `src`'s `slices`; `cancel` stops the workers between slices,
    /// as `give_way` does without making it a failure.
    pub(crate) fn new(
        slices: &'a [Range<u64>],
        src: &'a File,
        (cancel, give_way): (&'a AtomicBool, Option<GiveWay<'a>>),
    ) -> Work<'a> {
        Work {
            slices,
            next: AtomicUsize::new(0),
            done: slices.iter().map(|_| AtomicBool::new(false)).collect(),
            stop: AtomicBool::new(false),
            cancel,
            give_way,
            error: Mutex::new(None),
            eof_at: AtomicU64::new(u64::MAX),
            src,
        }
    }

    /// A slice that ended `failed`: a read that asked past SOURCE's end as it is now marks
    /// that end at the slice's start, as a short read does (a library may answer EIO to a
    /// read across a new EOF); the finish reads on from there with buffered reads, which
    /// meet any other failure again. Anything else fails the copy.
    fn slice_failed(&self, slice: &Range<u64>, failed: CopyError) {
        let asked_past_end = matches!(failed, CopyError::Read { .. })
            && self.src.metadata().is_ok_and(|m| m.len() < slice.end);
        match asked_past_end {
            true => {
                self.eof_at.fetch_min(slice.start, Ordering::SeqCst);
            }
            false => self.fail(slice.start, failed),
        }
    }
    pub(crate) fn fail(&self, offset: u64, e: CopyError) {
        self.stop.store(true, Ordering::SeqCst);
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        // Keep the error at the lowest offset: that is what a serial copy would have hit.
        if slot.as_ref().is_none_or(|(o, _)| offset < *o) {
            *slot = Some((offset, e));
        }
    }
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.cancel.load(Ordering::SeqCst) || self.giving_way()
    }
    fn giving_way(&self) -> bool {
        self.give_way.is_some_and(|g| g())
    }
    /// The end of the last slice of the leading run of whole slices (None: the first slice
    /// is not whole), and whether every slice is whole.
    fn leading_run(&self) -> (Option<u64>, bool) {
        let mut good = None;
        for (slice, done) in self.slices.iter().zip(&self.done) {
            if !done.load(Ordering::SeqCst) {
                return (good, false);
            }
            good = Some(slice.end);
        }
        (good, true)
    }

    /// The parts of `range` (what was planned) that no slice covers: where the plan saw
    /// holes, or SOURCE ending.
    fn holes(&self, range: &Range<u64>) -> Vec<Range<u64>> {
        let mut holes = Vec::new();
        let mut end = range.start;
        for slice in self.slices {
            if slice.start > end {
                holes.push(end..slice.start);
            }
            end = end.max(slice.end);
        }
        if range.end > end {
            holes.push(end..range.end);
        }
        holes
    }

    /// How the data phase of `range` ended (the workers have stopped).
    pub(crate) fn phase(&self, range: &Range<u64>) -> Phase {
        let (good, whole) = self.leading_run();
        let error = self.error.lock().unwrap_or_else(|p| p.into_inner()).take();
        let eof_at = self.eof_at.load(Ordering::SeqCst);
        let error = error.filter(|(at, _)| *at < eof_at);
        let error = error.map(|(_, e)| e).or_else(|| {
            let cancelled = self.cancel.load(Ordering::SeqCst) && !whole;
            cancelled.then_some(CopyError::Interrupted)
        });
        // Short because it gave way, not because SOURCE ended or a slice failed.
        let gave_way = !whole && error.is_none() && eof_at == u64::MAX && self.giving_way();
        Phase {
            good,
            whole,
            error,
            holes: self.holes(range),
            gave_way,
        }
    }
}

/// What a file's slices are read and written through: both files, each side's route and
/// the copy's context.
pub(crate) struct SliceIo<'a, H> {
    pub(crate) src: &'a File,
    pub(crate) dst: &'a File,
    pub(crate) src_side: &'a SideRoute<H>,
    pub(crate) dst_side: &'a SideRoute<H>,
    pub(crate) cx: &'a Ctx<'a>,
    /// Write only the non-zero `align` blocks (--sparse=always).
    pub(crate) skip_zeros: bool,
    pub(crate) align: u64,
}

/// One worker: takes slices until none are left, the copy fails, or it is cancelled.
pub(crate) fn run_worker<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    io: &SliceIo<'_, Handle<'_, S>>,
    work: &Work<'_>,
    report: &mut dyn FnMut(u64),
) {
    if let Err(e) = staging.enter_worker(slot) {
        work.fail(0, io.cx.names.read(e));
        return;
    }
    take_slices(work, report, io.cx.pause, |slice| {
        copy_slice(staging, slot, io, slice)
    });
}

/// Takes slices until none are left, the copy fails, or it is cancelled; `copy` moves one
/// and returns its bytes (fewer only where SRC ended early).
pub(crate) fn take_slices(
    work: &Work<'_>,
    report: &mut dyn FnMut(u64),
    pause: fn(&'static str),
    mut copy: impl FnMut(Range<u64>) -> Result<u64, CopyError>,
) {
    let mut first = true;
    loop {
        // Looked at after the pause too: no slice begins once the copy is stopped.
        if work.stopping() {
            break;
        }
        pause(if first { "slice" } else { "between-slices" });
        first = false;
        if work.stopping() {
            break;
        }
        let index = work.next.fetch_add(1, Ordering::SeqCst);
        let Some(slice) = work.slices.get(index) else {
            break;
        };
        match copy(slice.clone()) {
            Ok(n) => {
                report(n);
                // A short slice (SOURCE ended in it) is left to the file's finish.
                if n == slice.end - slice.start {
                    work.done[index].store(true, Ordering::SeqCst);
                } else {
                    work.eof_at.fetch_min(slice.start + n, Ordering::SeqCst);
                }
            }
            Err(e) => work.slice_failed(slice, e),
        }
    }
}

/// Moves `len` bytes with `part(offset, n)` in parts of at most [`fileio::STOP_GRAIN`],
/// looking at the stop flag before each. Returns the bytes moved: a part that comes back
/// short (EOF) ends it.
fn in_grains(
    len: usize,
    cx: &Ctx<'_>,
    mut part: impl FnMut(usize, usize) -> Result<usize, CopyError>,
) -> Result<usize, CopyError> {
    let mut done = 0;
    while done < len {
        // Also before the first part: a write does not begin once the copy is stopped.
        cx.check_cancel()?;
        let n = (len - done).min(fileio::STOP_GRAIN);
        let got = part(done, n)?;
        done += got;
        if got < n {
            break;
        }
    }
    Ok(done)
}

/// Reads `slice` into the slot and writes it out, each side by the library (a registered
/// file and slot) or by the bounce route. Returns the bytes moved: fewer than the slice
/// only when SRC ended early, and then only the aligned part of what was read is written
/// (the file's finish reads the rest again).
fn copy_slice<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    io: &SliceIo<'_, Handle<'_, S>>,
    slice: Range<u64>,
) -> Result<u64, CopyError> {
    let len = (slice.end - slice.start) as usize;
    let got = read_slice(staging, slot, io, &slice)?;
    // A short read (SOURCE ended in the slice) is left to the file's finish, piece and all.
    // A piece queued on the GPU is computed while the slice is written out.
    let piece = match got == len {
        true => io.cx.take_piece(staging, slot, slice.start, len),
        false => PieceToAdd::none(),
    };
    let to_write = if got < len && io.src_side.is_direct() | io.dst_side.is_direct() {
        got & !(io.align as usize - 1)
    } else {
        got
    };
    let wrote = write_slice(staging, slot, io, slice.start, to_write);
    io.cx.end_piece(staging, slot, piece, wrote.is_ok());
    wrote.map(|()| to_write as u64)
}

/// The library that moves a slice through `slot`: none where the slot's buffer was refused
/// registration (it bounces, even on a registered file: the fd keeps O_DIRECT, and the
/// windows and requests stay aligned for it).
fn library_for<'s, S: Staging>(staging: &'s S, slot: &S::Slot) -> Option<&'s S::Library> {
    staging
        .library()
        .filter(|library| library.slot_refusal(slot).is_none())
}

/// Reads `slice` into the slot from its start, by the library or the bounce route; returns
/// the bytes read (fewer only where SOURCE ended).
fn read_slice<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    io: &SliceIo<'_, Handle<'_, S>>,
    slice: &Range<u64>,
) -> Result<usize, CopyError> {
    let cx = io.cx;
    let len = (slice.end - slice.start) as usize;
    let align = io.align as usize;
    match (io.src_side, library_for(staging, slot)) {
        (SideRoute::Library(handle), Some(library)) => in_grains(len, cx, |at, n| {
            cx.clock
                .time(Stage::Read, || {
                    transfer::drive(Way::Read, n, align, fileio::MAX_IO, |done, want| {
                        let done = at + done;
                        library.read(handle, slot, want, slice.start + done as u64, done)
                    })
                })
                .map_err(|e| cx.names.read(e))
        }),
        (side, _) => {
            let reader = Reader::At {
                file: io.src,
                direct: side.is_direct(),
            };
            bounce::read_in(staging, slot, &reader, slice.start, len, cx)
        }
    }
}

/// Writes the slot's first `len` bytes to DEST at `start`, by the library or the bounce
/// route.
fn write_slice<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    io: &SliceIo<'_, Handle<'_, S>>,
    start: u64,
    len: usize,
) -> Result<(), CopyError> {
    let cx = io.cx;
    let align = io.align as usize;
    match (io.dst_side, library_for(staging, slot)) {
        (SideRoute::Library(handle), Some(library)) => {
            in_grains(len, cx, |at, n| {
                cx.clock
                    .time(Stage::Write, || {
                        transfer::drive(Way::Write, n, align, fileio::MAX_IO, |done, want| {
                            let done = at + done;
                            library.write(handle, slot, want, start + done as u64, done)
                        })
                    })
                    .map_err(|e| cx.names.write(e))
            })?;
        }
        _ => {
            let writer = Writer::At {
                file: io.dst,
                skip_zeros: io.skip_zeros.then_some(align),
            };
            bounce::write_out(staging, slot, &writer, start, len, cx).map_err(|(_, e)| e)?;
        }
    }
    Ok(())
}
