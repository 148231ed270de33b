//! Sizes and rates as every output of aiscp prints them (progress, --stats, --debug): binary
//! units (KiB, MiB, GiB), so a size reads the same wherever it appears.

use humansize::{format_size, BINARY};

/// `n` bytes in binary units: "3 B", "4 KiB", "1.50 GiB".
pub fn size(n: u64) -> String {
    format_size(n, BINARY)
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
        assert_eq!(super::size(64 << 20), "64 MiB");
        assert_eq!(super::size(4097), "4.00 KiB");
        assert_eq!(super::length(5), "5 bytes");
        assert_eq!(super::length(1), "1 byte");
        assert_eq!(super::length(70000), "68.36 KiB (70000 bytes)");
        assert_eq!(super::length(1 << 30), "1 GiB (1073741824 bytes)");
        assert_eq!(super::rate(1e9), "953.67 MiB/s");
    }
}
