//! The `--stats` summary: labelled lines in words (like rsync's `--stats`), or one JSON
//! object, from the run's file counts, the progress counters and what the engine staged
//! through. The text keeps to what a person asks of a copy (files, bytes, time, rate, where
//! the data went); stage times, routes and the library's own counters are for `--debug` and
//! the JSON.

use super::staged::{Staged, StagedPart};
use aiscp_engine::units;
use aiscp_engine::{Backend, LibraryCounters, StageTimes};
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

/// The run's time and routes, from the engine's events (its bytes are the copier's:
/// [`Files::bytes`]).
#[derive(Clone, Debug)]
pub struct Summary {
    pub seconds: f64,
    pub routes: Vec<RouteCount>,
}

/// The run's files (anything but directories) by what became of them, as cp's side
/// decides and counts them (`copy::count`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Files {
    pub copied: u64,
    pub skipped: u64,
    pub failed: u64,
    /// The data of the files copied: a failed file's bytes are not in it, even those its
    /// data phase moved before its copy (or its --verify read-back) failed.
    pub bytes: u64,
}

/// `--stats=json`: one object, its fields stable for scripts.
#[derive(Debug, Serialize)]
pub struct StatsReport {
    /// Files (anything but directories) copied: data, links, special files.
    pub files: u64,
    /// Files cp's rules left as they were: -n, -u, -i answered no, a source named twice.
    pub files_skipped: u64,
    /// Files (and directories that could not be made or read) reported as errors.
    pub files_failed: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub bytes_per_second: f64,
    /// Whether any operand failed (the exit status is 1).
    pub failed: bool,
    /// "hipFile", "cuFile", "host memory"; null when no file had data to copy.
    pub backend: Option<Backend>,
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
    /// The I/O library's own counters (cuFile's or hipFile's statistics calls); null when
    /// there are none, with the reason in `library_stats_absent`.
    pub library_stats: Option<LibraryCounters>,
    pub library_stats_absent: Option<String>,
    /// Each side that copied files, with how many: the staging service, this process, or
    /// both when a run went on in-process after losing the service. The fields above
    /// describe this process's side where both copied files. Empty when no file had data
    /// to copy.
    pub staged: Vec<StagedPart>,
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
    /// Hashing for --sums (0 without it).
    pub digest: f64,
}

impl From<StageTimes> for StageSeconds {
    fn from(t: StageTimes) -> StageSeconds {
        StageSeconds {
            open: t.open.as_secs_f64(),
            read: t.read.as_secs_f64(),
            copy_queue: t.copy_queue.as_secs_f64(),
            copy_wait: t.copy_wait.as_secs_f64(),
            write: t.write.as_secs_f64(),
            digest: t.digest.as_secs_f64(),
        }
    }
}

/// Why the JSON has no library counters when no engine came up.
const NO_ENGINE: &str = "no file had data to copy: no library was used";

impl StatsReport {
    /// `staged`: what each side staged through and its stage times; `shutdown`: how long
    /// the run took to shut down.
    pub fn new(
        summary: Summary,
        files: Files,
        staged: &Staged,
        shutdown: Duration,
        failed: bool,
    ) -> StatsReport {
        let (backend, library, gpus, startup, shutdown, counters) = match staged.main() {
            Some((e, _)) => (
                Some(e.backend),
                e.library.clone(),
                e.gpus.clone(),
                Some(e.startup.as_secs_f64()),
                Some(shutdown.as_secs_f64()),
                e.library_stats.clone(),
            ),
            None => (None, None, Vec::new(), None, None, Err(NO_ENGINE.into())),
        };
        let (library_stats, library_stats_absent) = match counters {
            Ok(s) => (Some(s), None),
            Err(why) => (None, Some(why)),
        };
        StatsReport {
            files: files.copied,
            files_skipped: files.skipped,
            files_failed: files.failed,
            bytes: files.bytes,
            seconds: summary.seconds,
            bytes_per_second: files.bytes as f64 / summary.seconds.max(1e-9),
            failed,
            backend,
            library,
            gpus,
            routes: summary.routes,
            stages: staged.stages().map(StageSeconds::from),
            startup_seconds: startup,
            shutdown_seconds: shutdown,
            library_stats,
            library_stats_absent,
            staged: staged.parts(),
        }
    }

    /// The summary in words, one labelled line each; `debug` adds the routes, the stage
    /// times, start-up and shutdown, and the library's own counters.
    pub fn text(&self, debug: bool) -> String {
        let mut lines: Vec<(&str, String)> = vec![
            ("Files copied", self.files.to_string()),
            ("Files skipped", self.files_skipped.to_string()),
            ("Files failed", self.files_failed.to_string()),
            ("Data copied", units::length(self.bytes)),
            ("Time", format!("{:.2} s", self.seconds)),
            ("Rate", units::rate(self.bytes_per_second)),
            ("Staged through", super::staged::describe(&self.staged)),
        ];
        if self.failed && self.files_failed == 0 {
            lines.push(("Errors", "reported above (exit status 1)".to_owned()));
        }
        if debug {
            lines.extend(self.debug_lines());
        }
        let width = lines
            .iter()
            .map(|(label, _)| label.len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for (i, (label, value)) in lines.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let _ = write!(
                out,
                "{:width$} {value}",
                format!("{label}:"),
                width = width + 1
            );
        }
        out
    }

    /// What `--debug` adds: the routes, stage times, start-up and shutdown, the library's
    /// counters.
    fn debug_lines(&self) -> Vec<(&'static str, String)> {
        let mut lines = Vec::new();
        if !self.routes.is_empty() {
            let routes: Vec<String> = self
                .routes
                .iter()
                .map(|r| format!("{} {}/{}", r.files, r.read, r.write))
                .collect();
            lines.push(("Read/write routes", routes.join(", ")));
        }
        if let Some(t) = &self.stages {
            lines.push((
                "Thread time",
                format!(
                    "open {:.2} s, read {:.2} s, copy queue {:.2} s, copy wait {:.2} s, \
                     write {:.2} s",
                    t.open, t.read, t.copy_queue, t.copy_wait, t.write
                ),
            ));
        }
        if let (Some(up), Some(down)) = (self.startup_seconds, self.shutdown_seconds) {
            lines.push(("Start-up, shutdown", format!("{up:.2} s, {down:.2} s")));
        }
        let library = match (&self.library_stats, &self.library_stats_absent) {
            (Some(c), _) => library_summary(c),
            (None, Some(why)) => format!("none: {why}"),
            (None, None) => "none".to_owned(),
        };
        lines.push(("Library counters", library));
        lines
    }

    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }
}

/// The library's counters in one line: calls and bytes each way, and the paths per GPU.
fn library_summary(counters: &LibraryCounters) -> String {
    let mut text = format!(
        "{} reads ({} failed), {}; {} writes ({} failed), {}",
        counters.reads.ok,
        counters.reads.failed,
        units::size(counters.read_bytes),
        counters.writes.ok,
        counters.writes.failed,
        units::size(counters.write_bytes),
    );
    match (&counters.per_gpu, &counters.per_gpu_absent) {
        (Some(gpus), _) => {
            for g in gpus {
                let _ = write!(
                    text,
                    "; slot {}: fast path {} reads, {} writes; fallback {} reads, {} writes",
                    g.slot,
                    g.fast_path_reads,
                    g.fast_path_writes,
                    g.fallback_reads,
                    g.fallback_writes
                );
            }
        }
        (None, Some(why)) => {
            let _ = write!(text, "; no per-GPU counts: {why}");
        }
        (None, None) => {}
    }
    text
}
