//! One regular file's data, from the open descriptors to DEST's final size, written once for
//! every scheduler. The pipeline (slices on many workers), the files in flight (a whole file
//! on one worker's slot) and MPI ranks (a part of a file each) only schedule the data phase
//! that [`FileCopy::plan`] hands out; everything else happens here:
//!
//! 1. **Plan**: the data extents (`--sparse`), the direct-I/O alignment, whether O_DIRECT is
//!    used, and the aligned slices that cover the extents.
//! 2. **Begin**: DEST is cut to 0 only now, once the caller's staging (device memory and
//!    pinned windows) exists, so a copy that cannot get memory leaves DEST as it was.
//! 3. **Data phase** (the scheduler's): each slice is read into a slot and written out; a
//!    short read on an O_DIRECT descriptor writes only its aligned part.
//! 4. **Finish**: from the end of what the data phase left good, SOURCE is read on to the
//!    end that reads report (the unaligned tail, whatever SOURCE grew by, or everything
//!    after a slice that found SOURCE shorter), with buffered I/O. DEST's size is then set.
//!
//! The rules that keep DEST correct, whatever SOURCE does meanwhile (README "Guarantees"):
//! - DEST's size is where reading SOURCE ended, never the size fstat gave at open: a SOURCE
//!   that shrinks ends at its new end, one that grows is copied on to its new end.
//! - Every byte of DEST was read from SOURCE, or lies in a hole SOURCE had when it was looked
//!   at: a hole the plan saw, or one SOURCE ends in, counts only when SOURCE, looked at again,
//!   still has no data there and its size still reaches the hole's end (the size and change
//!   time the same on both sides of that look). Otherwise SOURCE is read on from the hole's
//!   start.
//! - An unaligned end met on an O_DIRECT descriptor is finished by buffered reads (no EINVAL).
//! - On failure DEST is cut back to the prefix known good; when the disk is full (ENOSPC,
//!   EDQUOT) the rest is written again in order with buffered writes first, so DEST keeps
//!   exactly the longest prefix the filesystem accepted, as cp does.
//! - A SOURCE whose bytes change under the copy gives the bytes read, in order (no snapshot).

mod plan;

pub(crate) use plan::{Access, Plan};

use crate::backend::{LibraryIo, Staging};
use crate::bounce::{self, Ctx, Names, Reader, Writer};
use crate::chunk_plan::ChunkPlan;
use crate::fileio::{self, MIN_ALIGN};
use crate::quote::quote;
use crate::stages::{Stage, StageTimes};
use crate::verify::Buffers;
use crate::worker::{Handle, Phase, SideRoute};
use crate::{CopyError, DataJob, ProgressSink, SparseMode};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::AtomicBool;

/// One regular SOURCE into one regular DEST.
pub(crate) struct FileCopy<'a> {
    pub(crate) src: &'a File,
    pub(crate) dst: &'a File,
    pub(crate) names: &'a Names,
    pub(crate) sparse: SparseMode,
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

impl<'a> FileCopy<'a> {
    /// The regular-file copy of `job`, with its names quoted once in `names`.
    pub(crate) fn of(job: &'a DataJob<'_>, names: &'a Names) -> FileCopy<'a> {
        FileCopy {
            src: job.src,
            dst: job.dst,
            names,
            sparse: job.sparse,
        }
    }

    /// The plan for SOURCE's bytes in `range` (the whole file: `0..len`, `len` its size at
    /// open, which bounds the plan only). O_DIRECT is used for a range of at least
    /// `direct_from` bytes holding an aligned slice, when the slot's memory is aligned enough
    /// and the chunk holds an aligned block; the slices are then aligned, else they are cut
    /// at chunk boundaries only.
    pub(crate) fn plan(
        &self,
        range: Range<u64>,
        chunk: usize,
        direct_from: u64,
        slot_alignment: u64,
    ) -> io::Result<Plan> {
        // A range too short for direct I/O (under `direct_from`, or no aligned block at all)
        // skips the two statx calls that would only say how much larger it would have to be.
        let may_be_direct = range.end - range.start >= direct_from && range.end >= MIN_ALIGN;
        let align = if may_be_direct {
            fileio::dio_alignment(self.src.as_fd()).max(fileio::dio_alignment(self.dst.as_fd()))
        } else {
            MIN_ALIGN
        };
        let extents = match self.sparse {
            SparseMode::Never => std::iter::once(0..range.end).collect(),
            _ => fileio::data_extents(self.src, range.end)?,
        };
        let extents: Vec<Range<u64>> = extents
            .iter()
            .map(|e| e.start.max(range.start)..e.end.min(range.end))
            .filter(|e| e.start < e.end)
            .collect();
        let chunk_aligned = (chunk as u64) & !(align - 1);
        let aligned_end = range.end & !(align - 1);
        let direct = may_be_direct
            && aligned_end > range.start
            && chunk_aligned >= align
            && align <= slot_alignment;
        // Without O_DIRECT a slice may end anywhere: the last one reads to the end.
        let (grain, chunk) = match direct {
            true => (align, chunk_aligned),
            false => (1, chunk as u64),
        };
        let mut slices = ChunkPlan::new(range.end, grain, chunk.max(grain), &extents).slices;
        slices.retain(|s| s.start >= range.start);
        Ok(Plan {
            align,
            slices,
            direct,
        })
    }

    /// Cuts DEST to 0 when it holds old bytes; call it once the staging the copy needs
    /// exists, so that a copy which cannot start leaves DEST as it was.
    pub(crate) fn begin(&self, truncate: bool) -> Result<(), CopyError> {
        if truncate {
            self.dst.set_len(0).map_err(|e| self.names.write(e))?;
        }
        Ok(())
    }

    /// Opens one side for the data phase as `access` asks: O_DIRECT, then registration with
    /// the library when `library` is given. Returns the side and, where it is not direct,
    /// why (for --debug).
    pub(crate) fn open_side<'fd, S: Staging>(
        &self,
        staging: &S,
        file: &'fd File,
        access: Access,
        library: Option<&S::Library>,
        name: &str,
        io_err: impl Fn(io::Error) -> CopyError,
    ) -> Result<(SideRoute<Handle<'fd, S>>, &'static str), CopyError> {
        if let Access::Buffered(why) = access {
            return Ok((SideRoute::Posix { direct: false }, why));
        }
        if !fileio::set_direct(file.as_fd()).map_err(&io_err)? {
            return Ok((SideRoute::Posix { direct: false }, "O_DIRECT refused"));
        }
        let Some(library) = library else {
            return Ok((SideRoute::Posix { direct: true }, ""));
        };
        match library.register(file.as_fd()) {
            Ok(Some(handle)) => Ok((SideRoute::Library(handle), "")),
            Ok(None) => {
                fileio::clear_direct(file.as_fd()).map_err(&io_err)?;
                Ok((SideRoute::Posix { direct: false }, "registration refused"))
            }
            Err(e) => {
                let _ = fileio::clear_direct(file.as_fd());
                Err(CopyError::Register {
                    name: name.to_owned(),
                    library: staging.name(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// Hands both files back buffered, as they came (the finishing reads need it), where
    /// `plan` opened them with O_DIRECT.
    pub(crate) fn end_direct(&self, plan: &Plan) -> Result<(), CopyError> {
        if !plan.direct {
            return Ok(());
        }
        fileio::clear_direct(self.src.as_fd()).map_err(|e| self.names.read(e))?;
        fileio::clear_direct(self.dst.as_fd()).map_err(|e| self.names.write(e))
    }

    /// Ends the copy after its data phase: on a failure DEST is cut back to what is good
    /// (after a full disk, first filled again in order as far as it goes); otherwise SOURCE is
    /// read on from there to its end through `slot`, and DEST's size set. `reported`: the
    /// bytes the data phase showed `progress`, so that holes are shown here (None: the
    /// caller shows the file's progress itself). Returns DEST's final
    /// size. Both files must be buffered again ([`FileCopy::end_direct`]).
    pub(crate) fn finish<S: Staging>(
        &self,
        phase: Phase,
        reported: Option<u64>,
        staging: &S,
        slot: &mut S::Slot,
        cx: &Ctx<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, CopyError> {
        let Phase {
            good,
            whole,
            error,
            holes,
        } = phase;
        let good = good.unwrap_or(0);
        // After a full disk the rest is written again in order, as far as it fits; the copy
        // fails either way.
        let disk_full = match error {
            Some(e) if is_disk_full(&e) => Some(e),
            Some(e) => {
                // Never leave DEST padded past what was copied; the copy error wins.
                let _ = self.dst.set_len(good);
                return Err(e);
            }
            None => None,
        };
        if !whole {
            // Slices copied past a gap are dropped: what follows `good` is read again in
            // order, and a full disk must give back their blocks first.
            self.dst.set_len(good).map_err(|e| self.names.write(e))?;
        }
        (cx.pause)("finish");
        staging
            .enter_worker(slot)
            .map_err(|e| self.names.read(e))
            .inspect_err(|_| {
                let _ = self.dst.set_len(good);
            })?;
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
        let walked = self
            .fill_holes(&mut on, &holes, good)
            .and_then(|from| self.read_on(&mut on, from));
        let end = match walked {
            Ok(end) => end,
            Err((copied, e)) => {
                let _ = self.dst.set_len(copied);
                return Err(e);
            }
        };
        if let Some(e) = disk_full {
            let _ = self.dst.set_len(end);
            return Err(e);
        }
        self.dst.set_len(end).map_err(|e| CopyError::Extend {
            name: self.names.dst.clone(),
            source: e,
        })?;
        let holes = reported.and_then(|r| end.checked_sub(r.saturating_add(read)));
        if let Some(holes) = holes {
            progress.advanced(holes);
        }
        Ok(end)
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
                    NextData::None => match self.hole_from(pos).map_err(read_err)? {
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
            let mut byte = [0u8; 1];
            if fileio::pread_full(self.src, &mut byte, from, false).map_err(read_err(from))? == 0 {
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
                Run::End => match self.trailing_end(pos).map_err(read_err(pos))? {
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
    fn trailing_end(&self, pos: u64) -> io::Result<Trailing> {
        Ok(match self.hole_from(pos)? {
            Some(size) if size <= pos => Trailing::ReadOn,
            Some(size) => Trailing::Hole(size),
            None => Trailing::Changed,
        })
    }

    /// SOURCE's size, when it has no data at or after `pos` and the looks agree: two at its
    /// size and change time, and SEEK_DATA between them. Zeros past `pos` count as SOURCE's
    /// only up to this size (a SOURCE cut short, then grown again, is no hole). None:
    /// SOURCE changed between the looks.
    fn hole_from(&self, pos: u64) -> io::Result<Option<u64>> {
        let first = self.look()?;
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
        let reader = Reader::At {
            file: self.src,
            direct: false,
        };
        let writer = Writer::At {
            file: self.dst,
            skip_zeros: (self.sparse == SparseMode::Always).then_some(MIN_ALIGN as usize),
        };
        let round = on.staging.slot_len(on.slot);
        let mut at = start;
        loop {
            let want = match until {
                Some(end) if end <= at => return Ok((at, false)),
                Some(end) => ((end - at) as usize).min(round),
                None => round,
            };
            let got = bounce::read_in(on.staging, on.slot, &reader, at, want, on.cx)
                .map_err(|e| (*written, e))?;
            if got > 0 {
                match bounce::write_out(on.staging, on.slot, &writer, at, got, on.cx) {
                    Ok(0) => {}
                    Ok(ends) => *written = at + ends as u64,
                    Err((0, e)) => return Err((*written, e)),
                    Err((ends, e)) => return Err((at + ends as u64, e)),
                }
                (on.report)(at, got as u64);
            }
            at += got as u64;
            if got < want {
                return Ok((at, true));
            }
        }
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

/// What a whole file's copy ends with, wherever it ran: the --debug line (size, time, rate
/// and thread times; `where_` when the scheduler has something to add, e.g. "slot 2 on
/// GPU 0, in flight"), then --verify. Lines go to `line` only with --debug (`debug`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conclude(
    job: &Ends<'_>,
    end: u64,
    secs: f64,
    stages: &StageTimes,
    where_: Option<String>,
    (verify, stop): (bool, &AtomicBool),
    debug: bool,
    pause: fn(&'static str),
    line: &mut dyn FnMut(String),
) -> Result<u64, CopyError> {
    if debug {
        line(format!(
            "{}: {} in {secs:.3} s ({}{}); thread time: {}",
            quote(job.dst_name),
            crate::units::length(end),
            crate::units::rate(end as f64 / secs.max(1e-9)),
            where_.map(|w| format!(", {w}")).unwrap_or_default(),
            stages.describe()
        ));
    }
    if verify {
        read_back(job, (debug, pause), (&mut Buffers::default(), stop), line)?;
    }
    Ok(end)
}

/// --verify of a whole file whose data is written: the test pause (a test changes DEST
/// there), then the read-back through `buffers`, ended at its next chunk once `stop` is set
/// (a signal: [`CopyError::Interrupted`]); its --debug line goes to `line` (only with
/// `debug`).
pub(crate) fn read_back(
    job: &Ends<'_>,
    (debug, pause): (bool, fn(&'static str)),
    (buffers, stop): (&mut Buffers, &AtomicBool),
    line: &mut dyn FnMut(String),
) -> Result<(), CopyError> {
    pause("verify");
    let (src, dst) = ((job.src, job.src_name), (job.dst, job.dst_name));
    let checked = crate::verify::verify_with(src, dst, buffers, stop)?;
    if debug {
        line(checked.describe(job.dst_name));
    }
    Ok(())
}

/// A whole file's two ends, by descriptor and by name, for [`conclude`].
pub(crate) struct Ends<'a> {
    pub(crate) src: &'a File,
    pub(crate) src_name: &'a Path,
    pub(crate) dst: &'a File,
    pub(crate) dst_name: &'a Path,
}

use fileio::NextData;

/// ENOSPC or EDQUOT on DEST: the failures after which DEST keeps the longest prefix that fits.
fn is_disk_full(e: &CopyError) -> bool {
    match e {
        CopyError::Write { source, .. } => {
            matches!(source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
        }
        _ => false,
    }
}

/// Times `f` as the open stage on `cx`'s clock.
pub(crate) fn opening<T>(cx: &Ctx<'_>, f: impl FnOnce() -> T) -> T {
    cx.clock.time(Stage::Open, f)
}
