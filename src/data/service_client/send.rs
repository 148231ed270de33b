//! Sending files to the service: queued here and sent together (several to a message), a
//! file whose names do not fit a message copied by the client, and files never sent ended
//! here as never begun.

use super::{Lost, ServiceClient, State};
use crate::service::wire::{self, FileRequest, Handover, Request};
use crate::sys::messages;
use aiscp_engine::digest::Algorithm;
use aiscp_engine::{CopyError, Finished, SparseMode, Ticket};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering;

/// Files queued in the client and not sent yet. Small files go [`wire::MAX_FILES`] to a
/// message, so each costs a fraction of a message each way; larger ones go as soon as they
/// add up to [`Unsent::ENOUGH`], so the service never waits long for data it could be
/// copying (bench/results/HISTORY.md, "Small files through the service").
#[derive(Default)]
pub(super) struct Unsent {
    ids: Vec<u64>,
    bytes: u64,
}

impl Unsent {
    const ENOUGH: u64 = 1 << 20;

    /// Queues file `id` of `len` bytes; whether it is time to send.
    pub(super) fn add(&mut self, id: u64, len: u64) -> bool {
        self.ids.push(id);
        self.bytes += len;
        self.ids.len() >= wire::MAX_FILES || self.bytes >= Self::ENOUGH
    }

    pub(super) fn take(&mut self) -> Vec<u64> {
        self.bytes = 0;
        std::mem::take(&mut self.ids)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub(super) fn len(&self) -> usize {
        self.ids.len()
    }
}

/// The service went away while files were being sent; [`ServiceClient::lose`] has taken
/// its files.
pub(super) struct ServiceGone;

impl ServiceClient {
    /// Sends `files` (each with its SOURCE and DEST descriptors) in as few messages as fit.
    /// Returns the ids of files whose request does not fit a message even alone (their
    /// names are too long): they are copied here.
    pub(super) fn post(
        &mut self,
        files: &[(FileRequest, [RawFd; 2])],
    ) -> Result<Vec<u64>, ServiceGone> {
        let mut misfits = Vec::new();
        for batch in files.chunks(wire::MAX_FILES) {
            let State::Up(up) = &self.state else {
                return Err(ServiceGone);
            };
            let sock = up.sock.as_fd();
            let send = |batch: &[(FileRequest, [RawFd; 2])]| {
                let request = Request::Copy {
                    files: batch.iter().map(|(f, _)| f.clone()).collect(),
                };
                let fds: Vec<RawFd> = batch.iter().flat_map(|(_, fds)| *fds).collect();
                wire::send(sock, &request, &fds)
            };
            let sent = match send(batch) {
                // Long names: one by one, and a file that does not fit alone stays here.
                Err(e) if wire::too_long(&e) => {
                    batch.chunks(1).try_for_each(|one| match send(one) {
                        Err(e) if wire::too_long(&e) => {
                            misfits.push(one[0].0.id);
                            Ok(())
                        }
                        other => other,
                    })
                }
                other => other,
            };
            if let Err(e) = sent {
                let lost = match e.kind() {
                    // SO_SNDTIMEO ran out: the service takes nothing.
                    std::io::ErrorKind::WouldBlock => Lost::Stuck(format!(
                        "the staging service (pid {}) took no request within {} s",
                        up.welcome.pid,
                        super::reach::SEND_LIMIT.as_secs()
                    )),
                    _ => Lost::Gone(messages::os_text(&e)),
                };
                self.lose(lost);
                return Err(ServiceGone);
            }
        }
        self.served |= misfits.len() < files.len();
        self.note_writing();
        Ok(misfits)
    }

    /// Sends the files queued here. One whose request does not fit a message is answered
    /// "not moved" at once, and the copier copies it here in its turn.
    pub(super) fn flush(&mut self) {
        if self.unsent.is_empty() {
            return;
        }
        // After SIGINT nothing more is sent: they end here, never begun.
        if self.config.cancel.load(Ordering::SeqCst) {
            self.drop_unsent();
            return;
        }
        let ids = self.unsent.take();
        let files: Vec<_> = ids
            .iter()
            .filter_map(|id| self.out.get(id).map(|job| (*id, job)))
            .map(|(id, job)| {
                let handover = Handover::InFlight {
                    len: job.len,
                    truncate: job.truncate,
                };
                let names = (&*job.src_name, &*job.dst_name);
                let request = request(id, names, job.sparse, job.digest, handover);
                (request, [job.src.as_raw_fd(), job.dst.as_raw_fd()])
            })
            .collect();
        let Ok(misfits) = self.post(&files) else {
            return;
        };
        for id in misfits {
            self.end_unsent(id, CopyError::NotMoved);
        }
    }

    /// After SIGINT: the files never sent end here, as never begun.
    pub(super) fn drop_unsent(&mut self) {
        for id in self.unsent.take() {
            self.end_unsent(id, CopyError::Interrupted);
        }
    }

    /// Ends file `id`, which the service never had, here: never begun, so a DEST this run
    /// made for it goes again after an interruption, and a file not moved is copied here in
    /// its turn.
    pub(super) fn end_unsent(&mut self, id: u64, why: CopyError) {
        if let Some(job) = self.out.remove(&id) {
            self.out_bytes = self.out_bytes.saturating_sub(job.len);
            let f = Finished::elsewhere(Ticket(id), job, Err(why), false);
            self.landed.push_back(f);
        }
        self.note_writing();
    }
}

/// A file's part of a copy request.
pub(super) fn request(
    id: u64,
    (src_name, dst_name): (&Path, &Path),
    sparse: SparseMode,
    digest: Option<Algorithm>,
    handover: Handover,
) -> FileRequest {
    FileRequest {
        id,
        src_name: src_name.as_os_str().as_bytes().to_vec(),
        dst_name: dst_name.as_os_str().as_bytes().to_vec(),
        sparse: sparse.into(),
        handover,
        sums: digest.map(Into::into),
    }
}
