//! One slice's share of a file's digest: the BLAKE3 chaining values of the tree nodes the
//! slice covers, or the slice's CRC.

use super::algorithm::Algorithm;
use blake3::hazmat::{ChainingValue, HasherExt};
use std::ops::Range;

/// BLAKE3's chunk: the tree's leaves, and the grain a piece's start must have.
pub const CHUNK_LEN: u64 = blake3::CHUNK_LEN as u64;

/// The BLAKE3 tree nodes (as file offsets) the slice `[start, start + len)` is hashed as:
/// from `start` (a multiple of [`CHUNK_LEN`]), each the largest power-of-two number of
/// chunks `start` is aligned to that fits, the last shorter than a chunk only where the
/// slice ends. Each is a node of the file's tree as long as the slice ends on a chunk or at
/// the file's end. A node starting at 0 that reaches the slice's end is split in two: it
/// may be the whole file, whose root is finalized differently, by [`Pieces::finish`]. A
/// slice starting off the chunk grid has none: its bytes are read back.
///
/// [`Pieces::finish`]: super::Pieces::finish
pub fn subtrees(start: u64, len: u64) -> Vec<Range<u64>> {
    if start % CHUNK_LEN != 0 {
        return Vec::new();
    }
    let end = start + len;
    let mut nodes = Vec::new();
    let mut at = start;
    while at < end {
        let rest = end - at;
        let most = match at {
            0 => u64::MAX,
            _ => CHUNK_LEN << (at / CHUNK_LEN).trailing_zeros(),
        };
        let mut size = match rest.min(most) {
            n if n < CHUNK_LEN => n,
            n => CHUNK_LEN << (n / CHUNK_LEN).ilog2(),
        };
        if at == 0 && size == rest && size > CHUNK_LEN {
            size = blake3::hazmat::left_subtree_len(size);
        }
        nodes.push(at..at + size);
        at += size;
    }
    nodes
}

/// A slice's share of a file's digest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    start: u64,
    len: u64,
    value: Value,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Value {
    /// The chaining values of [`subtrees`]`(start, len)`, in order; and a piece at 0 no
    /// longer than a chunk keeps its bytes, the whole file's if it has no more (a file of
    /// one chunk has that chunk as its root, finalized from the bytes).
    Blake3 {
        nodes: Vec<ChainingValue>,
        head: Vec<u8>,
    },
    /// The CRC of the piece's bytes alone.
    Crc { algorithm: Algorithm, crc: u64 },
}

impl Piece {
    /// A BLAKE3 piece from chaining values computed elsewhere (a GPU kernel): `nodes[i]` is
    /// that of `subtrees(start, len)[i]`; `head` the piece's bytes when `start` is 0 and
    /// `len` at most [`CHUNK_LEN`], else empty ([`Piece::needs_head`]). None when the
    /// counts do not match.
    pub fn from_subtrees(
        start: u64,
        len: u64,
        nodes: Vec<ChainingValue>,
        head: Vec<u8>,
    ) -> Option<Piece> {
        let head_len = if Piece::needs_head(start, len) {
            len
        } else {
            0
        };
        let fits = nodes.len() == subtrees(start, len).len() && head.len() as u64 == head_len;
        fits.then_some(Piece {
            start,
            len,
            value: Value::Blake3 { nodes, head },
        })
    }

    /// A CRC piece from a CRC computed elsewhere: `crc` is the CRC of the `len` bytes at
    /// `start` on their own. None for BLAKE3.
    pub fn from_crc(algorithm: Algorithm, start: u64, len: u64, crc: u64) -> Option<Piece> {
        (algorithm != Algorithm::Blake3).then_some(Piece {
            start,
            len,
            value: Value::Crc { algorithm, crc },
        })
    }

    /// The piece of `bytes`, which DEST holds at `start`, computed on the CPU.
    pub fn of_bytes(algorithm: Algorithm, start: u64, bytes: &[u8]) -> Piece {
        let len = bytes.len() as u64;
        let value = match algorithm {
            Algorithm::Blake3 => Value::Blake3 {
                nodes: subtrees(start, len)
                    .into_iter()
                    .map(|node| {
                        let at = (node.start - start) as usize..(node.end - start) as usize;
                        chaining_value(node.start, &bytes[at])
                    })
                    .collect(),
                head: match Piece::needs_head(start, len) {
                    true => bytes.to_vec(),
                    false => Vec::new(),
                },
            },
            _ => Value::Crc {
                algorithm,
                crc: crc(algorithm, bytes),
            },
        };
        Piece { start, len, value }
    }

    /// Whether a BLAKE3 piece of `len` bytes at `start` keeps its bytes: only one that may
    /// be a whole file of one chunk, whose digest is not made from chaining values.
    pub fn needs_head(start: u64, len: u64) -> bool {
        start == 0 && len <= CHUNK_LEN
    }

    pub fn range(&self) -> Range<u64> {
        self.start..self.start + self.len
    }

    pub fn algorithm(&self) -> Algorithm {
        match self.value {
            Value::Blake3 { .. } => Algorithm::Blake3,
            Value::Crc { algorithm, .. } => algorithm,
        }
    }

    /// The BLAKE3 nodes this piece covers, each with its chaining value.
    pub(super) fn nodes(&self) -> impl Iterator<Item = (Range<u64>, ChainingValue)> + '_ {
        let values = match &self.value {
            Value::Blake3 { nodes, .. } => nodes.as_slice(),
            Value::Crc { .. } => &[],
        };
        subtrees(self.start, self.len)
            .into_iter()
            .zip(values.iter().copied())
    }

    /// The bytes of a BLAKE3 piece at 0 no longer than a chunk.
    pub(super) fn head(&self) -> Option<&[u8]> {
        match &self.value {
            Value::Blake3 { head, .. } if self.start == 0 => Some(head),
            _ => None,
        }
    }

    /// The CRC of a CRC piece's bytes.
    pub(super) fn crc(&self) -> Option<u64> {
        match self.value {
            Value::Crc { crc, .. } => Some(crc),
            Value::Blake3 { .. } => None,
        }
    }
}

/// The non-root chaining value of the node of `bytes` at file offset `at`; a large node is
/// hashed on several threads.
fn chaining_value(at: u64, bytes: &[u8]) -> ChainingValue {
    /// Below this a node is not worth rayon's hand-off (BLAKE3's own guidance is 128 KiB).
    const THREADED_FROM: usize = 1 << 20;
    let mut hasher = blake3::Hasher::new();
    hasher.set_input_offset(at);
    match bytes.len() >= THREADED_FROM {
        true => hasher.update_rayon(bytes),
        false => hasher.update(bytes),
    };
    hasher.finalize_non_root()
}

/// The CRC of `bytes` alone, as `algorithm` defines it (init and final xor included).
pub(crate) fn crc(algorithm: Algorithm, bytes: &[u8]) -> u64 {
    crc_fast::checksum(crc_kind(algorithm), bytes)
}

/// The CRC of `first`'s bytes followed by `second_len` bytes whose CRC is `second`.
pub(super) fn crc_combine(algorithm: Algorithm, first: u64, second: u64, second_len: u64) -> u64 {
    crc_fast::checksum_combine(crc_kind(algorithm), first, second, second_len)
}

fn crc_kind(algorithm: Algorithm) -> crc_fast::CrcAlgorithm {
    match algorithm {
        Algorithm::Crc32c => crc_fast::CrcAlgorithm::Crc32Iscsi,
        _ => crc_fast::CrcAlgorithm::Crc64Nvme,
    }
}
