//! Where a copy's time goes: each stage's busy time, summed over the threads that ran it.
//! With several workers the sums exceed the wall time; a stage whose sum is near
//! workers x wall is the one the copy waits on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Time spent per stage (plain data, for --debug and the caller's run summary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Making files ready: O_DIRECT switches, library registration, staging memory.
    pub open: Duration,
    /// Reads: POSIX reads into host windows, and library reads into GPU memory.
    pub read: Duration,
    /// Queueing copies between host windows and GPU memory (both ways).
    pub copy_queue: Duration,
    /// Waiting for queued copies before a window could be refilled or written out.
    pub copy_wait: Duration,
    /// Writes: POSIX writes from host windows, and library writes from GPU memory.
    pub write: Duration,
    /// Digests (--sums): hashing staged slices, and reading back what no slice vouched for.
    pub digest: Duration,
}

impl StageTimes {
    pub fn add(&mut self, other: &StageTimes) {
        self.open += other.open;
        self.read += other.read;
        self.copy_queue += other.copy_queue;
        self.copy_wait += other.copy_wait;
        self.write += other.write;
        self.digest += other.digest;
    }

    /// "open 0.001 s, read 1.234 s, ..." for --debug; the digest stage only where a copy
    /// took digests.
    pub fn describe(&self) -> String {
        let digest = match self.digest.is_zero() {
            true => String::new(),
            false => format!(", digest {:.3} s", self.digest.as_secs_f64()),
        };
        format!(
            "open {:.3} s, read {:.3} s, copy queue {:.3} s, copy wait {:.3} s, write {:.3} s{digest}",
            self.open.as_secs_f64(),
            self.read.as_secs_f64(),
            self.copy_queue.as_secs_f64(),
            self.copy_wait.as_secs_f64(),
            self.write.as_secs_f64(),
        )
    }
}

/// A stage of [`StageTimes`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stage {
    Open,
    Read,
    CopyQueue,
    CopyWait,
    Write,
    Digest,
}

/// Stage clocks the workers of one file add to.
#[derive(Default)]
pub(crate) struct StageClock {
    nanos: [AtomicU64; 6],
}

impl StageClock {
    /// Runs `f`, adding its time to `stage`.
    pub(crate) fn time<T>(&self, stage: Stage, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        let spent = started.elapsed().as_nanos() as u64;
        self.nanos[stage as usize].fetch_add(spent, Ordering::Relaxed);
        out
    }

    /// [`StageClock::time`] where `timed`; else only runs `f` (a step that does nothing
    /// on this backend costs no clock reads).
    pub(crate) fn time_if<T>(&self, timed: bool, stage: Stage, f: impl FnOnce() -> T) -> T {
        match timed {
            true => self.time(stage, f),
            false => f(),
        }
    }

    pub(crate) fn times(&self) -> StageTimes {
        let at = |s: Stage| Duration::from_nanos(self.nanos[s as usize].load(Ordering::Relaxed));
        StageTimes {
            open: at(Stage::Open),
            read: at(Stage::Read),
            copy_queue: at(Stage::CopyQueue),
            copy_wait: at(Stage::CopyWait),
            write: at(Stage::Write),
            digest: at(Stage::Digest),
        }
    }
}
