//! Properties of the chunk planner: for any file size, chunk, alignment
//! and data extents, every planned request is aligned, within the per-call cap, and the
//! slices plus the tail cover the file's data exactly once.

use aiscp_engine::ChunkPlan;
use aiscp_engine::MAX_CHUNK;
use proptest::prelude::*;
use std::ops::Range;

fn check_shape(plan: &ChunkPlan, len: u64, align: u64, chunk: u64) {
    assert_eq!(plan.tail.end, len);
    assert_eq!(plan.tail.start % align, 0);
    assert!(plan.tail.end - plan.tail.start < align);
    let mut prev_end = 0;
    for s in &plan.slices {
        assert_eq!(s.start % align, 0, "unaligned offset in {s:?}");
        assert_eq!((s.end - s.start) % align, 0, "unaligned length in {s:?}");
        assert!(s.end > s.start, "empty slice");
        assert!(
            s.end - s.start <= chunk && chunk <= MAX_CHUNK,
            "slice over the cap"
        );
        assert!(s.start >= prev_end, "overlap or disorder at {s:?}");
        assert!(s.end <= plan.tail.start, "slice into the tail");
        prev_end = s.end;
    }
}

/// (len, align, chunk): chunk a multiple of the alignment up to the cap, biased towards small
/// multiples; len up to a few thousand slices (and past 4 GiB where the chunk allows).
fn shape() -> impl Strategy<Value = (u64, u64, u64)> {
    (12u32..=16)
        .prop_flat_map(|shift| {
            let align = 1u64 << shift;
            let max_mult = MAX_CHUNK / align;
            (
                Just(align),
                prop_oneof![1u64..=64, 1u64..=max_mult].prop_map(move |m| m * align),
            )
        })
        .prop_flat_map(|(align, chunk)| (0..chunk * 3000 + 2 * align, Just(align), Just(chunk)))
}

proptest! {
    #[test]
    fn whole_file_is_covered_exactly((len, align, chunk) in shape()) {
        let plan = ChunkPlan::new(len, align, chunk, std::slice::from_ref(&(0..len)));
        check_shape(&plan, len, align, chunk);
        // Contiguous from 0 to the tail: every byte exactly once.
        let mut pos = 0;
        for s in &plan.slices {
            prop_assert_eq!(s.start, pos);
            pos = s.end;
        }
        prop_assert_eq!(pos, plan.tail.start);
    }

    #[test]
    fn data_extents_are_covered(
        (len, align, chunk) in shape(),
        cuts in proptest::collection::vec(0u64..=1_000_000, 0..12),
    ) {
        // Turn sorted cut points (scaled into the file) into alternating data/hole ranges.
        let mut points: Vec<u64> = cuts.iter().map(|c| c * len / 1_000_000).collect();
        points.sort_unstable();
        points.dedup();
        let extents: Vec<Range<u64>> = points
            .chunks_exact(2)
            .map(|p| p[0]..p[1])
            .filter(|r| !r.is_empty())
            .collect();
        let plan = ChunkPlan::new(len, align, chunk, &extents);
        check_shape(&plan, len, align, chunk);
        for e in &extents {
            // Every data byte before the tail lies in a slice.
            let mut pos = e.start;
            let end = e.end.min(plan.tail.start);
            while pos < end {
                let i = plan.slices.partition_point(|s| s.end <= pos);
                let s = plan.slices.get(i).filter(|s| s.contains(&pos));
                prop_assert!(s.is_some(), "byte {} of extent {:?} not planned", pos, e);
                pos = s.unwrap().end;
            }
        }
    }
}
