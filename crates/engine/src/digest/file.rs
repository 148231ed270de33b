//! A file's digest from its pieces: the rule that keeps it equal to DEST's final content.
//!
//! A piece counts only where DEST still holds the bytes it was taken from, starting on a
//! chunk and ending on one or at DEST's end: a data phase's piece inside the prefix the
//! file's finish left standing (`kept`: the leading run of whole slices, up to where the
//! finish wrote again), a piece of the finish's own writes (the last DEST had) anywhere.
//! Every other byte (holes, the tail the finish read on, slices after a
//! SOURCE that changed, a backend that does not hash where it stages) is read back from
//! DEST, so the digest is DEST's whatever the copy met on the way.

use super::algorithm::{Algorithm, Digest};
use super::piece::Piece;
use super::piece::{crc_combine, CHUNK_LEN};
use blake3::hazmat::ChainingValue;
use blake3::hazmat::{left_subtree_len, merge_subtrees_non_root, merge_subtrees_root, Mode};
use std::cell::OnceCell;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Bytes read back from DEST at a time, where no piece vouches for them.
const READ_BACK: usize = 16 << 20;

/// The pieces of one file's digest, gathered from the workers as its slices are staged.
#[derive(Debug)]
pub struct Pieces {
    algorithm: Algorithm,
    /// Each piece, and whether the finish wrote it (else a data phase did).
    list: Mutex<Vec<(Piece, bool)>>,
}

/// A file's digest, and how many of its bytes had to be read back from DEST for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestDigest {
    pub digest: Digest,
    pub read_back: u64,
}

impl Pieces {
    pub fn new(algorithm: Algorithm) -> Pieces {
        Pieces {
            algorithm,
            list: Mutex::new(Vec::new()),
        }
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Adds a data phase's piece of a staged slice (of this algorithm; others are
    /// ignored).
    pub fn add(&self, piece: Piece) {
        self.push(piece, false);
    }

    /// Adds a piece of bytes the file's finish wrote: nothing writes DEST after it.
    pub fn add_final(&self, piece: Piece) {
        self.push(piece, true);
    }

    fn push(&self, piece: Piece, last: bool) {
        if piece.algorithm() == self.algorithm {
            self.lock().push((piece, last));
        }
    }

    /// Adds a data phase's pieces taken elsewhere (a part copied in turn, or by an MPI
    /// rank).
    pub fn extend(&self, others: impl IntoIterator<Item = Piece>) {
        others.into_iter().for_each(|p| self.add(p));
    }

    /// Takes a data phase's pieces gathered so far, in no particular order (a part's, to
    /// hand to the file's end).
    pub fn take(&self) -> Vec<Piece> {
        std::mem::take(&mut *self.lock())
            .into_iter()
            .map(|(piece, _)| piece)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Piece, bool)>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The digest of `dest`, whose final size is `size` and which holds the bytes the
    /// pieces were taken from before `kept` (the module's rule); what no piece vouches for
    /// is read from `dest`.
    pub fn finish(&self, dest: &File, kept: u64, size: u64) -> io::Result<DestDigest> {
        let pieces = counted(std::mem::take(&mut *self.lock()), kept.min(size), size);
        let dest = ReadBack {
            dest,
            again: OnceCell::new(),
        };
        let dest = &dest;
        let mut read_back = 0;
        let mut all = Vec::with_capacity(pieces.len());
        let mut at = 0;
        for piece in pieces {
            let range = piece.range();
            read_back += gap(dest, self.algorithm, at..range.start, &mut all)?;
            at = range.end;
            all.push(piece);
        }
        read_back += gap(dest, self.algorithm, at..size, &mut all)?;
        let digest = match self.algorithm {
            Algorithm::Blake3 => root(&all, size),
            algorithm => combine(algorithm, &all),
        };
        match digest {
            Some(digest) => Ok(DestDigest { digest, read_back }),
            // Pieces that do not tile the tree (not expected: the rule above makes them
            // tile): DEST is hashed whole instead.
            None => {
                let mut whole = Vec::new();
                gap(dest, self.algorithm, 0..size, &mut whole)?;
                let digest = match self.algorithm {
                    Algorithm::Blake3 => root(&whole, size),
                    algorithm => combine(algorithm, &whole),
                };
                let digest = digest.expect("pieces of one reading tile the file");
                Ok(DestDigest {
                    digest,
                    read_back: size,
                })
            }
        }
    }
}

/// The digest of `dest`'s first `size` bytes, all read back (a file copied where no pieces
/// were taken: by another process).
pub fn of_dest(algorithm: Algorithm, dest: &File, size: u64) -> io::Result<Digest> {
    Pieces::new(algorithm)
        .finish(dest, 0, size)
        .map(|f| f.digest)
}

/// The pieces that count for a DEST of `size` holding a data phase's before `kept`, in file
/// order, none overlapping the one before.
fn counted(mut pieces: Vec<(Piece, bool)>, kept: u64, size: u64) -> Vec<Piece> {
    pieces.sort_by_key(|(p, _)| p.range().start);
    let mut end = 0;
    pieces.retain(|(p, last)| {
        let r = p.range();
        let counts = r.start >= end
            && r.end <= if *last { size } else { kept }
            && !r.is_empty()
            && r.start % CHUNK_LEN == 0
            && (r.end % CHUNK_LEN == 0 || r.end == size);
        if counts {
            end = r.end;
        }
        counts
    });
    pieces.into_iter().map(|(piece, _)| piece).collect()
}

/// DEST to read back from, opened again the first time a gap needs it: most files have
/// no gap, and an open per file is a cost a tree of small files shows.
struct ReadBack<'a> {
    dest: &'a File,
    again: OnceCell<Option<File>>,
}

impl ReadBack<'_> {
    fn file(&self) -> io::Result<&File> {
        if self.again.get().is_none() {
            let _ = self.again.set(readable(self.dest)?);
        }
        let again = self.again.get().expect("set above");
        Ok(again.as_ref().unwrap_or(self.dest))
    }
}

/// DEST opened again for reading through /proc where `dest` is write-only (as cp opens
/// it); None where `dest` reads.
fn readable(dest: &File) -> io::Result<Option<File>> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use std::os::fd::AsRawFd;
    let flags = fcntl(dest.as_raw_fd(), FcntlArg::F_GETFL)?;
    match OFlag::from_bits_truncate(flags) & OFlag::O_ACCMODE {
        OFlag::O_WRONLY => {
            let again = format!("/proc/self/fd/{}", dest.as_raw_fd());
            File::open(again).map(Some)
        }
        _ => Ok(None),
    }
}

/// Reads `range` of `dest` and adds its pieces to `out`; returns the bytes read.
fn gap(
    dest: &ReadBack<'_>,
    algorithm: Algorithm,
    range: Range<u64>,
    out: &mut Vec<Piece>,
) -> io::Result<u64> {
    if range.is_empty() {
        return Ok(0);
    }
    let dest = dest.file()?;
    let mut buf = vec![0u8; READ_BACK.min((range.end - range.start.min(range.end)) as usize)];
    let mut at = range.start;
    while at < range.end {
        let want = ((range.end - at) as usize).min(READ_BACK);
        let bytes = &mut buf[..want];
        dest.read_exact_at(bytes, at).map_err(|e| match e.kind() {
            // DEST shorter than its size a moment ago: another process cut it.
            io::ErrorKind::UnexpectedEof => io::Error::other("file shrank while being hashed"),
            _ => e,
        })?;
        out.push(Piece::of_bytes(algorithm, at, bytes));
        at += want as u64;
    }
    Ok(range.end.saturating_sub(range.start))
}

/// The CRC of the file whose pieces, in order and tiling it, are `pieces`.
fn combine(algorithm: Algorithm, pieces: &[Piece]) -> Option<Digest> {
    // Combining costs far more than a small file's CRC: the first piece is taken as it is.
    let Some((first, rest)) = pieces.split_first() else {
        return Some(Digest::of_crc(algorithm, super::piece::crc(algorithm, &[])));
    };
    let mut crc = first.crc()?;
    for piece in rest {
        let len = piece.range().end - piece.range().start;
        crc = crc_combine(algorithm, crc, piece.crc()?, len);
    }
    Some(Digest::of_crc(algorithm, crc))
}

/// The BLAKE3 hash of a file of `size` bytes whose pieces, in order and tiling it, are
/// `pieces`: their nodes merged up the tree, the root finalized as root.
fn root(pieces: &[Piece], size: u64) -> Option<Digest> {
    let hash = if size <= CHUNK_LEN {
        let head = pieces.first().map_or(Some(&[][..]), |p| p.head())?;
        blake3::hash(head.get(..size as usize)?)
    } else {
        let mut nodes = pieces.iter().flat_map(|p| p.nodes()).peekable();
        let left = left_subtree_len(size);
        let l = node(&mut nodes, 0..left)?;
        let r = node(&mut nodes, left..size)?;
        if nodes.next().is_some() {
            return None;
        }
        merge_subtrees_root(&l, &r, Mode::Hash)
    };
    Digest::from_bytes(Algorithm::Blake3, hash.as_bytes().to_vec())
}

/// The chaining value of the tree node `range`, from `nodes` (in order; consumed as used).
fn node(
    nodes: &mut std::iter::Peekable<impl Iterator<Item = (Range<u64>, ChainingValue)>>,
    range: Range<u64>,
) -> Option<ChainingValue> {
    let (next, _) = nodes.peek()?;
    if *next == range {
        return nodes.next().map(|(_, cv)| cv);
    }
    let len = range.end - range.start;
    if next.start != range.start || next.end >= range.end || len <= CHUNK_LEN {
        return None;
    }
    let split = range.start + left_subtree_len(len);
    let l = node(nodes, range.start..split)?;
    let r = node(nodes, split..range.end)?;
    Some(merge_subtrees_non_root(&l, &r, Mode::Hash))
}
