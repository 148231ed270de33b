//! Names as cp's messages and checks see them: a directory part, a basename, one directory.

use crate::sys::open_dir::OpenDir;
use std::path::{Path, PathBuf};

/// A name's identity for GNU's "same name" checks: its basename.
pub(super) fn name_key(p: &Path) -> PathBuf {
    p.file_name().map(PathBuf::from).unwrap_or_default()
}

pub(super) fn same_dir(a: &Path, b: &Path) -> bool {
    let cwd = OpenDir::cwd();
    match (cwd.stat(a.as_os_str(), true), cwd.stat(b.as_os_str(), true)) {
        (Ok(x), Ok(y)) => x.id() == y.id(),
        _ => false,
    }
}

/// The directory part of a path as messages name it ("." for a bare name).
pub(super) fn parent_path(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
