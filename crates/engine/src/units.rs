//! Sizes and rates as every output of aiscp prints them (the progress view, --stats,
//! --debug, --doctor), one rule for all: binary units (KiB, MiB, GiB), bytes below 1 KiB
//! ("512 B"), and past them always two decimals ("2.00 GiB", not "2 GiB"), so a figure
//! that lands on a whole unit does not read as rounded next to "2.70 GiB". Where the exact
//! count matters (a file's length) [`length`] adds it.

use humansize::{format_size, FormatSizeOptions, BINARY};

/// `n` bytes in binary units: "3 B", "4.00 KiB", "1.50 GiB".
pub fn size(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    format_size(n, FormatSizeOptions::from(BINARY).decimal_zeroes(2))
}

/// A file's length: binary units and the exact count ("68.36 KiB (70000 bytes)"), since a
/// --debug reader checks lengths to the byte.
pub fn length(n: u64) -> String {
    match n {
        1 => "1 byte".to_owned(),
        0..1024 => format!("{n} bytes"),
        _ => format!("{} ({n} bytes)", size(n)),
    }
}

/// A rate in binary units per second: "953.67 MiB/s".
pub fn rate(bytes_per_second: f64) -> String {
    format!("{}/s", size(bytes_per_second.max(0.0) as u64))
}

#[cfg(test)]
mod tests {
    #[test]
    fn binary_units() {
        assert_eq!(super::size(3), "3 B");
        assert_eq!(super::size(64 << 20), "64.00 MiB");
        assert_eq!(super::size(1023), "1023 B");
        assert_eq!(super::size(1536), "1.50 KiB");
        assert_eq!(super::size(4097), "4.00 KiB");
        assert_eq!(super::length(5), "5 bytes");
        assert_eq!(super::length(1), "1 byte");
        assert_eq!(super::length(70000), "68.36 KiB (70000 bytes)");
        assert_eq!(super::length(1 << 30), "1.00 GiB (1073741824 bytes)");
        assert_eq!(super::rate(1e9), "953.67 MiB/s");
    }
}
