//! Seeded random data and sparse files (a failure reproduces with the same seed).

use rand::{RngCore, SeedableRng};
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

/// `len` random bytes from a generator seeded with `seed`.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut data = vec![0u8; len];
    rng.fill_bytes(&mut data);
    data
}

/// Writes `len` random bytes to `path` and returns them.
pub fn write_random(path: &Path, len: usize, seed: u64) -> Vec<u8> {
    let data = random_bytes(len, seed);
    fs::write(path, &data).unwrap();
    data
}

/// Asserts two byte strings are equal, naming the first differing offset (not a 1 GiB dump).
pub fn assert_same_bytes(got: &[u8], want: &[u8], what: &str) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: first difference at byte {i}");
    }
    assert_eq!(got.len(), want.len(), "{what}: length differs");
}

/// A sparse file of `len` bytes whose data is the given (offset, bytes) pieces.
pub fn write_sparse(path: &Path, len: u64, pieces: &[(u64, &[u8])]) {
    let f = File::create(path).unwrap();
    f.set_len(len).unwrap();
    for (off, bytes) in pieces {
        f.write_all_at(bytes, *off).unwrap();
    }
}

/// 512-byte blocks allocated to `path`.
pub fn blocks(path: &Path) -> u64 {
    fs::metadata(path).unwrap().blocks()
}
