//! What a progress line says: a snapshot of the run's counters, laid out around indicatif's
//! bar for a terminal of a given width (the name shortened, then dropped first; the rate and
//! ETA last) or written in full for a log.

use aiscp_engine::units;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// A snapshot of the run, formatted for the views.
pub(super) struct Snapshot {
    pub(super) bytes_done: u64,
    pub(super) bytes_total: u64,
    pub(super) files_done: u64,
    pub(super) files_total: u64,
    pub(super) counting: bool,
    /// Files of unknown size (sequential sources) are in the run: there is no byte total to show.
    pub(super) sizeless: bool,
    /// Bytes per second, once measured.
    pub(super) rate: Option<f64>,
    /// The run is over: no ETA, whatever is left undone (failed files' bytes).
    pub(super) ended: bool,
    pub(super) name: String,
}

impl Snapshot {
    /// Whether the byte total is final: the walk has ended and every file has a size.
    fn total_known(&self) -> bool {
        !self.counting && !self.sizeless && self.bytes_total > 0
    }

    /// Percent of the bytes done, once the total is known.
    pub(super) fn percent(&self) -> Option<u64> {
        self.total_known()
            .then(|| (self.bytes_done as u128 * 100 / self.bytes_total as u128) as u64)
    }

    /// Seconds left at the current rate, once the total is final and a rate is known.
    fn eta(&self) -> Option<u64> {
        let rate = self.rate.filter(|r| *r > 0.0)?;
        if self.ended || !self.total_known() || self.bytes_done >= self.bytes_total {
            return None;
        }
        Some(((self.bytes_total - self.bytes_done) as f64 / rate).ceil() as u64)
    }

    /// The parts before the name, most important first; the terminal view drops from the
    /// end when they do not fit.
    fn parts(&self) -> Vec<String> {
        let more = if self.counting { "+" } else { "" };
        let bytes = match self.sizeless {
            // A sequential source has no size: only what is done means anything.
            true => units::size(self.bytes_done),
            false => format!("{}{more}", fraction(self.bytes_done, self.bytes_total)),
        };
        let mut parts = vec![
            bytes,
            format!("{}/{}{more} files", self.files_done, self.files_total),
        ];
        if let Some(rate) = self.rate {
            parts.push(units::rate(rate));
        }
        if let Some(eta) = self.eta() {
            parts.push(format!("ETA {}", clock(eta)));
        }
        parts
    }

    /// The text before and after indicatif's bar on a terminal of `width` columns, and
    /// whether the bar is drawn (only once the total is known). As the terminal narrows the
    /// name is shortened and then dropped, then the files, then the bar; the rate and the
    /// ETA go last. Without a bar the text is padded to the width, so the bar gets none.
    pub(super) fn around_bar(&self, width: usize) -> (String, String) {
        let percent = self.percent();
        let parts = self.parts();
        let (bytes, files) = (&parts[0], &parts[1]);
        let speed: Vec<&String> = parts[2..].iter().collect();
        let mut show = (true, percent.is_some(), speed.len());
        let pre = |bar: bool| match (percent, bar) {
            (Some(p), true) => format!("{p:>3}% ["),
            (Some(p), false) => format!("{p:>3}%  "),
            (None, _) => String::new(),
        };
        let post = |(files_shown, bar, speeds): (bool, bool, usize)| {
            let mut text = if bar { "] ".to_owned() } else { String::new() };
            text.push_str(bytes);
            if files_shown {
                text.push_str("  ");
                text.push_str(files);
            }
            for s in &speed[..speeds] {
                text.push_str("  ");
                text.push_str(s);
            }
            text
        };
        let need = |s: (bool, bool, usize)| {
            // Without a bar the last column stays free (see below).
            pre(s.1).width() + post(s).width() + if s.1 { MIN_BAR } else { 1 }
        };
        while need(show) > width {
            show = match show {
                (true, bar, n) => (false, bar, n),
                (false, true, n) => (false, false, n),
                (false, false, n) if n > 0 => (false, false, n - 1),
                _ => break,
            };
        }
        let (pre, mut post) = (pre(show.1), post(show));
        let room = width.saturating_sub(need(show) + 2);
        let min_name = MIN_NAME.min(self.name.width());
        if !self.name.is_empty() && room >= min_name && show.0 {
            // The name takes what it needs of the room, up to half of it; the bar the rest.
            let share = if show.1 {
                (room / 2).max(min_name)
            } else {
                room
            };
            post.push_str("  ");
            post.push_str(&shorten_left(&self.name, share));
        }
        if !show.1 {
            // The text ends before the last column (a full line wraps on some terminals);
            // spaces pad it to the width, so the bar gets none.
            post = truncate_end(&post, width.saturating_sub(pre.width() + 1));
            let used = pre.width() + post.width();
            post.push_str(&" ".repeat(width.saturating_sub(used)));
        }
        (pre, post)
    }

    /// The plain line for logs: everything, the name in full.
    pub(super) fn log_line(&self) -> String {
        let mut line = self.parts().join(", ");
        if let Some(pct) = self.percent() {
            line.push_str(&format!(" ({pct}%)"));
        }
        if !self.name.is_empty() {
            line.push_str(&format!(", {}", self.name));
        }
        line
    }
}

/// The fewest columns worth giving the file name on the terminal.
const MIN_NAME: usize = 10;
/// The fewest columns worth drawing the bar in.
const MIN_BAR: usize = 10;

/// "3.04/8.00 GiB", or "512.00 MiB/8.00 GiB" when the units differ.
fn fraction(done: u64, total: u64) -> String {
    let (d, t) = (units::size(done), units::size(total));
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
            sizeless: false,
            rate,
            ended: false,
            name: name.into(),
        }
    }

    #[test]
    fn the_bar_narrows_name_first_rate_and_eta_last() {
        let name = "very/long/directory/name/that/goes/on/and/on/model-00001-of-00008.safetensors";
        let s = snap(name, false, Some(1e9));
        let (pre, post) = s.around_bar(99);
        assert_eq!(pre, " 37% [");
        assert!(
            post.starts_with("] 3.00/8.00 GiB  12/200 files  953.67 MiB/s  ETA 0:06  …"),
            "{post}"
        );
        assert!(post.ends_with("8.safetensors"), "{post}");
        assert!(pre.width() + post.width() + MIN_BAR <= 99);
        // Narrower: no name, then no files, then no bar; the rate and ETA stay.
        let (pre, post) = s.around_bar(72);
        assert_eq!(
            (pre.as_str(), post.as_str()),
            (
                " 37% [",
                "] 3.00/8.00 GiB  12/200 files  953.67 MiB/s  ETA 0:06"
            )
        );
        let (pre, post) = s.around_bar(56);
        assert_eq!(pre, " 37% [");
        assert_eq!(post, "] 3.00/8.00 GiB  953.67 MiB/s  ETA 0:06");
        let (pre, post) = s.around_bar(44);
        assert_eq!(pre, " 37%  ");
        assert_eq!(post.trim_end(), "3.00/8.00 GiB  953.67 MiB/s  ETA 0:06");
        assert_eq!(
            pre.width() + post.width(),
            44,
            "padded so the bar gets nothing, the last column free"
        );
        // A sequential source: no total, so no bar, percentage or ETA.
        let mut fifo = snap("fifo", false, Some(1e6));
        fifo.sizeless = true;
        let (pre, post) = fifo.around_bar(99);
        assert_eq!(pre, "");
        assert!(
            post.starts_with("3.00 GiB  12/200 files  976.56 KiB/s  fifo"),
            "{post}"
        );
    }

    #[test]
    fn a_line_without_a_bar_leaves_the_last_column_free() {
        let name =
            "…/.tmp5Kcm1R/src/a-file-name-long-enough-to-be-dropped-on-a-narrow-terminal.bin";
        for counting in [true, false] {
            let mut s = snap(name, counting, None);
            s.sizeless = true;
            for width in [40, 72, 100] {
                let (pre, post) = s.around_bar(width);
                let text = format!("{pre}{post}");
                assert!(text.trim_end().width() < width, "{width}: {text:?}");
                assert_eq!(text.width(), width, "padded: {text:?}");
            }
        }
    }

    #[test]
    fn no_rate_or_eta_before_they_are_known() {
        let s = snap("a", true, None);
        assert_eq!(s.parts(), ["3.00/8.00 GiB+", "12/200+ files"]);
        assert_eq!(
            s.percent(),
            None,
            "no percentage while the total still grows"
        );
        assert_eq!(fraction(512 << 20, 8 << 30), "512.00 MiB/8.00 GiB");
        let s = snap("a", true, Some(1024.0));
        assert_eq!(s.eta(), None, "no ETA while the total still grows");
        assert_eq!(snap("a", false, Some(0.0)).eta(), None);
    }

    #[test]
    fn sizes_keep_two_decimals() {
        assert_eq!(fraction(2 << 30, 2900 << 20), "2.00/2.83 GiB");
        assert_eq!(units::size(2 << 30), "2.00 GiB");
        assert_eq!(units::size(1536), "1.50 KiB");
        assert_eq!(units::size(1023), "1023 B");
        assert_eq!(units::size(0), "0 B");
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
