//! What a read-back found: how DEST was read, the files' agreement, or the error.

use crate::digest::Digest;
use crate::quote::quote;
use std::io;
use std::path::Path;

/// Bytes read from each file per step: large enough that the per-call cost disappears,
/// small enough that three of them (SOURCE's, and DEST's two read ahead) are no burden
/// (12 MiB in all for a file longer than this; a shorter one's buffers fit it).
pub const VERIFY_CHUNK: usize = 4 << 20;

/// How DST was read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DstRead {
    /// With O_DIRECT: the bytes came from the disk.
    Direct,
    /// Through the page cache, with the reason O_DIRECT could not be used.
    Buffered(String),
}

/// A successful verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verified {
    /// Bytes compared (the size of both files), or hashed (DEST's, by digest).
    pub bytes: u64,
    pub checked: Checked,
    pub dst_read: DstRead,
}

/// What a verification compared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// SOURCE and DEST byte for byte; xxh3-128 of the contents (the same for both).
    Bytes { xxh3: u128 },
    /// DEST's digest, equal to the one taken while copying.
    Digest(Digest),
}

impl Verified {
    /// A --debug line: "verified 'b': 123 bytes, xxh3-128 …, read back with O_DIRECT", or
    /// "..., blake3 … as copied, ...".
    pub fn describe(&self, dst_name: &Path) -> String {
        let how = match &self.dst_read {
            DstRead::Direct => "read back with O_DIRECT".to_owned(),
            DstRead::Buffered(why) => format!("read back through the page cache ({why})"),
        };
        let checked = match &self.checked {
            Checked::Bytes { xxh3 } => format!("xxh3-128 {xxh3:032x}"),
            Checked::Digest(d) => format!("{} {d} as copied", d.algorithm().name()),
        };
        format!(
            "verified {}: {}, {checked}, {how}",
            quote(dst_name),
            crate::units::length(self.bytes),
        )
    }
}

/// Why a verification failed; Display is the message without the program prefix. Names are
/// quoted as cp quotes them.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("verification failed: {dst} differs from {src} at offset {offset}")]
    Differs {
        src: String,
        dst: String,
        /// First differing byte, counted from 0.
        offset: u64,
    },
    /// One file ends where the other goes on; every byte before `offset` matched.
    #[error("verification failed: {dst} is {dst_len} bytes long, {src} is {src_len}")]
    Length {
        src: String,
        dst: String,
        src_len: u64,
        dst_len: u64,
        /// Where the shorter one ends (the first differing offset).
        offset: u64,
    },
    /// DEST's digest read back is not the one taken while copying.
    #[error("verification failed: {dst} has {algorithm} {now}, not {copied} as copied")]
    Digest {
        dst: String,
        algorithm: &'static str,
        now: String,
        copied: String,
    },
    #[error("cannot verify {name}: {what}")]
    Cannot { name: String, what: String },
    /// The run was stopped (a signal) while the files were read back.
    #[error("interrupted")]
    Stopped,
    #[error("error reading {name} to verify it: {}", crate::quote::os_text(source))]
    Read { name: String, source: io::Error },
}

impl VerifyError {
    /// The first offset at which the files differ, for the two mismatch kinds.
    pub fn offset(&self) -> Option<u64> {
        match self {
            VerifyError::Differs { offset, .. } | VerifyError::Length { offset, .. } => {
                Some(*offset)
            }
            _ => None,
        }
    }
}
