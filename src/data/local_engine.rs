//! This process's engine as the copier uses it: started the first time a file has data to
//! copy, and never tried twice.

use crate::sys::messages::{error, EngineLines};
use aiscp_engine::{Config, Engine, StartError};

/// This process's engine: not started until a file has data to copy here (so -s, -l,
/// --attributes-only, directory-only runs and runs whose data a mover carries never load a
/// GPU library), and once it could not start, not tried again (its error said once).
pub enum EngineSlot {
    Unstarted,
    Running(Box<Engine>),
    Failed,
}

/// Why there is no engine to copy with.
pub enum NoEngine {
    /// It could not start now: say why.
    Now(StartError),
    /// It could not start earlier, and that was said then.
    Before,
}

impl NoEngine {
    /// Says why there is no engine, unless that was said before.
    pub fn say(self) {
        if let NoEngine::Now(e) = self {
            error(&e.to_string());
        }
    }
}

impl EngineSlot {
    pub fn running(&self) -> Option<&Engine> {
        match self {
            EngineSlot::Running(e) => Some(e),
            _ => None,
        }
    }

    pub fn running_mut(&mut self) -> Option<&mut Engine> {
        match self {
            EngineSlot::Running(e) => Some(e),
            _ => None,
        }
    }

    /// The engine, started from `config` the first time.
    pub fn try_start(&mut self, config: &Config) -> Result<&mut Engine, NoEngine> {
        if let EngineSlot::Unstarted = self {
            let diagnostics = EngineLines::new(config.quiet, String::new());
            match Engine::start(config.clone(), diagnostics) {
                Ok(e) => *self = EngineSlot::Running(Box::new(e)),
                Err(e) => {
                    *self = EngineSlot::Failed;
                    return Err(NoEngine::Now(e));
                }
            }
        }
        match self {
            EngineSlot::Running(e) => Ok(e),
            _ => Err(NoEngine::Before),
        }
    }

    /// [`EngineSlot::try_start`] where a file's copy is already under way (a mover handing
    /// its data back): without an engine the run ends here.
    pub fn start_or_exit(&mut self, config: &Config) -> &mut Engine {
        match self.try_start(config) {
            Ok(engine) => engine,
            Err(why) => {
                crate::sys::signals::die_if_stopped();
                why.say();
                crate::sys::messages::exit(1);
            }
        }
    }
}

/// The engine as a mover sees it: started when first asked for.
pub struct LocalEngine<'e> {
    slot: &'e mut EngineSlot,
    config: &'e Config,
}

impl<'e> LocalEngine<'e> {
    pub fn new(slot: &'e mut EngineSlot, config: &'e Config) -> Self {
        LocalEngine { slot, config }
    }

    pub fn get(&mut self) -> &mut Engine {
        self.slot.start_or_exit(self.config)
    }
}
