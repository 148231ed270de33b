//! Reading a file back: DEST opened again past the page cache, and the buffers a reader
//! keeps from one file to the next.

use super::outcome::DstRead;
use crate::backend::host::AlignedBuf;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Buffers one reader keeps from file to file, so that each of a tree's small files does not
/// map and fault in fresh memory (that, and unmapping it, took about 7% of the CPU time of a
/// verified copy of 20,000 small files: bench/results/HISTORY.md, "--verify at copy
/// speed"). Only buffers of 256 KiB (`KEPT_LEN`) are kept, two at most.
#[derive(Default)]
pub struct Buffers(Vec<AlignedBuf>);

/// The length of a kept buffer: files whose reads fit it (up to 256 KiB) share them.
const KEPT_LEN: usize = 256 << 10;

impl Buffers {
    /// A buffer of at least `len` bytes: a kept one where `len` fits one.
    pub(super) fn take(&mut self, len: usize) -> Result<AlignedBuf, hipfile::Error> {
        match len <= KEPT_LEN {
            true => self.0.pop().map_or_else(|| AlignedBuf::new(KEPT_LEN), Ok),
            false => AlignedBuf::new(len),
        }
    }

    /// Keeps `buf` for the next file when it is of the kept length.
    pub(super) fn keep(&mut self, mut buf: AlignedBuf) {
        if buf.as_mut_slice().len() == KEPT_LEN && self.0.len() < 2 {
            self.0.push(buf);
        }
    }
}

/// Opens DST again for reading, with O_DIRECT where the filesystem allows it. Goes through
/// /proc/self/fd (the very inode written); where /proc is missing, through the name.
pub(super) fn reopen_for_reading(dst: &File, dst_name: &Path) -> io::Result<(File, DstRead)> {
    let proc_path = format!("/proc/self/fd/{}", dst.as_raw_fd());
    let open = |path: &Path, flags: i32| {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOCTTY | flags)
            .open(path)
    };
    // The fd's own file through /proc; by name only where /proc is not mounted.
    let mut path = Path::new(&proc_path);
    let mut opened = open(path, libc::O_DIRECT);
    if opened
        .as_ref()
        .is_err_and(|e| e.kind() == io::ErrorKind::NotFound)
    {
        path = dst_name;
        opened = open(path, libc::O_DIRECT);
    }
    match opened {
        Ok(f) => Ok((f, DstRead::Direct)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let f = open(path, 0)?;
            Ok((
                f,
                DstRead::Buffered("the filesystem refused O_DIRECT".into()),
            ))
        }
        Err(e) => Err(e),
    }
}
