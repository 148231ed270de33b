//! Where the engine's messages go: the caller's [`Diagnostics`], with the engine's start
//! time for --debug stamps.

use std::time::{Duration, Instant};

/// Where the engine's messages go: the caller shows them (the engine never prints).
pub trait Diagnostics: Send {
    /// A one-line warning (no GPU library, so host memory; --async unavailable).
    fn warn(&mut self, line: &str);
    /// A --debug line (only with [`crate::Config::debug`]); `since_start` is the time since
    /// [`crate::Engine::start`] was called, so start-up costs show where they are paid.
    fn debug(&mut self, since_start: Duration, line: &str);
}

/// The caller's [`Diagnostics`] with the engine's start time, for --debug stamps.
pub(super) struct Diag {
    pub(super) sink: Box<dyn Diagnostics>,
    pub(super) started: Instant,
    pub(super) debug: bool,
}

impl Diag {
    pub(super) fn debug(&mut self, line: &str) {
        if self.debug {
            self.sink.debug(self.started.elapsed(), line);
        }
    }
}
