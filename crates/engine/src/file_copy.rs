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
//! The rules that keep DEST correct, whatever SOURCE does meanwhile (docs/GUARANTEES.md):
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

mod finish;
mod plan;
mod run;
mod state;

pub(crate) use state::{FileCopy, Sides};

pub(crate) use finish::FinalSize;
pub(crate) use plan::{Access, Plan};
pub use run::Timed;
pub(crate) use run::{opening, Cut, Planned, Scheduler, Setup};

/// Slices one plan holds at most ([`FileCopy::plan`]): 1,024 chunks, 64 GiB at the default
/// chunk, planned in 16 KiB.
pub(crate) const WINDOW_SLICES: u64 = 1024;

use crate::backend::{LibraryIo, Staging};
use crate::bounce::{Ctx, Names};
use crate::chunk_plan::ChunkPlan;
use crate::config::Verify;
use crate::error::{CopyError, Side};
use crate::fileio::{self, MIN_ALIGN};
use crate::job::Copied;
use crate::job::DataJob;
use crate::job::SparseMode;
use crate::quote::quote;
use crate::stages::{Stage, StageTimes};
use crate::verify::Buffers;
use crate::worker::{Handle, Phase, SideRoute};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;

impl<'a> FileCopy<'a> {
    /// The regular-file copy of `job`, with its names quoted once in `names`.
    pub(crate) fn of(job: &'a DataJob<'_>, names: &'a Names<'a>) -> FileCopy<'a> {
        FileCopy {
            src: job.src,
            dst: job.dst,
            names,
            sparse: job.sparse,
            may_have_holes: true,
        }
    }

    /// The plan for SOURCE's bytes in the first window of `range` (the whole file: `0..len`,
    /// `len` its size at open, which bounds the plan only): at most [`WINDOW_SLICES`]
    /// slices, so a plan costs the same memory whatever the file's length. O_DIRECT is used
    /// for a range of at least `direct_from` bytes holding an aligned slice, when the
    /// slot's memory is aligned enough and the chunk holds an aligned block; the slices are
    /// then aligned, else they are cut at chunk boundaries only.
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
        let chunk = chunk.max(grain);
        // Window ends other than the file's are whole chunks from its start, so aligned.
        let span = chunk.saturating_mul(WINDOW_SLICES);
        let window = range.start..range.end.min(range.start.saturating_add(span));
        let extents = match self.sparse {
            _ if !self.may_have_holes => vec![window.clone()],
            SparseMode::Never => vec![window.clone()],
            _ => fileio::data_extents(self.src, window.clone())?,
        };
        let extents: Vec<Range<u64>> = extents
            .iter()
            .map(|e| e.start.max(window.start)..e.end.min(window.end))
            .filter(|e| e.start < e.end)
            .collect();
        let mut slices = ChunkPlan::new(window.end, grain, chunk, &extents).slices;
        slices.retain(|s| s.start >= window.start);
        Ok(Plan {
            align,
            slices,
            window,
            direct,
        })
    }

    /// The data phase of `range`, a window at a time: `first` (the plan of its first
    /// window, for which the caller readied the slots and opened the sides) is run by
    /// `run`, then each next window, planned by `replan` from where the last one ended,
    /// while the last ended whole and the next opens the files as the first did (else the
    /// finish reads on from where the last whole window ended). Returns how the phase
    /// ended, with every window's holes.
    pub(crate) fn in_windows(
        &self,
        range: &Range<u64>,
        first: Plan,
        replan: impl Fn(Range<u64>) -> io::Result<Plan>,
        mut run: impl FnMut(&Plan) -> Phase,
    ) -> Phase {
        let mut plan = first;
        let mut phase = run(&plan);
        while phase.whole && phase.error.is_none() && plan.window.end < range.end {
            let next = match replan(plan.window.end..range.end) {
                Ok(next) => next,
                Err(e) => return phase.or_failure(Some(self.names.read(e))),
            };
            if next.direct != plan.direct || next.align != plan.align {
                break;
            }
            plan = next;
            phase = phase.then(run(&plan));
        }
        phase
    }

    /// Cuts DEST to 0 when it holds old bytes; call it once the staging the copy needs
    /// exists, so that a copy which cannot start leaves DEST as it was. A copy its owner
    /// stopped before this point never touches DEST; the run's own stop still cuts it, as
    /// the copier has already named the file (`-v`) as begun.
    pub(crate) fn begin(&self, truncate: bool, cx: &Ctx<'_>) -> Result<(), CopyError> {
        if !cx.may_resize() {
            return Err(CopyError::Interrupted);
        }
        if truncate {
            self.dst.set_len(0).map_err(|e| self.names.write(e))?;
        }
        Ok(())
    }

    /// Sets DEST's final size, `end` (no call where DEST is known to end there already:
    /// `sized`); a copy stopped by its owner meanwhile leaves DEST as it is instead
    /// ([`OnStop::Leave`]). Every change of DEST's size after its data phase goes through
    /// here or [`FileCopy::cut_back`].
    pub(crate) fn set_size(&self, end: u64, sized: bool, cx: &Ctx<'_>) -> Result<(), CopyError> {
        if !cx.may_resize() {
            return Err(CopyError::Stopped { good: end });
        }
        if sized {
            return Ok(());
        }
        self.dst.set_len(end).map_err(|e| CopyError::Extend {
            path: self.names.dst_path.to_path_buf(),
            source: e,
        })
    }

    /// DEST cut back to `good`, the prefix known to hold SOURCE's bytes, after `failure`
    /// ended the copy (never padded past what was copied; the failure is what the caller
    /// sees). A copy stopped by its owner is left as it is, and ends as
    /// [`CopyError::Stopped`] at `good`.
    pub(crate) fn cut_back(&self, good: u64, failure: CopyError, cx: &Ctx<'_>) -> CopyError {
        if !cx.may_resize() {
            return CopyError::Stopped { good };
        }
        let _ = self.dst.set_len(good);
        failure
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
        side: Side,
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
                let path = match side {
                    Side::Source => &self.names.src_path,
                    Side::Dest => &self.names.dst_path,
                };
                Err(CopyError::Register {
                    path: path.to_path_buf(),
                    side,
                    library: staging.name(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// Opens both sides for the data phase as `plan` asks (registered with `library` where
    /// given; SOURCE through the page cache under `verify` where it may be), then cuts DEST
    /// when `cut` says it holds old bytes (unless `cx`'s copy was stopped meanwhile). On a
    /// failure both files go back buffered. Returns
    /// each side with why it is not direct (for --debug).
    pub(crate) fn open_sides<S: Staging>(
        &self,
        staging: &S,
        plan: &Plan,
        library: Option<&S::Library>,
        verify: bool,
        cut: bool,
        cx: &Ctx<'_>,
    ) -> Result<Sides<'a, S>, CopyError> {
        let names = self.names;
        let opened = (|| {
            let src_access = plan.source_access(verify, library.is_some());
            let dst_access = plan.dest_access(self.sparse, library.is_some());
            let src =
                self.open_side(staging, self.src, src_access, library, Side::Source, |e| {
                    names.read(e)
                })?;
            let dst = self.open_side(staging, self.dst, dst_access, library, Side::Dest, |e| {
                names.write(e)
            })?;
            self.begin(cut, cx)?;
            Ok([src, dst])
        })();
        if opened.is_err() {
            let _ = self.end_direct(plan.direct);
        }
        opened
    }

    /// What the copy gave DEST, once its size is set: the size and, where the copy takes
    /// digests, DEST's digest (from the pieces that still stand, the rest read back).
    pub(crate) fn copied(&self, ended: FinalSize, cx: &Ctx<'_>) -> Result<Copied, CopyError> {
        let digest = match cx.digest {
            None => None,
            Some(pieces) => {
                let finished = cx.clock.time(Stage::Digest, || {
                    pieces.finish(self.dst, ended.kept, ended.size)
                });
                let finished = finished.map_err(|e| CopyError::Digest {
                    name: self.names.dst(),
                    source: e,
                })?;
                Some(finished.digest)
            }
        };
        Ok(Copied {
            size: ended.size,
            digest,
        })
    }

    /// Hands both files back buffered, as they came (the finishing reads need it), where
    /// the plan opened them with O_DIRECT (`direct`).
    pub(crate) fn end_direct(&self, direct: bool) -> Result<(), CopyError> {
        if !direct {
            return Ok(());
        }
        fileio::clear_direct(self.src.as_fd()).map_err(|e| self.names.read(e))?;
        fileio::clear_direct(self.dst.as_fd()).map_err(|e| self.names.write(e))
    }
}

/// How long a whole file's copy took, for its --debug line: `where_` when the scheduler
/// has something to add, e.g. "slot 2 on GPU 0, in flight".
pub(crate) struct Timing<'s> {
    pub(crate) secs: f64,
    pub(crate) stages: &'s StageTimes,
    pub(crate) where_: Option<String>,
}

/// What the run asks of a file once its copy has ended: --verify (stopped by `stop`),
/// --debug lines, and the tests' pause points.
pub(crate) struct AtEnd<'a> {
    pub(crate) verify: Option<Verify>,
    pub(crate) stop: &'a AtomicBool,
    pub(crate) debug: bool,
    pub(crate) pause: fn(&'static str),
}

/// What a whole file's copy ends with, wherever it ran: the --debug line (size, time, rate
/// and thread times), then --verify. Lines go to `line` only with --debug.
pub(crate) fn conclude(
    job: &DataJob<'_>,
    copied: Copied,
    timing: Timing<'_>,
    at_end: AtEnd<'_>,
    line: &mut dyn FnMut(String),
) -> Result<Copied, CopyError> {
    let Timing {
        secs,
        stages,
        where_,
    } = timing;
    let AtEnd {
        verify,
        stop,
        debug,
        pause,
    } = at_end;
    let end = copied.size;
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
    if let Some(verify) = verify {
        let how = (verify, &copied);
        read_back(
            job,
            how,
            (debug, pause),
            (&mut Buffers::default(), stop),
            line,
        )?;
    }
    Ok(copied)
}

/// --verify of a whole file whose data is written: the test pause (a test changes DEST
/// there), then the read-back through `buffers`, ended at its next chunk once `stop` is set
/// (a signal: [`CopyError::Interrupted`]); its --debug line goes to `line` (only with
/// `debug`).
pub(crate) fn read_back(
    job: &DataJob<'_>,
    (verify, copied): (Verify, &Copied),
    (debug, pause): (bool, fn(&'static str)),
    (buffers, stop): (&mut Buffers, &AtomicBool),
    line: &mut dyn FnMut(String),
) -> Result<(), CopyError> {
    pause("verify");
    let (src, dst) = ((job.src, job.src_name), (job.dst, job.dst_name));
    let checked = crate::verify::check(verify, src, dst, copied, buffers, stop)?;
    if debug {
        line(checked.describe(job.dst_name));
    }
    Ok(())
}
