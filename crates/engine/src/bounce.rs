//! The bounce route, written once: SRC is read into host windows, each window's bytes are
//! queued to the slot (GPU memory) while the next window is read, and the slot's bytes come
//! back through the windows, each one queued while the previous is written out. Every path
//! that does not use the I/O library takes it: the workers' slices, the unaligned tail, and
//! sequential sources.
//!
//! On the host backend a window is the slot itself and the copies are no-ops, so the same
//! code is a plain read then write of the slice.

use crate::backend::{Staging, StreamIo};
use crate::digest::{Hashing, Piece, Pieces, Queued};
use crate::error::CopyError;
use crate::fileio;
use crate::stages::{Stage, StageClock};
use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// The two names of a copy, for messages: borrowed from the job, and quoted as cp quotes
/// them only when a message or a --debug line needs them (a tree of small files makes none).
#[derive(Clone, Copy)]
pub(crate) struct Names<'p> {
    pub(crate) src_path: &'p std::path::Path,
    pub(crate) dst_path: &'p std::path::Path,
}

impl<'p> Names<'p> {
    /// The names of a copy from `src` to `dst`.
    pub(crate) fn of(src: &'p std::path::Path, dst: &'p std::path::Path) -> Names<'p> {
        Names {
            src_path: src,
            dst_path: dst,
        }
    }
    /// SOURCE's name quoted as cp quotes it.
    pub(crate) fn src(&self) -> String {
        crate::quote::quote(self.src_path)
    }
    /// DEST's name quoted as cp quotes it.
    pub(crate) fn dst(&self) -> String {
        crate::quote::quote(self.dst_path)
    }
    /// A read failure, from an OS call or a GPU library call (hipfile-rs keeps the errno
    /// where there is one, the decoded text otherwise).
    pub(crate) fn read(&self, e: impl Into<io::Error>) -> CopyError {
        CopyError::Read {
            path: self.src_path.to_path_buf(),
            source: e.into(),
        }
    }
    pub(crate) fn write(&self, e: impl Into<io::Error>) -> CopyError {
        CopyError::Write {
            path: self.dst_path.to_path_buf(),
            source: e.into(),
        }
    }
}

/// Where the bounce route reads.
pub(crate) enum Reader<'a> {
    /// Positional reads of a regular file; `direct` when its fd has O_DIRECT.
    At { file: &'a File, direct: bool },
    /// Reads in order from a sequential source, until EOF or until the copy is cancelled.
    Sequential(&'a File),
}

/// Where the bounce route writes.
pub(crate) enum Writer<'a> {
    /// Positional writes; with `skip_zeros`, all-zero blocks of that size stay holes.
    At {
        file: &'a File,
        skip_zeros: Option<usize>,
    },
    /// Sequential writes (DST is a pipe, a terminal, a device).
    Sequential(&'a File),
}

/// What a stopped copy may still do to DEST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OnStop {
    /// The run's own stop (a signal in this process, which then dies of it): DEST is cut
    /// back to the prefix known good, what cp leaves of the file it was writing.
    CutBack,
    /// A stop from the file's owner (a staging service's client that cancelled or went
    /// away): DEST is left exactly as the last write left it, since the owner may already
    /// be writing it again; the prefix known good comes back in [`CopyError::Stopped`] for
    /// an owner still there to cut.
    Leave,
}

/// What stops a copy, and what the stop leaves DEST as.
#[derive(Clone, Copy)]
pub(crate) struct Stop<'a> {
    pub(crate) cancel: &'a AtomicBool,
    pub(crate) on_stop: OnStop,
    /// True once a copy of part of a file is to end early, where the slices already begun
    /// end: no new slice starts, and what was copied stands (see [`crate::PartRan`]).
    pub(crate) give_way: Option<GiveWay<'a>>,
}

impl Stop<'_> {
    /// The run's own stop: DEST is cut back to the prefix known good.
    pub(crate) fn cut_back(cancel: &AtomicBool) -> Stop<'_> {
        Stop {
            cancel,
            on_stop: OnStop::CutBack,
            give_way: None,
        }
    }

    /// A stop from the file's owner: DEST is left as the last write left it.
    pub(crate) fn leave(cancel: &AtomicBool) -> Stop<'_> {
        Stop {
            cancel,
            on_stop: OnStop::Leave,
            give_way: None,
        }
    }
}

/// Whether a part should end now, where its slices begun end
/// ([`crate::Engine::copy_part_cancellable`]); asked by every worker before each slice.
pub type GiveWay<'a> = &'a (dyn Fn() -> bool + Sync);

/// What one bounce needs besides the bytes' place.
pub(crate) struct Ctx<'a> {
    pub(crate) names: &'a Names<'a>,
    pub(crate) cancel: &'a AtomicBool,
    /// [`Stop::give_way`].
    pub(crate) give_way: Option<GiveWay<'a>>,
    /// What `cancel` leaves DEST to.
    pub(crate) on_stop: OnStop,
    pub(crate) clock: &'a StageClock,
    /// [`crate::Config::pause`].
    pub(crate) pause: fn(&'static str),
    /// Where the file's digest pieces go (--sums); None without digests.
    pub(crate) digest: Option<&'a Pieces>,
}

impl Ctx<'_> {
    pub(crate) fn check_cancel(&self) -> Result<(), CopyError> {
        match self.cancel.load(Ordering::SeqCst) {
            true => Err(CopyError::Interrupted),
            false => Ok(()),
        }
    }

    /// The most one write from a host window asks for before the stop is looked at again
    /// ([`fileio::WRITE_PIECE`] for a copy its owner may stop, the whole window otherwise).
    pub(crate) fn write_piece(&self) -> usize {
        match self.on_stop {
            OnStop::Leave => fileio::WRITE_PIECE,
            OnStop::CutBack => usize::MAX,
        }
    }

    /// Starts the digest piece of the slot's first `len` bytes, which DEST receives at
    /// `start`, where the copy takes digests: taken now, or queued where the bytes are
    /// staged and added by [`Ctx::end_piece`] once the slot is written out (the slot's
    /// bytes stay until then). A slot the backend does not (or could not) hash adds none:
    /// the file's digest reads those bytes back from DEST instead.
    pub(crate) fn take_piece<S: Staging>(
        &self,
        staging: &S,
        slot: &mut S::Slot,
        start: u64,
        len: usize,
    ) -> PieceToAdd {
        self.start_piece(staging, slot, start, len, false)
    }

    /// [`Ctx::take_piece`] of bytes the file's finish writes (nothing writes DEST after).
    pub(crate) fn take_final_piece<S: Staging>(
        &self,
        staging: &S,
        slot: &mut S::Slot,
        start: u64,
        len: usize,
    ) -> PieceToAdd {
        self.start_piece(staging, slot, start, len, true)
    }

    fn start_piece<S: Staging>(
        &self,
        staging: &S,
        slot: &mut S::Slot,
        start: u64,
        len: usize,
        last: bool,
    ) -> PieceToAdd {
        let Some(pieces) = self.digest else {
            return PieceToAdd(None);
        };
        let hashing = self.clock.time(Stage::Digest, || {
            staging.hash(slot, len, start, pieces.algorithm())
        });
        match hashing {
            Ok(Hashing::Done(Some(piece))) => add(pieces, piece, last),
            Ok(Hashing::Queued(queued)) => return PieceToAdd(Some((queued, last))),
            Ok(Hashing::Done(None)) | Err(_) => {}
        }
        PieceToAdd(None)
    }

    /// Ends the piece [`Ctx::take_piece`] queued, once the GPU has it: added where the slice
    /// was `written`, else only waited for, so that on every path the kernels are done
    /// before the slot takes other bytes. One that fails is left out, and the file's digest
    /// reads those bytes back from DEST.
    pub(crate) fn end_piece<S: Staging>(
        &self,
        staging: &S,
        slot: &mut S::Slot,
        to: PieceToAdd,
        written: bool,
    ) {
        let (Some(pieces), Some((queued, last))) = (self.digest, to.0) else {
            return;
        };
        let hashed = self
            .clock
            .time(Stage::Digest, || staging.hashed(slot, queued));
        if let (Ok(Some(piece)), true) = (hashed, written) {
            add(pieces, piece, last);
        }
    }

    /// Adds the digest piece of the first `len` bytes of a stream's slot, which DEST received
    /// at `start` (`--async`: the stream's reads and writes are synchronized, so the slot
    /// holds what DEST got). One the backend does not give is read back from DEST.
    pub(crate) fn add_streamed_piece<L: StreamIo>(
        &self,
        library: &L,
        stream: &mut L::Stream<'_>,
        start: u64,
        len: usize,
    ) {
        let Some(pieces) = self.digest else {
            return;
        };
        let hashed = self.clock.time(Stage::Digest, || {
            library.hash_staged(stream, len, start, pieces.algorithm())
        });
        if let Ok(Some(piece)) = hashed {
            pieces.add(piece);
        }
    }

    /// Whether DEST may still be cut or sized: not once its owner has stopped the copy.
    pub(crate) fn may_resize(&self) -> bool {
        !(self.on_stop == OnStop::Leave && self.cancel.load(Ordering::SeqCst))
    }
}

/// A slice's digest piece still being computed where its bytes are staged, for
/// [`Ctx::end_piece`] (and whether nothing writes DEST after it).
#[must_use = "a queued piece is added once the slice is written out"]
pub(crate) struct PieceToAdd(Option<(Queued, bool)>);

impl PieceToAdd {
    /// Nothing to add.
    pub(crate) fn none() -> PieceToAdd {
        PieceToAdd(None)
    }
}

fn add(pieces: &Pieces, piece: Piece, last: bool) {
    match last {
        true => pieces.add_final(piece),
        false => pieces.add(piece),
    }
}

/// Reads up to `len` bytes (from `at` for positional reads) into the slot from its start,
/// a window at a time, alternating the two windows so that one travels to the slot while
/// the other is read. Returns the bytes read: fewer only at EOF. Every queued copy has
/// finished on return, so library I/O may read the slot.
pub(crate) fn read_in<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    reader: &Reader<'_>,
    at: u64,
    len: usize,
    cx: &Ctx<'_>,
) -> Result<usize, CopyError> {
    let (names, clock) = (cx.names, cx.clock);
    let window_len = staging.window_len(slot);
    let mut got = 0;
    let mut k = 0;
    while got < len {
        cx.check_cancel()?;
        let piece = window_len.min(len - got);
        let window = clock
            .time_if(staging.windows_apart(), Stage::CopyWait, || {
                staging.window(slot, k, got)
            })
            .map_err(|e| names.read(e))?;
        let window = &mut window[..piece];
        let n = clock
            .time(Stage::Read, || match reader {
                Reader::At { file, direct } => {
                    fileio::pread_full(file, window, at + got as u64, *direct)
                }
                Reader::Sequential(file) => fileio::read_sequential(file, window, cx.cancel),
            })
            .map_err(|e| names.read(e))?;
        // A sequential read returns early when asked to stop; what it had is dropped with the
        // rest, as DST is cut back to before it.
        cx.check_cancel()?;
        clock
            .time_if(staging.windows_apart(), Stage::CopyQueue, || {
                staging.upload(slot, k, n, got)
            })
            .map_err(|e| names.read(e))?;
        got += n;
        k ^= 1;
        if n < piece {
            break;
        }
    }
    clock
        .time_if(staging.windows_apart(), Stage::CopyWait, || {
            staging.settle(slot)
        })
        .map_err(|e| names.read(e))?;
    Ok(got)
}

/// Writes the slot's first `len` bytes (to `at` for positional writes) back through the
/// windows: the first two are queued at once, and each window is queued again as soon as
/// it has been written out, so copies from the slot overlap the writes. Returns where the
/// last bytes written end, from `at` (`len`, or less where --sparse=always left trailing
/// zero blocks unwritten; 0 for none); a failure comes with the same measure up to it.
pub(crate) fn write_out<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    writer: &Writer<'_>,
    at: u64,
    len: usize,
    cx: &Ctx<'_>,
) -> Result<usize, (usize, CopyError)> {
    let (names, clock) = (cx.names, cx.clock);
    let window_len = staging.window_len(slot);
    let pieces = len.div_ceil(window_len);
    let piece = |i: usize| (i * window_len, window_len.min(len - i * window_len));
    // Where the last bytes written end, from `at`.
    let mut written = 0;
    let queue = |slot: &mut S::Slot, i: usize, written: usize| {
        let (off, n) = piece(i);
        clock
            .time_if(staging.windows_apart(), Stage::CopyQueue, || {
                staging.download(slot, i % 2, off, n)
            })
            .map_err(|e| (written, names.write(e)))
    };
    for i in 0..pieces.min(2) {
        queue(slot, i, written)?;
    }
    for i in 0..pieces {
        let (off, n) = piece(i);
        // No write begins once the copy is stopped.
        cx.check_cancel().map_err(|e| (written, e))?;
        let window = clock
            .time_if(staging.windows_apart(), Stage::CopyWait, || {
                staging.window(slot, i % 2, off)
            })
            .map_err(|e| (written, names.write(e)))?;
        let window = &window[..n];
        let most = cx.write_piece().min(n.max(1));
        for p in (0..n).step_by(most) {
            if p > 0 {
                cx.check_cancel().map_err(|e| (written, e))?;
            }
            let piece = &window[p..n.min(p + most)];
            let at = at + (off + p) as u64;
            let ends = clock
                .time(Stage::Write, || match writer {
                    Writer::At {
                        file,
                        skip_zeros: Some(block),
                    } => fileio::pwrite_skipping_zeros(file, piece, at, *block),
                    Writer::At { file, .. } => {
                        fileio::pwrite_all(file, piece, at).map(|()| piece.len())
                    }
                    Writer::Sequential(file) => (&**file)
                        .write_all(piece)
                        .map(|()| piece.len())
                        .map_err(|e| (0, e)),
                })
                .map_err(|(end, e)| {
                    let end = if end > 0 { off + p + end } else { written };
                    (end, names.write(e))
                })?;
            if ends > 0 {
                written = off + p + ends;
            }
        }
        if i + 2 < pieces {
            queue(slot, i + 2, written)?;
        }
    }
    Ok(written)
}

/// A stretch of SOURCE through the bounce route, a round at a time, written once for its
/// two users: a sequential source copied to its end, and a file's finish reading on past
/// its slices.
pub(crate) struct Pump<'a> {
    pub(crate) reader: Reader<'a>,
    pub(crate) writer: Writer<'a>,
    /// What one round moves at most: a window (a slow writer into a pipe sees its bytes come
    /// out as they arrive) or the whole slot.
    pub(crate) round: usize,
    /// Where the pump stops; None: where SOURCE ends.
    pub(crate) until: Option<u64>,
    /// The writes are the file's last (its finish's): their digest pieces stand whatever
    /// came before ([`Ctx::take_final_piece`]).
    pub(crate) last_writes: bool,
}

impl Pump<'_> {
    /// Moves SOURCE's bytes from `at` through `slot`: each round read in, its digest piece
    /// taken, written out, then `report(at, n)`; until `until`, or until SOURCE ends (a
    /// positional read comes back short; a sequential one, which returns what has arrived,
    /// comes back empty). `written` follows where the last bytes written to DEST end.
    /// Returns where reading stopped and whether SOURCE ended there; a failure comes with
    /// where DEST is good to: `written`, or the end of a write that failed part way (a DEST
    /// cut back there never ends in a hole --sparse=always skipped).
    pub(crate) fn run<S: Staging>(
        &self,
        staging: &S,
        slot: &mut S::Slot,
        mut at: u64,
        written: &mut u64,
        cx: &Ctx<'_>,
        report: &mut dyn FnMut(u64, u64),
    ) -> Result<(u64, bool), (u64, CopyError)> {
        loop {
            let want = match self.until {
                Some(end) if end <= at => return Ok((at, false)),
                Some(end) => ((end - at) as usize).min(self.round),
                None => self.round,
            };
            let got =
                read_in(staging, slot, &self.reader, at, want, cx).map_err(|e| (*written, e))?;
            if got > 0 {
                // A piece queued on the GPU is computed while the round is written out.
                let piece = match self.last_writes {
                    true => cx.take_final_piece(staging, slot, at, got),
                    false => cx.take_piece(staging, slot, at, got),
                };
                let wrote = write_out(staging, slot, &self.writer, at, got, cx);
                cx.end_piece(staging, slot, piece, wrote.is_ok());
                match wrote {
                    Ok(0) => {}
                    Ok(ends) => *written = at + ends as u64,
                    Err((0, e)) => return Err((*written, e)),
                    Err((ends, e)) => return Err((at + ends as u64, e)),
                }
                report(at, got as u64);
            }
            at += got as u64;
            let ended = match self.reader {
                Reader::Sequential(_) => got == 0,
                Reader::At { .. } => got < want,
            };
            if ended {
                return Ok((at, true));
            }
        }
    }
}

/// Allocates `slot`'s two windows (pinned host memory on GPU backends; on host memory the
/// window is the slot), what its bounce route needs, and names a failure as what it is.
pub(crate) fn ready_windows<S: Staging>(
    staging: &S,
    slot: &mut S::Slot,
    src: &std::path::Path,
) -> Result<(), CopyError> {
    let bytes = staging.window_len(slot);
    for k in 0..2 {
        staging.window(slot, k, 0).map_err(|e| CopyError::Alloc {
            path: src.to_path_buf(),
            bytes,
            smallest: None,
            memory: "pinned host memory".to_owned(),
            message: e.to_string(),
        })?;
    }
    Ok(())
}
