//! --parents: DEST's missing ancestors made like their source directories, and their
//! attributes set once DEST is in.

use super::copier::Copier;
use super::copier::Step;
use crate::cp::attrs;
use crate::cp::options::Preserve;
use crate::cp::plan::join;
use crate::sys::messages::say;
use crate::sys::messages::{fail, fail_os, Reported};
use crate::sys::open_dir::{open_parent, OpenDir};
use crate::sys::stat::Stat;
use aiscp_engine::quote::quote;
use nix::sys::stat::Mode;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

/// A directory on DEST's path that --parents made (or, with -p, found), whose attributes
/// are set after the copy.
pub(super) struct MadeParent {
    dir: OpenDir,
    src: PathBuf,
    dst: PathBuf,
    src_meta: Stat,
    /// The mode to give a made directory at the end where it was made narrower or
    /// owner-writable for the copy, and the mode is not preserved.
    restore_mode: Option<u32>,
}

impl Copier<'_> {
    /// --parents: creates DEST's missing ancestors below TARGET, each like its source
    /// directory, each made and entered through its parent's descriptor. Returns DEST's
    /// directory and DEST's name in it.
    pub(super) fn make_parents(
        &mut self,
        src: &Path,
        dst: &Path,
        target: &Path,
        made: &mut Vec<MadeParent>,
    ) -> Result<(OpenDir, OsString), Reported> {
        let rel = dst.strip_prefix(target).unwrap_or(dst);
        let comps: Vec<_> = rel.components().collect();
        let Some((last, ancestors)) = comps.split_last() else {
            return Ok(open_parent(dst));
        };
        let mut s = if src.is_absolute() {
            PathBuf::from("/")
        } else {
            PathBuf::new()
        };
        let mut d = target.to_path_buf();
        let mut dir = OpenDir::open(target).map_err(|e| fail_os("cannot access", target, &e))?;
        // Like cp, -p also sets the attributes of the ancestors that exist, but only when
        // one is missing: they wait here until then.
        let p = self.opts.preserve;
        let mut found = Vec::new();
        let mut missing = false;
        for c in ancestors {
            s.push(c);
            d = join(&d, Path::new(c.as_os_str()));
            let name = c.as_os_str();
            // Like GNU, an existing ancestor may be a symlink to a directory: followed.
            let made_here = match dir.stat(name, true) {
                Ok(m) if m.is_dir() => None,
                Ok(_) => return Err(fail(format!("{} exists but is not a directory", quote(&d)))),
                Err(_) => Some(self.make_parent(&dir, name, &s, &d)?),
            };
            let cannot = |e: io::Error| fail_os("cannot access", &d, &e);
            dir = dir.open_child(name, true).map_err(cannot)?;
            let entry = match made_here {
                Some((src_meta, mkdir_mode)) => {
                    missing = true;
                    let restore_mode = self.make_accessible(&dir, &d, mkdir_mode)?;
                    Some((src_meta, restore_mode))
                }
                None if p.mode || p.ownership || p.timestamps => {
                    Some((self.parent_source_meta(&s)?, None))
                }
                None => None,
            };
            if let Some((src_meta, restore_mode)) = entry {
                let parent = MadeParent {
                    dir: dir.try_clone().map_err(cannot)?,
                    src: s.clone(),
                    dst: d.clone(),
                    src_meta,
                    restore_mode,
                };
                if missing {
                    made.append(&mut found);
                    made.push(parent);
                } else {
                    found.push(parent);
                }
            }
        }
        let last = match last {
            Component::Normal(n) => n.to_os_string(),
            other => other.as_os_str().to_os_string(),
        };
        Ok((dir, last))
    }

    /// The directory `s` that a DEST ancestor is made like.
    fn parent_source_meta(&self, s: &Path) -> Result<Stat, Reported> {
        let sm = OpenDir::cwd()
            .stat(s.as_os_str(), true)
            .map_err(|e| fail_os("failed to get attributes of", s, &e))?;
        if !sm.is_dir() {
            return Err(fail(format!(
                "failed to get attributes of {}: Not a directory",
                quote(s)
            )));
        }
        Ok(sm)
    }

    /// One missing ancestor for --parents: `name` in `dir`, made like the directory `s`,
    /// less the bits others should not have before the owner is set (as cp). Returns the
    /// source's attributes and the mode the directory was made with.
    fn make_parent(
        &mut self,
        dir: &OpenDir,
        name: &OsStr,
        s: &Path,
        d: &Path,
    ) -> Result<(Stat, u32), Reported> {
        let sm = self.parent_source_meta(s)?;
        let p = self.opts.preserve;
        let src_mode = sm.mode() & 0o7777;
        let omitted = src_mode
            & if p.ownership {
                0o077
            } else if p.mode {
                0o022
            } else {
                0
            };
        let mode = if p.default_mode { 0o777 } else { src_mode } & !omitted;
        dir.mkdir(name, mode)
            .map_err(|e| fail_os("cannot make directory", d, &e))?;
        if self.opts.verbose {
            say(format_args!("{} -> {}", s.display(), d.display()));
        }
        Ok((sm, omitted))
    }

    /// A made ancestor gets owner rwx while DEST is copied into it. Returns the mode to give
    /// it at the end where the mode is not preserved and the one it has now is not that
    /// (the bits held back, less the umask, or the owner bits just added).
    fn make_accessible(
        &self,
        dir: &OpenDir,
        d: &Path,
        omitted: u32,
    ) -> Result<Option<u32>, Reported> {
        let now = dir
            .stat_self()
            .map_err(|e| fail_os("failed to get attributes of", d, &e))?
            .mode()
            & 0o7777;
        let mut restore = None;
        if !self.opts.preserve.mode {
            let omitted = if omitted & !now != 0 {
                omitted & !self.umask
            } else {
                omitted
            };
            if omitted & !now != 0 || now & 0o700 != 0o700 {
                restore = Some(now | omitted);
            }
        }
        if now & 0o700 != 0o700 {
            let f = dir
                .readable()
                .map_err(|e| fail_os("setting permissions for", d, &e))?;
            nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(now | 0o700))
                .map_err(|e| fail_os("setting permissions for", d, &e.into()))?;
        }
        Ok(restore)
    }

    /// The attributes -p asks for, on a directory --parents made or found, and the mode a
    /// made one is to end with.
    pub(super) fn finish_parent(&self, made: &MadeParent) -> Step {
        // Times, owner and mode (with the ACL) only: cp copies no xattrs here.
        let p = Preserve {
            xattr: false,
            xattr_required: false,
            ..self.opts.preserve
        };
        let restore = made.restore_mode.filter(|_| !p.mode);
        if !(p.mode || p.ownership || p.timestamps || restore.is_some()) {
            return Ok(());
        }
        let f = made
            .dir
            .readable()
            .map_err(|e| fail_os("cannot open", &made.dst, &e))?;
        // SOURCE's own descriptor, for its ACL.
        let src_dir = p.mode.then(|| File::open(&made.src).ok()).flatten();
        attrs::apply_these(
            &f,
            &made.dst,
            src_dir.as_ref(),
            &made.src_meta,
            p,
            false,
            self.umask,
        )?;
        if let Some(mode) = restore {
            nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(mode))
                .map_err(|e| fail_os("failed to preserve permissions for", &made.dst, &e.into()))?;
        }
        Ok(())
    }
}
