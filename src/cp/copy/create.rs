//! Making DEST once the checks have passed: a directory (entered by the walk), a hard link to
//! an earlier copy, a symbolic or hard link instead of a copy, a regular file's data, a
//! symlink or a special file.

use super::atomic;
use super::copier::Copier;
use super::copier::Disposition;
use super::copier::FirstCopy;
use super::copier::Found;
use super::copier::Step;
use super::names::name_key;
use super::names::same_dir;
use crate::cp::attrs;
use crate::cp::options::Clobber;
use crate::cp::same_file::{self};
use crate::sys::messages::Reported;
use crate::sys::messages::{error, os_text, say};
use crate::sys::messages::{fail, fail_os};
use crate::sys::open_dir::At;
use crate::sys::stat::{FileKind, Stat};
use aiscp_engine::quote::{quote, quote_if_needed};
use nix::sys::stat::SFlag;
use std::ffi::OsStr;
use std::io;
use std::path::Path;
use std::rc::Rc;

impl Copier<'_> {
    /// Makes DEST once the checks have passed: a directory (entered, and returned for the walk
    /// to copy its entries), a link, a regular file's data or a special file.
    pub(super) fn create(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
        top: bool,
        parent_dev: Option<u64>,
    ) -> Result<Disposition, Reported> {
        let opts = self.opts;
        if src_meta.kind() == FileKind::Dir {
            return self.create_dir(src, dst, src_meta, found, top, parent_dev);
        }
        if opts.verbose {
            // Held: a file that goes in flight is named only once its copy has begun (see
            // `inflight`); one copied in turn has its line let out before its data.
            self.hold_output();
            match &found.backup {
                Some((_, b)) => say(format_args!(
                    "{} -> {} (backup: {})",
                    quote(src.path),
                    quote(dst.path),
                    quote(b)
                )),
                None => say(format_args!("{} -> {}", quote(src.path), quote(dst.path))),
            }
        }
        let made = self.make(src, dst, src_meta, found, top);
        self.finish_ended();
        made
    }

    /// [`Copier::create`] for all but a directory, once the `-v` line is said.
    fn make(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
        top: bool,
    ) -> Result<Disposition, Reported> {
        let follow = self.follows(top);
        let opts = self.opts;
        // Hard links within the copied set.
        if self.remembers_link(src_meta, top) {
            if let Some(first) = self.memory.links.get(&src_meta.id()) {
                return self
                    .link_to_first(dst, first, follow)
                    .map(|()| Disposition::Made { bytes: 0 });
            }
        }
        let mut outcome = Disposition::Made { bytes: 0 };
        if opts.symbolic_link {
            make_symlink_instead(src, dst, opts.force)?;
            attrs::apply_to_link_made(dst, src_meta, opts)?;
        } else if opts.hard_link {
            let replace = opts.force || opts.clobber == Clobber::Ask;
            force_link(dst, src, replace, follow).map_err(|e| {
                fail(format!(
                    "cannot create hard link {} to {}: {}",
                    quote(dst.path),
                    quote(src.path),
                    os_text(&e)
                ))
            })?;
        } else {
            match src_meta.kind() {
                FileKind::File => outcome = self.copy_file(src, dst, src_meta, found, follow)?,
                FileKind::Symlink => self.copy_symlink(src, dst, src_meta)?,
                _ if self.copies_as_regular() => {
                    outcome = self.copy_file(src, dst, src_meta, found, follow)?
                }
                _ => self.make_special(src, dst, src_meta)?,
            }
        }
        self.remember_made(dst, src_meta, top);
        Ok(outcome)
    }

    /// A SOURCE directory: refused when DEST lies inside it or it would be a hard link to a
    /// directory, skipped when named twice for one DEST, else entered.
    fn create_dir(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
        top: bool,
        parent_dev: Option<u64>,
    ) -> Result<Disposition, Reported> {
        let follow = self.follows(top);
        // A directory this run created showing up as a source means DEST is inside SOURCE.
        if self.memory.made_dirs.contains(&src_meta.id()) {
            self.memory.into_itself = true;
            return Err(fail(format!(
                "cannot copy a directory, {}, into itself, {}",
                quote(&self.memory.top.0),
                quote(&self.memory.top.1)
            )));
        }
        if top {
            // The same directory named twice for one DEST: copied once, with a warning.
            let dst_id = dst.dir.stat_self().map(|m| m.id()).ok();
            let key = (dst_id, same_file::last_component(dst.name).to_os_string());
            if !self.memory.top_dirs.insert((src_meta.id(), key)) {
                error(&format!(
                    "warning: source directory {} specified more than once",
                    quote(src.path)
                ));
                return Ok(Disposition::Directory(None));
            }
        }
        if self.remembers_link(src_meta, top) {
            if let Some(earlier) = self.memory.dir_links.get(&src_meta.id()) {
                // Reached again through a followed symlink (-L, or -H on the command
                // line), cp copies it again; otherwise it refuses.
                if !follow {
                    return Err(fail(format!(
                        "will not create hard link {} to directory {}",
                        quote(dst.path),
                        quote(earlier)
                    )));
                }
            } else {
                self.memory
                    .dir_links
                    .insert(src_meta.id(), dst.path.to_path_buf());
            }
        }
        let dst_meta = if found.new { None } else { found.sb.as_ref() };
        self.enter_dir(src, dst, src_meta, dst_meta, follow, parent_dev)
            .map(|frame| Disposition::Directory(Some(Box::new(frame))))
    }

    /// Remembers the DEST just made: as the first copy of SOURCE's inode (--preserve=links),
    /// and, for a command-line operand, as made by this run, so cp refuses to overwrite it.
    fn remember_made(&mut self, dst: At<'_>, src_meta: &Stat, top: bool) {
        if self.remembers_link(src_meta, top) {
            let first = FirstCopy {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
            };
            self.memory.links.insert(src_meta.id(), first);
        }
        if top && self.memory.track {
            if let Ok(m) = dst.dir.stat(dst.name, false) {
                self.memory.created.insert((m.id(), name_key(dst.path)));
            }
        }
    }

    /// Makes DEST a hard link to the first copy of the same SOURCE inode (--preserve=links,
    /// and -u's kept DEST), replacing whatever DEST is.
    pub(super) fn link_to_first(&self, dst: At<'_>, first: &FirstCopy, follow: bool) -> Step {
        let from = At {
            dir: &first.dir,
            name: &first.name,
            path: &first.path,
        };
        let replaced = force_link(dst, from, true, follow).map_err(|e| {
            fail(format!(
                "cannot create hard link {} to {}: {}",
                quote(dst.path),
                quote(&first.path),
                os_text(&e)
            ))
        })?;
        if replaced && self.opts.verbose {
            say(format_args!("removed {}", quote(dst.path)));
        }
        Ok(())
    }

    fn copy_symlink(&mut self, src: At<'_>, dst: At<'_>, meta: &Stat) -> Step {
        let target = src
            .dir
            .read_link(src.name)
            .map_err(|e| fail_os("cannot read symbolic link", src.path, &e))?;
        force_symlink(dst, &target, self.opts.force)
            .map_err(|e| fail_os("cannot create symbolic link", dst.path, &e))?;
        attrs::apply_by_name(src, dst, meta, self.opts)
    }

    fn make_special(&mut self, src: At<'_>, dst: At<'_>, meta: &Stat) -> Step {
        let perm = meta.mode() & 0o777;
        let (res, what) = match meta.kind() {
            FileKind::Fifo => (dst.dir.mkfifo(dst.name, perm), "cannot create fifo"),
            kind => {
                let flag = match kind {
                    FileKind::CharDevice => SFlag::S_IFCHR,
                    FileKind::BlockDevice => SFlag::S_IFBLK,
                    _ => SFlag::S_IFSOCK,
                };
                let res = dst.dir.mknod(dst.name, flag, perm, meta.rdev());
                (res, "cannot create special file")
            }
        };
        res.map_err(|e| fail_os(what, dst.path, &e))?;
        attrs::apply_by_name(src, dst, meta, self.opts)
    }
}

/// -s: DEST made a symbolic link to SOURCE as named; a relative one only in the current
/// directory, as cp allows.
fn make_symlink_instead(src: At<'_>, dst: At<'_>, force: bool) -> Step {
    if !src.path.is_absolute() {
        let parent = dst.path.parent().unwrap_or(Path::new(""));
        let here = parent.as_os_str().is_empty()
            || parent == Path::new(".")
            || same_dir(parent, Path::new("."));
        if !here {
            return Err(fail(format!(
                "{}: can make relative symbolic links only in current directory",
                quote_if_needed(dst.path)
            )));
        }
    }
    force_symlink(dst, src.path.as_os_str(), force).map_err(|e| {
        fail(format!(
            "cannot create symbolic link {} to {}: {}",
            quote(dst.path),
            quote(src.path),
            os_text(&e)
        ))
    })?;
    Ok(())
}

/// Makes DEST a symlink to `target`; an existing DEST is replaced (atomically, through a
/// temporary name) only when `force` says so (gnulib's force_symlinkat).
pub(super) fn force_symlink(dst: At<'_>, target: &OsStr, force: bool) -> io::Result<()> {
    match dst.dir.symlink(target, dst.name) {
        Err(e) if force && e.raw_os_error() == Some(libc::EEXIST) => {
            let (tmp, ()) = atomic::make_temp(dst, |n| dst.dir.symlink(target, n))?;
            dst.dir.rename(&tmp, dst.name).inspect_err(|_| {
                let _ = dst.dir.unlink(&tmp);
            })
        }
        other => other,
    }
}

/// Makes DEST a hard link to `from`; an existing DEST is replaced (atomically, through a
/// temporary name) only when `replace` says so (gnulib's force_linkat). Ok(true): replaced.
pub(super) fn force_link(
    dst: At<'_>,
    from: At<'_>,
    replace: bool,
    follow: bool,
) -> io::Result<bool> {
    match dst.dir.hard_link(dst.name, from, follow) {
        Ok(()) => Ok(false),
        Err(e) if replace && e.raw_os_error() == Some(libc::EEXIST) => {
            let (tmp, ()) = atomic::make_temp(dst, |n| dst.dir.hard_link(n, from, follow))?;
            let renamed = dst.dir.rename(&tmp, dst.name);
            // Renaming one hard link over another of the same file does nothing: the
            // temporary name would stay.
            let _ = dst.dir.unlink(&tmp);
            renamed.map(|()| true)
        }
        Err(e) => Err(e),
    }
}
