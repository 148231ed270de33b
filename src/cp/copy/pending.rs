//! A file queued in flight, as the walk left it, a directory made behind files in flight,
//! and what a stop undoes of them.

use crate::sys::stat::{FileId, Stat};
use std::fs::Metadata;
use std::path::{Path, PathBuf};

/// What `path` names now, if it is still the inode `id` this run made: a stop removes only
/// what it made, never what another process put at the name since.
fn still_ours(path: &Path, id: FileId) -> Option<Metadata> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| (m.dev(), m.ino()) == id)
}

/// A queued file, as the walk left it.
pub(super) struct Pending {
    pub(super) dst_path: PathBuf,
    /// SOURCE as opened (what the attributes are copied from).
    pub(super) src_meta: Stat,
    /// DEST was created by this run (the attributes differ for a new file).
    pub(super) created: bool,
    /// DEST's inode, to forget it as just-created when its copy fails.
    pub(super) dst_id: FileId,
    pub(super) src_id: FileId,
}

impl Pending {
    /// Removes the DEST this run made for the file, checked to be that inode (and still
    /// `empty`, where it must never have been written).
    pub(super) fn remove_made(&self, empty: bool) {
        let ours = still_ours(&self.dst_path, self.dst_id).is_some_and(|m| !empty || m.len() == 0);
        if self.created && ours {
            let _ = std::fs::remove_file(&self.dst_path);
        }
    }
}

/// A directory the walk made while files were in flight.
pub(super) struct MadeDir {
    pub(super) path: PathBuf,
    pub(super) id: FileId,
}

impl MadeDir {
    /// Removes the directory, checked to be that inode, if it is empty.
    pub(super) fn remove(&self) {
        if still_ours(&self.path, self.id).is_some_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir(&self.path);
        }
    }
}
