//! `--verify=sums`: DEST read back alone (with O_DIRECT where the filesystem allows it, one
//! chunk ahead as the byte check reads it) and hashed, its digest compared with the one
//! taken of the staged bytes while copying. SOURCE is not read again.

use super::dest_reads::DestReads;
use super::outcome::{Checked, DstRead, Verified, VerifyError, VERIFY_CHUNK};
use super::reading::{reopen_for_reading, Buffers};
use crate::digest::{Digest, Piece, Pieces};
use crate::fileio::MIN_ALIGN;
use crate::quote::quote;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Checks that DEST (`dst`) holds `size` bytes whose digest is `copied`.
pub(super) fn verify(
    (dst, dst_name): (&File, &Path),
    (size, copied): (u64, &Digest),
    buffers: &mut Buffers,
    stop: &AtomicBool,
) -> Result<Verified, VerifyError> {
    let dq = quote(dst_name);
    let read_err = |source| VerifyError::Read {
        name: dq.clone(),
        source,
    };
    let (reader, dst_read) = reopen_for_reading(dst, dst_name).map_err(read_err)?;
    // Reads fitted to the file, one byte past it so a short read says it ended.
    let longer = size.saturating_add(1);
    let fitted = longer.div_ceil(MIN_ALIGN) * MIN_ALIGN;
    let chunk = usize::try_from(fitted).map_or(VERIFY_CHUNK, |f| f.min(VERIFY_CHUNK));
    let ahead = 1 + usize::from(longer > chunk as u64);
    let bufs = (0..ahead)
        .map(|_| buffers.take(chunk))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| VerifyError::Cannot {
            name: dq.clone(),
            what: e.to_string(),
        })?;
    let pieces = Pieces::new(copied.algorithm());
    let direct = dst_read == DstRead::Direct;
    let (read, kept) = std::thread::scope(|scope| {
        let mut reads = DestReads::start(scope, &reader, (direct, chunk), bufs);
        let read = hash_in_order(&mut reads, (&pieces, &dq), chunk, stop);
        (read, reads.into_kept())
    });
    kept.into_iter().for_each(|buf| buffers.keep(buf));
    let read = read?;
    let now = pieces.finish(&reader, read, read).map_err(read_err)?.digest;
    if read != size || now != *copied {
        return Err(VerifyError::Digest {
            dst: dq,
            algorithm: copied.algorithm().name(),
            now: now.to_string(),
            copied: copied.to_string(),
        });
    }
    Ok(Verified {
        bytes: read,
        checked: Checked::Digest(now),
        dst_read,
    })
}

/// Hashes DEST's chunks from `reads` in order into `pieces` until one comes short (the
/// end); returns the bytes read. `dq`: DEST's quoted name.
fn hash_in_order(
    reads: &mut DestReads<'_>,
    (pieces, dq): (&Pieces, &str),
    chunk: usize,
    stop: &AtomicBool,
) -> Result<u64, VerifyError> {
    let mut offset = 0u64;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Err(VerifyError::Stopped);
        }
        let (mut buf, n) = reads.next().map_err(|source| VerifyError::Read {
            name: dq.to_owned(),
            source,
        })?;
        if n > 0 {
            let bytes = &buf.as_mut_slice()[..n];
            pieces.add_final(Piece::of_bytes(pieces.algorithm(), offset, bytes));
        }
        offset += n as u64;
        reads.give_back(buf);
        if n < chunk {
            return Ok(offset);
        }
    }
}
