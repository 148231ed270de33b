//! The chunked copy of one file's data.
//!
//! The cp layer opens SRC and DST (with the right flags, modes and checks) and hands both
//! files here; the engine moves the bytes through the staging backend and sets DST's size.
//!
//! A regular file's copy is planned and ended in one place (`file_copy`): it is cut into
//! slices (aligned where O_DIRECT is used, [`ChunkPlan`]) that N workers copy in parallel,
//! each through its own staging slot (device memory on GPU backends), by the direct route
//! (O_DIRECT + hipFile/cuFile) or the bounce route (POSIX I/O + copies to and from the
//! slot); the finish reads on to SOURCE's end (the unaligned tail, growth, a shrink) through
//! the bounce route on the calling thread and sets the exact size. Sequential sources (pipes,
//! FIFOs, devices) go through the bounce route in order. The library, its driver, the slots and the
//! worker threads are made once and reused for every file of the run.
//!
//! With `--async` (GPU backends whose library has the stream API), a file whose SRC and DST
//! are both registered is copied by workers that each queue ReadAsync then WriteAsync on
//! their own stream and synchronize once per slice; everything else is as above.

mod async_io;
mod backend;
mod bounce;
mod chunk_plan;
mod config;
mod devices;
pub mod digest;
mod engine;
mod error;
mod file_copy;
mod fileio;
mod job;
mod library_stats;
mod one_slot;
mod pipeline;
pub mod probe;
mod queue;
pub mod quote;
mod read_back;
mod read_back_pool;
mod route;
mod stages;
mod transfer;
pub mod units;
pub mod verify;
mod worker;

pub use backend::{Backend, BackendChoice, GpuChoice, RouteChoice};
pub use bounce::GiveWay;
pub use config::{ChunkSize, ChunkSizeError, Config, Verify, DEFAULT_SLOTS_PER_GPU, MAX_CHUNK};
pub use error::{CopyError, Side};
pub use file_copy::Timed;
pub use job::{Copied, DataJob, NoProgress, ProgressSink, SourceKind, SparseMode};
pub use queue::{Finished, QueueLimits, QueuedJob, Ticket};
pub use quote::os_text;
pub use read_back_pool::ReadBackPool;
pub use route::Route;
pub use stages::StageTimes;
pub use worker::{PartEnd, PartRan};

pub use chunk_plan::ChunkPlan;
pub use engine::{prepare_process, Diagnostics, Engine, EngineInfo, StartError};
pub use library_stats::{Calls, GpuCounters, LibraryCounters, LibraryStats};

/// The staging backends themselves, for the engine's own tests of what a slot hashes (the
/// fake GPU's kernels piece by piece); not part of the engine's interface.
#[doc(hidden)]
pub mod staging_for_tests {
    pub use crate::backend::gpu::GpuStaging;
    pub use crate::backend::{Request, Staging};
}
