//! Waiting on a descriptor the run may be stopped out of: a FIFO SOURCE opened with
//! O_NONBLOCK (the blocking open() would wait for a writer out of reach of SIGINT), and
//! the answer to an interactive question on standard input.

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// How long one poll() waits before the stop flag is looked at again.
const POLL_MS: u16 = 100;

/// Waits until `fd` has something to read or has hung up, in poll() slices of [`POLL_MS`].
/// Returns false, without waiting further, once `cancel` is set.
///
/// For a FIFO opened with O_NONBLOCK this stands in for the blocking open(): until a
/// writer has come, Linux reports neither data nor hang-up, so this waits just as long.
pub fn wait_readable(fd: BorrowedFd<'_>, cancel: &AtomicBool) -> io::Result<bool> {
    while !cancel.load(Ordering::SeqCst) {
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, POLL_MS) {
            Ok(0) | Err(Errno::EINTR) => {}
            Ok(_) => return Ok(true),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(false)
}

/// Clears O_NONBLOCK on the open file description, once the FIFO has a writer: the copy
/// then reads it as cp would, blocking.
pub fn clear_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?);
    if flags.contains(OFlag::O_NONBLOCK) {
        fcntl(fd.as_raw_fd(), FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    }
    Ok(())
}
