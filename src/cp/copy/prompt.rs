//! The prompt of -i, answered on standard input.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

/// The prompt of -i, on stderr; an answer starting with y or Y means yes. None: a signal
/// came while waiting (the answer is read in short polls so that one can end the wait, as
/// it kills cp at its prompt). Reads stdin unbuffered, one line per prompt.
pub(super) fn ask(question: &str, cancel: &std::sync::atomic::AtomicBool) -> Option<bool> {
    // The progress line stays wiped until the answer is in.
    crate::progress::suspend(|| ask_wiped(question, cancel))
}

pub(super) fn ask_wiped(question: &str, cancel: &std::sync::atomic::AtomicBool) -> Option<bool> {
    crate::sys::messages::to_stderr_raw(&format!(
        "{}: {question}",
        crate::sys::messages::program()
    ));
    let stdin = io::stdin();
    let mut first = None;
    loop {
        match crate::sys::fd_wait::wait_readable(stdin.as_fd(), cancel) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(_) => return Some(false),
        }
        let mut byte = [0u8];
        match nix::unistd::read(stdin.as_raw_fd(), &mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                first.get_or_insert(byte[0]);
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(_) => break,
        }
    }
    Some(matches!(first, Some(b'y' | b'Y')))
}
