//! A digest on the staging service's wire: which one a request asks for, and what DEST's
//! was.

use aiscp_engine::digest::{Algorithm, Digest};
use serde::{Deserialize, Serialize};

/// A digest's algorithm ([`Algorithm`] on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sums {
    Blake3,
    Crc64nvme,
    Crc32c,
}

impl From<Algorithm> for Sums {
    fn from(a: Algorithm) -> Sums {
        match a {
            Algorithm::Blake3 => Sums::Blake3,
            Algorithm::Crc64Nvme => Sums::Crc64nvme,
            Algorithm::Crc32c => Sums::Crc32c,
        }
    }
}

impl From<Sums> for Algorithm {
    fn from(s: Sums) -> Algorithm {
        match s {
            Sums::Blake3 => Algorithm::Blake3,
            Sums::Crc64nvme => Algorithm::Crc64Nvme,
            Sums::Crc32c => Algorithm::Crc32c,
        }
    }
}

/// A file's digest ([`Digest`] on the wire): its algorithm and bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WireDigest {
    pub algorithm: Sums,
    pub bytes: Vec<u8>,
}

impl From<&Digest> for WireDigest {
    fn from(d: &Digest) -> WireDigest {
        WireDigest {
            algorithm: d.algorithm().into(),
            bytes: d.bytes().to_vec(),
        }
    }
}

impl WireDigest {
    /// The digest, when its length is its algorithm's.
    pub fn digest(self) -> Option<Digest> {
        Digest::from_bytes(self.algorithm.into(), self.bytes)
    }
}
