//! This process's engine as the copier uses it: started the first time a file has data to
//! copy.

use crate::sys::messages::{error, EngineLines};
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
        let diagnostics = EngineLines::new(config.quiet, String::new());
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
