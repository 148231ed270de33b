//! POSIX file primitives the engine builds on: full positional reads and writes (retrying
//! short counts and EINTR), O_DIRECT toggling, direct-I/O alignment, data extents.

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// The alignment no direct I/O may go below: the AMD kernel driver refuses anything finer
/// than 4 KiB even where statx reports 512.
pub const MIN_ALIGN: u64 = 4096;

/// Largest count one read or write syscall moves on Linux (MAX_RW_COUNT).
pub const MAX_IO: usize = hipfile::sys::MAX_IO_BYTES;

/// The most one read, write or library call is asked to move before the stop flag is
/// looked at again: a call in progress can't be interrupted, and with --chunk-size
/// 0x7ffff000 one call of a whole slice took up to 4.8 s to end after SIGINT (host route,
/// page cache). 64 MiB is the default chunk, so default runs make the same calls as before.
pub const STOP_GRAIN: usize = 64 << 20;
/// A write from a host window of a copy its owner may stop (the staging service's) is made
/// in pieces of at most this, the stop looked at between them: what a stopped copy still
/// writes is one piece per worker, about 20 ms on the dev VM where a whole window took 80
/// (BENCHMARKS.md, "Stopping"). The run's own copies write whole windows: smaller pieces
/// cost them a few percent on host memory, and a signal only needs them stopped within a
/// second.
pub const WRITE_PIECE: usize = 16 << 20;

/// Direct-I/O alignment the file asks for: max(statx DIO offset and memory alignment, 4096).
/// Falls back to 4096 where statx cannot tell (old kernels, filesystems without DIO).
pub fn dio_alignment(fd: BorrowedFd<'_>) -> u64 {
    // SAFETY: statx with AT_EMPTY_PATH reads the open fd and writes into our zeroed struct.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let rc = unsafe {
        libc::statx(
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            libc::STATX_DIOALIGN,
            &mut stx,
        )
    };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 {
        return MIN_ALIGN;
    }
    let asked = u64::from(stx.stx_dio_offset_align.max(stx.stx_dio_mem_align));
    asked.max(MIN_ALIGN).next_power_of_two()
}

/// Sets O_DIRECT on the open file description. Returns Ok(false) when the filesystem refuses
/// it (EINVAL), so that side takes the buffered route.
pub fn set_direct(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    if flags.contains(OFlag::O_DIRECT) {
        return Ok(true);
    }
    match fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags | OFlag::O_DIRECT)) {
        Ok(_) => Ok(true),
        Err(Errno::EINVAL) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Clears O_DIRECT again (for the unaligned tail, and to hand the fd back as it came).
pub fn clear_direct(fd: BorrowedFd<'_>) -> io::Result<()> {
    clear_flag(fd, OFlag::O_DIRECT)
}

/// Clears a status flag (O_DIRECT, O_NONBLOCK) on the open file description.
pub fn clear_flag(fd: BorrowedFd<'_>, flag: OFlag) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    if flags.contains(flag) {
        fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags - flag))?;
    }
    Ok(())
}

/// Waits until `fd` has something to read or has hung up, in poll() slices of
/// `SEQUENTIAL_POLL_MS`. Returns false, without waiting further, once `cancel` is set.
///
/// For a FIFO opened with O_NONBLOCK this stands in for the blocking open(), which would
/// wait for a writer out of reach of the first SIGINT: until a writer has come, Linux
/// reports neither data nor hang-up, so this waits just as long.
pub fn wait_readable(fd: BorrowedFd<'_>, cancel: &AtomicBool) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags};
    while !cancel.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, SEQUENTIAL_POLL_MS) {
            Ok(0) | Err(Errno::EINTR) => {}
            Ok(_) => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// Whether `fd` has something to read, or has hung up, within `ms` milliseconds.
fn readable_within(fd: BorrowedFd<'_>, ms: u16) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    match poll(&mut fds, ms) {
        Ok(n) => Ok(n > 0),
        Err(Errno::EINTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Reads into all of `buf` at `offset`; fewer bytes only at EOF, or where the read was torn
/// by a truncate ([`untorn`]). With `direct` (an O_DIRECT fd), a count that leaves the offset
/// unaligned also means end of file: asking again there would be refused with EINVAL instead
/// of answering 0.
///
/// A read refused with ENOMEM is asked again for half as much (down to [`MIN_ALIGN`]):
/// /proc/sys files allocate the whole count in the kernel and refuse more than a few MiB.
pub fn pread_full(file: &File, buf: &mut [u8], offset: u64, direct: bool) -> io::Result<usize> {
    let mut done = 0;
    let mut most = MAX_IO;
    while done < buf.len() {
        let end = buf.len().min(done + most);
        match file.read_at(&mut buf[done..end], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                let kept = untorn(file, &mut buf[done..end], n, offset + done as u64)?;
                done += kept;
                if kept < n || (direct && (offset + done as u64) % MIN_ALIGN != 0) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if smaller(&e, &mut most, end - done) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Whether `file` has a byte at `at`: one read, whose byte is not kept (so it needs none of
/// [`pread_full`]'s looks).
pub fn has_byte_at(file: &File, at: u64) -> io::Result<bool> {
    let mut byte = [0u8; 1];
    loop {
        match file.read_at(&mut byte, at) {
            Ok(n) => return Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// How many of the `n` bytes a read of `asked` just returned at `at` are the file's. A truncate
/// racing the read zeroes the tail of the page holding the new end, and the kernel can hand
/// that page out, zeros and all, to buffered reads and to O_DIRECT reads that go through the
/// page cache, as on tmpfs (docs/GUARANTEES.md, "A SOURCE that changes"). So where the file,
/// looked at after the read, says it ends inside what was read with a zero past that end, the
/// same request is made again (its length stays what O_DIRECT allows) and that read's count is
/// kept: a file whose size describes it gives no byte past its end, and one that does (a
/// /proc file says 0) was not torn by a size it does not have. The caller reads on from the
/// end kept. The second read is not looked at again: on a file whose size says nothing, it
/// would never end.
fn untorn(file: &File, asked: &mut [u8], n: usize, at: u64) -> io::Result<usize> {
    let Ok(size) = file.metadata().map(|m| m.len()) else {
        return Ok(n);
    };
    let below = size.saturating_sub(at).min(n as u64) as usize;
    if below == n || !asked[below..n].contains(&0) {
        return Ok(n);
    }
    loop {
        match file.read_at(asked, at) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// For a read of `asked` bytes refused with ENOMEM: halves `most`, kept a multiple of
/// [`MIN_ALIGN`] (an O_DIRECT read must stay aligned), and says whether to try again.
fn smaller(e: &io::Error, most: &mut usize, asked: usize) -> bool {
    let block = MIN_ALIGN as usize;
    let retry = e.raw_os_error() == Some(libc::ENOMEM) && asked > block;
    if retry {
        *most = ((asked / 2) & !(block - 1)).max(block);
    }
    retry
}

/// How long a sequential read waits in poll() before it looks at the cancel flag again.
const SEQUENTIAL_POLL_MS: u16 = 100;

/// How long a sequential read waits for more once its writer pauses, and at most gathers
/// after its first byte: a writer that waits for its data to reach DST (as cp writes each
/// read at once) sees it within [`SEQUENTIAL_GATHER_MAX`], while a fast one still fills whole
/// slices rather than paying a GPU round trip per pipe buffer.
const SEQUENTIAL_GATHER_IDLE_MS: u16 = 1;
const SEQUENTIAL_GATHER_MAX: std::time::Duration = std::time::Duration::from_millis(50);

/// Reads a sequential source (FIFO, pipe, terminal, /proc file) in order into `buf`, handing on
/// what it has once the writer pauses (see `SEQUENTIAL_GATHER_MAX`); 0 only at EOF or once
/// `cancel` is set. Waits for the first data in poll() slices of `SEQUENTIAL_POLL_MS`, looking
/// at `cancel` between them: a plain read() would sit in the kernel through the first SIGINT
/// (the handlers restart interrupted calls), so a copy from a stalled pipe could not stop
/// cleanly.
pub fn read_sequential(file: &File, buf: &mut [u8], cancel: &AtomicBool) -> io::Result<usize> {
    use std::io::Read;
    let mut done = 0;
    let mut most = MAX_IO;
    let mut first_byte: Option<std::time::Instant> = None;
    while done < buf.len() {
        let more = match first_byte {
            None => wait_readable(file.as_fd(), cancel)?,
            Some(t) => {
                t.elapsed() < SEQUENTIAL_GATHER_MAX
                    && readable_within(file.as_fd(), SEQUENTIAL_GATHER_IDLE_MS)?
            }
        };
        if !more {
            break;
        }
        let end = buf.len().min(done + most);
        match (&*file).read(&mut buf[done..end]) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                first_byte.get_or_insert_with(std::time::Instant::now);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if smaller(&e, &mut most, end - done) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Writes `buf` at `offset` except its all-zero blocks of `block` bytes, which stay holes.
/// Returns where the last bytes written end, from `offset` (0: all zeros, nothing written);
/// a failure comes with the same measure up to it, since a hole skipped past the last write
/// does not make DEST any longer (as cp's lseek over a hole does not).
pub fn pwrite_skipping_zeros(
    file: &File,
    buf: &[u8],
    offset: u64,
    block: usize,
) -> Result<usize, (usize, io::Error)> {
    let mut run_start = None;
    let mut pos = 0;
    let mut written = 0;
    let mut flush = |start: usize, end: usize| {
        let done = pwrite_all(file, &buf[start..end], offset + start as u64);
        match done {
            Ok(()) => {
                written = end;
                Ok(())
            }
            Err((0, e)) => Err((written, e)),
            Err((n, e)) => Err((start + n, e)),
        }
    };
    while pos < buf.len() {
        let end = buf.len().min(pos + block);
        let zero = is_zero(&buf[pos..end]);
        match (zero, run_start) {
            (false, None) => run_start = Some(pos),
            (true, Some(start)) => {
                flush(start, pos)?;
                run_start = None;
            }
            _ => {}
        }
        pos = end;
    }
    if let Some(start) = run_start {
        flush(start, buf.len())?;
    }
    Ok(written)
}

pub fn is_zero(buf: &[u8]) -> bool {
    // SAFETY: every bit pattern is a valid u64.
    let (head, words, tail) = unsafe { buf.align_to::<u64>() };
    head.iter().all(|&b| b == 0) && words.iter().all(|&w| w == 0) && tail.iter().all(|&b| b == 0)
}

/// The data extents of `file` within `range`, found with SEEK_DATA/SEEK_HOLE. Where the
/// filesystem cannot tell, the whole range is data.
pub fn data_extents(file: &File, range: Range<u64>) -> io::Result<Vec<Range<u64>>> {
    let fd = file.as_fd().as_raw_fd();
    let seek = |off: u64, whence: libc::c_int| -> io::Result<Option<u64>> {
        // SAFETY: lseek on an fd we borrow; the position is not used by positional I/O.
        let r = unsafe { libc::lseek(fd, off as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        match Errno::last() {
            Errno::ENXIO => Ok(None),
            e => Err(e.into()),
        }
    };
    let (from, len) = (range.start, range.end);
    let mut extents = Vec::new();
    let mut pos = from;
    while pos < len {
        let start = match seek(pos, libc::SEEK_DATA) {
            Ok(Some(s)) => s,
            Ok(None) => break,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && pos == from => {
                return Ok(std::iter::once(from..len).collect())
            }
            Err(e) => return Err(e),
        };
        if start >= len {
            break;
        }
        let end = seek(start, libc::SEEK_HOLE)?.unwrap_or(len).min(len);
        extents.push(start..end);
        pos = end;
    }
    Ok(extents)
}

/// Where SOURCE's next data lies, seen from some offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextData {
    /// Data from `.0` up to the hole at `.1`.
    At(u64, u64),
    /// No data at or after the offset (it may be at or past EOF).
    None,
    /// The filesystem cannot tell (no SEEK_DATA): read on to EOF.
    Unknown,
}

/// SEEK_DATA from `pos`, then SEEK_HOLE from the data found.
pub fn next_data(file: &File, pos: u64) -> io::Result<NextData> {
    let fd = file.as_fd().as_raw_fd();
    let seek = |off: u64, whence: libc::c_int| -> Result<u64, Errno> {
        // SAFETY: lseek on an fd we borrow; the position is not used by positional I/O.
        let r = unsafe { libc::lseek(fd, off as libc::off_t, whence) };
        match r {
            r if r >= 0 => Ok(r as u64),
            _ => Err(Errno::last()),
        }
    };
    let start = match seek(pos, libc::SEEK_DATA) {
        Ok(s) => s,
        Err(Errno::ENXIO) => return Ok(NextData::None),
        Err(Errno::EINVAL | Errno::ESPIPE | Errno::EOPNOTSUPP) => return Ok(NextData::Unknown),
        Err(e) => return Err(e.into()),
    };
    match seek(start, libc::SEEK_HOLE) {
        Ok(hole) if hole > start => Ok(NextData::At(start, hole)),
        // SOURCE shrank between the two calls: nothing is there now.
        Ok(_) | Err(Errno::ENXIO) => Ok(NextData::None),
        Err(e) => Err(e.into()),
    }
}

/// Writes all of `buf` at `offset`, retrying short counts and EINTR. On failure, says how
/// many bytes went in before it (a full disk takes part of a write, then refuses the rest).
pub fn pwrite_all(file: &File, buf: &[u8], offset: u64) -> Result<(), (usize, io::Error)> {
    let mut done = 0;
    while done < buf.len() {
        let end = buf.len().min(done + MAX_IO);
        match file.write_at(&buf[done..end], offset + done as u64) {
            Ok(0) => return Err((done, io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}
