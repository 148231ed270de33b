//! What a file's data phase is to do (its aligned slices) and how each side is opened for
//! it: O_DIRECT, or buffered I/O for a reason --debug gives.

use crate::job::SparseMode;
use std::ops::Range;

/// What the data phase is to do: aligned slices, and how the files are opened for them.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The direct-I/O alignment both files ask for (at least [`crate::fileio::MIN_ALIGN`]).
    pub(crate) align: u64,
    /// Disjoint, ascending; aligned to `align` when `direct`.
    pub(crate) slices: Vec<Range<u64>>,
    /// The part of the file these slices are planned for (at most
    /// [`super::WINDOW_SLICES`] chunks): the data phase goes window by window.
    pub(crate) window: Range<u64>,
    /// The slices are read and written with O_DIRECT where the files take it.
    pub(crate) direct: bool,
}

/// What a side's data phase asks of its file: O_DIRECT (and the library, where there is
/// one), or buffered I/O, with the reason --debug gives for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Direct,
    Buffered(&'static str),
}

impl Plan {
    /// What the plan asks of both sides: O_DIRECT where its slices are aligned for it.
    pub(crate) fn access(&self) -> Access {
        match self.direct {
            true => Access::Direct,
            false => Access::Buffered("small or unaligned"),
        }
    }

    /// How SOURCE's data phase reads it: not with O_DIRECT under `verify`, where SOURCE is
    /// read through the page cache so that its read-back finds it there and only DEST comes
    /// from the device, one read of each file from the disk instead of three
    /// (bench/results/HISTORY.md, "--verify at copy speed"). A SOURCE the GPU library reads
    /// (`library`) keeps O_DIRECT, which that route needs, and is read from the disk twice.
    pub(crate) fn source_access(&self, verify: bool, library: bool) -> Access {
        match self.access() {
            Access::Direct if verify && !library => {
                Access::Buffered("through the page cache for --verify")
            }
            planned => planned,
        }
    }

    /// How DEST's data phase writes it: `--sparse=always` on the library route (`library`)
    /// must see the bytes on the host to find zero blocks, so DEST is written buffered.
    pub(crate) fn dest_access(&self, sparse: SparseMode, library: bool) -> Access {
        match self.access() {
            Access::Direct if sparse == SparseMode::Always && library => {
                Access::Buffered("--sparse=always finds zeros on the host")
            }
            planned => planned,
        }
    }
}
