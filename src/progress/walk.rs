//! The totals' walk: the operands stat'ed up front, then trees walked on a counting thread
//! as the copy will walk them (its links followed, its file systems kept to).

use super::counters::Counters;
use crate::cp::options::{Deref, Options};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;

/// What the counting thread needs of cp's options: which trees it walks and which links it
/// follows, as the copy will.
#[derive(Clone, Copy)]
pub struct Walk {
    pub recursive: bool,
    /// Special files in trees are read in order (--copy-contents), not recreated.
    pub copy_contents: bool,
    pub deref: Deref,
    pub one_file_system: bool,
}

impl From<&Options> for Walk {
    fn from(o: &Options) -> Walk {
        Walk {
            recursive: o.recursive,
            copy_contents: o.copy_contents,
            deref: o.deref,
            one_file_system: o.one_file_system,
        }
    }
}

impl Walk {
    /// Counts `sources` into `counters`' totals: operands here, on this thread (a copy of files
    /// has its whole total up front), then the trees among them on a counting thread, which
    /// is returned (the totals grow until it ends).
    pub(super) fn count(
        self,
        counters: &Arc<Counters>,
        sources: Vec<PathBuf>,
    ) -> Option<JoinHandle<()>> {
        let walk = self;
        let mut trees = Vec::new();
        for src in sources {
            let follow = walk.deref != Deref::Never || !walk.recursive;
            let meta = if follow {
                fs::metadata(&src)
            } else {
                fs::symlink_metadata(&src)
            };
            match meta {
                Ok(m) if m.is_dir() => {
                    if walk.recursive {
                        trees.push((src, m.dev()));
                    }
                }
                Ok(m) => count_file(counters, &m, walk),
                Err(_) => {}
            }
        }
        if trees.is_empty() {
            return None;
        }
        counters.counting.store(true, Relaxed);
        let c = Arc::clone(counters);
        std::thread::Builder::new()
            .name("aiscp-count".into())
            .spawn(move || {
                for (tree, dev) in trees {
                    count_tree(&c, &tree, dev, walk);
                }
                c.counting.store(false, Relaxed);
            })
            .ok()
    }
}

/// Adds one non-directory to the totals: a regular file's size; a special file only when
/// it will be read in order until EOF, with no size to add.
fn count_file(c: &Counters, m: &fs::Metadata, walk: Walk) {
    if m.is_file() {
        c.files_total.fetch_add(1, Relaxed);
        c.bytes_total.fetch_add(m.len(), Relaxed);
    } else if (!walk.recursive || walk.copy_contents) && !m.file_type().is_symlink() {
        c.files_total.fetch_add(1, Relaxed);
        c.sizeless.fetch_add(1, Relaxed);
    }
}

/// Walks one tree on the counting thread, following links as the copy will (-L only).
fn count_tree(c: &Counters, dir: &Path, dev: u64, walk: Walk) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if c.stop.load(Relaxed) {
                return;
            }
            let path = entry.path();
            let meta = if walk.deref == Deref::Always {
                fs::metadata(&path)
            } else {
                entry.metadata()
            };
            let Ok(m) = meta else { continue };
            if m.is_dir() {
                if !walk.one_file_system || m.dev() == dev {
                    pending.push(path);
                }
            } else {
                count_file(c, &m, walk);
            }
        }
    }
}
