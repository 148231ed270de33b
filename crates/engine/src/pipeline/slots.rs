//! Slot allocation policy: which of the pipeline's slots a copy may use (by GPU), making
//! them when first needed, and what to do when memory runs out (halve the chunk, or go on
//! with fewer slots). Slots live for the run; only the first one is required.

use super::state::Pipeline;
use crate::backend::{LibraryIo, Staging};
use crate::bounce;
use crate::error::CopyError;
use crate::fileio::MIN_ALIGN;
use std::io;

impl<S: Staging> Pipeline<S> {
    /// Restricts the next copies to the slots of `devices` (positions in the staging's
    /// device list, the first one taking a file's first slice and its tail; all devices
    /// when none of theirs is left), taken a round of devices at a time.
    pub(crate) fn choose(&mut self, devices: &[usize]) {
        let per = self.staging.devices();
        let rank = |i: usize| devices.iter().position(|&d| d == i % per);
        let usable = |i: &usize| self.usable[*i];
        self.chosen = (0..self.slots.len())
            .filter(usable)
            .filter(|&i| rank(i).is_some())
            .collect();
        self.chosen.sort_by_key(|&i| (i / per, rank(i)));
        if self.chosen.is_empty() {
            self.chosen = (0..self.slots.len()).filter(usable).collect();
        }
        self.workers = 1;
    }

    /// The devices the last copy used (positions), its first one first.
    pub(crate) fn devices_used(&self) -> Vec<usize> {
        let per = self.staging.devices();
        let mut used: Vec<usize> = Vec::new();
        for &i in &self.chosen[..self.workers.clamp(1, self.chosen.len())] {
            if !used.contains(&(i % per)) {
                used.push(i % per);
            }
        }
        used
    }

    /// Secures the first slot and its host window, what every copy needs (the window serves
    /// the bounce route and every unaligned tail). The engine calls it before DST is opened,
    /// so that a machine without memory for them fails the file with DST intact, and again
    /// at the start of each copy, where it is a no-op once they exist (slots live for the run).
    pub(crate) fn first_slot(
        &mut self,
        src: &std::path::Path,
        diag: &mut dyn FnMut(&str),
    ) -> Result<(), CopyError> {
        self.ensure_slots(1, src, diag)?;
        let slot = self.slots[self.chosen[0]].as_mut().expect("ensured above");
        bounce::ready_windows(&*self.staging, slot, src)
    }

    /// Readies the windows of the first `n` chosen slots (the bounce route's pinned memory),
    /// before DST is touched. A slot after the first whose windows cannot be had is given
    /// up for the run; returns how many slots there are to use.
    pub(crate) fn ready_windows(
        &mut self,
        n: usize,
        src: &std::path::Path,
        diag: &mut dyn FnMut(&str),
    ) -> Result<usize, CopyError> {
        for k in 0..n.min(self.chosen.len()) {
            let i = self.chosen[k];
            let slot = self.slots[i].as_mut().expect("ensure_slots made it");
            if let Err(e) = bounce::ready_windows(&*self.staging, slot, src) {
                if k == 0 {
                    return Err(e);
                }
                diag(&format!("slot {i}: {e}; going on with {k} slot(s)"));
                self.usable[i] = false;
                self.slots[i] = None;
                self.chosen.truncate(k);
                return Ok(k);
            }
        }
        Ok(n.min(self.chosen.len()))
    }

    /// Makes sure the first `n` slots exist; returns how many slots there are to use (at
    /// least one, at most `n`) and the chunk they hold.
    ///
    /// A slot the device has no memory for at the current chunk size is retried at half the
    /// size, down to [`MIN_RETRY_CHUNK`]; the smaller chunk then holds for the rest of the run
    /// (larger slots still fit it). A later slot that cannot be had even so is given up for
    /// the run and the copy goes on with fewer slots; only the first one is required.
    pub(crate) fn ensure_slots(
        &mut self,
        n: usize,
        src: &std::path::Path,
        diag: &mut dyn FnMut(&str),
    ) -> Result<Granted, CopyError> {
        let n = n.min(self.chosen.len());
        for k in 0..n {
            let i = self.chosen[k];
            if self.slots[i].is_some() {
                continue;
            }
            match self.alloc_shrinking(i % self.staging.devices(), diag) {
                Ok(slot) => {
                    let refusal = self.staging.library().and_then(|l| l.slot_refusal(&slot));
                    if let Some(why) = refusal {
                        diag(&format!(
                            "slot {i}: buffer registration refused ({why}); it bounces"
                        ));
                    }
                    self.slots[i] = Some(slot);
                }
                Err((_, e)) if k > 0 => {
                    diag(&format!("slot {i}: {e}; going on with {k} slot(s)"));
                    self.usable[i] = false;
                    self.chosen.truncate(k);
                    return Ok(Granted {
                        slots: k,
                        chunk: self.chunk,
                    });
                }
                Err((first, e)) => {
                    return Err(CopyError::Alloc {
                        path: src.to_path_buf(),
                        bytes: first,
                        smallest: (self.chunk < first).then_some(self.chunk),
                        memory: self.staging.memory().to_owned(),
                        message: e.to_string(),
                    })
                }
            }
        }
        Ok(Granted {
            slots: n,
            chunk: self.chunk,
        })
    }

    /// One slot of the current chunk size, halving it while memory runs out. The error
    /// comes with the size first asked for.
    fn alloc_shrinking(
        &mut self,
        device: usize,
        diag: &mut dyn FnMut(&str),
    ) -> Result<S::Slot, (usize, hipfile::Error)> {
        let first = self.chunk;
        loop {
            match self.staging.alloc_slot(self.chunk, device) {
                Ok(slot) => return Ok(slot),
                Err(e) if is_out_of_memory(&e) && self.chunk > MIN_RETRY_CHUNK => {
                    let smaller = (self.chunk / 2).max(MIN_RETRY_CHUNK) & !(MIN_ALIGN as usize - 1);
                    diag(&format!(
                        "cannot allocate {} ({e}); chunk now {}",
                        crate::units::size(self.chunk as u64),
                        crate::units::size(smaller as u64)
                    ));
                    self.chunk = smaller;
                }
                Err(e) => return Err((first, e)),
            }
        }
    }
}

/// Smallest chunk the engine shrinks to when device memory runs short.
const MIN_RETRY_CHUNK: usize = 1 << 20;

/// hipErrorOutOfMemory and CUDA_ERROR_OUT_OF_MEMORY are both 2; host memory says so itself.
fn is_out_of_memory(e: &hipfile::Error) -> bool {
    match e {
        hipfile::Error::Runtime { code, .. } => *code == hipfile::sys::RUNTIME_OUT_OF_MEMORY,
        hipfile::Error::Os(e) => e.kind() == io::ErrorKind::OutOfMemory,
        _ => false,
    }
}

/// What [`Pipeline::ensure_slots`] could make: how many slots, and the chunk each holds (the
/// run's chunk, halved when device memory ran short).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Granted {
    pub(crate) slots: usize,
    pub(crate) chunk: usize,
}
