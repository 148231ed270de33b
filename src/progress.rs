//! The progress bar on stderr, fed by the engine's per-chunk events (it never reaches into
//! the engine). One bar per file, drawn only while that file's data moves and cleared when
//! it ends, well or badly, so error messages never land on top of a bar. Hidden entirely when
//! disabled, so callers need not branch.

use aiscp_engine::ProgressSink;
use humansize::{format_size, BINARY};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

/// One bar per file: name, bytes done / total, rate, ETA.
pub struct Bar {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
}

fn human(n: u64) -> String {
    format_size(n, BINARY)
}

impl Bar {
    pub fn new(enabled: bool) -> Bar {
        Bar {
            enabled,
            bar: Mutex::new(None),
        }
    }

    fn current(&self) -> std::sync::MutexGuard<'_, Option<ProgressBar>> {
        // A poisoned lock only means a panic elsewhere; the bar itself is still usable.
        self.bar.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn style(known_len: bool) -> ProgressStyle {
        let template = if known_len {
            "{msg:.bold} [{bar:30}] {done}/{all} {rate} ETA {eta}"
        } else {
            "{msg:.bold} {spinner} {done} {rate}"
        };
        ProgressStyle::with_template(template)
            .expect("static template")
            .progress_chars("=> ")
            .with_key("done", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", human(s.pos()));
            })
            .with_key("all", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}", human(s.len().unwrap_or(0)));
            })
            .with_key("rate", |s: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{}/s", human(s.per_sec() as u64));
            })
    }

    /// Removes the bar from the terminal.
    pub fn clear(&self) {
        if let Some(bar) = self.current().take() {
            bar.finish_and_clear();
        }
    }
}

impl ProgressSink for Bar {
    fn file_started(&self, name: &Path, len: Option<u64>) {
        if !self.enabled {
            return;
        }
        let bar = ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr())
            .with_style(Bar::style(len.is_some()))
            .with_message(name.display().to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        if let Some(old) = self.current().replace(bar) {
            old.finish_and_clear();
        }
    }

    fn advanced(&self, bytes: u64) {
        if let Some(bar) = self.current().as_ref() {
            bar.inc(bytes);
        }
    }

    fn file_finished(&self) {
        self.clear();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.clear();
    }
}
