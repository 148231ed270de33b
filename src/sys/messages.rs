//! Message text as GNU prints it: strerror's words without Rust's " (os error N)" suffix,
//! and the program name as invoked (`argv[0]`), so `cp -> aiscp` prints `cp:` like cp.
//!
//! Every line for stdout (-v) and stderr goes through here, because a failed write must end
//! the run as it ends cp, never in a panic (what `println!` does): cp keeps copying, and at
//! exit reports a failed stdout as "write error: STRERROR" and exits 1; a failed stderr gives
//! exit 1 silently; a closed pipe kills it with SIGPIPE (unless SIGPIPE was ignored, when the
//! write fails with EPIPE like any other). After its first failure stdout (or stderr) is not
//! written again.

use crate::sys::signals;
use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};

/// strerror(errno) for an I/O error, e.g. "No space left on device" (the engine's messages
/// use the same function).
pub use aiscp_engine::os_text;

/// The program name for message prefixes (it belongs to the command line).
pub use crate::cli::program;

/// Bit `fd` set: standard descriptor `fd` was closed when the program was executed. The Rust
/// runtime then opens /dev/null in its place before `main`, which would make writes succeed
/// where cp's fail with EBADF; so it is looked at earlier, by an `.init_array` function.
static CLOSED_AT_EXEC: AtomicU8 = AtomicU8::new(0);

extern "C" fn record_closed_std_fds() {
    let mut closed = 0;
    for fd in 0..3 {
        // SAFETY: F_GETFD on any number is harmless.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            closed |= 1 << fd;
        }
    }
    CLOSED_AT_EXEC.store(closed, Ordering::SeqCst);
}

#[used]
#[link_section = ".init_array"]
static RECORD_CLOSED_STD_FDS: extern "C" fn() = record_closed_std_fds;

fn closed_at_exec(fd: u8) -> bool {
    CLOSED_AT_EXEC.load(Ordering::SeqCst) & (1 << fd) != 0
}

/// errno of the first failed write to stdout (0: none yet).
static STDOUT_ERRNO: AtomicI32 = AtomicI32::new(0);
/// Whether a write to stderr failed.
static STDERR_FAILED: AtomicBool = AtomicBool::new(false);

fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// A standard descriptor written with write(2) directly, not through std's handles, whose
/// write_all and flush retry EINTR: after a stop signal a write blocked on a stalled pipe
/// must give up, or the run would never get to stop.
pub struct StdFd(i32);

impl Write for StdFd {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for `buf.len()` bytes.
        let n = unsafe { libc::write(self.0, buf.as_ptr().cast(), buf.len()) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted && !signals::stop_asked() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes to stdout with `write`, unless stdout already failed; records the first failure.
pub fn to_stdout(write: impl FnOnce(&mut StdFd) -> io::Result<()>) {
    if STDOUT_ERRNO.load(Ordering::SeqCst) != 0 {
        return;
    }
    let res = if closed_at_exec(1) {
        Err(io::Error::from_raw_os_error(libc::EBADF))
    } else {
        // The progress line is wiped while this prints: stdout may be the same terminal.
        crate::progress::suspend(|| {
            // What std's handle buffered (clap's --help) goes first.
            io::stdout().flush()?;
            write(&mut StdFd(1))
        })
    };
    if let Err(e) = res {
        stdout_failed(&e);
    }
}

/// Records a failed write to stdout made elsewhere (clap's --help).
pub fn stdout_failed(e: &io::Error) {
    let _ = STDOUT_ERRNO.compare_exchange(0, errno_of(e), Ordering::SeqCst, Ordering::SeqCst);
}

/// Writes `bytes` to stdout as they are.
pub fn write_stdout(bytes: &[u8]) {
    to_stdout(|out| out.write_all(bytes));
}

/// Prints one line on stdout (-v), as `println!` would, without its panic.
pub fn say(line: fmt::Arguments<'_>) {
    if holding() {
        return hold_back(Held::Stdout(format!("{line}\n")));
    }
    // One write per line, as std's line-buffered stdout made it.
    to_stdout(|out| out.write_all(format!("{line}\n").as_bytes()));
}

/// Adds a line to the --sums manifest ([`crate::cp::sums`]), held with the -v lines while files
/// ahead of it in cp's order are still in flight.
pub fn digest_line(line: String) {
    match holding() {
        true => hold_back(Held::Digest(line)),
        false => crate::cp::sums::add(line),
    }
}

/// A message this thread printed while its output was held (see [`hold`]).
pub enum Held {
    Stdout(String),
    Stderr {
        text: String,
        counts: bool,
    },
    /// A line of the --sums manifest.
    Digest(String),
}

type Holder = Box<dyn FnMut(Held)>;

thread_local! {
    static HOLD: std::cell::RefCell<Option<Holder>> = const { std::cell::RefCell::new(None) };
}

/// While set, this thread's messages (-v lines, errors, --debug lines) go to `to` instead of
/// out: files still in flight report first (copy::inflight). Returns the hold it replaces.
pub fn hold(to: Option<Holder>) -> Option<Holder> {
    HOLD.with(|h| std::mem::replace(&mut *h.borrow_mut(), to))
}

fn holding() -> bool {
    HOLD.with(|h| h.borrow().is_some())
}

fn hold_back(held: Held) {
    HOLD.with(|h| {
        if let Some(to) = h.borrow_mut().as_mut() {
            to(held);
        }
    });
}

/// Prints a held message now.
pub fn release(held: Held) {
    match held {
        Held::Stdout(text) => to_stdout(|out| out.write_all(text.as_bytes())),
        Held::Stderr { text, counts } => {
            write_stderr(&text, counts);
        }
        Held::Digest(line) => crate::cp::sums::add(line),
    }
}

/// Writes `text` to stderr as is, unless stderr already failed; `counts` says whether a
/// failure makes the exit status 1 (cp's messages) or is let go (aiscp's own warnings,
/// which cp would not have printed).
fn to_stderr(text: &str, counts: bool) -> bool {
    if holding() {
        hold_back(Held::Stderr {
            text: text.to_owned(),
            counts,
        });
        return true;
    }
    write_stderr(text, counts)
}

/// [`to_stderr`] past any hold.
///
/// Nothing is written once a stop signal has arrived: cp, dying at it, says nothing more, and
/// what fails after it (a library load cut short by EINTR) is the stop's doing.
fn write_stderr(text: &str, counts: bool) -> bool {
    if STDERR_FAILED.load(Ordering::SeqCst) {
        return false;
    }
    if signals::stop_asked() {
        return true;
    }
    let res = if closed_at_exec(2) {
        Err(io::Error::from_raw_os_error(libc::EBADF))
    } else {
        // The progress line is wiped while this prints, so a message never lands on it.
        crate::progress::suspend(|| StdFd(2).write_all(text.as_bytes()))
    };
    if res.is_err() && counts {
        STDERR_FAILED.store(true, Ordering::SeqCst);
    }
    res.is_ok()
}

/// Prints `PROGRAM: MSG` on stderr.
pub fn error(msg: &str) {
    to_stderr(&format!("{}: {msg}\n", program()), true);
}

/// Prints `PROGRAM: warning: MSG` for a warning of aiscp's own (the host-memory fallback):
/// a failure to print it does not change the exit status.
pub fn own_warning(msg: &str) {
    to_stderr(&format!("{}: warning: {msg}\n", program()), false);
}

/// Writes one --debug line, in the one form every part of aiscp gives it: "PROGRAM: debug:
/// LINE".
pub fn debug(line: &str) {
    to_stderr_raw(&format!("{}: debug: {line}\n", program()));
}

/// The engine's warnings and --debug lines on stderr, each after `prefix` (an MPI rank's
/// "rank N: "), its --debug lines stamped with the time since it started ("PROGRAM: debug:
/// +0.012s LINE", so start-up costs show where they are paid). Every process that runs an
/// engine (a copy, the staging service, a rank) hands it one, so they all speak alike.
pub struct EngineLines {
    quiet: bool,
    prefix: String,
}

impl EngineLines {
    /// `quiet`: no warnings (--quiet); --debug lines are written whenever the engine sends them.
    pub fn new(quiet: bool, prefix: String) -> Box<EngineLines> {
        Box::new(EngineLines { quiet, prefix })
    }
}

impl aiscp_engine::Diagnostics for EngineLines {
    fn warn(&mut self, line: &str) {
        if !self.quiet {
            own_warning(&format!("{}{line}", self.prefix));
        }
    }
    fn debug(&mut self, since_start: std::time::Duration, line: &str) {
        let secs = since_start.as_secs_f64();
        debug(&format!("{}+{secs:.3}s {line}", self.prefix));
    }
}

/// Writes `text` (a prompt, or a usage hint) to stderr without a newline or prefix.
pub fn to_stderr_raw(text: &str) -> bool {
    to_stderr(text, true)
}

/// The exit status once output errors are counted, as gnulib's close_stdout decides it: a
/// failed stdout is reported ("write error: ...") and gives 1, or ends the process by SIGPIPE
/// where a closed pipe would have killed cp; a failed stderr gives 1.
pub fn final_status(status: i32) -> i32 {
    match STDOUT_ERRNO.load(Ordering::SeqCst) {
        0 => {}
        libc::EPIPE if signals::sigpipe_kills() => signals::die_of_sigpipe(),
        errno => {
            error(&format!(
                "write error: {}",
                os_text(&io::Error::from_raw_os_error(errno))
            ));
            return 1;
        }
    }
    if STDERR_FAILED.load(Ordering::SeqCst) {
        1
    } else {
        status
    }
}

/// Exits with [`final_status`].
pub fn exit(status: i32) -> ! {
    std::process::exit(final_status(status))
}

/// A failure already reported on stderr.
#[derive(Clone, Copy, Debug)]
pub struct Reported;

/// Reports `msg` as an error; the failure is then [`Reported`].
pub fn fail(msg: String) -> Reported {
    error(&msg);
    Reported
}

/// "WHAT 'PATH': STRERROR", cp's shape for a failed operation on a file, reported.
pub fn fail_os(what: &str, path: impl AsRef<std::path::Path>, e: &io::Error) -> Reported {
    fail(format!(
        "{what} {}: {}",
        aiscp_engine::quote::quote(path),
        os_text(e)
    ))
}
