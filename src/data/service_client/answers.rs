//! What the service's answers mean here: each file's progress and result, and --verify:
//! files in flight read back on the engine's read-back threads (as an in-process run reads
//! its own) before they are handed back, a file copied in turn read back at once.

use super::ServiceClient;
use crate::service::wire::{Outcome, WireDigest};
use aiscp_engine::digest::{self, Algorithm};
use aiscp_engine::quote::quote;
use aiscp_engine::verify::{self, Buffers};
use aiscp_engine::{
    Copied, CopyError, DataJob, Finished, ProgressSink, ReadBackPool, StageTimes, Ticket,
};
use std::fs::File;
use std::path::Path;

impl ServiceClient {
    /// What a file's answer means here: its progress reported (past the `shown` bytes the
    /// service's reports already showed), the result before any --verify. A file the
    /// service stopped is cut here (`dst`) to what it says is good, what an interrupted
    /// copy in this process leaves. `wanted`: the digest the file's request asked for.
    pub(super) fn conclude(
        &mut self,
        outcome: Outcome,
        (src_name, dst_name): (&Path, &Path),
        (dst, wanted): (&File, Option<Algorithm>),
        shown: u64,
        progress: &dyn ProgressSink,
    ) -> (Result<Copied, CopyError>, bool, StageTimes) {
        match outcome {
            Outcome::Copied {
                end,
                route,
                stages,
                digest,
            } => {
                if let Some((r, w)) = route {
                    progress.route(r, w);
                }
                // What the progress reports during the copy did not show yet (holes too).
                progress.advanced(end.saturating_sub(shown));
                progress.file_finished();
                let stages = StageTimes::from(stages);
                self.stages.add(&stages);
                if self.config.debug {
                    self.debug(&format!(
                        "{}: {end} bytes through the staging service",
                        quote(dst_name)
                    ));
                }
                let digest = match (wanted, digest.and_then(WireDigest::digest)) {
                    (None, _) => Ok(None),
                    (Some(a), Some(d)) if d.algorithm() == a => Ok(Some(d)),
                    // None sent, or another algorithm's: DEST's bytes are read back here.
                    (Some(a), _) => digest::of_dest(a, dst, end).map(Some),
                };
                let result = digest
                    .map(|digest| Copied { size: end, digest })
                    .map_err(|e| CopyError::Digest {
                        name: quote(dst_name),
                        source: e,
                    });
                (result, true, stages)
            }
            // Worded here, about this process's paths, in its locale; a full disk is a
            // write error with its errno, as in-process.
            Outcome::Failed { failure } => {
                progress.file_finished();
                let failure = failure.into_error(src_name, dst_name);
                (Err(failure), true, StageTimes::default())
            }
            Outcome::Interrupted { started } => {
                progress.file_finished();
                (Err(CopyError::Interrupted), started, StageTimes::default())
            }
            Outcome::Stopped { good } => {
                progress.file_finished();
                let _ = dst.set_len(good);
                (Err(CopyError::Interrupted), true, StageTimes::default())
            }
        }
    }

    /// An answer to a file in flight, as the copier takes it from a queue; None while it is
    /// read back (--verify), or for an unknown id.
    pub(super) fn finished(&mut self, id: u64, outcome: Outcome) -> Option<Finished> {
        let job = self.out.remove(&id)?;
        self.out_bytes = self.out_bytes.saturating_sub(job.len);
        self.note_writing();
        let progress = std::sync::Arc::clone(&job.progress);
        let names = (&*job.src_name, &*job.dst_name);
        let dst = (&job.dst, job.digest);
        let (result, started, stages) = self.conclude(outcome, names, dst, 0, &*progress);
        let copied = result.is_ok();
        let mut f = Finished::elsewhere(Ticket(id), job, result, started);
        f.stages = stages;
        if self.config.verify.is_some() && copied {
            let config = &self.config;
            let pool = self
                .read_backs
                .get_or_insert_with(|| ReadBackPool::start(config));
            pool.check(f);
            return None;
        }
        Some(f)
    }

    /// --verify of a file copied in turn, read back at once (as in-process).
    pub(super) fn verify_in_turn(
        &self,
        job: &DataJob<'_>,
        copied: Copied,
    ) -> Result<Copied, CopyError> {
        let Some(how) = self.config.verify else {
            return Ok(copied);
        };
        let (src, dst) = ((job.src, job.src_name), (job.dst, job.dst_name));
        let buffers = &mut Buffers::default();
        let stop = &self.config.cancel;
        let checked = verify::check(how, src, dst, &copied, buffers, stop)?;
        self.debug(&checked.describe(job.dst_name));
        Ok(copied)
    }

    /// The files being read back (--verify); they are still in flight.
    pub(super) fn reading_back(&self) -> usize {
        self.read_backs.as_ref().map_or(0, ReadBackPool::waiting)
    }

    /// A file whose read-back has ended (waiting for one with `block`), its --debug lines
    /// shown.
    pub(super) fn read_back(&mut self, block: bool) -> Option<Finished> {
        let f = self.read_backs.as_mut()?.next(block)?;
        for line in f.debug_lines() {
            self.debug(line);
        }
        Some(f)
    }
}
