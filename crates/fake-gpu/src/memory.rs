//! "Device" and pinned host memory: anonymous private mappings.
//!
//! mmap gives page alignment (at least the 4096 bytes real device allocations have) and
//! costs nothing until touched, so tests can allocate buffers past the 2 GiB per-call cap
//! without using that much memory.

use std::ptr;

/// Maps `len` bytes of zeroed, lazily committed memory; `None` when the kernel refuses.
pub fn map(len: usize) -> Option<usize> {
    // SAFETY: an anonymous mapping at an address of the kernel's choosing touches no
    // existing memory.
    let addr = unsafe {
        libc::mmap(
            ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    (addr != libc::MAP_FAILED).then_some(addr as usize)
}

/// Unmaps a region returned by [`map`].
///
/// # Safety
/// `addr`/`len` must be a live mapping from [`map`] that nothing uses any more.
pub unsafe fn unmap(addr: usize, len: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
}
