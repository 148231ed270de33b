//! Digests of the bytes a copy gave DEST, taken from the staged slices as they pass instead
//! of a second read: BLAKE3 (a tree of 1 KiB chunks, so a slice's subtrees hash on their
//! own and merge) and the CRCs S3 keeps (CRC-64/NVME, CRC-32C; CRCs combine). A slice's
//! [`Piece`] is taken where its bytes are staged (the staging backend's `hash`); the
//! file's [`Pieces`] become its [`Digest`] once its size is set, the bytes no piece vouches
//! for read back from DEST ([`Pieces::finish`]).

mod algorithm;
mod file;
mod hashing;
mod kernel_cache;
pub mod launch;
pub mod on_gpu;
mod piece;
#[cfg(test)]
mod tests;

pub use algorithm::{Algorithm, Digest};
pub use file::{of_dest, DestDigest, Pieces};
pub use hashing::{Hashing, Queued};
pub use piece::{subtrees, Piece, CHUNK_LEN};
