//! The first file's first bytes, read into host memory while the GPU is still coming up
//! ([`crate::Starting::wait_reading`]): the slices they cover are then copied from memory
//! into the slot instead of being read again, so the time the bring-up leaves on the first
//! file's path is spent reading it.

use crate::backend::host::AlignedBuf;
use crate::fileio;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::time::Instant;

/// Bytes read per call while waiting: the readiness of the GPU is looked at between them.
const PIECE: usize = 16 << 20;

/// SRC's bytes from offset 0, read ahead.
pub(crate) struct Early {
    /// The file they came from: its device and inode.
    id: (u64, u64),
    buf: AlignedBuf,
    /// Bytes read, from offset 0.
    len: usize,
    /// What reading took, for --debug.
    pub(crate) secs: f64,
}

impl Early {
    /// Reads `src` (of `len` bytes) from its start, up to `budget` bytes, until `done` says
    /// the wait is over. None when nothing could be read: the copy then reads it all itself.
    pub(crate) fn read(
        src: &File,
        len: u64,
        budget: usize,
        done: impl Fn() -> bool,
    ) -> Option<Early> {
        let began = Instant::now();
        let meta = src.metadata().ok()?;
        let want = budget.min(usize::try_from(len).ok()?);
        let mut buf = AlignedBuf::new(want).ok()?;
        // O_DIRECT where the file takes it, as the copy would read it; buffered otherwise.
        let fd = src.as_fd();
        let align = fileio::dio_alignment(fd).max(fileio::MIN_ALIGN) as usize;
        let direct = PIECE % align == 0 && fileio::set_direct(fd).unwrap_or(false);
        let mut got = 0;
        {
            let bytes = buf.as_mut_slice();
            while got < want && !done() {
                let piece = PIECE.min(want - got);
                // An O_DIRECT request stays aligned; what lies past `want` is not kept.
                let ask = match direct {
                    true => piece.next_multiple_of(align).min(bytes.len() - got),
                    false => piece,
                };
                if direct && ask % align != 0 {
                    break;
                }
                match fileio::pread_full(src, &mut bytes[got..got + ask], got as u64, direct) {
                    Ok(n) => {
                        got += n.min(piece);
                        if n < ask {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        }
        if direct && fileio::clear_direct(fd).is_err() {
            return None;
        }
        (got > 0).then(|| Early {
            id: (meta.dev(), meta.ino()),
            buf,
            len: got,
            secs: began.elapsed().as_secs_f64(),
        })
    }

    /// Whether these are `file`'s bytes.
    pub(crate) fn is_of(&self, file: &File) -> bool {
        file.metadata().is_ok_and(|m| (m.dev(), m.ino()) == self.id)
    }

    /// The bytes read, from offset 0.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf.as_slice()[..self.len]
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
