//! SIGINT and SIGTERM: the first one asks the copy to stop, a second one ends the process.
//!
//! cp dies where it stands on Ctrl-C. aiscp cannot: a worker may have DMA in flight into a
//! device buffer, and registered handles and buffers must be given back. So the first signal
//! only sets the engine's cancel flag; the engine finishes the I/O in flight, returns
//! `Interrupted`, the copier drops the engine (deregister, free, close the driver) and `main`
//! prints "interrupted" and exits 128 + the signal number, as a shell reports a process
//! killed by that signal. A second signal while stopping gets the default disposition and
//! terminates at once, for a user who would rather lose the cleanup than wait.

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The signals that stop a copy.
const STOP_SIGNALS: [i32; 2] = [SIGINT, SIGTERM];

/// The installed handlers' shared state.
pub struct Signals {
    cancel: Arc<AtomicBool>,
    /// The signal that arrived first (0: none).
    which: Arc<AtomicUsize>,
}

impl Signals {
    /// Installs the handlers; they set `cancel` (the engine's `Config::cancel`).
    pub fn install(cancel: Arc<AtomicBool>) -> io::Result<Signals> {
        let which = Arc::new(AtomicUsize::new(0));
        for sig in STOP_SIGNALS {
            // Actions run in registration order: the check for "already stopping" must come
            // before the flag is set, or the first signal would kill the process itself.
            flag::register_conditional_default(sig, Arc::clone(&cancel))?;
            // Only the first signal's number is kept (a compare-exchange is not available to
            // signal-hook's flag actions; the second one terminates before this runs anyway).
            flag::register_usize(sig, Arc::clone(&which), sig as usize)?;
            flag::register(sig, Arc::clone(&cancel))?;
        }
        Ok(Signals { cancel, which })
    }

    /// Whether a stop was asked for.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }

    /// The signal that asked the copy to stop, if one did.
    pub fn received(&self) -> Option<i32> {
        match self.which.load(Ordering::SeqCst) {
            0 => None,
            sig => i32::try_from(sig).ok(),
        }
    }

    /// The exit status after an interruption: 128 + the signal (130 for SIGINT, 143 for
    /// SIGTERM), what a shell shows for a process that signal killed.
    pub fn exit_code(&self) -> Option<i32> {
        self.received().map(|sig| 128 + sig)
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
        signal_hook::low_level::raise(SIGTERM).unwrap();
        assert!(cancel.load(Ordering::SeqCst));
        assert!(signals.cancelled());
        assert_eq!(signals.received(), Some(SIGTERM));
        assert_eq!(signals.exit_code(), Some(143));
    }
}
