//! A file copied in turn: a regular file a part at a time, so other clients' files go
//! between its parts.

use super::connections::Job;
use super::recorder::Recorder;
use super::ClientId;
use crate::service::wire::Handover;
use aiscp_engine::{Copied, CopyError, DataJob, Engine, GiveWay, PartEnd, SourceKind, StageTimes};
use std::ops::Range;
use std::sync::atomic::AtomicBool;

/// Chunks of a file copied in turn that one part holds beside other work: four per slot of
/// the default four, 1 GiB at the default chunk (a few tenths of a second at storage speed),
/// about the longest another client's file waits for its turn. A file alone is one part
/// that gives way instead: each part's end drains the pipeline, which cost a 16 GiB copy
/// 1.16x on the H200 (BENCHMARKS.md, "Pinned windows on huge pages").
pub(super) const TURN_CHUNKS: u64 = 16;

/// The file copied in turn: a regular file a part at a time (so other clients' files go
/// between its parts), a source without a length whole.
pub(super) struct Turn {
    pub(super) client: ClientId,
    pub(super) job: Job,
    pub(super) recorder: Recorder,
    len: Option<u64>,
    /// Where the next part begins.
    next: u64,
    parts: Vec<Result<PartEnd, CopyError>>,
    pub(super) stages: StageTimes,
}

impl Turn {
    /// Client `client`'s `job`, to be copied in turn, reported through `recorder`.
    pub(super) fn new(client: ClientId, job: Job, recorder: Recorder) -> Turn {
        // An empty file has no part to copy: it is copied whole, as one without a length.
        let len = match job.handover {
            Handover::InFlight { len, .. } | Handover::InTurn { len: Some(len) } => Some(len),
            Handover::InTurn { len: None } => None,
        }
        .filter(|&len| len > 0);
        Turn {
            client,
            job,
            recorder,
            len,
            next: 0,
            parts: Vec::new(),
            stages: StageTimes::default(),
        }
    }

    /// Copies the file's next part of at most `span` bytes, or ends the file (the finish
    /// of its parts, or a file without a length copied whole); stopped by `cancel`, the part
    /// ended early by `give_way` (the next part begins where it reached). Returns how the
    /// file ended once it has; None while parts remain.
    pub(super) fn step(
        &mut self,
        engine: &mut Engine,
        span: u64,
        (cancel, give_way): (&AtomicBool, Option<GiveWay<'_>>),
    ) -> Option<Result<Copied, CopyError>> {
        let part = self.next_part(span);
        let stopped = matches!(self.parts.last(), Some(Err(_)));
        match (self.len, part) {
            (Some(_), Some(part)) if !stopped => {
                let ran = engine.copy_part_cancellable(
                    &self.data_job(),
                    part.clone(),
                    &self.recorder,
                    (cancel, give_way),
                );
                self.stages.add(&ran.stages);
                self.next = ran.result.as_ref().map_or(part.end, |r| r.upto);
                self.parts.push(ran.result.map(|r| r.end));
                None
            }
            (Some(_), _) => {
                let parts = std::mem::take(&mut self.parts);
                Some(engine.finish_parts_cancellable(
                    &self.data_job(),
                    parts,
                    &self.recorder,
                    cancel,
                ))
            }
            // No length to cut in parts: copied whole.
            (None, _) => {
                let ran = engine.copy_cancellable(&self.data_job(), &self.recorder, cancel);
                self.stages.add(&ran.stages);
                Some(ran.result)
            }
        }
    }

    fn data_job(&self) -> DataJob<'_> {
        DataJob {
            src: &self.job.src,
            src_name: &self.job.src_name,
            src_kind: match self.len {
                Some(len) if len > 0 => SourceKind::Regular { len },
                _ => SourceKind::Sequential,
            },
            dst: &self.job.dst,
            dst_name: &self.job.dst_name,
            sparse: self.job.sparse,
            digest: self.job.digest,
        }
    }

    /// The next part of at most `span` bytes (a multiple of the chunk), None once the
    /// file's planned length is covered (an empty file has one empty part).
    fn next_part(&self, span: u64) -> Option<Range<u64>> {
        let len = self.len?;
        let first = self.parts.is_empty();
        (self.next < len || first).then(|| self.next..len.min(self.next.saturating_add(span)))
    }
}
