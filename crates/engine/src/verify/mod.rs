//! --verify: after a copy, read SRC and DST back and check they hold the same bytes.
//!
//! DST is read with O_DIRECT so the check covers what reached the disk, not the page cache
//! that the copy itself may have filled (a direct read first writes back any dirty pages of
//! its range). Where the filesystem refuses O_DIRECT, DST is read buffered and the outcome
//! says so. Both files stream through fixed buffers fitted to the file (at most three of
//! [`VERIFY_CHUNK`]: SOURCE's, and DEST's two when it is read ahead), so memory stays bounded
//! whatever the size; each side is also hashed with xxh3-128 (the round-trip check of hipFile's
//! examples), and the digest is returned for --debug. The comparison itself is exact: the
//! first differing byte is found by comparing the buffers, not by trusting a hash.
//!
//! `--verify=sums` reads DEST alone the same way and compares its digest with the one taken
//! of the staged bytes while copying (by_digest.rs): SOURCE is not read again.

mod by_digest;
mod dest_reads;
mod outcome;
mod reading;

pub use outcome::{Checked, DstRead, Verified, VerifyError, VERIFY_CHUNK};
use reading::reopen_for_reading;
pub use reading::Buffers;

use super::fileio;
use crate::config::Verify;
use crate::job::Copied;
use crate::quote::quote;
use dest_reads::DestReads;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use xxhash_rust::xxh3::Xxh3;

/// Starts writing `dst`'s dirty pages to the device without waiting for them
/// (`sync_file_range` with `SYNC_FILE_RANGE_WRITE`): call it as soon as a file's data is
/// written and read it back later, so that its O_DIRECT read-back finds the writeback done
/// or under way instead of starting it and waiting a whole disk write. Failure is ignored:
/// the read-back writes back what is still dirty itself.
pub fn start_writeback(dst: &File) {
    // SAFETY: sync_file_range reads and writes no memory of this process.
    let _ = unsafe { libc::sync_file_range(dst.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
}

/// Reads `src` and `dst` back and checks they are byte for byte the same. Both must be
/// regular files (a stream cannot be read twice, a device has nothing to read back), and
/// `src` not one of size 0 that holds data (a /proc file, made up at each read). `dst`
/// may be open write-only: it is reopened for reading through /proc/self/fd, so the file
/// checked is the one written even if its name was replaced meanwhile. `stop` set (by a
/// signal) ends the read-back at its next chunk: [`VerifyError::Stopped`].
pub fn verify(
    src: &File,
    src_name: &Path,
    dst: &File,
    dst_name: &Path,
    stop: &AtomicBool,
) -> Result<Verified, VerifyError> {
    verify_with(
        (src, src_name),
        (dst, dst_name),
        &mut Buffers::default(),
        stop,
    )
}

/// --verify of a copied file as `how` asks: SOURCE and DEST byte for byte, or DEST's digest
/// against `copied`'s (which must have one), through `buffers`.
pub fn check(
    how: Verify,
    src: (&File, &Path),
    dst: (&File, &Path),
    copied: &Copied,
    buffers: &mut Buffers,
    stop: &AtomicBool,
) -> Result<Verified, VerifyError> {
    match (how, &copied.digest) {
        (Verify::Bytes, _) => verify_with(src, dst, buffers, stop),
        (Verify::Sums, Some(digest)) => {
            by_digest::verify(dst, (copied.size, digest), buffers, stop)
        }
        (Verify::Sums, None) => Err(VerifyError::Cannot {
            name: quote(dst.1),
            what: "no digest was taken while copying it".into(),
        }),
    }
}

/// [`verify`] through `buffers`, kept by the caller from one file to the next.
pub(crate) fn verify_with(
    src: (&File, &Path),
    dst: (&File, &Path),
    buffers: &mut Buffers,
    stop: &AtomicBool,
) -> Result<Verified, VerifyError> {
    verify_in_chunks(src, dst, (VERIFY_CHUNK, stop), buffers)
}

/// [`verify_with`] with `chunk` bytes per read (tests cross chunk boundaries with a small one).
fn verify_in_chunks(
    (src, src_name): (&File, &Path),
    (dst, dst_name): (&File, &Path),
    (chunk, stop): (usize, &AtomicBool),
    buffers: &mut Buffers,
) -> Result<Verified, VerifyError> {
    let (sq, dq) = (quote(src_name), quote(dst_name));
    // Builds the error only when there is one (the name is cloned then, not per chunk).
    fn read_err(name: &str) -> impl FnOnce(io::Error) -> VerifyError + '_ {
        move |source| VerifyError::Read {
            name: name.to_owned(),
            source,
        }
    }
    let src_meta = readable_twice(src, &sq)?;
    let dst_meta = dst.metadata().map_err(read_err(&dq))?;
    if !dst_meta.is_file() {
        return Err(VerifyError::Cannot {
            name: dq,
            what: "not a regular file".into(),
        });
    }
    let (reader, dst_read) = reopen_for_reading(dst, dst_name).map_err(read_err(&dq))?;
    let reader_meta = reader.metadata().map_err(read_err(&dq))?;
    if (reader_meta.dev(), reader_meta.ino()) != (dst_meta.dev(), dst_meta.ino()) {
        return Err(VerifyError::Cannot {
            name: dq,
            what: "it was replaced during the copy".into(),
        });
    }
    let direct = dst_read == DstRead::Direct;

    let alloc_err = |e: hipfile::Error| VerifyError::Cannot {
        name: dq.clone(),
        what: e.to_string(),
    };
    // Reads fitted to the files: a direct read's cost grows with the length asked, not the
    // length read, so a small file read with a chunk-sized buffer pays for the whole chunk
    // (bench/results/HISTORY.md, "--verify at copy speed"). One byte more than the larger
    // file, so the first short read says both ended.
    let longer = src_meta.len().max(dst_meta.len()).saturating_add(1);
    let fitted = longer.div_ceil(fileio::MIN_ALIGN) * fileio::MIN_ALIGN;
    let chunk = usize::try_from(fitted).map_or(chunk, |f| f.min(chunk));
    let mut src_buf = buffers.take(chunk).map_err(alloc_err)?;
    // A file longer than one chunk has DEST read one chunk ahead, through a second buffer.
    let ahead = 1 + usize::from(longer > chunk as u64);
    let dst_bufs = (0..ahead)
        .map(|_| buffers.take(chunk))
        .collect::<Result<Vec<_>, _>>()
        .map_err(alloc_err)?;
    let sides = Sides {
        src,
        sq: &sq,
        dq: &dq,
        stop,
    };
    let (compared, kept) = std::thread::scope(|scope| {
        let mut dst_reads = DestReads::start(scope, &reader, (direct, chunk), dst_bufs);
        let src_chunk = &mut src_buf.as_mut_slice()[..chunk];
        let compared = compare(&sides, &reader, src_chunk, &mut dst_reads);
        (compared, dst_reads.into_kept())
    });
    buffers.keep(src_buf);
    kept.into_iter().for_each(|buf| buffers.keep(buf));
    let (offset, xxh3) = compared?;
    Ok(Verified {
        bytes: offset,
        checked: Checked::Bytes { xxh3 },
        dst_read,
    })
}

/// SOURCE's metadata, where a second read of it checks the first: a regular file that is
/// not one of size 0 holding data. Such a /proc or /sys file holds data made up at each
/// read (it was copied as a stream), so it is refused as a FIFO is; an empty file reads
/// nothing. `sq`: its quoted name.
fn readable_twice(src: &File, sq: &str) -> Result<std::fs::Metadata, VerifyError> {
    let read_err = |source| VerifyError::Read {
        name: sq.to_owned(),
        source,
    };
    let cannot = |what: &str| VerifyError::Cannot {
        name: sq.to_owned(),
        what: format!("{what} (it cannot be read twice)"),
    };
    let meta = src.metadata().map_err(read_err)?;
    if !meta.is_file() {
        return Err(cannot("not a regular file"));
    }
    if meta.len() == 0 && fileio::has_byte_at(src, 0).map_err(read_err)? {
        return Err(cannot("its size is 0 but reading it gives data"));
    }
    Ok(meta)
}

/// SOURCE and both quoted names, as [`compare`] reports them.
struct Sides<'a> {
    src: &'a File,
    sq: &'a str,
    dq: &'a str,
    /// Set by a signal: the read-back ends at the next chunk.
    stop: &'a AtomicBool,
}

/// Compares SOURCE (read here into `src_buf`) with DEST's chunks from `dst_reads` (of the
/// same length), from offset 0 to the end both reach. Returns the bytes compared and their
/// xxh3-128; `dst` is DEST as reopened, for the length a mismatch reports.
fn compare(
    sides: &Sides<'_>,
    dst: &File,
    src_buf: &mut [u8],
    dst_reads: &mut DestReads<'_>,
) -> Result<(u64, u128), VerifyError> {
    let Sides { src, sq, dq, stop } = *sides;
    let read_err = |name: &str| {
        let name = name.to_owned();
        move |source| VerifyError::Read { name, source }
    };
    let chunk = src_buf.len();
    let (mut src_hash, mut dst_hash) = (Xxh3::new(), Xxh3::new());
    let mut offset = 0u64;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Err(VerifyError::Stopped);
        }
        let a = fileio::pread_full(src, src_buf, offset, false).map_err(read_err(sq))?;
        let (mut dst_buf, b) = dst_reads.next().map_err(read_err(dq))?;
        let dst_bytes = &dst_buf.as_mut_slice()[..b];
        let common = a.min(b);
        if let Some(i) = first_difference(&src_buf[..common], &dst_bytes[..common]) {
            return Err(VerifyError::Differs {
                src: sq.to_owned(),
                dst: dq.to_owned(),
                offset: offset + i as u64,
            });
        }
        if a != b {
            // One side ended inside this chunk; report both full lengths.
            let src_len = file_len(src, offset + a as u64, a < b);
            let dst_len = file_len(dst, offset + b as u64, b < a);
            return Err(VerifyError::Length {
                src: sq.to_owned(),
                dst: dq.to_owned(),
                src_len,
                dst_len,
                offset: offset + common as u64,
            });
        }
        src_hash.update(&src_buf[..a]);
        dst_hash.update(dst_bytes);
        dst_reads.give_back(dst_buf);
        offset += a as u64;
        if a < chunk {
            break; // both ended here: a read stops short only at the end
        }
    }
    let digest = src_hash.digest128();
    // Equal bytes give equal digests; checked anyway so a bug here cannot pass silently.
    if digest != dst_hash.digest128() {
        return Err(VerifyError::Cannot {
            name: dq.to_owned(),
            what: "its checksum differs although its bytes matched (internal error)".into(),
        });
    }
    Ok((offset, digest))
}

/// The length to report for one side of a length mismatch: where it ended if it did,
/// otherwise its size as fstat tells.
fn file_len(file: &File, ended_at: u64, ended: bool) -> u64 {
    if ended {
        ended_at
    } else {
        file.metadata().map_or(ended_at, |m| m.len().max(ended_at))
    }
}

/// Index of the first byte where `a` and `b` (of equal length) differ. Compares 4 KiB
/// blocks with memcmp first, then bytes within the first block that differs.
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    const BLOCK: usize = 4096;
    let block = a
        .chunks(BLOCK)
        .zip(b.chunks(BLOCK))
        .position(|(x, y)| x != y)?;
    let start = block * BLOCK;
    a[start..]
        .iter()
        .zip(&b[start..])
        .position(|(x, y)| x != y)
        .map(|i| start + i)
}

#[cfg(test)]
mod tests;
