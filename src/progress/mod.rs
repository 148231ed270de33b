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
//! `line` says what a line shows; `stats` is the `--stats` summary; this file runs the view:
//! the counters, the counting thread, the terminal bar and the log-line writer.

mod line;
mod staged;
mod stats;

pub use line::human;
pub use staged::Staged;
pub use stats::{Files, StatsReport, Summary};

use line::Snapshot;
use stats::RouteCount;

use crate::cli::program;
use crate::cli::staging::View;
use crate::options::{Deref, Options};
use aiscp_engine::{ProgressSink, Route};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the plain lines are written off a terminal: often enough to see a stall in a
/// log, rarely enough that a long run's log stays readable (dd's status=progress: 1 s, on
/// one rewritten line).
pub const LINE_INTERVAL: Duration = Duration::from_secs(2);
/// The terminal view's redraw tick, so the rate and ETA move while a slice is in flight.
const TICK: Duration = Duration::from_millis(250);
/// A rate is shown only after this long: before it, one slice's burst is not a rate.
const RATE_AFTER: Duration = Duration::from_millis(1000);

/// The counters every view and the summary read.
#[derive(Default)]
struct Counters {
    bytes_done: AtomicU64,
    bytes_total: AtomicU64,
    files_done: AtomicU64,
    files_total: AtomicU64,
    /// Set while the counting thread still walks a tree: the totals are lower bounds.
    counting: AtomicBool,
    /// Files counted with no size (sequential sources): the byte total is unknown.
    sizeless: AtomicU64,
    /// The run is over: the view shows the run's average rate, no ETA and no name.
    ended: AtomicBool,
    /// Asks the counting thread and the line writer to stop.
    stop: AtomicBool,
    /// The file being copied, as given on the command line or found in a tree.
    current: Mutex<String>,
    /// Files per (read, write) route, as the engine reported them.
    routes: Mutex<BTreeMap<(Route, Route), u64>>,
}

impl Counters {
    fn current(&self) -> std::sync::MutexGuard<'_, String> {
        // A poisoned lock only means a panic elsewhere; a name is still a name.
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The totals shown: never below what is already done (a file the walk has not reached
    /// yet, or a sequential source, adds to done first).
    fn totals(&self) -> (u64, u64) {
        let bytes = self.bytes_total.load(Relaxed);
        let files = self.files_total.load(Relaxed);
        (
            bytes.max(self.bytes_done.load(Relaxed)),
            files.max(self.files_done.load(Relaxed)),
        )
    }
}

/// The terminal's width in columns as indicatif sees it (it pads the line to that width);
/// the last column is left empty, since writing into it makes some terminals wrap.
fn term_width() -> usize {
    usize::from(console::Term::stderr().size().1)
        .saturating_sub(1)
        .max(1)
}

/// The bar currently on the terminal, for messages printed while it is drawn.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Runs `f` (which prints) with the terminal view wiped, so a message never lands on top
/// of it; the view is redrawn after.
/// Calls nest (a prompt prints its question from inside one): only the outermost wipes.
pub fn suspend<R>(f: impl FnOnce() -> R) -> R {
    thread_local! {
        static WIPED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    let bar = ACTIVE.lock().unwrap_or_else(|p| p.into_inner()).clone();
    match bar {
        Some(bar) if !WIPED.get() => bar.suspend(|| {
            WIPED.set(true);
            let out = f();
            WIPED.set(false);
            out
        }),
        _ => f(),
    }
}

/// What the counting thread needs of cp's options: which trees it walks and which links it
/// follows, as the copy will.
#[derive(Clone, Copy)]
pub struct Walk {
    pub recursive: bool,
    /// Special files in trees are read in order (--copy-contents), not recreated.
    pub copy_contents: bool,
    pub deref: Deref,
    pub one_file_system: bool,
}

impl From<&Options> for Walk {
    fn from(o: &Options) -> Walk {
        Walk {
            recursive: o.recursive,
            copy_contents: o.copy_contents,
            deref: o.deref,
            one_file_system: o.one_file_system,
        }
    }
}

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
        // Operands first, on this thread: a copy of files has its whole total up front.
        let mut trees = Vec::new();
        for src in sources {
            let follow = walk.deref != Deref::Never || !walk.recursive;
            let meta = if follow {
                fs::metadata(&src)
            } else {
                fs::symlink_metadata(&src)
            };
            match meta {
                Ok(m) if m.is_dir() => {
                    if walk.recursive {
                        trees.push((src, m.dev()));
                    }
                }
                Ok(m) => count_file(&counters, &m, walk),
                Err(_) => {}
            }
        }
        if !trees.is_empty() {
            counters.counting.store(true, Relaxed);
            let c = Arc::clone(&counters);
            progress.walker = std::thread::Builder::new()
                .name("aiscp-count".into())
                .spawn(move || {
                    for (tree, dev) in trees {
                        count_tree(&c, &tree, dev, walk);
                    }
                    c.counting.store(false, Relaxed);
                })
                .ok();
        }
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
            *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = None;
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

/// Adds one non-directory to the totals: a regular file's size; a special file only when
/// it will be read in order until EOF, with no size to add.
fn count_file(c: &Counters, m: &fs::Metadata, walk: Walk) {
    if m.is_file() {
        c.files_total.fetch_add(1, Relaxed);
        c.bytes_total.fetch_add(m.len(), Relaxed);
    } else if (!walk.recursive || walk.copy_contents) && !m.file_type().is_symlink() {
        c.files_total.fetch_add(1, Relaxed);
        c.sizeless.fetch_add(1, Relaxed);
    }
}

/// Walks one tree on the counting thread, following links as the copy will (-L only).
fn count_tree(c: &Counters, dir: &Path, dev: u64, walk: Walk) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if c.stop.load(Relaxed) {
                return;
            }
            let path = entry.path();
            let meta = if walk.deref == Deref::Always {
                fs::metadata(&path)
            } else {
                entry.metadata()
            };
            let Ok(m) = meta else { continue };
            if m.is_dir() {
                if !walk.one_file_system || m.dev() == dev {
                    pending.push(path);
                }
            } else {
                count_file(c, &m, walk);
            }
        }
    }
}

/// The terminal view: indicatif's bar between the texts [`Snapshot::around_bar`] lays out
/// for the terminal's width (the bar gets what they leave). One ticker thread for the run.
fn terminal_bar(c: &Arc<Counters>, started: Instant) -> ProgressBar {
    let window = Arc::new(Mutex::new(RateWindow::default()));
    // Both sides come from one snapshot per draw: `pre` takes it, `post` uses it.
    let drawn: Arc<Mutex<(String, String)>> = Arc::default();
    let (counters, d) = (Arc::clone(c), Arc::clone(&drawn));
    let style = ProgressStyle::with_template("{pre}{wide_bar}{post}")
        .expect("static template")
        .progress_chars("=> ")
        .with_key(
            "pre",
            move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let done = counters.bytes_done.load(Relaxed);
                let rate = match counters.ended.load(Relaxed) {
                    true => Some(average(&counters, started)),
                    false => window
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .rate(Instant::now(), done)
                        .filter(|_| s.elapsed() >= RATE_AFTER && done > 0),
                };
                let texts = Snapshot::take(&counters, rate).around_bar(term_width());
                let _ = w.write_str(&texts.0);
                *d.lock().unwrap_or_else(|p| p.into_inner()) = texts;
            },
        )
        .with_key(
            "post",
            move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&drawn.lock().unwrap_or_else(|p| p.into_inner()).1);
                // The terminal's last column stays empty: writing into it makes some wrap.
                let _ = w.write_char(' ');
            },
        );
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style);
    set_length(&bar, c);
    bar.enable_steady_tick(TICK);
    *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
    bar
}

/// Gives the bar the run's byte total once it is known (the bar's fill is done / total).
fn set_length(bar: &ProgressBar, c: &Counters) {
    let (bytes, _) = c.totals();
    if !c.counting.load(Relaxed) && c.sizeless.load(Relaxed) == 0 && bytes > 0 {
        bar.set_length(bytes);
    }
}

/// The run's average rate so far, for the last line.
fn average(c: &Counters, started: Instant) -> f64 {
    c.bytes_done.load(Relaxed) as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

/// The rate over the last [`RATE_WINDOW`], from the samples the redraws take. indicatif's
/// own estimate weighs the whole run and started from zero: on the H200 it showed 400-720
/// MiB/s through a copy that averaged 1.08 GiB/s.
#[derive(Default)]
struct RateWindow {
    samples: std::collections::VecDeque<(Instant, u64)>,
}

/// How far back the shown rate looks: long enough to smooth one slice's burst, short
/// enough to show a slowdown within seconds.
const RATE_WINDOW: Duration = Duration::from_secs(3);

impl RateWindow {
    /// Records `done` at `now`; the bytes per second since the oldest sample kept.
    fn rate(&mut self, now: Instant, done: u64) -> Option<f64> {
        self.samples.push_back((now, done));
        // Keep one sample at least RATE_WINDOW old, so the span is the whole window.
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= RATE_WINDOW {
            self.samples.pop_front();
        }
        let &(then, before) = self.samples.front()?;
        let secs = now.duration_since(then).as_secs_f64();
        (secs > 0.0).then(|| done.saturating_sub(before) as f64 / secs)
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

impl Snapshot {
    fn take(c: &Counters, rate: Option<f64>) -> Snapshot {
        let (bytes_total, files_total) = c.totals();
        let ended = c.ended.load(Relaxed);
        Snapshot {
            bytes_done: c.bytes_done.load(Relaxed),
            bytes_total,
            files_done: c.files_done.load(Relaxed),
            files_total,
            counting: c.counting.load(Relaxed),
            sizeless: c.sizeless.load(Relaxed) > 0,
            rate,
            ended,
            // The last line is about the run, not one file.
            name: match ended {
                true => String::new(),
                false => c.current().clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_window_follows_the_last_seconds() {
        let t0 = Instant::now();
        let mut w = RateWindow::default();
        assert_eq!(w.rate(t0, 0), None, "one sample is no rate");
        // 100 MB/s for 10 s, then 10 MB/s: after 3 s more the window shows only the latter.
        let mut done = 0;
        for i in 1..=100 {
            done += 10_000_000;
            w.rate(t0 + Duration::from_millis(100 * i), done);
        }
        let r = w.rate(t0 + Duration::from_millis(10_050), done).unwrap();
        assert!((90e6..110e6).contains(&r), "{r}");
        for i in 1..=40 {
            done += 1_000_000;
            w.rate(t0 + Duration::from_millis(10_050 + 100 * i), done);
        }
        let r = w.rate(t0 + Duration::from_millis(14_100), done).unwrap();
        assert!((9e6..11e6).contains(&r), "{r}");
    }
}
