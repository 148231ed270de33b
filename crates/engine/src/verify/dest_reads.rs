//! DEST's chunks for the read-back, in order: read here, one at a time, for a file of one
//! chunk, and on a helper thread one chunk ahead for a longer one, so the device is reading
//! DEST's next chunk while this thread reads SOURCE's (from the page cache) and compares.

use crate::backend::host::AlignedBuf;
use crate::fileio;
use std::fs::File;
use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::Scope;

/// A buffer of DEST's bytes and how many the read gave (fewer than its length: the end).
pub(super) type Chunk = io::Result<(AlignedBuf, usize)>;

/// Where DEST's next chunk comes from.
pub(super) enum DestReads<'env> {
    Here {
        file: &'env File,
        direct: bool,
        buf: Option<AlignedBuf>,
        /// Bytes read per chunk (the buffer may be longer).
        len: usize,
        offset: u64,
    },
    Ahead {
        full: Receiver<Chunk>,
        empty: Sender<AlignedBuf>,
    },
}

impl<'env> DestReads<'env> {
    /// Reads `file` from its start, `len` bytes at a time, through `bufs` (each at least
    /// `len` long): ahead on a thread of `scope` when there are two or more and the thread
    /// starts, else here with the first.
    pub(super) fn start<'scope>(
        scope: &'scope Scope<'scope, 'env>,
        file: &'env File,
        (direct, len): (bool, usize),
        mut bufs: Vec<AlignedBuf>,
    ) -> DestReads<'env> {
        if bufs.len() > 1 {
            let (full_tx, full) = mpsc::channel();
            let (empty, empty_rx) = mpsc::channel();
            let reader = move || read_ahead(file, (direct, len), &empty_rx, &full_tx);
            let spawned = std::thread::Builder::new()
                .name("aiscp-verify-ahead".into())
                .spawn_scoped(scope, reader);
            if spawned.is_ok() {
                for buf in bufs {
                    let _ = empty.send(buf);
                }
                return DestReads::Ahead { full, empty };
            }
        }
        DestReads::Here {
            file,
            direct,
            buf: bufs.pop(),
            len,
            offset: 0,
        }
    }

    /// The buffer read here, to be kept for the next file (none when read ahead).
    pub(super) fn into_kept(self) -> Option<AlignedBuf> {
        match self {
            DestReads::Here { buf, .. } => buf,
            DestReads::Ahead { .. } => None,
        }
    }

    /// DEST's next chunk, after the last one handed out.
    pub(super) fn next(&mut self) -> Chunk {
        match self {
            DestReads::Here {
                file,
                direct,
                buf,
                len,
                offset,
            } => {
                let mut buf = buf.take().expect("the buffer was given back");
                let chunk = &mut buf.as_mut_slice()[..*len];
                let n = fileio::pread_full(file, chunk, *offset, *direct)?;
                *offset += n as u64;
                Ok((buf, n))
            }
            DestReads::Ahead { full, .. } => full
                .recv()
                .unwrap_or_else(|_| Err(io::Error::other("the read-ahead thread stopped"))),
        }
    }

    /// Returns a chunk's buffer, compared, for the next read.
    pub(super) fn give_back(&mut self, chunk: AlignedBuf) {
        match self {
            DestReads::Here { buf, .. } => *buf = Some(chunk),
            DestReads::Ahead { empty, .. } => {
                let _ = empty.send(chunk);
            }
        }
    }
}

/// The helper thread: fills each buffer given back with DEST's next bytes, in order, until
/// a read stops short (the end) or fails, or the reader is dropped.
fn read_ahead(
    file: &File,
    (direct, len): (bool, usize),
    empty: &Receiver<AlignedBuf>,
    full: &Sender<Chunk>,
) {
    let mut offset = 0u64;
    for mut buf in empty.iter() {
        let slice = &mut buf.as_mut_slice()[..len];
        let got = fileio::pread_full(file, slice, offset, direct);
        let n = *got.as_ref().unwrap_or(&0);
        offset += n as u64;
        if full.send(got.map(|n| (buf, n))).is_err() || n < len {
            return;
        }
    }
}
