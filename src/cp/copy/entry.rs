//! One SOURCE/DEST pair, in cp's order: look at SOURCE, look at DEST, the rules for an
//! existing DEST (same file, -u, -n/-i, file types), making room (backup or unlink), then the
//! making of DEST (`create`), with the backup put back where that fails.

mod rules;
#[cfg(test)]
mod tests;

use super::atomic::Aside;
use super::copier::Copier;
use super::copier::Disposition;
use super::copier::FirstCopy;
use super::copier::Found;
use super::copier::Step;
use super::names::name_key;
use super::prompt::ask;
use crate::cp::backup;
use crate::cp::options::{BackupKind, Clobber, Deref};
use crate::cp::same_file::{self, Verdict};
use crate::sys::messages::{error, os_text, say};
use crate::sys::messages::{fail, fail_os, Reported};
use crate::sys::open_dir::At;
use crate::sys::stat::{dst_is_current, FileKind, Stat};
use aiscp_engine::quote::quote;
use rules::{clobbering, looks_at_dest_as_link, room_for, Clobbering, Room};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::rc::Rc;

/// DEST as [`Copier::look_at_dest`] found it.
struct DestLook {
    /// DEST's stat (see [`Found::sb`]).
    sb: Option<Stat>,
    /// DEST is known not to exist.
    new: bool,
    /// DEST was looked at without following a symlink.
    lstat: bool,
}

/// The directory an entry of a tree is copied from and into.
#[derive(Clone, Copy)]
pub(super) struct Parent {
    /// SOURCE's device (for -x).
    pub(super) dev: u64,
    /// DEST's directory was made by this run, so it holds only what the run put there: an
    /// entry's DEST is known not to exist and is not looked for, as cp does (a file made there
    /// meanwhile by another process makes the creation fail with EEXIST, as in cp).
    pub(super) made: bool,
}

impl DestLook {
    /// A DEST known not to exist.
    fn absent() -> DestLook {
        DestLook {
            sb: None,
            new: true,
            lstat: true,
        }
    }
}

/// Whether `copy_entry` goes on after a step.
#[derive(PartialEq, Eq)]
enum Next {
    Go,
    Done,
}

impl Copier<'_> {
    /// Copies SRC to DST; prints its own errors. `parent` is the directory being copied
    /// (None for an operand): its device for -x, and whether the run made DEST's side. The
    /// steps, in cp's order: look at SOURCE, look at DEST, the
    /// rules for a DEST that exists, making room for the new one, then making it. A directory
    /// is entered and returned for the walk to copy its entries.
    pub(super) fn copy_entry(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        top: bool,
        parent: Option<Parent>,
    ) -> Result<Disposition, Reported> {
        let Some(src_meta) = self.check_source(src, top)? else {
            return Ok(Disposition::Skipped);
        };
        let look = match parent {
            Some(Parent { made: true, .. }) => DestLook::absent(),
            _ => self.look_at_dest(dst, src_meta.kind())?,
        };
        let mut found = Found {
            sb: look.sb,
            new: look.new,
            aside: Aside::Keep,
            backup: None,
        };
        if let Some(dm) = &look.sb {
            if self.check_existing(src, dst, &src_meta, dm, top)? == Next::Done {
                return Ok(Disposition::Skipped);
            }
            self.make_room(src, dst, &src_meta, dm, top, &mut found)?;
        }
        self.refuse_created_symlink(src, dst, top, &look)?;
        let parent_dev = parent.map(|p| p.dev);
        let result = self.create(src, dst, &src_meta, &found, top, parent_dev);
        if result.is_err() && found.aside == Aside::Keep {
            self.un_backup(dst, &found);
        }
        result
    }

    /// SOURCE as cp first looks at it: stat'ed (followed as -H, -L or -P say), refused when a
    /// directory meets no -r, skipped with a warning when named twice on the command line.
    /// None: nothing more to do for it.
    fn check_source(&mut self, src: At<'_>, top: bool) -> Result<Option<Stat>, Reported> {
        if self.config.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Reported); // interrupted: main dies of the signal, silently
        }
        let src_meta = src
            .dir
            .stat(src.name, self.follows(top))
            .map_err(|e| fail_os("cannot stat", src.path, &e))?;
        let src_kind = src_meta.kind();
        if src_kind == FileKind::Dir && !self.opts.recursive {
            return Err(fail(format!(
                "-r not specified; omitting directory {}",
                quote(src.path)
            )));
        }
        if top && self.memory.track && src_kind != FileKind::Dir && self.backup.is_none() {
            let key = (src_meta.id(), name_key(src.path));
            if !self.memory.seen_sources.insert(key) {
                error(&format!(
                    "warning: source file {} specified more than once",
                    quote(src.path)
                ));
                return Ok(None);
            }
        }
        Ok(Some(src_meta))
    }

    /// Whether a SOURCE that is not a regular file is copied as one (its data read), as
    /// without -R or with --copy-contents.
    pub(super) fn copies_as_regular(&self) -> bool {
        !self.opts.recursive || self.opts.copy_contents
    }

    /// DEST as cp looks at it: followed only when a regular file will be written through
    /// it; a DEST that is unlinked, backed up or replaced by a link is taken as it is.
    fn look_at_dest(&self, dst: At<'_>, src_kind: FileKind) -> Result<DestLook, Reported> {
        let opts = self.opts;
        let lstat = looks_at_dest_as_link(opts, self.backup.is_some(), src_kind);
        let mut new = false;
        let sb = match dst.dir.stat(dst.name, !lstat) {
            Ok(m) => Some(m),
            // A symlink loop: -f unlinks it once opening it fails.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) && opts.force => None,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                new = true;
                None
            }
            Err(e) => return Err(fail_os("cannot stat", dst.path, &e)),
        };
        Ok(DestLook { sb, new, lstat })
    }

    /// Whether --atomic writes this file's data aside and leaves a backup or a removal of
    /// DEST to the rename that puts the complete new file in place (see `atomic`).
    fn writes_atomically(&self, src_meta: &Stat, top: bool) -> bool {
        let opts = self.opts;
        let src_kind = src_meta.kind();
        opts.atomic
            && !opts.attributes_only
            && !opts.symbolic_link
            && !opts.hard_link
            && (src_kind == FileKind::File
                || (self.copies_as_regular()
                    && !matches!(src_kind, FileKind::Dir | FileKind::Symlink)))
            && !(self.remembers_link(src_meta, top)
                && self.memory.links.contains_key(&src_meta.id()))
    }

    /// cp's rules for a DEST that exists (`dm`): the same file, -u, -n and -i, a directory
    /// against a non-directory, a file this run just made. `Done`: nothing more to do.
    fn check_existing(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        dm: &Stat,
        top: bool,
    ) -> Result<Next, Reported> {
        let opts = self.opts;
        let src_kind = src_meta.kind();
        let mut done = false;
        if opts.clobber != Clobber::SkipSilently {
            let follows = self.follows(top);
            match same_file::check(src, src_meta, dst, dm, opts, self.backup.is_some(), follows) {
                Verdict::Proceed => {}
                Verdict::Done => done = true,
                Verdict::Refuse => {
                    return Err(fail(format!(
                        "{} and {} are the same file",
                        quote(src.path),
                        quote(dst.path)
                    )))
                }
            }
        }
        if src_kind != FileKind::Dir {
            // -u compares DEST's time: a file in flight still writing it (DEST a hard link
            // of an earlier one) ends first, as cp had finished it, and DEST is looked at again.
            let mut dm = *dm;
            if opts.update_older && self.inflight.writing.contains_key(&dm.id()) {
                self.settle();
                dm = dst
                    .dir
                    .stat(dst.name, true)
                    .ok()
                    .filter(|m| m.id() == dm.id())
                    .unwrap_or(dm);
            }
            let current = opts.update_older
                && dst_is_current(src_meta.mtime(), &dm, opts.preserve.timestamps);
            match clobbering(opts, current) {
                Clobbering::KeepCurrent => {
                    let follow = self.follows(top);
                    return self
                        .keep_current(dst, src_meta, follow)
                        .map(|()| Next::Done);
                }
                Clobbering::Overwrite => {}
                Clobbering::Skip => return Ok(Next::Done),
                Clobbering::Refuse => {
                    return Err(fail(format!("not replacing {}", quote(dst.path))));
                }
                Clobbering::Ask => {
                    self.settle();
                    match ask(&self.overwrite_question(dst, &dm), &self.config.cancel) {
                        Some(true) => {}
                        Some(false) => return Ok(Next::Done),
                        None => return Err(Reported), // interrupted: main dies of the signal, silently
                    }
                }
            }
        }
        if done {
            return Ok(Next::Done);
        }
        self.refuse_kind_clash(src, dst, src_kind, dm, top)?;
        Ok(Next::Go)
    }

    /// A directory onto a non-directory or the reverse, and a file this run just made
    /// overwritten from another command-line SOURCE: refused with cp's words.
    fn refuse_kind_clash(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_kind: FileKind,
        dm: &Stat,
        top: bool,
    ) -> Step {
        if !dm.is_dir() {
            if src_kind == FileKind::Dir {
                return Err(fail(format!(
                    "cannot overwrite non-directory {} with directory {}",
                    quote(dst.path),
                    quote(src.path)
                )));
            }
            // Numbered backups keep what a second source would overwrite.
            if top
                && self.memory.track
                && self.backup != Some(BackupKind::Numbered)
                && self.just_created(&(dm.id(), name_key(dst.path)))
            {
                return Err(fail(format!(
                    "will not overwrite just-created {} with {}",
                    quote(dst.path),
                    quote(src.path)
                )));
            }
        } else if src_kind != FileKind::Dir {
            return Err(fail(format!(
                "cannot overwrite directory {} with non-directory",
                quote(dst.path)
            )));
        }
        Ok(())
    }

    /// Makes room for the new DEST where the old one (`dm`) must go first: renamed to its
    /// backup name, or unlinked (-f's removal, --remove-destination, --preserve=links,
    /// special files). Under --atomic either is left to the rename, in `found`.
    fn make_room(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        dm: &Stat,
        top: bool,
        found: &mut Found,
    ) -> Step {
        let opts = self.opts;
        let atomic = self.writes_atomically(src_meta, top);
        let src_base = same_file::last_component(src.path.as_os_str());
        let dot_or_dotdot = src_base == "." || src_base == "..";
        let room = room_for(
            opts,
            self.backup.filter(|_| !dot_or_dotdot),
            src_meta.kind(),
            self.follows(top),
            dm,
        );
        if let Room::BackUp(kind) = room {
            if kind != BackupKind::Numbered && self.source_is_dst_backup(src_base, src_meta, dst) {
                return Err(fail(format!(
                    "backing up {} might destroy source;  {} not copied",
                    quote(dst.path),
                    quote(src.path)
                )));
            }
            let suffix = backup::suffix(dst.dir, dst.name, kind, &opts.suffix);
            let name = backup::with_suffix(dst.name, &suffix);
            let path = PathBuf::from(backup::with_suffix(dst.path.as_os_str(), &suffix));
            if atomic {
                found.aside = Aside::Backup(name.clone());
                found.backup = Some((name, path));
            } else {
                match dst.dir.rename(dst.name, &name) {
                    Ok(()) => found.backup = Some((name, path)),
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(fail_os("cannot backup", dst.path, &e)),
                }
            }
            found.new = true;
        } else if room == Room::Unlink {
            // Unlinked first: with --preserve=links DEST's other names keep their data.
            // (Not following here includes -H below the command line, where GNU copies
            // with DEREF_NEVER.)
            // (-v says so here, in cp's order, also when --atomic removes it at the rename.)
            if atomic {
                found.aside = Aside::Remove;
            } else {
                match dst.dir.unlink(dst.name) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(fail_os("cannot remove", dst.path, &e)),
                }
            }
            if opts.verbose {
                say(format_args!("removed {}", quote(dst.path)));
            }
            found.new = true;
        }
        Ok(())
    }

    /// Never writes through a symlink this run made from an earlier SOURCE.
    fn refuse_created_symlink(&self, src: At<'_>, dst: At<'_>, top: bool, look: &DestLook) -> Step {
        if !(top && self.memory.track && self.backup.is_none()) {
            return Ok(());
        }
        let lstat = if look.lstat {
            look.sb
        } else {
            dst.dir.stat(dst.name, false).ok()
        };
        if let Some(l) = lstat.filter(Stat::is_symlink) {
            if self.memory.created.contains(&(l.id(), name_key(dst.path))) {
                return Err(fail(format!(
                    "will not copy {} through just-created symlink {}",
                    quote(src.path),
                    quote(dst.path)
                )));
            }
        }
        Ok(())
    }

    /// Puts the backup back where making the new DEST failed (GNU's un_backup).
    fn un_backup(&self, dst: At<'_>, found: &Found) {
        let Some((name, path)) = &found.backup else {
            return;
        };
        match dst.dir.rename(name, dst.name) {
            Err(e) => error(&format!(
                "cannot un-backup {}: {}",
                quote(dst.path),
                os_text(&e)
            )),
            Ok(()) if self.opts.verbose => say(format_args!(
                "{} -> {} (unbackup)",
                quote(path),
                quote(dst.path)
            )),
            Ok(()) => {}
        }
    }

    /// Whether SOURCE's inode is remembered, so a later name for it is linked to this DEST
    /// (--preserve=links): files with other links, and with -H or -L also single-link files
    /// reached twice through symlinks.
    pub(super) fn remembers_link(&self, src_meta: &Stat, top: bool) -> bool {
        let opts = self.opts;
        opts.preserve.links
            && !opts.hard_link
            && (src_meta.nlink() > 1
                || opts.deref == Deref::Always
                || top && opts.deref == Deref::CommandLine)
    }

    /// -u found DEST up to date. cp still maps SOURCE's inode to it, and makes a later name
    /// of that inode a link to this DEST, replacing whatever was there.
    fn keep_current(&mut self, dst: At<'_>, src_meta: &Stat, follow: bool) -> Step {
        let Some(first) = self.memory.links.get(&src_meta.id()) else {
            let first = FirstCopy {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
            };
            self.memory.links.insert(src_meta.id(), first);
            return Ok(());
        };
        self.link_to_first(dst, first, follow)
    }

    /// The -i question for DEST: cp warns when DEST is not writable.
    fn overwrite_question(&self, dst: At<'_>, dm: &Stat) -> String {
        let writable =
            dm.is_symlink() || nix::unistd::geteuid().is_root() || dst.dir.writable(dst.name);
        if writable {
            return format!("overwrite {}? ", quote(dst.path));
        }
        let mode = dm.mode() & 0o7777;
        if self.opts.force || self.opts.remove_destination {
            format!(
                "replace {}, overriding mode {mode:04o} ({})? ",
                quote(dst.path),
                perm_string(mode)
            )
        } else {
            format!(
                "unwritable {} (mode {mode:04o}, {}); try anyway? ",
                quote(dst.path),
                perm_string(mode)
            )
        }
    }

    /// Whether SOURCE is DEST's simple backup, which backing DEST up would overwrite.
    fn source_is_dst_backup(&self, src_base: &OsStr, src_meta: &Stat, dst: At<'_>) -> bool {
        let dst_base = same_file::last_component(dst.name);
        let expected = backup::with_suffix(dst_base, OsStr::new(&self.opts.suffix));
        if src_base != expected {
            return false;
        }
        let backup = backup::with_suffix(dst.name, OsStr::new(&self.opts.suffix));
        dst.dir
            .stat(&backup, true)
            .is_ok_and(|m| m.id() == src_meta.id())
    }
}

/// The nine permission characters of `ls -l` (with s/S and t/T), as cp's -i question
/// shows them.
fn perm_string(mode: u32) -> String {
    let bit = |m: u32, c: char| if mode & m != 0 { c } else { '-' };
    let special = |x: u32, s: u32, lower: char| match (mode & x != 0, mode & s != 0) {
        (true, true) => lower,
        (false, true) => lower.to_ascii_uppercase(),
        (true, false) => 'x',
        (false, false) => '-',
    };
    [
        bit(0o400, 'r'),
        bit(0o200, 'w'),
        special(0o100, 0o4000, 's'),
        bit(0o040, 'r'),
        bit(0o020, 'w'),
        special(0o010, 0o2000, 's'),
        bit(0o004, 'r'),
        bit(0o002, 'w'),
        special(0o001, 0o1000, 't'),
    ]
    .iter()
    .collect()
}
