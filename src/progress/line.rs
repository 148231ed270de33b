//! What a progress line says: a snapshot of the run's counters, laid out for a terminal of
//! a given width (dropping ETA, then rate, then shortening the name) or written in full for
//! a log.

use humansize::{format_size, FormatSizeOptions, BINARY};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// Humansize's binary units (KiB, MiB, GiB), the one convention of every size aiscp prints:
/// always two decimals past bytes ("2.00 GiB", not "2 GiB"), so a figure that lands on a
/// whole unit does not read as rounded next to "2.70 GiB".
pub fn human(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    format_size(n, FormatSizeOptions::from(BINARY).decimal_zeroes(2))
}

/// A snapshot of the run, formatted for the views.
pub(super) struct Snapshot {
    pub(super) bytes_done: u64,
    pub(super) bytes_total: u64,
    pub(super) files_done: u64,
    pub(super) files_total: u64,
    pub(super) counting: bool,
    /// Bytes per second, once measured.
    pub(super) rate: Option<f64>,
    pub(super) name: String,
}

impl Snapshot {
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
    pub(super) fn line(&self, width: usize) -> String {
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
    pub(super) fn log_line(&self) -> String {
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

/// "3.04/8.00 GiB", or "512.00 MiB/8.00 GiB" when the units differ.
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
            line.starts_with("3.00/8.00 GiB  12/200 files  953.67 MiB/s  ETA 0:06  …"),
            "{line}"
        );
        assert!(line.ends_with("-00008.safetensors"), "{line}");
        // Narrower, the ETA goes first, then the rate, so the name keeps some room.
        let line = snap(name, false, Some(1e9)).line(59);
        assert!(
            line.starts_with("3.00/8.00 GiB  12/200 files  953.67 MiB/s  …"),
            "{line}"
        );
        let line = snap(name, false, Some(1e9)).line(50);
        assert!(line.starts_with("3.00/8.00 GiB  12/200 files  …"), "{line}");
    }

    #[test]
    fn no_rate_or_eta_before_they_are_known() {
        let s = snap("a", true, None);
        assert_eq!(s.parts(), ["3.00/8.00 GiB+", "12/200+ files"]);
        assert_eq!(fraction(512 << 20, 8 << 30), "512.00 MiB/8.00 GiB");
        let s = snap("a", true, Some(1024.0));
        assert_eq!(s.eta(), None, "no ETA while the total still grows");
        assert_eq!(snap("a", false, Some(0.0)).eta(), None);
    }

    #[test]
    fn sizes_keep_two_decimals() {
        assert_eq!(fraction(2 << 30, 2900 << 20), "2.00/2.83 GiB");
        assert_eq!(human(2 << 30), "2.00 GiB");
        assert_eq!(human(1536), "1.50 KiB");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(0), "0 B");
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
