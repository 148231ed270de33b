//! The pipeline's state, apart from its methods (in its parent and siblings) so that each
//! of them imports it from here.

use crate::backend::Staging;
use crate::stages::StageTimes;
use std::sync::Arc;

/// Workers' slots (dropped first: buffers go back before the driver closes) and the backend.
pub(crate) struct Pipeline<S: Staging> {
    /// The worker threads: made for the first file that has more than one slice for them,
    /// then reused for every file of the run (each makes the device current again per file,
    /// which is cheap). Idle whenever no copy runs, so dropping them first frees nothing in use.
    pub(super) threads: Option<rayon::ThreadPool>,
    /// Files in flight (see `queue`): workers holding slots lent from `slots`.
    pub(super) flight: Option<crate::queue::Flight<S>>,
    /// `slots_per_gpu` per GPU, interleaved: slot `i` is on the staging's device `i % devices`.
    pub(super) slots: Vec<Option<S::Slot>>,
    /// The slots the current file may use (indices into `slots`; see [`Pipeline::choose`]).
    pub(super) chosen: Vec<usize>,
    /// False for a slot given up for the run (no memory for it).
    pub(super) usable: Vec<bool>,
    /// How many of `chosen` the current file's slices run on.
    pub(super) workers: usize,
    pub(super) staging: Arc<S>,
    pub(super) chunk: usize,
    /// `--async`, checked at start to be supported: files whose sides are both direct are
    /// copied with the stream API, one stream per worker.
    pub(super) async_io: bool,
    /// The stage times of every file copied so far.
    pub(super) run_stages: StageTimes,
    /// [`crate::Config::pause`].
    pub(super) pause: fn(&'static str),
    /// [`crate::Config::verify`]: SOURCE is read through the page cache for the read-back.
    /// SOURCE is read again by --verify (so it goes through the page cache).
    pub(super) verify: bool,
}
