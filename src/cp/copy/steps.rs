//! Steps every kind of entry shares: --fsync, and the words for a replaced file.

use super::copier::Step;
use super::names::parent_path;
use crate::sys::messages::{fail, fail_os, Reported};
use crate::sys::open_dir::At;
use aiscp_engine::quote::quote;
use std::fs::File;
use std::path::Path;

/// GNU's words for a file that is no longer the one that was checked.
pub(super) fn replaced(path: &Path) -> Reported {
    fail(format!(
        "skipping file {}, as it was replaced while being copied",
        quote(path)
    ))
}

/// --fsync: DEST's data, and for a new DEST the directory entry naming it.
pub(super) fn sync(f: &File, dst: At<'_>, created: bool) -> Step {
    f.sync_all()
        .map_err(|e| fail_os("error syncing", dst.path, &e))?;
    if created {
        sync_dir(dst)?;
    }
    Ok(())
}

/// fsync of the directory DEST is in, through its descriptor.
pub(super) fn sync_dir(dst: At<'_>) -> Step {
    let d = dst
        .dir
        .readable()
        .map_err(|e| fail_os("cannot open directory", parent_path(dst.path), &e))?;
    d.sync_all()
        .map_err(|e| fail_os("error syncing directory of", dst.path, &e))
}
