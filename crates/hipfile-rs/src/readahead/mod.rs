//! Reading the libraries' files ahead of the loader.
//!
//! A GPU runtime is a large file (libcuda.so is ~96 MB) that the loader maps and the runtime's
//! initialisation then touches page by page. With a cold page cache each first touch is a
//! small read from disk. Reading the files on a thread of their own while the loader works
//! turns those into large reads already under way: on the H200 machine a cold start's median
//! came 15 and 32 ms lower in two runs (bench/results/HISTORY.md, "Reading the runtime's
//! file ahead"). It is a hint: a wrong guess costs a read (of at most 512 MiB, stopped when
//! the load fails), never the load.

mod search;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::load;
use crate::{Flavor, LibraryPaths};
use search::Search;

/// Reads go in pieces of this size: large enough that the disk sees large requests, small
/// enough to be a trifle of memory.
const PIECE: usize = 2 << 20;
/// No more of a file is read ahead than this (a runtime is ~100 MB; a wrong override may not be).
const FILE_LIMIT: u64 = 512 << 20;

/// The files being read ahead. Dropping it stops the reading at the next piece: a load
/// that failed, or a library released, has no more use for it.
pub(crate) struct ReadAhead {
    files: Vec<PathBuf>,
    stop: Arc<AtomicBool>,
}

impl ReadAhead {
    pub(crate) fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Starts reading the files the loader is most likely to map for `flavor`'s runtime and I/O
/// library into the page cache, on a thread of its own.
pub(crate) fn start(flavor: Flavor, paths: &LibraryPaths) -> ReadAhead {
    let (runtime, io) = match flavor {
        Flavor::HipFile => (&load::HIP, &load::HIPFILE),
        Flavor::CuFile => (&load::CUDA, &load::CUFILE),
    };
    let search = Search::for_this_process(flavor);
    let wanted = [
        (runtime, paths.runtime.as_deref()),
        (io, paths.io.as_deref()),
    ];
    let mut files: Vec<(PathBuf, File)> = wanted
        .into_iter()
        .filter_map(|(wanted, exact)| search.likely_file(wanted, exact))
        .collect();
    // One file can stand for both (a test's fake library).
    files.dedup_by(|a, b| a.0 == b.0);
    let stop = Arc::new(AtomicBool::new(false));
    let mut read_ahead = ReadAhead {
        files: files.iter().map(|(path, _)| path.clone()).collect(),
        stop: stop.clone(),
    };
    if files.is_empty() {
        return read_ahead;
    }
    let reader = std::thread::Builder::new()
        .name("lib read-ahead".into())
        .spawn(move || {
            for (_, file) in &files {
                read_through(file, &stop);
            }
        });
    if reader.is_err() {
        read_ahead.files.clear();
    }
    read_ahead
}

/// `path` opened for reading if it is a regular file. Anything else is left unopened, as
/// opening a device or a FIFO can act on it; the open itself cannot block or take a
/// terminal (the path could change between the look and the open, so it is looked at again).
fn open_regular(path: &Path) -> Option<File> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// Reads the pieces of `file` (up to [`FILE_LIMIT`]) that are not in the page cache yet and
/// drops the bytes; stops at the next piece once `stop` is set. Plain reads one piece at a
/// time, as `cat` beside a start was measured to help: the loader's own faults queue between
/// pieces, where `posix_fadvise(WILLNEED)` would queue the whole file at once (it measured
/// no better: bench/results/HISTORY.md, "Reading the runtime's file ahead"). Cached pieces
/// are skipped, so that a warm start does not copy 100 MB for nothing.
fn read_through(file: &File, stop: &AtomicBool) {
    let len = file.metadata().map_or(0, |m| m.len()).min(FILE_LIMIT) as usize;
    let cached = Residency::of(file, len);
    let mut piece = vec![0u8; PIECE];
    let mut at = 0;
    while at < len && !stop.load(Ordering::Relaxed) {
        let n = PIECE.min(len - at);
        if !cached.as_ref().is_some_and(|c| c.holds(at, n)) {
            match file.read_at(&mut piece[..n], at as u64) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
        at += n;
    }
}

/// A read-only mapping of a file, only to ask the kernel which of its pages are cached
/// (`mincore`); nothing is read through it.
struct Residency {
    map: *mut libc::c_void,
    len: usize,
}

impl Residency {
    fn of(file: &File, len: usize) -> Option<Residency> {
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh shared read-only mapping of an open file; its memory is never read
        // (mincore only), so a file that shrinks meanwhile cannot fault this process.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        (map != libc::MAP_FAILED).then_some(Residency { map, len })
    }

    /// Whether every page of `[at, at + n)` is in the page cache (`at` page-aligned).
    fn holds(&self, at: usize, n: usize) -> bool {
        // SAFETY: sysconf reads a constant of the system.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let mut pages = vec![0u8; n.div_ceil(page)];
        // SAFETY: the range lies inside the mapping (at + n <= len); `pages` has one byte per
        // page, as mincore wants.
        let ok =
            unsafe { libc::mincore(self.map.cast::<u8>().add(at).cast(), n, pages.as_mut_ptr()) };
        ok == 0 && pages.iter().all(|&b| b & 1 == 1)
    }
}

impl Drop for Residency {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, unmapped once.
        unsafe { libc::munmap(self.map, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_file_is_read_into_the_page_cache() {
        // A file larger than any read-ahead window, evicted, then read through: it should end
        // up (nearly) all in the page cache. Skipped where eviction or mincore do not work.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let len = 48usize << 20;
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: advice on an open descriptor.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let before = resident(&file, len);
        if before > len / 4 {
            test_support::skip::skip(
                "TMPDIR keeps evicted pages cached",
                &format!("{before} bytes stayed"),
            );
            return;
        }
        read_through(&file, &AtomicBool::new(false));
        let after = resident(&file, len);
        assert!(after >= len * 9 / 10, "{after} of {len} bytes read ahead");
    }

    /// Bytes this thread has asked read() for so far (`rchar`), or None where the kernel
    /// does not count per thread.
    fn bytes_read_by_this_thread() -> Option<u64> {
        let io = std::fs::read_to_string("/proc/thread-self/io").ok()?;
        io.lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .and_then(|n| n.trim().parse().ok())
    }

    #[test]
    fn cached_pieces_are_skipped_and_a_stopped_reader_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lib");
        let len = 8usize << 20;
        std::fs::write(&path, vec![3u8; len]).unwrap();
        let file = File::open(&path).unwrap();
        let Some(before) = bytes_read_by_this_thread() else {
            test_support::skip::skip("no per-thread I/O counts", "/proc/thread-self/io");
            return;
        };
        // Just written: every page cached, so nothing is read.
        assert_eq!(resident(&file, len), len);
        read_through(&file, &AtomicBool::new(false));
        let after = bytes_read_by_this_thread().unwrap();
        // The counter's own file is read too: a few hundred bytes.
        assert!(after - before < 4096, "{} bytes read", after - before);
        // Evicted, a stopped reader still reads nothing.
        file.sync_all().unwrap();
        // SAFETY: advice on an open descriptor.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if resident(&file, len) > len / 4 {
            test_support::skip::skip(
                "TMPDIR keeps evicted pages cached",
                "the evicted half not checked",
            );
            return;
        }
        read_through(&file, &AtomicBool::new(true));
        let stopped = bytes_read_by_this_thread().unwrap();
        assert!(stopped - after < 4096, "{} bytes read", stopped - after);
        // Running, it reads at least the first piece (the kernel's own read-ahead may bring
        // later pieces in before their turn, and those are skipped as cached).
        read_through(&file, &AtomicBool::new(false));
        let running = bytes_read_by_this_thread().unwrap();
        assert!(
            running - stopped >= PIECE as u64,
            "{} bytes read",
            running - stopped
        );
    }

    /// Bytes of `file`'s first `len` in the page cache (mincore on a mapping).
    fn resident(file: &File, len: usize) -> usize {
        let page = 4096;
        // SAFETY: a read-only shared mapping of an open file, unmapped before returning; the
        // vector has one byte per page as mincore wants.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(page)];
            let ok = libc::mincore(map, len, vec.as_mut_ptr()) == 0;
            libc::munmap(map, len);
            assert!(ok);
            vec.iter().filter(|&&b| b & 1 == 1).count() * page
        }
    }
}
