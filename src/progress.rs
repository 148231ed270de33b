//! The run's progress and its summary, fed by the engine's events (it never reaches into the
//! engine).
//!
//! One view for the whole run: bytes done of the run's total, files done of the total, the
//! rate once measured, the overall ETA once the total is known, and the file being copied,
//! shortened to the terminal's width. On a terminal it is one indicatif line redrawn in
//! place; off a terminal (`--progress` with stderr in a log) it is a plain line every
//! [`LINE_INTERVAL`]. The totals come from the command-line operands (stat'ed up front) and,
//! for trees, from one counting thread that walks them while the copy runs, so the total
//! grows until the walk ends. The same counters feed `--stats`.

use crate::cli::program;
use crate::cli::staging::View;
use crate::options::{Deref, Options};
use aiscp_engine::{EngineInfo, ProgressSink, StageTimes};
use humansize::{format_size, BINARY};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use serde::Serialize;
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
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// How often the plain lines are written off a terminal: often enough to see a stall in a
/// log, rarely enough that a long run's log stays readable (dd's status=progress: 1 s, on
/// one rewritten line).
pub const LINE_INTERVAL: Duration = Duration::from_secs(2);
/// The terminal view's redraw tick, so the rate and ETA move while a slice is in flight.
const TICK: Duration = Duration::from_millis(250);
/// A rate is shown only after this long: before it, one slice's burst is not a rate.
const RATE_AFTER: Duration = Duration::from_millis(1000);

/// Humansize's binary units (KiB, MiB, GiB), the one convention of every size aiscp prints.
pub fn human(n: u64) -> String {
    format_size(n, BINARY)
}

/// The counters every view and the summary read.
#[derive(Default)]
struct Counters {
    bytes_done: AtomicU64,
    bytes_total: AtomicU64,
    files_done: AtomicU64,
    files_total: AtomicU64,
    /// Set while the counting thread still walks a tree: the totals are lower bounds.
    counting: AtomicBool,
    /// Asks the counting thread and the line writer to stop.
    stop: AtomicBool,
    /// The file being copied, as given on the command line or found in a tree.
    current: Mutex<String>,
    /// Files per (read, write) route, as the engine reported them.
    routes: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl Counters {
    fn current(&self) -> std::sync::MutexGuard<'_, String> {
        // A poisoned lock only means a panic elsewhere; a name is still a name.
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The totals shown: never below what is already done (a file the walk has not reached
    /// yet, or a stream, adds to done first).
    fn totals(&self) -> (u64, u64) {
        let bytes = self.bytes_total.load(Relaxed);
        let files = self.files_total.load(Relaxed);
        (
            bytes.max(self.bytes_done.load(Relaxed)),
            files.max(self.files_done.load(Relaxed)),
        )
    }
}

/// A snapshot of the run, formatted for the views.
struct Snapshot {
    bytes_done: u64,
    bytes_total: u64,
    files_done: u64,
    files_total: u64,
    counting: bool,
    /// Bytes per second, once measured.
    rate: Option<f64>,
    name: String,
}

impl Snapshot {
    fn take(c: &Counters, rate: Option<f64>) -> Snapshot {
        let (bytes_total, files_total) = c.totals();
        Snapshot {
            bytes_done: c.bytes_done.load(Relaxed),
            bytes_total,
            files_done: c.files_done.load(Relaxed),
            files_total,
            counting: c.counting.load(Relaxed),
            rate,
            name: c.current().clone(),
        }
    }

    /// Seconds left at the current rate, once the total is final and a rate is known.
    fn eta(&self) -> Option<u64> {
        let rate = self.rate.filter(|r| *r > 0.0)?;
        if self.counting {
            return None;
        }
        Some(((self.bytes_total - self.bytes_done) as f64 / rate).ceil() as u64)
    }

    /// The parts before the name, most important first; the terminal view drops from the
    /// end when they do not fit.
    fn parts(&self) -> Vec<String> {
        let more = if self.counting { "+" } else { "" };
        let mut parts = vec![
            format!("{}{more}", fraction(self.bytes_done, self.bytes_total)),
            format!("{}/{}{more} files", self.files_done, self.files_total),
        ];
        if let Some(rate) = self.rate {
            parts.push(format!("{}/s", human(rate as u64)));
        }
        if let Some(eta) = self.eta() {
            parts.push(format!("ETA {}", clock(eta)));
        }
        parts
    }

    /// One line of at most `width` columns: the parts, dropping ETA then rate until the
    /// name gets [`MIN_NAME`] columns, then the name shortened from the left (its end is
    /// the telling part).
    fn line(&self, width: usize) -> String {
        let mut parts = self.parts();
        let min_name = MIN_NAME.min(self.name.width());
        let mut head = parts.join("  ");
        while parts.len() > 2 && head.width() + 2 + min_name > width {
            parts.pop();
            head = parts.join("  ");
        }
        let room = width.saturating_sub(head.width() + 2);
        if self.name.is_empty() || room < min_name {
            return truncate_end(&head, width);
        }
        format!("{head}  {}", shorten_left(&self.name, room))
    }

    /// The plain line for logs: everything, the name in full.
    fn log_line(&self) -> String {
        let mut line = self.parts().join(", ");
        if self.bytes_total > 0 && !self.counting {
            let pct = self.bytes_done as f64 * 100.0 / self.bytes_total as f64;
            line.push_str(&format!(" ({pct:.0}%)"));
        }
        if !self.name.is_empty() {
            line.push_str(&format!(", {}", self.name));
        }
        line
    }
}

/// The fewest columns worth giving the file name on the terminal.
const MIN_NAME: usize = 10;

/// "3.04/8.00 GiB", or "512 MiB/8 GiB" when the units differ.
fn fraction(done: u64, total: u64) -> String {
    let (d, t) = (human(done), human(total));
    match (d.split_once(' '), t.split_once(' ')) {
        (Some((dn, du)), Some((tn, tu))) if du == tu => format!("{dn}/{tn} {tu}"),
        _ => format!("{d}/{t}"),
    }
}

/// Seconds as M:SS or H:MM:SS.
fn clock(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// `text` cut to `width` columns from the left, led by "…" when cut.
fn shorten_left(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_owned();
    }
    let mut kept = Vec::new();
    let mut used = 1; // the ellipsis
    for c in text.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        used += w;
        kept.push(c);
    }
    std::iter::once('…').chain(kept.into_iter().rev()).collect()
}

/// `text` cut to `width` columns at the end.
fn truncate_end(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            break;
        }
        used += w;
        out.push(c);
    }
    out
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
    /// Special files in trees are read as streams (--copy-contents), not recreated.
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
            View::Terminal => progress.bar = Some(terminal_bar(&counters)),
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
    pub fn finish(mut self) -> Summary {
        self.stop();
        let c = &self.counters;
        let routes = c.routes.lock().unwrap_or_else(|p| p.into_inner());
        Summary {
            files: c.files_done.load(Relaxed),
            bytes: c.bytes_done.load(Relaxed),
            seconds: self.started.elapsed().as_secs_f64(),
            routes: routes
                .iter()
                .map(|(&(read, write), &files)| RouteCount { read, write, files })
                .collect(),
        }
    }

    fn stop(&mut self) {
        self.counters.stop.store(true, Relaxed);
        if let Some(bar) = self.bar.take() {
            *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = None;
            bar.finish_and_clear();
        }
        if let Some((wake, handle)) = self.lines.take() {
            *wake.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
            wake.1.notify_all();
            let _ = handle.join();
        }
        if let Some(handle) = self.walker.take() {
            let _ = handle.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Adds one non-directory to the totals: a regular file's size; a special file only when
/// it will be read as a stream, with no size to add.
fn count_file(c: &Counters, m: &fs::Metadata, walk: Walk) {
    if m.is_file() {
        c.files_total.fetch_add(1, Relaxed);
        c.bytes_total.fetch_add(m.len(), Relaxed);
    } else if (!walk.recursive || walk.copy_contents) && !m.file_type().is_symlink() {
        c.files_total.fetch_add(1, Relaxed);
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

/// The terminal view: one indicatif line whose text is drawn by [`Snapshot::line`], so the
/// name can be shortened to the width left over. One ticker thread for the run.
fn terminal_bar(c: &Arc<Counters>) -> ProgressBar {
    let counters = Arc::clone(c);
    let window = Arc::new(Mutex::new(RateWindow::default()));
    let style = ProgressStyle::with_template("{view}")
        .expect("static template")
        .with_key(
            "view",
            move |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let done = counters.bytes_done.load(Relaxed);
                let rate = window
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .rate(Instant::now(), done)
                    .filter(|_| s.elapsed() >= RATE_AFTER && done > 0);
                let _ = w.write_str(&Snapshot::take(&counters, rate).line(term_width()));
            },
        );
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()).with_style(style);
    bar.enable_steady_tick(TICK);
    *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
    bar
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
            bar.inc(bytes);
        }
    }

    fn file_finished(&self) {
        self.counters.files_done.fetch_add(1, Relaxed);
    }

    fn route(&self, read: &'static str, write: &'static str) {
        let mut routes = self
            .counters
            .routes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *routes.entry((read, write)).or_default() += 1;
    }
}

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
    pub fn new(
        summary: Summary,
        engine: Option<(EngineInfo, StageTimes)>,
        failed: bool,
    ) -> StatsReport {
        let (backend, library, gpus, stages) = match engine {
            Some((e, t)) => (Some(e.backend), e.library, e.gpus, Some(t.into())),
            None => (None, None, Vec::new(), None),
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
        if self.failed {
            line.push_str("; some operands failed");
        }
        line
    }

    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(name: &str, counting: bool, rate: Option<f64>) -> Snapshot {
        Snapshot {
            bytes_done: 3 << 30,
            bytes_total: 8 << 30,
            files_done: 12,
            files_total: 200,
            counting,
            rate,
            name: name.into(),
        }
    }

    #[test]
    fn line_fits_the_width_and_keeps_the_name_end() {
        let name = "very/long/directory/name/that/goes/on/and/on/model-00001-of-00008.safetensors";
        for width in [20, 40, 59, 79, 200] {
            let line = snap(name, false, Some(1e9)).line(width);
            assert!(line.width() <= width, "{width}: {line:?}");
        }
        let line = snap(name, false, Some(1e9)).line(79);
        assert!(
            line.starts_with("3/8 GiB  12/200 files  953.67 MiB/s  ETA 0:06  …"),
            "{line}"
        );
        assert!(line.ends_with("-00008.safetensors"), "{line}");
        // Narrower, the ETA goes first, then the rate, so the name keeps some room.
        let line = snap(name, false, Some(1e9)).line(50);
        assert!(
            line.starts_with("3/8 GiB  12/200 files  953.67 MiB/s  …"),
            "{line}"
        );
        let line = snap(name, false, Some(1e9)).line(40);
        assert!(line.starts_with("3/8 GiB  12/200 files  …"), "{line}");
    }

    #[test]
    fn no_rate_or_eta_before_they_are_known() {
        let s = snap("a", true, None);
        assert_eq!(s.parts(), ["3/8 GiB+", "12/200+ files"]);
        assert_eq!(fraction(512 << 20, 8 << 30), "512 MiB/8 GiB");
        let s = snap("a", true, Some(1024.0));
        assert_eq!(s.eta(), None, "no ETA while the total still grows");
        assert_eq!(snap("a", false, Some(0.0)).eta(), None);
    }

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

    #[test]
    fn clocks_and_shortening() {
        assert_eq!(clock(7), "0:07");
        assert_eq!(clock(3725), "1:02:05");
        assert_eq!(shorten_left("abcdef", 4), "…def");
        assert_eq!(shorten_left("日本語ファイル", 5), "…イル");
        assert_eq!(truncate_end("abcdef", 3), "abc");
    }
}
