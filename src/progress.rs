//! The progress bar on stderr, fed by the engine's per-chunk events (it never reaches into
//! the engine). Hidden entirely when disabled, so callers need not branch.

use aiscp::engine::ProgressSink;
use humansize::{format_size, BINARY};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};
use std::path::Path;
use std::time::Duration;

/// One bar per file: name, bytes done / total, rate, ETA.
pub struct Bar {
    bar: ProgressBar,
}

fn human(n: u64) -> String {
    format_size(n, BINARY)
}

impl Bar {
    pub fn new(enabled: bool) -> Bar {
        let bar = if enabled {
            ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        Bar { bar }
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

    /// Removes the bar from the terminal (before an error message is printed).
    pub fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

impl ProgressSink for Bar {
    fn file_started(&self, name: &Path, len: Option<u64>) {
        self.bar.set_style(Bar::style(len.is_some()));
        match len {
            Some(len) => self.bar.set_length(len),
            None => self.bar.unset_length(),
        }
        self.bar.set_position(0);
        self.bar.reset_eta();
        self.bar.set_message(name.display().to_string());
        self.bar.enable_steady_tick(Duration::from_millis(200));
    }

    fn advanced(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    fn file_finished(&self) {
        self.bar.disable_steady_tick();
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}
