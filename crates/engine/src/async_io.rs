//! The `--async` route: both sides registered, each worker queues a slice's library read
//! and write on its own registered stream and synchronizes once per slice.

use crate::backend::{LibraryIo, Staging, StreamIo};
use crate::error::CopyError;
use crate::fileio;
use crate::transfer::{self, Way};
use crate::worker::{run_worker, take_slices, Endpoints, Handle, SideRoute, Work};
use std::ops::Range;

/// One `--async` worker (both sides registered): one stream on its slot for this file,
/// each slice a ReadAsync then a WriteAsync on it, synchronized once. A slot hipFile would
/// not register takes the threaded worker instead.
pub(crate) fn run_async_worker<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    ends: &Endpoints<'_, Handle<'_, S>>,
    work: &Work<'_>,
    report: &mut dyn FnMut(u64),
) {
    let (SideRoute::Library(src), SideRoute::Library(dst), Some(library)) =
        (ends.src_side, ends.dst_side, staging.library())
    else {
        return run_worker(staging, slot, ends, work, report);
    };
    if library.slot_refusal(slot).is_some() {
        return run_worker(staging, slot, ends, work, report);
    }
    if let Err(e) = staging.enter_worker(slot) {
        work.fail(0, ends.cx.names.read(e));
        return;
    }
    let mut stream = match library.open_stream(slot) {
        Ok(Some(stream)) => stream,
        // Only an unregistered slot has no stream, and that was asked above.
        Ok(None) => return,
        Err(e) => {
            work.fail(0, ends.cx.names.read(e));
            return;
        }
    };
    take_slices(work, report, ends.cx.pause, |slice| {
        copy_slice_in_grains(library, &mut stream, src, dst, ends, slice)
    });
    // Dropping the stream (nothing is pending: every slice was synchronized) deregisters and
    // destroys it before the slot can be used again.
}

/// Copies `slice` a [`fileio::STOP_GRAIN`] at a time (each part its own ReadAsync,
/// WriteAsync and synchronize, into and out of its own place in the slot), looking at the
/// stop flag between parts: one pair of ops for a whole slice of --chunk-size 0x7ffff000
/// ran for seconds after SIGINT, where the threaded routes stop within a part. Returns the
/// bytes in place, as [`copy_slice_async`] does: a part that comes back short (EOF) ends it.
fn copy_slice_in_grains<'s, L: StreamIo>(
    staging: &L,
    stream: &mut L::Stream<'s>,
    src: &'s L::Handle<'_>,
    dst: &'s L::Handle<'_>,
    ends: &Endpoints<'_, L::Handle<'_>>,
    slice: Range<u64>,
) -> Result<u64, CopyError> {
    let len = slice.end - slice.start;
    let mut done = 0;
    while done < len {
        if done > 0 {
            ends.cx.check_cancel()?;
        }
        let n = (len - done).min(fileio::STOP_GRAIN as u64);
        let at = slice.start + done;
        let got = copy_slice_async(staging, stream, src, dst, ends, at..at + n, done as usize)?;
        done += got;
        if got < n {
            break;
        }
    }
    Ok(done)
}

/// One queued op, synchronized on its own: its count, or its error.
fn one_op<'s, L: StreamIo>(
    staging: &L,
    stream: &mut L::Stream<'s>,
    way: Way,
    file: &'s L::Handle<'_>,
    len: usize,
    file_off: u64,
    slot_off: usize,
) -> Result<usize, hipfile::Error> {
    match way {
        Way::Read => staging.submit_read(stream, file, len, file_off, slot_off)?,
        Way::Write => staging.submit_write(stream, file, len, file_off, slot_off)?,
    }
    staging
        .sync_stream(stream)?
        .pop()
        .expect("one op was queued")
}

/// Copies `slice` with the stream through the slot from `slot_base`: ReadAsync then
/// WriteAsync (stream order makes the write see the read; no host sync between them), one
/// synchronize, then the counts checked.
///
/// The write runs whatever the read did, so after a short or failed read it has written
/// stale slot bytes to this slice of DST. A failed read fails the copy, and DST is cut back
/// to before this slice; a short read is completed from its aligned-down count, one op per
/// synchronize, and the part the write had covered from there is written again. A short
/// write is completed the same way. Returns the bytes in place, as the threaded worker's `copy_slice` does.
fn copy_slice_async<'s, L: StreamIo>(
    staging: &L,
    stream: &mut L::Stream<'s>,
    src: &'s L::Handle<'_>,
    dst: &'s L::Handle<'_>,
    ends: &Endpoints<'_, L::Handle<'_>>,
    slice: Range<u64>,
    slot_base: usize,
) -> Result<u64, CopyError> {
    let names = ends.cx.names;
    let len = (slice.end - slice.start) as usize;
    let align = ends.align as usize;
    staging
        .submit_read(stream, src, len, slice.start, slot_base)
        .map_err(|e| names.read(e))?;
    if let Err(e) = staging.submit_write(stream, dst, len, slice.start, slot_base) {
        // Let the queued read finish before the error goes up (and the slot with it).
        let _ = staging.sync_stream(stream);
        return Err(names.write(e));
    }
    let mut results = staging
        .sync_stream(stream)
        .map_err(|e| names.read(e))?
        .into_iter();
    // EINTR is a zero count: the follow-up below retries it.
    let count = |result: Option<Result<usize, hipfile::Error>>| match result {
        Some(Ok(n)) => Ok(n.min(len)),
        Some(Err(e)) if transfer::Interruptible::is_interrupted(&e) => Ok(0),
        Some(Err(e)) => Err(e),
        None => unreachable!("two ops were queued"),
    };
    let read = count(results.next()).map_err(|e| names.read(e))?;
    let written = count(results.next()).map_err(|e| names.write(e))?;
    if read == len && written == len {
        return Ok(len as u64);
    }
    let mut got = len;
    let mut write_from = written & !(align - 1);
    if read < len {
        let base = read & !(align - 1);
        got = base
            + transfer::drive(
                Way::Read,
                len - base,
                align,
                fileio::MAX_IO,
                |done, want| {
                    let at = base + done;
                    one_op(
                        staging,
                        stream,
                        Way::Read,
                        src,
                        want,
                        slice.start + at as u64,
                        slot_base + at,
                    )
                },
            )
            .map_err(|e| names.read(e))?;
        write_from = write_from.min(base);
    }
    let to_write = if got < len { got & !(align - 1) } else { len };
    if write_from < to_write {
        transfer::drive(
            Way::Write,
            to_write - write_from,
            align,
            fileio::MAX_IO,
            |done, want| {
                let at = write_from + done;
                one_op(
                    staging,
                    stream,
                    Way::Write,
                    dst,
                    want,
                    slice.start + at as u64,
                    slot_base + at,
                )
            },
        )
        .map_err(|e| names.write(e))?;
    }
    Ok(to_write as u64)
}
