//! The finish of one file's copy (step 4 of [`super`]): from where the data phase left DEST
//! good, SOURCE is read on to the end that reads report, through the slot's bounce route
//! with buffered I/O, the holes the plan saw are looked at again, and DEST's size is set. The
//! rules it keeps are [`super`]'s.

use super::state::FileCopy;
use crate::backend::Staging;
use crate::bounce::{Ctx, Pump, Reader, Writer};
use crate::error::CopyError;
use crate::fileio::{self, NextData, MIN_ALIGN};
use crate::job::ProgressSink;
use crate::job::SparseMode;
use crate::worker::Phase;
use std::io;
use std::ops::Range;

/// DEST's final size once a file's copy ended, and the prefix of it the data phase's slices
/// wrote and nothing wrote again (their digest pieces count only there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FinalSize {
    pub(crate) size: u64,
    pub(crate) kept: u64,
}

/// The slot and the progress a file's finishing reads go through.
struct Reading<'r, 's, S: Staging> {
    staging: &'r S,
    slot: &'s mut S::Slot,
    cx: &'r Ctx<'r>,
    /// Shown as progress: the bytes at `.0`, `.1` of them.
    report: &'r mut dyn FnMut(u64, u64),
}

/// What lies past the last byte read when SEEK_DATA finds no more data.
enum Trailing {
    /// A hole up to SOURCE's end, at this size.
    Hole(u64),
    /// SOURCE changed between the looks.
    Changed,
    /// SOURCE claims no size past it: read on to see.
    ReadOn,
}

/// SOURCE as one fstat sees it: a write that leaves the size as it was still moves the
/// change time (to the nanosecond where the kernel keeps fine-grained times).
#[derive(PartialEq)]
struct Look {
    size: u64,
    changed: (i64, i64),
}

/// Where SOURCE's data goes on from some offset, as the finish reads it.
enum Run {
    /// Data from `.0`, up to the hole at `.1` (None: read on to EOF).
    Data(u64, Option<u64>),
    /// No data at or after the offset.
    End,
}

/// How many looks at a trailing hole may disagree (SOURCE changing between them) before
/// the hole is read instead of trusted.
const HOLE_LOOKS: usize = 8;

impl FileCopy<'_> {
    /// Ends the copy after its data phase: on a failure DEST is cut back to what is good
    /// (after a full disk, first filled again in order as far as it goes); otherwise SOURCE is
    /// read on from there to its end through `slot`, and DEST's size set. `reported`: the
    /// bytes the data phase showed `progress`, so that holes are shown here (None: the
    /// caller shows the file's progress itself). Returns DEST's final size and how much of
    /// it the data phase's slices still stand for. Both files must be buffered again
    /// ([`FileCopy::end_direct`]), and DEST must have held nothing when the data phase
    /// began (made new, or cut by [`FileCopy::begin`]).
    pub(crate) fn finish<S: Staging>(
        &self,
        phase: Phase,
        reported: Option<u64>,
        staging: &S,
        slot: &mut S::Slot,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<FinalSize, CopyError> {
        let Phase {
            good,
            whole,
            error,
            holes,
            gave_way,
        } = phase;
        debug_assert!(!gave_way, "only a part gives way, and a part has no finish");
        let good = good.unwrap_or(0);
        // DEST began empty: a data phase whose slices were all written whole, the last
        // ending at `good`, with no zero block left unwritten (--sparse=always), left it
        // ending there (a hole between slices is below it).
        let sized_at = (whole && self.sparse != SparseMode::Always).then_some(good);
        let disk_full = self.after_phase(good, whole, error, cx)?;
        (cx.pause)("finish");
        staging
            .enter_worker(slot)
            .map_err(|e| self.cut_back(good, self.names.read(e), cx))?;
        let (end, kept, read) = self
            .read_to_end(staging, slot, &holes, good, cx, progress)
            .map_err(|(copied, e)| self.cut_back(copied, e, cx))?;
        if let Some(e) = disk_full {
            return Err(self.cut_back(end, e, cx));
        }
        self.set_size(end, sized_at == Some(end), cx)?;
        let holes = reported.and_then(|r| end.checked_sub(r.saturating_add(read)));
        if let Some(holes) = holes {
            progress.advanced(holes);
        }
        Ok(FinalSize { size: end, kept })
    }

    /// The data phase's end made good before reading on from `good`: a failure other than a
    /// full disk cuts DEST back there and is the copy's error; slices copied past a gap
    /// (`whole` false) are dropped, DEST cut to `good`. Returns a full disk's error, which
    /// fails the copy once the rest is written again in order, as far as it fits.
    fn after_phase(
        &self,
        good: u64,
        whole: bool,
        error: Option<CopyError>,
        cx: &Ctx<'_>,
    ) -> Result<Option<CopyError>, CopyError> {
        let disk_full = match error {
            Some(e) if e.is_disk_full() => Some(e),
            Some(e) => return Err(self.cut_back(good, e, cx)),
            None => None,
        };
        if !whole {
            // What follows `good` is read again in order, and a full disk must give back
            // the dropped slices' blocks first.
            if !cx.may_resize() {
                return Err(CopyError::Stopped { good });
            }
            self.dst.set_len(good).map_err(|e| self.names.write(e))?;
        }
        Ok(disk_full)
    }

    /// Reads SOURCE on through the slot to its end: first the data it now has in `holes`
    /// before `good`, then from `good` on. Returns where it ended, where the finish began
    /// writing DEST again (the slices' bytes before it stand), and the bytes it showed
    /// `progress` (only those past what the data phase showed, up to `good`).
    fn read_to_end<S: Staging>(
        &self,
        staging: &S,
        slot: &mut S::Slot,
        holes: &[Range<u64>],
        good: u64,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<(u64, u64, u64), (u64, CopyError)> {
        // Bytes before `shown` were shown by the data phase (or here): when SOURCE is read
        // again from before `good`, only what lies past it is new to the progress view.
        let mut read = 0;
        let mut shown = good;
        let mut report = |at: u64, n: u64| {
            let new = (at + n).saturating_sub(shown.max(at));
            shown = shown.max(at + n);
            read += new;
            progress.advanced(new);
        };
        let mut on = Reading {
            staging,
            slot,
            cx,
            report: &mut report,
        };
        let kept = self.fill_holes(&mut on, holes, good)?;
        let end = self.read_on(&mut on, kept)?;
        Ok((end, kept, read))
    }

    /// Copies whatever data SOURCE now has in the holes the plan left before `good` (cp
    /// looks for data again after each extent; a plan's holes are from before the slices
    /// were read). A hole stays a hole only where a look finds it still one, SOURCE's size
    /// reaching its end: a plan made while SOURCE was cut short sees its end as a hole, and
    /// SOURCE may have grown back since. Returns where the finishing reads go on from: `good`;
    /// or, where the look finds SOURCE ending inside a hole, disagrees with itself, or cannot
    /// see holes, or a read in a hole meets EOF, that point (what DEST holds past it is read
    /// again). Errors come with the offset DEST is good up to.
    fn fill_holes<S: Staging>(
        &self,
        on: &mut Reading<'_, '_, S>,
        holes: &[Range<u64>],
        good: u64,
    ) -> Result<u64, (u64, CopyError)> {
        if self.sparse == SparseMode::Never {
            return Ok(good);
        }
        for hole in holes.iter().filter(|h| h.start < good) {
            let mut pos = hole.start;
            while pos < hole.end {
                let read_err = |e| (pos, self.names.read(e));
                let next = self.next_data(pos).map_err(read_err)?;
                let (start, end) = match next {
                    NextData::At(start, end) => (start, end),
                    // No data from `pos` on: a hole only if SOURCE reaches past this one.
                    NextData::None => match self.hole_from(pos, on.cx).map_err(read_err)? {
                        Some(size) if size >= hole.end => break,
                        _ => return Ok(pos),
                    },
                    NextData::Unknown => return Ok(pos),
                };
                if start >= hole.end {
                    break;
                }
                // A write that fails at once leaves DEST ending where this hole's data did.
                let mut written = pos;
                let (stop, at_eof) =
                    self.copy_run(on, start, Some(end.min(hole.end)), &mut written)?;
                if at_eof {
                    return Ok(stop);
                }
                pos = stop;
            }
        }
        Ok(good)
    }

    /// Reads SOURCE from `from` to its end through the slot's bounce route and writes it to
    /// DEST at the same offsets, skipping the holes SOURCE has as it goes (unless
    /// `--sparse=never`). Returns where SOURCE ended; errors come with the offset DEST is
    /// good up to (never past the last bytes written: a hole skipped before a write that
    /// failed does not lengthen DEST, as with cp).
    fn read_on<S: Staging>(
        &self,
        on: &mut Reading<'_, '_, S>,
        from: u64,
    ) -> Result<u64, (u64, CopyError)> {
        let read_err = |at: u64| move |e: io::Error| (at, self.names.read(e));
        if self.sparse != SparseMode::Never {
            // The usual end: SOURCE ends where the slices did, and one read says so before
            // any seek for data or holes.
            if !fileio::has_byte_at(self.src, from).map_err(read_err(from))? {
                return Ok(from);
            }
        }
        // `pos`: everything before it is in DEST. `written`: where the last bytes written
        // end. `looks`: looks at SOURCE's holes that found nothing to read (it changed
        // meanwhile); past a few, holes are read as data.
        let mut pos = from;
        let mut written = from;
        let mut looks = 0;
        loop {
            let holes = self.sparse != SparseMode::Never && looks < HOLE_LOOKS;
            let run = match holes {
                false => Run::Data(pos, None),
                true => match self.next_data(pos).map_err(read_err(pos))? {
                    NextData::At(start, hole) => Run::Data(start, Some(hole)),
                    NextData::None => Run::End,
                    NextData::Unknown => {
                        looks = HOLE_LOOKS;
                        continue;
                    }
                },
            };
            let (start, until) = match run {
                Run::Data(start, until) => (start, until),
                Run::End => match self.trailing_end(pos, on.cx).map_err(read_err(pos))? {
                    Trailing::Hole(end) => return Ok(end),
                    // No data past `pos` by SEEK_DATA, and no size past it either: only a
                    // read can say whether SOURCE ends here (a /proc file of size 0 holds
                    // bytes all the same).
                    Trailing::ReadOn => (pos, None),
                    Trailing::Changed => {
                        looks += 1;
                        continue;
                    }
                },
            };
            let (end, at_eof) = self.copy_run(on, start, until, &mut written)?;
            if end > start {
                pos = end;
            } else if start > pos {
                // Nothing where SEEK_DATA saw data: the hole before it is not trusted
                // without data after it; look again from the last byte read.
                looks += 1;
                continue;
            }
            if at_eof {
                return Ok(pos);
            }
        }
    }

    /// What lies past `pos` when SEEK_DATA finds no data at or after it: a trailing hole up
    /// to SOURCE's size when the looks agree, nothing to trust when they disagree, or no
    /// size past `pos` at all.
    fn trailing_end(&self, pos: u64, cx: &Ctx<'_>) -> io::Result<Trailing> {
        Ok(match self.hole_from(pos, cx)? {
            Some(size) if size <= pos => Trailing::ReadOn,
            Some(size) => Trailing::Hole(size),
            None => Trailing::Changed,
        })
    }

    /// SOURCE's size, when it has no data at or after `pos` and the looks agree: two at its
    /// size and change time, and SEEK_DATA between them. Zeros past `pos` count as SOURCE's
    /// only up to this size (a SOURCE cut short, then grown again, is no hole). None:
    /// SOURCE changed between the looks. The test pause `hole-looked` falls between the
    /// first look and SEEK_DATA.
    fn hole_from(&self, pos: u64, cx: &Ctx<'_>) -> io::Result<Option<u64>> {
        let first = self.look()?;
        (cx.pause)("hole-looked");
        let again = self.next_data(pos)?;
        Ok((again == NextData::None && self.look()? == first).then_some(first.size))
    }

    /// Copies SOURCE from `start` up to `until` (None: to EOF), a slot at a time, keeping
    /// `written` at the end of the last bytes written. Returns where it stopped and whether
    /// SOURCE ended there.
    fn copy_run<S: Staging>(
        &self,
        on: &mut Reading<'_, '_, S>,
        start: u64,
        until: Option<u64>,
        written: &mut u64,
    ) -> Result<(u64, bool), (u64, CopyError)> {
        let pump = Pump {
            reader: Reader::At {
                file: self.src,
                direct: false,
            },
            writer: Writer::At {
                file: self.dst,
                skip_zeros: (self.sparse == SparseMode::Always).then_some(MIN_ALIGN as usize),
            },
            round: on.staging.slot_len(on.slot),
            until,
            last_writes: true,
        };
        pump.run(on.staging, on.slot, start, written, on.cx, on.report)
    }

    /// The next data at or after `pos`, by SEEK_DATA/SEEK_HOLE.
    fn next_data(&self, pos: u64) -> io::Result<NextData> {
        fileio::next_data(self.src, pos)
    }

    fn look(&self) -> io::Result<Look> {
        use std::os::unix::fs::MetadataExt;
        let m = self.src.metadata()?;
        Ok(Look {
            size: m.len(),
            changed: (m.ctime(), m.ctime_nsec()),
        })
    }
}
