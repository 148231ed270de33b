//! The engine's state, apart from its methods (in its parent and siblings) so that each of
//! them imports it from here.

use super::diag::Diag;
use crate::backend;
use crate::config::Config;
use crate::devices;
use crate::pipeline::Pipeline;
use crate::queue::{self, QueueLimits};
use std::time::Duration;

/// The pipeline of the backend brought up, whichever it is.
pub(super) enum Pipelines {
    Host(Pipeline<backend::host::HostStaging>),
    Gpu(Pipeline<backend::gpu::GpuStaging>),
}

/// The engine: backend, buffers and workers, reused across the files of one run.
pub struct Engine {
    pub(super) backend: Pipelines,
    pub(super) config: Config,
    pub(super) diag: Diag,
    /// With several GPUs: how files are placed on them.
    pub(super) spread: Option<devices::Spread>,
    /// How long the start took (reported in the run's summary).
    pub(super) startup: Duration,
    /// The GPUs (positions) the file workers of the current flight have slots on.
    pub(super) flying_on: Option<Vec<usize>>,
    /// Files in flight: the limits, and results received while landing the flight.
    pub(super) limits: QueueLimits,
    pub(super) landed: queue::Landed,
    /// Whole files whose copy ended well (see [`super::EngineInfo::files`]).
    pub(super) copied: u64,
}

/// Runs `$body` with `$p` bound to the backend's pipeline, whichever it is (the caller
/// imports [`Pipelines`]).
macro_rules! with_pipeline {
    ($backend:expr, $p:ident => $body:expr) => {
        match $backend {
            Pipelines::Host($p) => $body,
            Pipelines::Gpu($p) => $body,
        }
    };
}
pub(super) use with_pipeline;

impl Engine {
    /// Waits for the files in flight and takes their slots back (results kept for
    /// [`Engine::next_finished`]), before a copy that needs the slots itself.
    pub(super) fn land(&mut self) {
        let into = &mut self.landed.finished;
        with_pipeline!(&mut self.backend, p => p.land(into));
    }
}
