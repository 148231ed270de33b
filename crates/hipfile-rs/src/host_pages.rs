//! Host memory for the pinned windows: an anonymous mapping of our own, aligned to and asking
//! for 2 MiB pages, that the runtime then pins (hipHostRegister / cuMemHostRegister) rather
//! than the runtime's own pinned memory, which comes in 4 KiB pages. O_DIRECT reads into
//! 8 MiB windows are 15-20% faster on huge pages (bench/results/HISTORY.md, "Where the GPU
//! engine's time goes"; the copies they speed up are in BENCHMARKS.md, "Pinned windows on
//! huge pages").
//!
//! Where THP's defrag setting is `madvise` (the kernel's default), the faults that pinning
//! makes may compact memory synchronously to find huge pages: paid when the memory is
//! pinned, not when it is used.

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::Error;

/// The huge-page size the mapping is aligned to (x86-64 and arm64 with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// `len` bytes of zeroed host memory, unmapped on drop.
pub(crate) struct HostPages {
    map: NonNull<c_void>,
    map_len: usize,
    start: NonNull<u8>,
    /// The mapping asked for huge pages.
    huge: bool,
}

impl HostPages {
    /// Maps `len` (> 0) bytes. Lengths of a huge page or more start on a huge-page boundary
    /// and ask for huge pages (a hint: where THP is off they stay 4 KiB pages).
    pub(crate) fn new(len: usize) -> Result<HostPages, Error> {
        let huge = len >= HUGE_PAGE;
        let map_len = if huge { len + HUGE_PAGE } else { len };
        // SAFETY: a fresh private anonymous mapping aliases nothing.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(Error::Os(std::io::Error::last_os_error()));
        }
        let map = NonNull::new(map).expect("mmap never maps address 0");
        let addr = map.as_ptr() as usize;
        let skip = if huge {
            addr.next_multiple_of(HUGE_PAGE) - addr
        } else {
            0
        };
        // SAFETY: skip < HUGE_PAGE, so `len` bytes from the start lie inside the mapping.
        let start = unsafe { NonNull::new_unchecked(map.as_ptr().cast::<u8>().add(skip)) };
        // SAFETY: advice on our own mapping. A child this process forks must not copy pages
        // the device reads and writes; a refusal of huge pages (no THP in this kernel) only
        // leaves them at 4 KiB.
        unsafe {
            libc::madvise(map.as_ptr(), map_len, libc::MADV_DONTFORK);
            if huge {
                libc::madvise(start.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
            }
        }
        Ok(HostPages {
            map,
            map_len,
            start,
            huge,
        })
    }

    pub(crate) fn start(&self) -> NonNull<u8> {
        self.start
    }

    /// Whether the mapping asked for huge pages (it is at least one huge page long).
    pub(crate) fn huge(&self) -> bool {
        self.huge
    }
}

impl Drop for HostPages {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this address and length; the owner unpinned it and no
        // slice outlives it. munmap fails only on arguments, which these are not.
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_mappings_start_on_a_huge_page_and_small_ones_are_plain() {
        for len in [4096, HUGE_PAGE - 1, HUGE_PAGE, 8 << 20, (8 << 20) + 1] {
            let pages = HostPages::new(len).unwrap();
            let start = pages.start().as_ptr();
            assert_eq!(pages.huge(), len >= HUGE_PAGE, "{len}");
            if len >= HUGE_PAGE {
                assert_eq!(start as usize % HUGE_PAGE, 0, "{len}");
            }
            // SAFETY: `len` bytes mapped from the start.
            let bytes = unsafe { std::slice::from_raw_parts_mut(start, len) };
            assert!(bytes.iter().all(|&b| b == 0), "{len}: zeroed");
            bytes[len - 1] = 1;
        }
    }
}
