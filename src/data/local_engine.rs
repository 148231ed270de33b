//! This process's engine as the copier uses it: started the first time a file has data to
//! copy.

use crate::sys::messages::{error, EngineLines};
use aiscp_engine::{Config, Engine, StartError};

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
/// and directory-only runs never load a GPU library).
pub fn started<'e>(
    slot: &'e mut Option<Engine>,
    config: &Config,
) -> Result<&'e mut Engine, StartError> {
    if slot.is_none() {
        let diagnostics = EngineLines::new(config.quiet, String::new());
        *slot = Some(Engine::start(config.clone(), diagnostics)?);
    }
    Ok(slot.as_mut().expect("engine started above"))
}

/// [`started`] where a file's copy is under way (a mover handing the data back): a failure
/// ends the run at once.
pub fn start_engine<'e>(slot: &'e mut Option<Engine>, config: &Config) -> &'e mut Engine {
    match started(slot, config) {
        Ok(engine) => engine,
        Err(e) => {
            crate::sys::signals::die_if_stopped();
            error(&e.to_string());
            crate::sys::messages::exit(1);
        }
    }
}
