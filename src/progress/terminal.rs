//! The terminal view: indicatif's bar, redrawn in place with the rate over the last
//! seconds, and wiped while a message is printed.

use super::counters::Counters;
use super::line::Snapshot;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The terminal view's redraw tick, so the rate and ETA move while a slice is in flight.
const TICK: Duration = Duration::from_millis(250);
/// A rate is shown only after this long: before it, one slice's burst is not a rate.
const RATE_AFTER: Duration = Duration::from_millis(1000);

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

/// Makes `bar` the one [`suspend`] wipes (None: no bar is drawn now).
pub(super) fn set_active(bar: Option<ProgressBar>) {
    *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = bar;
}

/// The terminal view: indicatif's bar between the texts [`Snapshot::around_bar`] lays out
/// for the terminal's width (the bar gets what they leave). One ticker thread for the run.
pub(super) fn terminal_bar(c: &Arc<Counters>, started: Instant) -> ProgressBar {
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
pub(super) fn set_length(bar: &ProgressBar, c: &Counters) {
    let (bytes, _) = c.totals();
    if !c.counting.load(Relaxed) && c.sizeless.load(Relaxed) == 0 && bytes > 0 {
        bar.set_length(bytes);
    }
}

/// The run's average rate so far, for the last line.
pub(super) fn average(c: &Counters, started: Instant) -> f64 {
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
