//! Files in flight with the service, as the copier's [`FileQueue`]: sent in batches,
//! answered in any order, lost ones ended here.

use super::{Answer, ServiceClient, State};
use crate::data::mover::FileQueue;
use aiscp_engine::{CopyError, Finished, QueueLimits, QueuedJob, Ticket};
use std::time::Duration;

impl FileQueue for ServiceClient {
    fn set_limits(&mut self, limits: QueueLimits) {
        self.limits = limits;
    }

    fn queue_max(&self) -> Option<u64> {
        match &self.state {
            State::Up(up) if self.limits.files > 0 => up.welcome.queue_max,
            _ => None,
        }
    }

    fn has_room(&self, len: u64) -> bool {
        self.out.len() + self.reading_back() < self.limits.files
            && (self.out.is_empty() || self.out_bytes + len <= self.limits.bytes)
    }

    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        if !matches!(self.state, State::Up(_)) {
            return Err(Box::new((job, CopyError::NotMoved)));
        }
        let id = self.next_id;
        self.next_id += 1;
        job.progress.file_started(&job.src_name, Some(job.len));
        self.out_bytes += job.len;
        let len = job.len;
        self.out.insert(id, job);
        if self.unsent.add(id, len) {
            self.flush();
        }
        Ok(Ticket(id))
    }

    fn next_finished(&mut self, block: bool) -> Option<Finished> {
        if block {
            self.flush();
        }
        let f = self.next_ended(block)?;
        self.copied += u64::from(f.result.is_ok());
        Some(f)
    }
}

impl ServiceClient {
    /// [`FileQueue::next_finished`]: files answered, lost or read back, as they end.
    fn next_ended(&mut self, block: bool) -> Option<Finished> {
        loop {
            if let Some(f) = self.landed.pop_front() {
                return Some(f);
            }
            if let Some(f) = self.read_back(false) {
                return Some(f);
            }
            // Only files sent can have been answered (after a wait, every file is sent).
            if self.out.len() == self.unsent.len() {
                return self.read_back(block);
            }
            // While files are read back, answers are awaited in short waits, so a read-back
            // that ends meanwhile is taken at once.
            let wait = match (block, self.reading_back()) {
                (false, _) => Some(Duration::ZERO),
                (true, 0) => None,
                (true, _) => Some(Duration::from_millis(1)),
            };
            match self.next_reply(wait) {
                Some(Answer::Done(id, outcome)) => {
                    if let Some(f) = self.finished(id, outcome) {
                        return Some(f);
                    }
                }
                Some(Answer::Progress(..)) => {}
                None if !block => return self.landed.pop_front(),
                None => {}
            }
        }
    }
}
