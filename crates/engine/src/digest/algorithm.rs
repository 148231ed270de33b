//! The algorithms a digest is taken with, and a file's digest as it is printed.

use super::piece;
use base64::Engine as _;
use std::fmt;

/// A digest's algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// BLAKE3, checked with `b3sum --check`.
    Blake3,
    /// CRC-64/NVME, S3's `x-amz-checksum-crc64nvme`.
    Crc64Nvme,
    /// CRC-32C (Castagnoli), S3's `x-amz-checksum-crc32c`.
    Crc32c,
}

impl Algorithm {
    /// Every algorithm, in the order --help lists them.
    pub const ALL: [Algorithm; 3] = [Algorithm::Blake3, Algorithm::Crc64Nvme, Algorithm::Crc32c];

    /// The name users type and manifests carry.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Blake3 => "blake3",
            Algorithm::Crc64Nvme => "crc64nvme",
            Algorithm::Crc32c => "crc32c",
        }
    }

    /// The algorithm named `name` ([`Algorithm::name`]).
    pub fn from_name(name: &str) -> Option<Algorithm> {
        Algorithm::ALL.into_iter().find(|a| a.name() == name)
    }

    /// The digest of `bytes` on the CPU, whole.
    pub fn of_bytes(self, bytes: &[u8]) -> Digest {
        match self {
            Algorithm::Blake3 => Digest::new(self, blake3::hash(bytes).as_bytes().to_vec()),
            _ => Digest::of_crc(self, piece::crc(self, bytes)),
        }
    }
}

/// One file's digest: the algorithm and its bytes (a CRC big-endian, as S3 sends it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Digest {
    algorithm: Algorithm,
    bytes: Vec<u8>,
}

impl Digest {
    /// A digest of `algorithm` made of `bytes` (32 for BLAKE3, 8 or 4 for the CRCs);
    /// None when the length is not the algorithm's.
    pub fn from_bytes(algorithm: Algorithm, bytes: Vec<u8>) -> Option<Digest> {
        let want = match algorithm {
            Algorithm::Blake3 => blake3::OUT_LEN,
            Algorithm::Crc64Nvme => 8,
            Algorithm::Crc32c => 4,
        };
        (bytes.len() == want).then(|| Digest::new(algorithm, bytes))
    }

    fn new(algorithm: Algorithm, bytes: Vec<u8>) -> Digest {
        Digest { algorithm, bytes }
    }

    pub(super) fn of_crc(algorithm: Algorithm, crc: u64) -> Digest {
        let bytes = match algorithm {
            Algorithm::Crc32c => (crc as u32).to_be_bytes().to_vec(),
            _ => crc.to_be_bytes().to_vec(),
        };
        Digest::new(algorithm, bytes)
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

impl fmt::Display for Digest {
    /// As each algorithm's own tools print it: BLAKE3 in lowercase hex (b3sum), a CRC in
    /// base64 of its big-endian bytes (S3's `x-amz-checksum-*` headers).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.algorithm {
            Algorithm::Blake3 => self.bytes.iter().try_for_each(|b| write!(f, "{b:02x}")),
            _ => f.write_str(&base64::engine::general_purpose::STANDARD.encode(&self.bytes)),
        }
    }
}
