//! Signals that end a run: SIGINT, SIGTERM and SIGHUP ask the copy to stop, a second one ends
//! the process; SIGPIPE stops the copy and then ends the process by SIGPIPE, as it ends cp;
//! the other signals whose default is to end the process (SIGUSR1, SIGALRM, SIGXFSZ...) end
//! it at once, as they end cp, after removing the registered --atomic temporaries.
//!
//! cp dies where it stands. aiscp cannot at once: a worker may have DMA in flight into a
//! device buffer, and registered handles and buffers must be given back. So the first signal
//! sets the engine's cancel flag; the engine finishes the I/O in flight, returns
//! `Interrupted`, the copier drops the engine (deregister, free, close the driver) and
//! removes an --atomic temporary, and `main` then dies of the same signal ([`die_by`]):
//! default action restored, signal raised. A shell running aiscp in a loop (or xargs, make)
//! sees what cp gives it, a child killed by SIGINT, and stops; an exit status of 130 would
//! tell it the child handled the signal. A second signal while stopping removes the
//! registered temporaries (see [`TempRegistration`]) and terminates at once, for a user who
//! would rather lose the rest of the cleanup than wait.
//!
//! The handlers do not restart interrupted system calls (no SA_RESTART): a thread blocked in
//! open() of a FIFO, in dlopen, or in a write to a stalled pipe gets EINTR and looks at the
//! stop flag, where a restarted call would wait on for ever.
//!
//! A signal the process inherited as ignored (`nohup`, `trap '' INT`, a shell's background
//! job) stays ignored, as it does for cp. The Rust runtime ignores SIGPIPE before `main`
//! runs, so the disposition it had at exec is read earlier, by an `.init_array` function.

use signal_hook::consts::{
    SIGALRM, SIGHUP, SIGINT, SIGPIPE, SIGPROF, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGVTALRM,
    SIGXCPU, SIGXFSZ,
};
use signal_hook::flag;
use signal_hook::low_level;
use std::cell::UnsafeCell;
use std::ffi::OsStr;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::sync::Arc;

/// The signals that stop a copy and, sent twice, end the process.
const STOP_SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Signals whose default action ends the process and that aiscp neither uses nor gets from
/// its own faults (SIGSEGV, SIGBUS... stay the runtime's): they end the run at once, as they
/// end cp, once the registered temporaries are removed.
const FATAL_SIGNALS: [i32; 8] = [
    SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ,
];

/// The first stop signal (0: none yet), for code with no engine flag at hand (output
/// writes, a failed start).
static FIRST_STOP: AtomicI32 = AtomicI32::new(0);

/// Set while a staging service writes this run's files: a second stop signal then does not
/// kill at once, since the service would go on writing DESTs the caller may already be
/// reusing; the client waits (bounded) for the service to say they stopped, then dies of
/// the first signal.
static SERVICE_WRITING: AtomicBool = AtomicBool::new(false);

/// Says whether a staging service is writing this run's files now (see [`SERVICE_WRITING`]).
pub fn service_writing(writing: bool) {
    SERVICE_WRITING.store(writing, Ordering::SeqCst);
}

/// Whether a stop signal has arrived: a system call that failed with EINTR is then not
/// restarted.
pub fn stop_asked() -> bool {
    FIRST_STOP.load(Ordering::SeqCst) != 0
}

/// Dies of the first stop signal, if one has arrived: where a step failed because the
/// signal cut it short (a library load's open() got EINTR), cp would have died silently.
pub fn die_if_stopped() {
    match FIRST_STOP.load(Ordering::SeqCst) {
        0 => {}
        sig => die_by(sig),
    }
}

/// Records `sig` as the first stop signal, from its handler.
fn note_stop(sig: i32) -> io::Result<()> {
    // SAFETY: a compare-exchange on an atomic is async-signal-safe.
    unsafe {
        low_level::register(sig, move || {
            let _ = FIRST_STOP.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        })?;
    }
    Ok(())
}

/// Whether SIGPIPE was ignored when the program was executed.
static SIGPIPE_IGNORED_AT_EXEC: AtomicBool = AtomicBool::new(false);

/// Whether `sig` is currently ignored.
fn is_ignored(sig: i32) -> bool {
    // SAFETY: a null new action only queries; `old` is a valid sigaction to fill.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

extern "C" fn record_inherited_sigpipe() {
    SIGPIPE_IGNORED_AT_EXEC.store(is_ignored(SIGPIPE), Ordering::SeqCst);
}

/// Runs before the Rust runtime sets SIGPIPE to ignored (glibc calls `.init_array` entries
/// before `main`).
#[used]
#[link_section = ".init_array"]
static RECORD_INHERITED_SIGPIPE: extern "C" fn() = record_inherited_sigpipe;

/// Whether a write to a closed pipe should end the process by SIGPIPE (cp's fate), rather
/// than fail with EPIPE.
pub fn sigpipe_kills() -> bool {
    !SIGPIPE_IGNORED_AT_EXEC.load(Ordering::SeqCst)
}

/// Ends the process by SIGPIPE, as the kernel would have ended cp.
pub fn die_of_sigpipe() -> ! {
    die_by(SIGPIPE)
}

/// The signal the process is to die of once the exit handlers have run (0: none).
static DYING_OF: AtomicI32 = AtomicI32::new(0);
/// Whether [`raise_at_exit`] is registered.
static RAISES_AT_EXIT: AtomicBool = AtomicBool::new(false);

/// Registered with atexit before any GPU library is loaded, so it runs after theirs (exit
/// handlers run last-registered first): a library's own exit work (the fake GPU's leak
/// report) is done before the process dies.
extern "C" fn raise_at_exit() {
    let sig = DYING_OF.load(Ordering::SeqCst);
    if sig != 0 {
        let _ = low_level::emulate_default_handler(sig);
    }
}

/// Ends the process by `sig`: the exit handlers run, then its default action is restored and
/// the signal raised, so the parent sees a death by that signal, as cp's; 128 + `sig` only
/// if that did not end it.
pub fn die_by(sig: i32) -> ! {
    if RAISES_AT_EXIT.load(Ordering::SeqCst) {
        DYING_OF.store(sig, Ordering::SeqCst);
    } else {
        let _ = low_level::emulate_default_handler(sig);
    }
    std::process::exit(128 + sig)
}

/// Makes `sig`'s installed handler interrupt system calls instead of restarting them
/// (signal-hook installs it with SA_RESTART).
fn interrupt_system_calls(sig: i32) -> io::Result<()> {
    // SAFETY: `act` is a valid sigaction, filled by the first call and passed back unchanged
    // but for the flag.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, std::ptr::null(), &mut act) != 0 {
            return Err(io::Error::last_os_error());
        }
        act.sa_flags &= !libc::SA_RESTART;
        if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The installed handlers' shared state.
pub struct Signals {
    cancel: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers; they set `cancel` (the engine's `Config::cancel`). Signals
    /// inherited as ignored are left ignored.
    pub fn install(cancel: Arc<AtomicBool>) -> io::Result<Signals> {
        // SAFETY: `raise_at_exit` is a plain extern "C" fn with no arguments.
        if unsafe { libc::atexit(raise_at_exit) } == 0 {
            RAISES_AT_EXIT.store(true, Ordering::SeqCst);
        }
        for sig in STOP_SIGNALS {
            if is_ignored(sig) {
                continue;
            }
            // Actions run in registration order: the check for "already stopping" must come
            // before the flag is set, or the first signal would kill the process itself.
            let stopping = Arc::clone(&cancel);
            // SAFETY: the action only loads an atomic, unlinks files (async-signal-safe) and
            // re-raises the signal with its default disposition, as signal-hook's own
            // conditional-default action does.
            unsafe {
                low_level::register(sig, move || {
                    if stopping.load(Ordering::SeqCst) && !SERVICE_WRITING.load(Ordering::SeqCst) {
                        remove_registered_temporaries();
                        let _ = low_level::emulate_default_handler(sig);
                    }
                })?;
            }
            note_stop(sig)?;
            flag::register(sig, Arc::clone(&cancel))?;
            interrupt_system_calls(sig)?;
        }
        for sig in FATAL_SIGNALS {
            if is_ignored(sig) {
                continue;
            }
            // SAFETY: as for the second stop signal above.
            unsafe {
                low_level::register(sig, move || {
                    remove_registered_temporaries();
                    let _ = low_level::emulate_default_handler(sig);
                })?;
            }
        }
        if sigpipe_kills() {
            // A write into a closed pipe (a -v listing piped into `head`, a FIFO DEST whose
            // reader left): stop as for SIGINT, then die of SIGPIPE in `main`. No
            // second-signal kill: each later write into the same pipe raises it again.
            note_stop(SIGPIPE)?;
            flag::register(SIGPIPE, Arc::clone(&cancel))?;
            interrupt_system_calls(SIGPIPE)?;
        }
        Ok(Signals { cancel })
    }

    /// Whether a stop was asked for.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// The signal that asked the copy to stop, if one did.
    pub fn received(&self) -> Option<i32> {
        match FIRST_STOP.load(Ordering::SeqCst) {
            0 => None,
            sig => Some(sig),
        }
    }
}

/// Longest name a slot holds (NAME_MAX and its NUL).
const SLOT_NAME: usize = 256;
const FREE: u8 = 0;
/// Owned by the thread filling or emptying it.
const BUSY: u8 = 1;
const READY: u8 = 2;
/// Taken by the signal handler, which ends the process.
const REMOVING: u8 = 3;

/// A temporary file a killing signal (the second stop signal, or SIGUSR1 and the like)
/// removes before the process dies: a directory
/// descriptor and a name in it. The state moves FREE -> BUSY -> READY (registered) and
/// READY -> BUSY -> FREE (deregistered) in the copying thread, or READY -> REMOVING in the
/// handler; each side touches the name only while it holds the slot, so neither reads a
/// half-written name.
struct TempSlot {
    state: AtomicU8,
    dir: AtomicI32,
    name: UnsafeCell<[u8; SLOT_NAME]>,
}

// SAFETY: `name` is only accessed by whoever moved `state` to BUSY or REMOVING.
unsafe impl Sync for TempSlot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: TempSlot = TempSlot {
    state: AtomicU8::new(FREE),
    dir: AtomicI32::new(libc::AT_FDCWD),
    name: UnsafeCell::new([0; SLOT_NAME]),
};

/// One temporary exists at a time (files are copied one after another); spare slots cost
/// nothing.
static TEMP_SLOTS: [TempSlot; 4] = [EMPTY_SLOT; 4];

/// A temporary file that a killing signal removes first. Dropping it deregisters
/// it; drop it before the directory descriptor closes.
pub struct TempRegistration {
    slot: &'static TempSlot,
}

/// Registers `name` inside the directory `dir` (a descriptor, or AT_FDCWD) for removal if
/// the process is killed by a signal. None when every slot is taken or the name is
/// too long to hold (the temporary is then only removed by the normal unwinding).
pub fn register_temporary(dir: RawFd, name: &OsStr) -> Option<TempRegistration> {
    let bytes = name.as_bytes();
    if bytes.len() >= SLOT_NAME || bytes.contains(&0) {
        return None;
    }
    let slot = TEMP_SLOTS.iter().find(|s| {
        s.state
            .compare_exchange(FREE, BUSY, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })?;
    // SAFETY: this thread holds the slot (BUSY); the handler never reads a BUSY slot.
    let buf = unsafe { &mut *slot.name.get() };
    buf[..bytes.len()].copy_from_slice(bytes);
    buf[bytes.len()] = 0;
    slot.dir.store(dir, Ordering::SeqCst);
    slot.state.store(READY, Ordering::SeqCst);
    Some(TempRegistration { slot })
}

impl Drop for TempRegistration {
    fn drop(&mut self) {
        // If the handler holds the slot, the process is ending: leave the slot to it.
        if self
            .slot
            .state
            .compare_exchange(READY, BUSY, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            self.slot.state.store(FREE, Ordering::SeqCst);
        }
    }
}

/// Called from the signal handler: unlinks every registered temporary.
fn remove_registered_temporaries() {
    for slot in &TEMP_SLOTS {
        if slot
            .state
            .compare_exchange(READY, REMOVING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            // SAFETY: the handler holds the slot; the name is NUL-terminated; unlinkat is
            // async-signal-safe.
            unsafe {
                let name = (*slot.name.get()).as_ptr().cast::<libc::c_char>();
                libc::unlinkat(slot.dir.load(Ordering::SeqCst), name, 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test only: handlers are process-wide, and a second signal would end the test
    /// process by design.
    #[test]
    fn first_signal_sets_the_flag_and_is_remembered() {
        let cancel = Arc::new(AtomicBool::new(false));
        let signals = Signals::install(Arc::clone(&cancel)).unwrap();
        assert_eq!(signals.received(), None);
        assert!(!signals.cancelled());
        low_level::raise(SIGTERM).unwrap();
        assert!(cancel.load(Ordering::SeqCst));
        assert!(signals.cancelled());
        assert_eq!(signals.received(), Some(SIGTERM));
    }

    #[test]
    fn registered_temporaries_are_removed_and_deregistered_ones_kept() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("kept"), b"").unwrap();
        std::fs::write(dir.path().join("tmp"), b"").unwrap();
        let kept = register_temporary(d.as_raw_fd(), OsStr::new("kept")).unwrap();
        drop(kept);
        let _tmp = register_temporary(d.as_raw_fd(), OsStr::new("tmp")).unwrap();
        assert!(register_temporary(d.as_raw_fd(), OsStr::new(&"x".repeat(300))).is_none());
        remove_registered_temporaries();
        assert!(dir.path().join("kept").exists());
        assert!(!dir.path().join("tmp").exists());
    }
}
