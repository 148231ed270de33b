//! --atomic's temporary file: a fresh name beside DEST that fits NAME_MAX, made until one is
//! free, and removed unless the rename took it.

use crate::sys::open_dir::{At, OpenDir};
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// A fresh name beside `name` (same directory part) for a file that is to be renamed over
/// it: `.BASE.aiscp-XXXXXXXX`, with BASE cut short so the name fits NAME_MAX (255 bytes)
/// whatever DEST's own length.
pub fn temp_name(name: &OsStr) -> OsString {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let b = name.as_bytes();
    let (prefix, base) = match b.iter().rposition(|&c| c == b'/') {
        Some(i) => b.split_at(i + 1),
        None => (&b[..0], b),
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let count = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // splitmix64 of the time, the pid and a counter: distinct names, unlikely to be guessed.
    let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ count.wrapping_mul(0x9e37_79b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let tag = format!(".aiscp-{:08x}", z as u32);
    let room = 255 - 1 - tag.len();
    let mut base = &base[..base.len().min(room)];
    // Cut on a character boundary where the name is UTF-8.
    if let Err(e) = std::str::from_utf8(base) {
        if e.error_len().is_none() {
            base = &base[..e.valid_up_to()];
        }
    }
    let mut out = prefix.to_vec();
    out.push(b'.');
    out.extend_from_slice(base);
    out.extend_from_slice(tag.as_bytes());
    OsString::from_vec(out)
}

/// Runs `make` on fresh temporary names beside DEST until one is not taken.
pub fn make_temp<T>(
    dst: At<'_>,
    mut make: impl FnMut(&OsStr) -> io::Result<T>,
) -> io::Result<(OsString, T)> {
    for _ in 0..100 {
        let name = temp_name(dst.name);
        match make(&name) {
            Ok(t) => return Ok((name, t)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// Removes the temporary file unless disarmed; registered meanwhile for removal by a
/// killing signal.
pub(super) struct TempGuard<'a> {
    pub(super) dir: &'a OpenDir,
    pub(super) name: Option<OsString>,
    pub(super) _on_kill: Option<crate::sys::signals::TempRegistration>,
}

impl TempGuard<'_> {
    pub(super) fn disarm(mut self) {
        self.name = None;
    }
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.name.take() {
            let _ = self.dir.unlink(&n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_fit_name_max() {
        for len in [1, 200, 240, 255] {
            let long = "é".repeat(len / 2) + &"x".repeat(len % 2);
            let t = temp_name(OsStr::new(&format!("dir/{long}")));
            let leaf = &t.as_bytes()[4..];
            assert!(leaf.len() <= 255, "{} bytes", leaf.len());
            assert!(std::str::from_utf8(leaf).is_ok());
            assert!(t.as_bytes().starts_with(b"dir/."));
        }
        assert_ne!(temp_name(OsStr::new("a")), temp_name(OsStr::new("a")));
    }
}
