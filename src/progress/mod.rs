//! The run's progress and its summary, fed by the engine's events (it never reaches into the
//! engine).
//!
//! One view for the whole run: once the total is known indicatif's bar and the percentage,
//! bytes done of the run's total, files done of the total, the rate once measured, the
//! overall ETA, and the file being copied, fitted to the terminal's width. Sequential sources (pipes,
//! FIFOs, devices) have no size: a run with one shows bytes and rate only. On a terminal it is one indicatif line
//! redrawn in place; off a terminal (`--progress` with stderr in a log) it is a plain line
//! every [`LINE_INTERVAL`]. Asked for with `--progress`, a last line stays at the end. The totals come from the command-line operands (stat'ed up front) and,
//! for trees, from one counting thread that walks them while the copy runs, so the total
//! grows until the walk ends. The same counters feed `--stats`.
//!
//! `line` says what a line shows; `stats` is the `--stats` summary; `counters` what every
//! view reads, `walk` the totals' count, `terminal` the bar; this file runs the view and
//! writes the log lines.

mod counters;
mod line;
mod staged;
mod stats;
mod terminal;
mod walk;

pub use staged::Staged;
pub use stats::{Files, StatsReport, Summary};
pub use terminal::suspend;
pub use walk::Walk;

use counters::Counters;
use terminal::{average, set_active, set_length, terminal_bar};

use line::Snapshot;
use stats::RouteCount;

use crate::cli::program;
use crate::cli::staging::View;
use aiscp_engine::{ProgressSink, Route};
use indicatif::ProgressBar;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the plain lines are written off a terminal: often enough to see a stall in a
/// log, rarely enough that a long run's log stays readable (dd's status=progress: 1 s, on
/// one rewritten line).
pub const LINE_INTERVAL: Duration = Duration::from_secs(2);
/// Tells the line writer to stop: the flag, and the condvar it sleeps on.
type Wake = (Mutex<bool>, Condvar);

/// The run's progress: the sink the engine reports to, the view, the summary's counters.
pub struct Progress {
    counters: Arc<Counters>,
    started: Instant,
    /// The last line stays (`--progress` asked for the view).
    keep: bool,
    bar: Option<ProgressBar>,
    lines: Option<(Arc<Wake>, JoinHandle<()>)>,
    walker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts the view for copying `sources`. Totals are counted only when a view shows them
    /// (the summary needs only what was done).
    pub fn start(view: View, sources: Vec<PathBuf>, walk: Walk) -> Progress {
        let counters = Arc::new(Counters::default());
        let mut progress = Progress {
            counters: Arc::clone(&counters),
            started: Instant::now(),
            keep: matches!(view, View::Terminal { keep: true } | View::Lines),
            bar: None,
            lines: None,
            walker: None,
        };
        if view == View::Off {
            return progress;
        }
        progress.walker = walk.count(&counters, sources);
        match view {
            View::Terminal { .. } => progress.bar = Some(terminal_bar(&counters, progress.started)),
            View::Lines => {
                let wake = Arc::new((Mutex::new(false), Condvar::new()));
                let w = Arc::clone(&wake);
                let c = Arc::clone(&counters);
                progress.lines = std::thread::Builder::new()
                    .name("aiscp-progress".into())
                    .spawn(move || write_lines(&c, &w))
                    .ok()
                    .map(|h| (wake, h));
            }
            View::Off => {}
        }
        progress
    }

    /// The sink to hand the copier.
    pub fn sink(&self) -> Box<dyn ProgressSink + Send + Sync> {
        Box::new(Sink {
            counters: Arc::clone(&self.counters),
            bar: self.bar.clone(),
        })
    }

    /// Stops the view (wiping the terminal line) and the threads, and returns what was done.
    /// `copied`: the bytes of the files copied ([`Files::bytes`]), which the last line shows
    /// as done: while the run goes on the view shows bytes as they move, a file whose copy
    /// or check then failed included.
    pub fn finish(mut self, copied: u64) -> Summary {
        self.counters.bytes_done.store(copied, Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_position(copied);
        }
        self.stop();
        let c = &self.counters;
        let routes = c.routes.lock().unwrap_or_else(|p| p.into_inner());
        let mut routes: Vec<RouteCount> = routes
            .iter()
            .map(|(&(read, write), &files)| RouteCount {
                read: read.name(),
                write: write.name(),
                files,
            })
            .collect();
        // By name, as --stats has always listed them.
        routes.sort_by_key(|r| (r.read, r.write));
        Summary {
            seconds: self.started.elapsed().as_secs_f64(),
            routes,
        }
    }

    fn stop(&mut self) {
        self.counters.stop.store(true, Relaxed);
        if let Some(handle) = self.walker.take() {
            let _ = handle.join();
        }
        // The last line shows the run as it ended.
        self.counters.ended.store(true, Relaxed);
        if let Some(bar) = self.bar.take() {
            set_active(None);
            match self.keep {
                true => {
                    set_length(&bar, &self.counters);
                    bar.finish();
                }
                false => bar.finish_and_clear(),
            }
        }
        if let Some((wake, handle)) = self.lines.take() {
            *wake.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            wake.1.notify_all();
            let _ = handle.join();
            let c = &self.counters;
            let rate = average(c, self.started);
            let _ = writeln!(
                std::io::stderr(),
                "{}: progress: {}",
                program(),
                Snapshot::take(c, Some(rate)).log_line()
            );
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The off-terminal view: a plain line on stderr every [`LINE_INTERVAL`] until told to stop.
/// The rate is the last interval's, so a log shows a slowdown when it happens.
fn write_lines(c: &Counters, wake: &Wake) {
    let (lock, cvar) = wake;
    let mut last = (Instant::now(), 0u64);
    let mut stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        let (guard, _) = cvar
            .wait_timeout_while(stopped, LINE_INTERVAL, |s| !*s)
            .unwrap_or_else(|p| p.into_inner());
        stopped = guard;
        if *stopped {
            return;
        }
        let now = Instant::now();
        let done = c.bytes_done.load(Relaxed);
        let secs = now.duration_since(last.0).as_secs_f64();
        let rate = Some((done - last.1) as f64 / secs.max(1e-9));
        last = (now, done);
        // Not eprintln!, which panics when stderr fails (a closed pipe raises SIGPIPE,
        // which stops the copy; other failures are let go, as for aiscp's own warnings).
        let _ = writeln!(
            std::io::stderr(),
            "{}: progress: {}",
            program(),
            Snapshot::take(c, rate).log_line()
        );
    }
}

/// What the engine reports to: counters, and the name on the view.
struct Sink {
    counters: Arc<Counters>,
    bar: Option<ProgressBar>,
}

impl ProgressSink for Sink {
    fn file_started(&self, name: &Path, _len: Option<u64>) {
        let mut current = self.counters.current();
        current.clear();
        let _ = write!(current, "{}", name.display());
    }

    fn advanced(&self, bytes: u64) {
        self.counters.bytes_done.fetch_add(bytes, Relaxed);
        if let Some(bar) = &self.bar {
            set_length(bar, &self.counters);
            bar.inc(bytes);
        }
    }

    fn file_finished(&self) {
        self.counters.files_done.fetch_add(1, Relaxed);
    }

    fn route(&self, read: Route, write: Route) {
        let mut routes = self
            .counters
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *routes.entry((read, write)).or_default() += 1;
    }
}
