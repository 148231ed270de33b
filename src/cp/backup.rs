//! Backup names for -b/--backup: simple (`b~`), numbered (`b.~1~`, one past the highest
//! existing number), or existing (numbered when a numbered backup is already there).

use crate::cp::options::BackupKind;
use crate::sys::open_dir::OpenDir;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// `name` with `suffix` appended (for the name in its directory and for the path alike).
pub fn with_suffix(name: &OsStr, suffix: &OsStr) -> OsString {
    let mut b = name.as_bytes().to_vec();
    b.extend_from_slice(suffix.as_bytes());
    OsString::from_vec(b)
}

/// The highest N of existing `NAME.~N~` files in `dir`.
fn highest_number(dir: &OpenDir, name: &OsStr) -> u64 {
    let mut prefix = name.as_bytes().to_vec();
    prefix.extend_from_slice(b".~");
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    entries
        .iter()
        .filter_map(|(_, n)| {
            let rest = n
                .as_bytes()
                .strip_prefix(prefix.as_slice())?
                .strip_suffix(b"~")?;
            if rest.is_empty() || rest[0] == b'0' || !rest.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(rest).ok()?.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// What to append to DEST's name (`name`, in `dir`) to name its backup.
pub fn suffix(dir: &OpenDir, name: &OsStr, kind: BackupKind, suffix: &str) -> OsString {
    if kind == BackupKind::Simple {
        return suffix.into();
    }
    // One listing of the directory decides both "are there numbered backups" and the next.
    match highest_number(dir, name) {
        0 if kind == BackupKind::Existing => suffix.into(),
        n => OsString::from(format!(".~{}~", n + 1)),
    }
}
