//! The `--stats` summary: one line of text or one JSON object, from the run's counters and
//! what the engine staged through.

use super::line::human;
use aiscp_engine::{EngineInfo, StageTimes};
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

/// Files per route in the summary.
#[derive(Clone, Debug, Serialize)]
pub struct RouteCount {
    pub read: &'static str,
    pub write: &'static str,
    pub files: u64,
}

/// What the run did, from the engine's events.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Files whose data phase ran (copied, or failed part way).
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub routes: Vec<RouteCount>,
}

/// `--stats=json`: one object, its fields stable for scripts.
#[derive(Debug, Serialize)]
pub struct StatsReport {
    pub files: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub bytes_per_second: f64,
    /// Whether any operand failed (the exit status is 1).
    pub failed: bool,
    /// "hipFile", "cuFile", "host memory"; null when no file had data to copy.
    pub backend: Option<&'static str>,
    /// The library's version text ("cuFile 1.9.1") when it tells.
    pub library: Option<String>,
    /// The GPUs staged through (empty on host memory).
    pub gpus: Vec<u32>,
    pub routes: Vec<RouteCount>,
    /// Thread time per pipeline stage, summed over the workers (null when no file had
    /// data to copy).
    pub stages: Option<StageSeconds>,
    /// Seconds the engine took to come up (libraries loaded, GPU context made): with the
    /// shutdown, the fixed cost a GPU run pays beside the copying. Null when no file had
    /// data to copy.
    pub startup_seconds: Option<f64>,
    /// Seconds the run took to shut down once the last file was done (staging memory freed,
    /// context and libraries released). Null when no file had data to copy.
    pub shutdown_seconds: Option<f64>,
}

/// The engine's stage times in seconds: each stage's busy time summed over the threads that
/// ran it, so with several workers a sum can exceed the wall time. `copy_wait` is time spent
/// waiting for queued copies between host and GPU memory.
#[derive(Clone, Debug, Serialize)]
pub struct StageSeconds {
    pub open: f64,
    pub read: f64,
    pub copy_queue: f64,
    pub copy_wait: f64,
    pub write: f64,
}

impl From<StageTimes> for StageSeconds {
    fn from(t: StageTimes) -> StageSeconds {
        StageSeconds {
            open: t.open.as_secs_f64(),
            read: t.read.as_secs_f64(),
            copy_queue: t.copy_queue.as_secs_f64(),
            copy_wait: t.copy_wait.as_secs_f64(),
            write: t.write.as_secs_f64(),
        }
    }
}

impl StatsReport {
    /// `engine`: what it staged through, its stage times and how long its shutdown took.
    pub fn new(
        summary: Summary,
        engine: Option<(EngineInfo, StageTimes, Duration)>,
        failed: bool,
    ) -> StatsReport {
        let (backend, library, gpus, stages, startup, shutdown) = match engine {
            Some((e, t, stop)) => (
                Some(e.backend),
                e.library,
                e.gpus,
                Some(t.into()),
                Some(e.startup.as_secs_f64()),
                Some(stop.as_secs_f64()),
            ),
            None => (None, None, Vec::new(), None, None, None),
        };
        StatsReport {
            files: summary.files,
            bytes: summary.bytes,
            seconds: summary.seconds,
            bytes_per_second: summary.bytes as f64 / summary.seconds.max(1e-9),
            failed,
            backend,
            library,
            gpus,
            routes: summary.routes,
            stages,
            startup_seconds: startup,
            shutdown_seconds: shutdown,
        }
    }

    /// The one-line summary of `--stats`.
    pub fn line(&self) -> String {
        let mut line = format!(
            "{} file{}, {} in {:.2} s ({}/s)",
            self.files,
            if self.files == 1 { "" } else { "s" },
            human(self.bytes),
            self.seconds,
            human(self.bytes_per_second as u64),
        );
        if let Some(backend) = self.backend {
            let _ = write!(
                line,
                ", through {}",
                self.library.as_deref().unwrap_or(backend)
            );
            let gpus: Vec<String> = self.gpus.iter().map(u32::to_string).collect();
            match gpus.len() {
                0 => {}
                1 => {
                    let _ = write!(line, " on GPU {}", gpus[0]);
                }
                _ => {
                    let _ = write!(line, " on GPUs {}", gpus.join(","));
                }
            }
        }
        if !self.routes.is_empty() {
            let routes: Vec<String> = self
                .routes
                .iter()
                .map(|r| format!("{} {}/{}", r.files, r.read, r.write))
                .collect();
            let _ = write!(line, "; read/write routes: {}", routes.join(", "));
        }
        if let Some(t) = &self.stages {
            let _ = write!(
                line,
                "; thread time: open {:.2} s, read {:.2} s, copy queue {:.2} s, copy wait {:.2} s, \
                 write {:.2} s",
                t.open, t.read, t.copy_queue, t.copy_wait, t.write
            );
        }
        if let (Some(up), Some(down)) = (self.startup_seconds, self.shutdown_seconds) {
            let _ = write!(line, "; start-up {up:.2} s, shutdown {down:.2} s");
        }
        if self.failed {
            line.push_str("; some operands failed");
        }
        line
    }

    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }
}
