//! A slice's piece as a staging backend gives it: taken at once (on the CPU), or queued
//! where the bytes are staged (a GPU kernel) and collected once the slice is written out, so
//! that hashing overlaps the write.

use super::algorithm::Algorithm;
use super::piece::Piece;

/// What [`crate::backend::Staging::hash`] gives for a slice.
pub enum Hashing {
    /// The piece, or None where the backend does not hash this slice (the file's finish
    /// reads those bytes back from DEST).
    Done(Option<Piece>),
    /// Work queued on the slot's GPU: `Staging::hashed` gives its piece.
    Queued(Queued),
}

/// One slice's hashing queued on its slot: what the piece will be made of once the result
/// comes back.
pub struct Queued {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) algorithm: Algorithm,
    /// BLAKE3: the slice's subtree count (one chaining value each); CRCs: 1.
    pub(crate) nodes: usize,
}
