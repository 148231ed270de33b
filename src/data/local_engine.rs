//! This process's engine as the copier uses it: started the first time a file has data to
//! copy, its warnings and --debug lines on stderr.

use crate::sys::messages::error;
use aiscp_engine::{Config, Engine};

/// This process's engine, brought up the first time it is asked for: a mover that moves
/// the data elsewhere (the staging service) may never need it.
pub struct LocalEngine<'e> {
    slot: &'e mut Option<Engine>,
    config: &'e Config,
}

impl<'e> LocalEngine<'e> {
    /// The engine in `slot`, started from `config` when first asked for.
    pub fn new(slot: &'e mut Option<Engine>, config: &'e Config) -> Self {
        LocalEngine { slot, config }
    }

    pub fn get(&mut self) -> &mut Engine {
        start_engine(self.slot, self.config)
    }
}

/// Brings the engine up the first time a file has data to copy (so -s, -l, --attributes-only
/// and directory-only runs never load a GPU library); a failure ends the run.
pub fn start_engine<'e>(slot: &'e mut Option<Engine>, config: &Config) -> &'e mut Engine {
    if slot.is_none() {
        let diagnostics = Box::new(StderrDiagnostics {
            quiet: config.quiet,
        });
        match Engine::start(config.clone(), diagnostics) {
            Ok(e) => *slot = Some(e),
            Err(e) => {
                crate::sys::signals::die_if_stopped();
                error(&e.to_string());
                crate::sys::messages::exit(1);
            }
        }
    }
    slot.as_mut().expect("engine started above")
}

/// The engine's warnings and --debug lines, on stderr.
struct StderrDiagnostics {
    quiet: bool,
}

impl aiscp_engine::Diagnostics for StderrDiagnostics {
    fn warn(&mut self, line: &str) {
        if !self.quiet {
            crate::sys::messages::own_warning(line);
        }
    }
    fn debug(&mut self, since_start: std::time::Duration, line: &str) {
        // Through messages, so a failed stderr ends the run as cp's would, not in a panic.
        crate::progress::suspend(|| {
            crate::sys::messages::to_stderr_raw(&format!(
                "{}: debug: +{:.3}s {line}\n",
                crate::sys::messages::program(),
                since_start.as_secs_f64()
            ));
        });
    }
}
