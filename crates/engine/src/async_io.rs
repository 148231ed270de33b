//! The `--async` route: both sides registered, each worker queues a slice's library read
//! and write on its own registered stream and synchronizes once per slice; with digests,
//! the slice is then hashed where it is staged.

use crate::backend::{LibraryIo, Staging, StreamIo};
use crate::bounce::Names;
use crate::error::CopyError;
use crate::fileio;
use crate::transfer::{self, Way};
use crate::worker::{run_worker, take_slices, Handle, SideRoute, SliceIo, Work};
use std::ops::Range;

/// One `--async` worker (both sides registered): one stream on its slot for this file,
/// each slice a ReadAsync then a WriteAsync on it, synchronized once. A slot hipFile would
/// not register takes the threaded worker instead.
pub(crate) fn run_async_worker<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    io: &SliceIo<'_, Handle<'_, S>>,
    work: &Work<'_>,
    report: &mut dyn FnMut(u64),
) {
    let (SideRoute::Library(src), SideRoute::Library(dst), Some(library)) =
        (io.src_side, io.dst_side, staging.library())
    else {
        return run_worker(staging, slot, io, work, report);
    };
    if library.slot_refusal(slot).is_some() {
        return run_worker(staging, slot, io, work, report);
    }
    if let Err(e) = staging.enter_worker(slot) {
        work.fail(0, io.cx.names.read(e));
        return;
    }
    let mut stream = match library.open_stream(slot) {
        Ok(Some(stream)) => stream,
        // Only an unregistered slot has no stream, and that was asked above.
        Ok(None) => return,
        Err(e) => {
            work.fail(0, io.cx.names.read(e));
            return;
        }
    };
    take_slices(work, report, io.cx.pause, |slice| {
        let len = slice.end - slice.start;
        let start = slice.start;
        let done = copy_slice_in_grains(library, &mut stream, src, dst, io, slice)?;
        // A short slice (SOURCE ended in it) is left to the file's finish, piece and all.
        if done == len {
            io.cx
                .add_streamed_piece(library, &mut stream, start, len as usize);
        }
        Ok(done)
    });
    // Dropping the stream (nothing is pending: every slice was synchronized) deregisters and
    // destroys it before the slot can be used again.
}

/// Copies `slice` a [`fileio::STOP_GRAIN`] at a time (each part its own ReadAsync,
/// WriteAsync and synchronize, into and out of its own place in the slot), looking at the
/// stop flag between parts: one pair of ops for a whole slice of --chunk-size 0x7ffff000
/// ran for seconds after SIGINT, where the threaded routes stop within a part. Returns the
/// bytes in place, as [`OnStream::copy`] does: a part that comes back short (EOF) ends it.
fn copy_slice_in_grains<'s, 'h, L: StreamIo>(
    staging: &L,
    stream: &mut L::Stream<'s>,
    src: &'s L::Handle<'h>,
    dst: &'s L::Handle<'h>,
    io: &SliceIo<'_, L::Handle<'h>>,
    slice: Range<u64>,
) -> Result<u64, CopyError> {
    let len = slice.end - slice.start;
    let mut done = 0;
    while done < len {
        if done > 0 {
            io.cx.check_cancel()?;
        }
        let n = (len - done).min(fileio::STOP_GRAIN as u64);
        let part = OnStream {
            staging,
            stream: &mut *stream,
            src,
            dst,
            file_at: slice.start + done,
            slot_at: done as usize,
        };
        let got = part.copy(n as usize, io)?;
        done += got;
        if got < n {
            break;
        }
    }
    Ok(done)
}

/// One part of a slice on a worker's stream: both registered sides, and where the part
/// begins in the files and in the slot.
struct OnStream<'r, 's, 'h, L: StreamIo + 's> {
    staging: &'r L,
    stream: &'r mut L::Stream<'s>,
    src: &'s L::Handle<'h>,
    dst: &'s L::Handle<'h>,
    file_at: u64,
    slot_at: usize,
}

impl<'s, L: StreamIo + 's> OnStream<'_, 's, '_, L> {
    /// Copies the part's `len` bytes: ReadAsync then WriteAsync (stream order makes the
    /// write see the read; no host sync between them), one synchronize, then the counts
    /// checked.
    ///
    /// The write runs whatever the read did, so after a short or failed read it has written
    /// stale slot bytes to this part of DST. A failed read fails the copy, and DST is cut
    /// back to before this slice; a short read is completed from its aligned-down count, one
    /// op per synchronize, and the part the write had covered from there is written again. A
    /// short write is completed the same way. Returns the bytes in place, as the threaded
    /// worker's `copy_slice` does.
    fn copy(mut self, len: usize, io: &SliceIo<'_, L::Handle<'_>>) -> Result<u64, CopyError> {
        let names = io.cx.names;
        let align = io.align as usize;
        let (read, written) = self.read_then_write(len, names)?;
        if read == len && written == len {
            return Ok(len as u64);
        }
        let mut got = len;
        let mut write_from = written & !(align - 1);
        if read < len {
            let base = read & !(align - 1);
            got = base
                + self
                    .complete(Way::Read, base..len, align)
                    .map_err(|e| names.read(e))?;
            write_from = write_from.min(base);
        }
        let to_write = if got < len { got & !(align - 1) } else { len };
        if write_from < to_write {
            self.complete(Way::Write, write_from..to_write, align)
                .map_err(|e| names.write(e))?;
        }
        Ok(to_write as u64)
    }

    /// Queues the read and the write of `len` bytes and synchronizes once; returns both
    /// counts (an interrupted op counts 0, for the follow-up to retry).
    fn read_then_write(
        &mut self,
        len: usize,
        names: &Names<'_>,
    ) -> Result<(usize, usize), CopyError> {
        let staging = self.staging;
        staging
            .submit(
                self.stream,
                Way::Read,
                self.src,
                len,
                self.file_at,
                self.slot_at,
            )
            .map_err(|e| names.read(e))?;
        if let Err(e) = staging.submit(
            self.stream,
            Way::Write,
            self.dst,
            len,
            self.file_at,
            self.slot_at,
        ) {
            // Let the queued read finish before the error goes up (and the slot with it).
            let _ = staging.sync_stream(self.stream);
            return Err(names.write(e));
        }
        let mut results = staging
            .sync_stream(self.stream)
            .map_err(|e| names.read(e))?
            .into_iter();
        let count = |result: Option<Result<usize, hipfile::Error>>| match result {
            Some(Ok(n)) => Ok(n.min(len)),
            Some(Err(e)) if transfer::Interruptible::is_interrupted(&e) => Ok(0),
            Some(Err(e)) => Err(e),
            None => unreachable!("two ops were queued"),
        };
        let read = count(results.next()).map_err(|e| names.read(e))?;
        let written = count(results.next()).map_err(|e| names.write(e))?;
        Ok((read, written))
    }

    /// Moves `range` of the part by `way`, one op per synchronize, until it is whole or
    /// reading meets EOF; returns the bytes moved.
    fn complete(
        &mut self,
        way: Way,
        range: Range<usize>,
        align: usize,
    ) -> Result<usize, hipfile::Error> {
        let file = match way {
            Way::Read => self.src,
            Way::Write => self.dst,
        };
        let len = range.end - range.start;
        transfer::drive(way, len, align, fileio::MAX_IO, |done, want| {
            let at = range.start + done;
            self.one_op(way, file, want, at)
        })
    }

    /// One queued op of `len` bytes at `at` into the part, synchronized on its own: its
    /// count, or its error.
    fn one_op(
        &mut self,
        way: Way,
        file: &'s L::Handle<'_>,
        len: usize,
        at: usize,
    ) -> Result<usize, hipfile::Error> {
        let (file_off, slot_off) = (self.file_at + at as u64, self.slot_at + at);
        self.staging
            .submit(self.stream, way, file, len, file_off, slot_off)?;
        self.staging
            .sync_stream(self.stream)?
            .pop()
            .expect("one op was queued")
    }
}
