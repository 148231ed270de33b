//! Backup names for -b/--backup: simple (`b~`), numbered (`b.~1~`, one past the highest
//! existing number), or existing (numbered when a numbered backup is already there).

use crate::options::BackupKind;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

fn with_suffix(p: &Path, suffix: &[u8]) -> PathBuf {
    let mut b = p.as_os_str().as_bytes().to_vec();
    b.extend_from_slice(suffix);
    PathBuf::from(OsString::from_vec(b))
}

/// The highest N of existing `NAME.~N~` files next to `p`.
fn highest_number(p: &Path) -> u64 {
    let Some(base) = p.file_name() else { return 0 };
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut prefix = base.as_bytes().to_vec();
    prefix.extend_from_slice(b".~");
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name();
            let n = n.as_bytes();
            let rest = n.strip_prefix(prefix.as_slice())?.strip_suffix(b"~")?;
            if rest.is_empty() || rest[0] == b'0' || !rest.iter().all(u8::is_ascii_digit) {
                return None;
            }
            std::str::from_utf8(rest).ok()?.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// The name DEST is renamed to before it is replaced.
pub fn name(dst: &Path, kind: BackupKind, suffix: &str) -> PathBuf {
    let n = highest_number(dst);
    match kind {
        BackupKind::Simple => with_suffix(dst, suffix.as_bytes()),
        BackupKind::Existing if n == 0 => with_suffix(dst, suffix.as_bytes()),
        BackupKind::Existing | BackupKind::Numbered => {
            with_suffix(dst, format!(".~{}~", n + 1).as_bytes())
        }
    }
}
