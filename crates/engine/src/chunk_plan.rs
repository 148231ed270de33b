//! Cuts a file into the slices the workers copy: aligned, at most one chunk each, covering
//! the data extents; the unaligned remainder at EOF is left to the tail phase, which runs
//! with O_DIRECT cleared (the AMD fastpath may answer EIO to a read that asks past EOF).

use std::ops::Range;

/// Slices for the parallel phase, then the tail for the sequential phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkPlan {
    /// Disjoint, ascending, each `align`-aligned in offset and length, each at most `chunk`.
    pub slices: Vec<Range<u64>>,
    /// `[aligned_end, len)`: fewer than `align` bytes, copied through the bounce route.
    pub tail: Range<u64>,
}

impl ChunkPlan {
    /// `extents` are the data ranges of the file (ascending, disjoint, within `[0, len)`);
    /// `align` is a power of two, `chunk` a positive multiple of it.
    pub fn new(len: u64, align: u64, chunk: u64, extents: &[Range<u64>]) -> ChunkPlan {
        assert!(align.is_power_of_two() && chunk > 0 && chunk % align == 0);
        let aligned_end = len & !(align - 1);
        let mut slices: Vec<Range<u64>> = Vec::new();
        for extent in extents {
            // Extents from SEEK_DATA are block-aligned on every filesystem we know, but round
            // outward anyway: copying a few zeros from a hole is harmless.
            let mut start = extent.start & !(align - 1);
            let end = extent
                .end
                .div_ceil(align)
                .saturating_mul(align)
                .min(aligned_end);
            if let Some(last) = slices.last() {
                start = start.max(last.end);
            }
            while start < end {
                let stop = end.min(start + chunk);
                slices.push(start..stop);
                start = stop;
            }
        }
        ChunkPlan {
            slices,
            tail: aligned_end..len,
        }
    }
}
