//! Host memory staging, for machines without a GPU library: each slot is aligned host
//! memory that POSIX reads fill and POSIX writes drain (O_DIRECT-capable alignment).

use super::kind::Backend;
use super::staging::{NoLibrary, Staging};
use crate::digest::{Algorithm, Hashing, Piece};
use hipfile::Error;
use nix::sys::mman::{self, MapFlags, ProtFlags};
use std::ffi::c_void;
use std::num::NonZeroUsize;
use std::ptr::NonNull;

/// Alignment of host slots: more than any filesystem's direct-I/O alignment we have seen.
const SLOT_ALIGN: usize = 64 * 1024;

pub struct HostStaging;

impl HostStaging {
    pub fn new() -> HostStaging {
        HostStaging
    }
}

impl Default for HostStaging {
    fn default() -> Self {
        Self::new()
    }
}

/// A zeroed, `SLOT_ALIGN`-aligned buffer of anonymous memory.
///
/// Mapped rather than taken from the heap so that the kernel zeroes pages as the first
/// reads touch them: a heap allocation of this alignment is zeroed up front, which cost a
/// quarter of a second for four 64 MiB slots before the first byte moved.
pub struct AlignedBuf {
    /// The whole mapping, `SLOT_ALIGN` longer than asked so an aligned start fits in it.
    map: NonNull<c_void>,
    map_len: usize,
    /// The aligned start inside `map`, and the length asked for.
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its mapping exclusively, like a Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> Result<AlignedBuf, Error> {
        let oom = |why: String| {
            Error::Os(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                format!("cannot allocate {len} bytes of host memory{why}"),
            ))
        };
        let map_len = NonZeroUsize::new(len.max(1))
            .and_then(|n| n.checked_add(SLOT_ALIGN))
            .ok_or_else(|| oom(String::new()))?;
        // SAFETY: a fresh private anonymous mapping aliases nothing.
        let map = unsafe {
            mman::mmap_anonymous(
                None,
                map_len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_PRIVATE,
            )
        }
        .map_err(|e| oom(format!(" ({})", e.desc())))?;
        let skip = map.as_ptr().cast::<u8>().align_offset(SLOT_ALIGN);
        // SAFETY: skip < SLOT_ALIGN, so the aligned start and `len` bytes after it lie
        // inside the mapping.
        let ptr = unsafe { NonNull::new_unchecked(map.as_ptr().cast::<u8>().add(skip)) };
        Ok(AlignedBuf {
            map,
            map_len: map_len.get(),
            ptr,
            len,
        })
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for len initialised (zero-filled by the kernel) bytes, owned by
        // self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this address and length; no slice outlives self.
        // munmap of a mapping we own fails only on invalid arguments, which these are not.
        let _ = unsafe { mman::munmap(self.map, self.map_len) };
    }
}

impl Staging for HostStaging {
    type Slot = AlignedBuf;
    type Library = NoLibrary<AlignedBuf>;

    fn name(&self) -> Backend {
        Backend::Host
    }
    fn memory(&self) -> &'static str {
        "host memory"
    }
    fn library(&self) -> Option<&NoLibrary<AlignedBuf>> {
        None
    }
    fn slot_alignment(&self) -> u64 {
        SLOT_ALIGN as u64
    }
    fn enter_worker(&self, _: &AlignedBuf) -> Result<(), Error> {
        Ok(())
    }
    fn alloc_slot(&self, len: usize, _device: usize) -> Result<AlignedBuf, Error> {
        AlignedBuf::new(len)
    }
    fn slot_len(&self, slot: &AlignedBuf) -> usize {
        slot.len
    }
    /// A window is the slot's memory, at most [`crate::fileio::STOP_GRAIN`] of it at a
    /// time: a slice is one read and one write up to that size, and the stop flag is looked
    /// at between windows.
    fn window_len(&self, slot: &AlignedBuf) -> usize {
        slot.len.min(crate::fileio::STOP_GRAIN)
    }
    fn window<'s>(
        &self,
        slot: &'s mut AlignedBuf,
        _: usize,
        slot_off: usize,
    ) -> Result<&'s mut [u8], Error> {
        Ok(&mut slot.as_mut_slice()[slot_off..])
    }
    /// The window is the slot's own memory: nothing to copy.
    fn upload(&self, _: &mut AlignedBuf, _: usize, _: usize, _: usize) -> Result<(), Error> {
        Ok(())
    }
    fn download(&self, _: &mut AlignedBuf, _: usize, _: usize, _: usize) -> Result<(), Error> {
        Ok(())
    }
    fn settle(&self, _: &mut AlignedBuf) -> Result<(), Error> {
        Ok(())
    }
    fn windows_apart(&self) -> bool {
        false
    }
    /// On the CPU, on the worker's thread: the workers hash their slices side by side.
    fn hash(
        &self,
        slot: &mut AlignedBuf,
        len: usize,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Hashing, Error> {
        Ok(Hashing::Done(Some(Piece::of_bytes(
            algorithm,
            start,
            &slot.as_mut_slice()[..len],
        ))))
    }
}
