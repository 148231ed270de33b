//! --atomic: a regular file's new data is written to a temporary file beside the file it
//! replaces, made complete (attributes set, fsynced) and only then renamed into place, so a
//! reader of DEST sees the old file or the new one, never a part, and a failure or a signal
//! leaves the old one as it was.
//!
//! It applies where DEST is, or will be, a regular file aiscp may replace; everywhere else
//! cp's own behaviour stands:
//! - a DEST symlink is resolved first and the file it names is replaced (cp writes through
//!   it); with -b or --remove-destination the symlink itself is replaced, as cp replaces it;
//! - a device node, FIFO or socket DEST is written in place, as cp writes it (--debug says so);
//! - an existing DEST is first opened for writing as cp opens it (not truncated): where cp
//!   would be refused, so is aiscp, with cp's message, unless -f (cp then unlinks DEST and
//!   makes a new file, and so does the rename);
//! - an existing DEST's owner, group and mode carry over to the new file (set-user-ID and
//!   set-group-ID dropped as a write by a non-root user drops them); where the owner cannot be
//!   kept the copy is refused before any data moves;
//! - a new DEST is put in place without replacing anything (RENAME_NOREPLACE, or a hard link
//!   where the filesystem lacks it), as cp creates it O_EXCL;
//! - a backup (-b) and --remove-destination happen at the rename: the backup is a second
//!   link to the old file made just before it, so DEST never goes missing;
//! - the temporary's name fits NAME_MAX whatever DEST's length;
//! - -v prints cp's lines in cp's order ("removed 'DEST'" included).
//!
//! Other hard links of a replaced DEST keep the old data (cp's in-place write would change
//! them too), and the directory holding it gets a new mtime: that is what replacing a name
//! means.

mod temp;

use super::copier::Copier;
use super::copier::Found;
use super::copier::Step;
use super::names::parent_path;
use super::steps::replaced;
use super::steps::sync_dir;
use crate::cp::attrs;
use crate::sys::messages::fail;
use crate::sys::messages::fail_os;
use crate::sys::messages::Reported;
use crate::sys::messages::{os_text, say};
use crate::sys::open_dir::{At, OpenDir};
use crate::sys::stat::Stat;
use aiscp_engine::quote::quote;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;
pub use temp::make_temp;
use temp::TempGuard;

/// What becomes of an existing DEST before the new file takes its name; under --atomic it
/// happens at the rename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aside {
    Keep,
    /// Backed up under this name (in DEST's directory).
    Backup(OsString),
    Remove,
}

/// How the complete temporary takes its name.
enum Commit {
    /// Nothing may be there (cp's O_EXCL).
    NoReplace,
    /// Replaces what is there; `removed`: cp would have unlinked it first (-v says so).
    Replace { removed: bool },
    /// DEST is linked to its backup's name, then replaced.
    Backup(OsString),
}

/// Where and how one file is replaced.
pub struct AtomicPlan {
    /// The directory and name the new file gets: DEST's, or those of the file a DEST
    /// symlink names.
    dir: Rc<OpenDir>,
    name: OsString,
    /// That name as messages give it.
    path: PathBuf,
    /// The file replaced, as opened for writing: its owner, group, mode and extended
    /// attributes (ACLs included) carry over.
    old: Option<(Stat, File)>,
    how: Commit,
}

impl Copier<'_> {
    /// Decides where --atomic puts the new file, refusing as cp's open would refuse.
    /// None: DEST is not a regular file and is written in place, as cp does.
    pub(super) fn plan_atomic(
        &mut self,
        src: &Path,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
    ) -> Result<Option<AtomicPlan>, Reported> {
        let here = |how: Commit| {
            Ok(Some(AtomicPlan {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
                old: None,
                how,
            }))
        };
        match &found.aside {
            Aside::Backup(name) => return here(Commit::Backup(name.clone())),
            Aside::Remove => return here(Commit::Replace { removed: false }),
            Aside::Keep => {}
        }
        let cannot_create = |e: &io::Error| fail_os("cannot create regular file", dst.path, e);
        if found.new {
            // Nothing there, or a dangling symlink, which cp refuses unless POSIXLY_CORRECT
            // asks it to create the file the symlink names.
            if dst.dir.read_link(dst.name).is_err() {
                return here(Commit::NoReplace);
            }
            if !self.open_dangling {
                return Err(fail(format!(
                    "not writing through dangling symlink {}",
                    quote(dst.path)
                )));
            }
            let (dir, name, path) = resolve(dst).map_err(|e| cannot_create(&e))?;
            return Ok(Some(AtomicPlan {
                dir,
                name,
                path,
                old: None,
                how: Commit::NoReplace,
            }));
        }
        let Some(dm) = &found.sb else {
            // A symlink loop under -f: cp unlinks it once opening it fails.
            return here(Commit::Replace { removed: true });
        };
        if !dm.is_file() {
            self.debug(&format!(
                "{} is not a regular file: written in place, not replaced atomically",
                quote(dst.path)
            ));
            return Ok(None);
        }
        self.plan_replacing(src, dst, src_meta)
    }

    /// The plan for a DEST that is a regular file: opened for writing as cp opens it (but
    /// not truncated), so what cp could not write aiscp does not replace.
    fn plan_replacing(
        &self,
        src: &Path,
        dst: At<'_>,
        src_meta: &Stat,
    ) -> Result<Option<AtomicPlan>, Reported> {
        let cannot_create = |e: &io::Error| fail_os("cannot create regular file", dst.path, e);
        let (dir, name, path) = resolve(dst).map_err(|e| cannot_create(&e))?;
        let flags = OFlag::O_WRONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW;
        match dir.open_file(&name, flags, 0) {
            Ok(f) => {
                let old = Stat::of(&f).map_err(|e| fail_os("cannot fstat", dst.path, &e))?;
                if old.id() == src_meta.id() {
                    return Err(fail(format!(
                        "{} and {} are the same file",
                        quote(src),
                        quote(dst.path)
                    )));
                }
                if !old.is_file() {
                    return Err(replaced(dst.path));
                }
                Ok(Some(AtomicPlan {
                    dir,
                    name,
                    path,
                    old: Some((old, f)),
                    how: Commit::Replace { removed: false },
                }))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(Some(AtomicPlan {
                dir,
                name,
                path,
                old: None,
                how: Commit::NoReplace,
            })),
            // cp -f unlinks a DEST it cannot open and creates a new file in its place.
            Err(_) if self.opts.force => Ok(Some(AtomicPlan {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
                old: None,
                how: Commit::Replace { removed: true },
            })),
            Err(e) => Err(cannot_create(&e)),
        }
    }

    /// Copies into a temporary file beside the file `plan` replaces, then renames it there.
    /// Returns the bytes copied.
    pub(super) fn copy_file_atomic(
        &mut self,
        src: &Path,
        dst: At<'_>,
        src_file: &File,
        src_meta: &Stat,
        plan: AtomicPlan,
    ) -> Result<u64, Reported> {
        let opts = self.opts;
        let at = At {
            dir: &plan.dir,
            name: &plan.name,
            path: dst.path,
        };
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOCTTY | OFlag::O_NOFOLLOW;
        let (tmp, tmp_file) =
            make_temp(at, |n| at.dir.open_file(n, flags, 0o600)).map_err(|e| match plan.old {
                // Where cp could write DEST in place but the directory takes no new name (a
                // 0555 directory), --atomic refuses rather than give up its promise, and
                // says which of the two it could not do.
                Some(_) => fail(format!(
                    "cannot replace {} atomically: cannot create temporary file in {}: {}",
                    quote(dst.path),
                    quote(parent_path(&plan.path)),
                    os_text(&e)
                )),
                None => fail_os(
                    "cannot create temporary file in",
                    parent_path(&plan.path),
                    &e,
                ),
            })?;
        let guard = TempGuard {
            dir: &plan.dir,
            name: Some(tmp.clone()),
            _on_kill: crate::sys::signals::register_temporary(plan.dir.raw_at(), &tmp),
        };
        let fd = tmp_file.as_raw_fd();
        if let Some((old, old_file)) = &plan.old {
            // Owner, group and extended attributes first: where they cannot be kept, nothing
            // has been copied yet.
            self.keep_old_owner(dst.path, src_meta, &tmp_file, old, old_file)?;
        }
        let bytes = self.fill(src, dst.path, src_file, src_meta, &tmp_file)?;
        let set_mode = |m: u32| {
            nix::sys::stat::fchmod(fd, Mode::from_bits_truncate(m)).map_err(|e| {
                fail(format!(
                    "setting permissions for {}: {}",
                    quote(dst.path),
                    os_text(&e.into())
                ))
            })
        };
        let created = plan.old.is_none();
        match &plan.old {
            Some((old, _)) => set_mode(kept_mode(old))?,
            None => set_mode(attrs::new_mode(src_meta, &opts.preserve, self.umask))?,
        }
        attrs::apply(
            &tmp_file,
            dst.path,
            Some(src_file),
            src_meta,
            opts,
            created,
            self.umask,
        )?;
        tmp_file
            .sync_all()
            .map_err(|e| fail_os("error syncing", dst.path, &e))?;
        self.commit(at, &tmp, &plan.how)?;
        guard.disarm();
        sync_dir(at).map(|()| bytes)
    }

    /// Gives the temporary the owner, group, extended attributes and ACLs of the file it
    /// replaces (`old`), or SOURCE's owner under -p where it can have them.
    fn keep_old_owner(
        &self,
        dst_path: &Path,
        src_meta: &Stat,
        tmp_file: &File,
        old: &Stat,
        old_file: &File,
    ) -> Step {
        let fd = tmp_file.as_raw_fd();
        let cannot_keep = |what: &str, e: &io::Error| {
            fail(format!(
                "cannot replace {} atomically keeping its {what}: {}",
                quote(dst_path),
                os_text(e)
            ))
        };
        let chown = |uid: u32, gid: u32| {
            nix::unistd::fchown(fd, Some(uid.into()), Some(gid.into())).map_err(io::Error::from)
        };
        // -p gives DEST SOURCE's owner and group in place too: where the new file can
        // have them, the old ones do not matter.
        let preserved =
            self.opts.preserve.ownership && chown(src_meta.uid(), src_meta.gid()).is_ok();
        let now = Stat::of(tmp_file).map_err(|e| fail_os("cannot fstat", dst_path, &e))?;
        if !preserved && (now.uid(), now.gid()) != (old.uid(), old.gid()) {
            chown(old.uid(), old.gid()).map_err(|e| cannot_keep("owner and group", &e))?;
        }
        attrs::carry_to_replacement(old_file, tmp_file)
            .map_err(|e| cannot_keep("extended attributes and ACLs", &e))
    }

    /// Gives the complete temporary its name, with the backup or removal DEST was due.
    fn commit(&self, at: At<'_>, tmp: &OsStr, how: &Commit) -> Step {
        let rename_failed = |e: &io::Error| {
            fail(format!(
                "cannot rename {} to {}: {}",
                quote(sibling(at.path, tmp)),
                quote(at.path),
                os_text(e)
            ))
        };
        match how {
            Commit::Replace { removed } => {
                at.dir.rename(tmp, at.name).map_err(|e| rename_failed(&e))?;
                if *removed && self.opts.verbose {
                    say(format_args!("removed {}", quote(at.path)));
                }
            }
            Commit::NoReplace => {
                let raw = at.dir.raw_at();
                let res = nix::fcntl::renameat2(
                    Some(raw),
                    tmp,
                    Some(raw),
                    at.name,
                    nix::fcntl::RenameFlags::RENAME_NOREPLACE,
                )
                .map_err(io::Error::from);
                match res {
                    Ok(()) => {}
                    // No RENAME_NOREPLACE here: a hard link never replaces either.
                    Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {
                        let from = At {
                            dir: at.dir,
                            name: tmp,
                            path: at.path,
                        };
                        at.dir
                            .hard_link(at.name, from, false)
                            .map_err(|e| fail_os("cannot create regular file", at.path, &e))?;
                        let _ = at.dir.unlink(tmp);
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                        return Err(fail_os("cannot create regular file", at.path, &e));
                    }
                    Err(e) => return Err(rename_failed(&e)),
                }
            }
            Commit::Backup(backup) => {
                // The backup is a second link to DEST, so DEST's name never goes missing.
                let cannot_backup = |e: &io::Error| fail_os("cannot backup", at.path, e);
                match make_temp(at, |n| at.dir.hard_link(n, at, false)) {
                    Ok((linked, ())) => {
                        at.dir.rename(&linked, backup).map_err(|e| {
                            let _ = at.dir.unlink(&linked);
                            cannot_backup(&e)
                        })?;
                    }
                    // DEST went away meanwhile: nothing to back up.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    // A filesystem without hard links: the backup is DEST renamed.
                    Err(_) => match at.dir.rename(at.name, backup) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                        Err(e) => return Err(cannot_backup(&e)),
                    },
                }
                at.dir.rename(tmp, at.name).map_err(|e| rename_failed(&e))?;
            }
        }
        Ok(())
    }

    /// A --debug line of the cp layer, shaped like the engine's (which stamp the time).
    fn debug(&self, line: &str) {
        if self.config.debug {
            crate::sys::messages::debug(line);
        }
    }
}

/// An existing DEST's mode for its replacement: kept, less the set-user-ID bit (and the
/// set-group-ID bit of a group-executable file) that a write by a non-root user clears.
fn kept_mode(old: &Stat) -> u32 {
    let mut mode = old.mode() & 0o7777;
    if !nix::unistd::geteuid().is_root() {
        mode &= !0o4000;
        if mode & 0o010 != 0 {
            mode &= !0o2000;
        }
    }
    mode
}

/// Follows DEST through symlinks to the name a write through it would create or replace:
/// the directory holding that name (opened by descriptor), the name in it, and its path as
/// messages give it.
fn resolve(dst: At<'_>) -> io::Result<(Rc<OpenDir>, OsString, PathBuf)> {
    let mut dir = Rc::clone(dst.dir);
    let mut name = dst.name.to_os_string();
    let mut path = dst.path.to_path_buf();
    for _ in 0..40 {
        let target = match dir.read_link(&name) {
            Ok(t) => t,
            // Not a symlink (EINVAL), or nothing there yet: this is the name.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOENT)) => {
                return Ok((dir, name, path));
            }
            Err(e) => return Err(e),
        };
        path = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() && !target.as_bytes().starts_with(b"/") => {
                crate::cp::plan::join(d, Path::new(&target))
            }
            _ => PathBuf::from(&target),
        };
        // A relative target is read from the directory holding the link.
        let mut full = Vec::new();
        if !target.as_bytes().starts_with(b"/") {
            if let Some(i) = name.as_bytes().iter().rposition(|&b| b == b'/') {
                full.extend_from_slice(&name.as_bytes()[..=i]);
            }
        }
        full.extend_from_slice(target.as_bytes());
        match full.iter().rposition(|&b| b == b'/') {
            Some(i) => {
                let parent = if i == 0 { &full[..1] } else { &full[..i] };
                dir = Rc::new(dir.open_child(OsStr::from_bytes(parent), true)?);
                name = OsString::from_vec(full[i + 1..].to_vec());
            }
            None => name = OsString::from_vec(full),
        }
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// `name` in the directory `path` is in, for messages.
fn sibling(path: &Path, name: &OsStr) -> PathBuf {
    let leaf = crate::cp::same_file::last_component(name);
    crate::cp::plan::join(&parent_path(path), Path::new(leaf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setuid_dropped_as_a_write_drops_it() {
        // SAFETY: an all-zero struct stat is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_mode = libc::S_IFREG | 0o6755;
        let kept = kept_mode(&Stat::from(st));
        if nix::unistd::geteuid().is_root() {
            assert_eq!(kept, 0o6755);
        } else {
            assert_eq!(kept, 0o755);
        }
        st.st_mode = libc::S_IFREG | 0o2644;
        assert_eq!(kept_mode(&Stat::from(st)), 0o2644);
    }
}
