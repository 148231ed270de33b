//! Drives one direct (O_DIRECT) transfer through repeated library calls until it is whole:
//! EINTR is retried, and short counts are continued from an aligned offset.
//!
//! A hipFile/cuFile call may report fewer bytes than asked (EOF, the per-call cap, or the
//! library falling back to buffered I/O, which can stop anywhere). Continuing at the reported
//! count would ask an O_DIRECT fd for a misaligned request, which the kernel refuses; so the
//! next call starts at the count rounded down to the alignment instead. Re-reading or
//! re-writing those few bytes is harmless: the slot holds the same data at the same offsets.

use std::io;

/// Which way the bytes go; a read may end early at EOF, a write may not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Way {
    Read,
    Write,
}

/// Consecutive read calls without aligned progress taken as EOF: SRC shrank to an unaligned
/// size, so every read from the last aligned offset ends at the same unaligned place. (A
/// library that merely keeps answering short is then treated as at EOF too, which is safe:
/// the caller copies from there to the real EOF through the buffered tail.)
const READ_STALLS: u32 = 3;
/// Consecutive write calls without aligned progress before giving up: a library that keeps
/// answering with less than one aligned block would otherwise be called forever.
const WRITE_STALLS: u32 = 8;

/// Moves `len` bytes (a multiple of `align`) with `call(done, want)`, which asks the library
/// for `want` bytes at `done` bytes into the transfer and returns the count it reports.
/// Every request it makes starts at a multiple of `align` and is a multiple of it long.
///
/// Returns `len`, or for a read that met EOF the furthest byte read (possibly unaligned;
/// everything before its aligned-down offset is in place). A write that makes no progress
/// fails with `WriteZero`.
pub(crate) fn drive<E: Interruptible>(
    way: Way,
    len: usize,
    align: usize,
    max_call: usize,
    mut call: impl FnMut(usize, usize) -> Result<usize, E>,
) -> Result<usize, E> {
    debug_assert!(align.is_power_of_two() && len % align == 0);
    let max_call = (max_call & !(align - 1)).max(align);
    // `done`: aligned, and everything before it is in place. `reached`: the furthest end a
    // call from `done` reported, which may be unaligned.
    let mut done = 0;
    let mut reached = 0;
    let mut stalls = 0;
    while done < len {
        let want = (len - done).min(max_call);
        let n = match call(done, want) {
            Ok(n) => n.min(want),
            Err(e) if e.is_interrupted() => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return match way {
                Way::Read => Ok(done),
                Way::Write => Err(E::write_zero()),
            };
        }
        let end = done + n;
        let aligned = end & !(align - 1);
        if aligned > done {
            done = aligned;
            reached = end;
            stalls = 0;
            continue;
        }
        reached = reached.max(end);
        stalls += 1;
        match way {
            Way::Read if stalls >= READ_STALLS => return Ok(reached),
            Way::Write if stalls >= WRITE_STALLS => return Err(E::write_zero()),
            _ => {}
        }
    }
    Ok(done)
}

/// Errors [`drive`] knows how to retry and how to make.
pub(crate) trait Interruptible {
    fn is_interrupted(&self) -> bool;
    fn write_zero() -> Self;
}

fn stalled_write() -> io::Error {
    io::Error::new(
        io::ErrorKind::WriteZero,
        "the write made no progress (the library kept writing less than one block)",
    )
}

impl Interruptible for hipfile::Error {
    fn is_interrupted(&self) -> bool {
        self.errno() == Some(libc::EINTR)
    }
    fn write_zero() -> Self {
        hipfile::Error::Os(stalled_write())
    }
}

impl Interruptible for io::Error {
    fn is_interrupted(&self) -> bool {
        self.kind() == io::ErrorKind::Interrupted
    }
    fn write_zero() -> Self {
        stalled_write()
    }
}

#[cfg(test)]
mod tests {
    use super::{drive, Way};
    use proptest::prelude::*;
    use std::io;

    const ALIGN: usize = 4096;

    /// A fake file of `size` bytes behind a library that answers with `answers` (short counts
    /// or EINTR, one per call, then whole calls). Checks every request is aligned.
    fn run(
        way: Way,
        len: usize,
        size: usize,
        answers: &[Option<usize>],
        max_call: usize,
    ) -> (io::Result<usize>, Vec<(usize, usize)>) {
        let mut calls = Vec::new();
        let mut answers = answers.iter();
        let result = drive(way, len, ALIGN, max_call, |done, want| {
            assert_eq!(done % ALIGN, 0, "unaligned offset {done}");
            assert_eq!(want % ALIGN, 0, "unaligned size {want}");
            assert!(calls.len() < 10_000, "runaway loop");
            calls.push((done, want));
            let available = match way {
                Way::Read => size.saturating_sub(done).min(want),
                Way::Write => want,
            };
            match answers.next() {
                Some(None) => Err(io::Error::from(io::ErrorKind::Interrupted)),
                Some(Some(short)) => Ok((*short).min(available)),
                None => Ok(available),
            }
        });
        (result, calls)
    }

    #[test]
    fn eintr_is_retried_at_the_same_place() {
        let (r, calls) = run(Way::Read, 3 * ALIGN, usize::MAX, &[None, None], 1 << 30);
        assert_eq!(r.unwrap(), 3 * ALIGN);
        assert_eq!(calls, vec![(0, 3 * ALIGN); 3]);
    }

    #[test]
    fn a_one_byte_count_continues_from_the_aligned_offset() {
        let (r, calls) = run(Way::Write, 3 * ALIGN, 0, &[Some(ALIGN + 1)], 1 << 30);
        assert_eq!(r.unwrap(), 3 * ALIGN);
        assert_eq!(calls, vec![(0, 3 * ALIGN), (ALIGN, 2 * ALIGN)]);
        let (r, calls) = run(Way::Read, 2 * ALIGN, usize::MAX, &[Some(1)], 1 << 30);
        assert_eq!(r.unwrap(), 2 * ALIGN);
        assert_eq!(calls, vec![(0, 2 * ALIGN), (0, 2 * ALIGN)]);
    }

    #[test]
    fn a_read_stuck_at_an_unaligned_place_is_eof() {
        let (r, calls) = run(Way::Read, 4 * ALIGN, 2 * ALIGN + 100, &[], 1 << 30);
        assert_eq!(r.unwrap(), 2 * ALIGN + 100);
        assert_eq!(calls.len(), 1 + super::READ_STALLS as usize);
        let (r, _) = run(Way::Read, 4 * ALIGN, 2 * ALIGN, &[], 1 << 30);
        assert_eq!(r.unwrap(), 2 * ALIGN);
    }

    #[test]
    fn a_write_that_never_progresses_fails_instead_of_spinning() {
        let stuck = [Some(1); 100];
        let (r, calls) = run(Way::Write, 2 * ALIGN, 0, &stuck, 1 << 30);
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WriteZero);
        assert_eq!(calls.len(), super::WRITE_STALLS as usize);
        let (r, _) = run(Way::Write, 2 * ALIGN, 0, &[Some(0)], 1 << 30);
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::WriteZero);
    }

    #[test]
    fn calls_are_capped_at_an_aligned_maximum() {
        let (r, calls) = run(Way::Read, 3 * ALIGN, usize::MAX, &[], ALIGN + 7);
        assert_eq!(r.unwrap(), 3 * ALIGN);
        assert_eq!(calls, vec![(0, ALIGN), (ALIGN, ALIGN), (2 * ALIGN, ALIGN)]);
    }

    proptest! {
        /// Any mix of short counts and EINTR: every request aligned; a read never claims more
        /// than the file holds, and ends exactly at its end (or the transfer's) unless the
        /// library answered short often enough to look like EOF; a write covers everything.
        #[test]
        fn any_short_counts_keep_requests_aligned(
            blocks in 1usize..16,
            size in 0usize..20 * ALIGN,
            answers in proptest::collection::vec(
                proptest::option::weighted(0.8, 1usize..3 * ALIGN), 0..8),
        ) {
            let len = blocks * ALIGN;
            let (r, _) = run(Way::Read, len, size, &answers, 1 << 30);
            let r = r.unwrap();
            prop_assert!(r <= size.min(len));
            if answers.iter().flatten().count() < super::READ_STALLS as usize {
                prop_assert_eq!(r, size.min(len));
            }
            let (r, _) = run(Way::Write, len, 0, &answers, 1 << 30);
            prop_assert_eq!(r.unwrap(), len);
        }
    }
}
