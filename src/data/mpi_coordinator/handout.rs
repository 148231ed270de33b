//! One file's parts handed out over the ranks: what the coordinator's loop over them keeps.

use aiscp_engine::{CopyError, PartEnd, ProgressSink};
use std::ops::Range;

pub(super) type PartResult = Option<Result<PartEnd, CopyError>>;

/// One file's parts being handed out: the next to hand, the ranks free, how many each rank
/// took, and what came back (the state of the coordinator's loop over a file's parts).
pub(super) struct Handout<'p> {
    pub(super) parts: &'p [Range<u64>],
    pub(super) results: Vec<PartResult>,
    /// Ranks with no part (rank 0, which copies between the others' answers, is not one).
    pub(super) idle: Vec<i32>,
    pub(super) by_rank: Vec<usize>,
    /// Parts sent to ranks and not answered yet.
    pub(super) busy: usize,
    pub(super) next: usize,
    /// A part failed, or the run was stopped: no part is handed out any more.
    pub(super) stop: bool,
}

impl<'p> Handout<'p> {
    pub(super) fn new(parts: &'p [Range<u64>], ranks: i32) -> Handout<'p> {
        Handout {
            parts,
            results: (0..parts.len()).map(|_| None).collect(),
            idle: (1..ranks).rev().collect(),
            by_rank: vec![0; ranks as usize],
            busy: 0,
            next: 0,
            stop: false,
        }
    }

    /// Whether parts remain to be handed out.
    pub(super) fn more(&self) -> bool {
        self.next < self.parts.len() && !self.stop
    }

    /// The next part, taken by `rank`.
    pub(super) fn take(&mut self, rank: i32) -> usize {
        let i = self.next;
        self.next += 1;
        self.by_rank[rank as usize] += 1;
        i
    }

    /// Part `i` ended as `r`: its bytes shown, or the handout stopped.
    pub(super) fn record(
        &mut self,
        i: usize,
        r: Result<PartEnd, CopyError>,
        progress: &dyn ProgressSink,
    ) {
        match &r {
            Ok(_) => progress.advanced(self.parts[i].end - self.parts[i].start),
            Err(_) => self.stop = true,
        }
        self.results[i] = Some(r);
    }
}
