//! The per-file work of cp: every decision about one SOURCE/DEST pair (same file, overwrite
//! rules, backups, links, directories, special files, attributes), with the file data handed
//! to the engine. Errors are printed where they happen and the run goes on; `Copier::failed`
//! tells `main` to exit 1.
//!
//! Every file is reached as a name inside an open directory ([`At`]): SOURCE trees are walked
//! and DEST trees built through directory descriptors, so a directory swapped for a symlink
//! mid-run can't redirect a read or a write (see `open_dir`).

use crate::attrs;
use crate::backup;
use crate::messages::{error, os_text};
use crate::open_dir::{open_parent, At, OpenDir};
use crate::options::{BackupKind, Clobber, Deref, Options};
use crate::plan::join;
use crate::quote::{quote, quote_if_needed};
use crate::stat::{dst_is_current, FileId, FileKind, Stat};
use aiscp::engine::{fileio, Config, DataJob, Engine, ProgressSink, SourceKind};
use nix::fcntl::OFlag;
use nix::sys::stat::{Mode, SFlag};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// A failure already reported on stderr.
#[derive(Debug)]
pub struct Reported;

type Step = Result<(), Reported>;

fn fail(msg: String) -> Reported {
    error(&msg);
    Reported
}

/// "WHAT 'PATH': STRERROR", cp's shape for a failed operation on a file, reported.
pub(crate) fn fail_os(what: &str, path: impl AsRef<Path>, e: &io::Error) -> Reported {
    fail(format!("{what} {}: {}", quote(path), os_text(e)))
}

/// A directory on DEST's path that --parents made (or, with -p, found), whose attributes
/// are set after the copy.
struct MadeParent {
    dir: OpenDir,
    src: PathBuf,
    dst: PathBuf,
    src_meta: Stat,
    /// The mode to give a made directory at the end where it was made narrower or
    /// owner-writable for the copy, and the mode is not preserved.
    restore_mode: Option<u32>,
}

/// Where the first DEST made from a multiply-linked SOURCE lives, to link the others to it.
struct FirstCopy {
    dir: Rc<OpenDir>,
    name: OsString,
    path: PathBuf,
}

pub struct Copier<'a> {
    opts: &'a Options,
    config: Config,
    engine: Option<Engine>,
    progress: Box<dyn ProgressSink>,
    umask: u32,
    /// Source inode -> first DEST made from it, to keep hard links (--preserve=links).
    links: HashMap<FileId, FirstCopy>,
    /// Files this run created, keyed with their name: cp won't overwrite them from another source.
    created: HashSet<(FileId, PathBuf)>,
    /// Command-line sources already copied (warn when one is named twice).
    seen_sources: HashSet<(FileId, PathBuf)>,
    /// Command-line source directories -> the DEST entry (its directory, its name) each
    /// was first copied to: the same again is only warned about.
    top_dirs: HashMap<FileId, (Option<FileId>, PathBuf)>,
    /// Directories this run created: met again as a source, DEST lies inside SOURCE.
    made_dirs: HashSet<FileId>,
    /// Set once the into-itself case is met: like GNU, stop copying that tree.
    into_itself: bool,
    /// The top-level SOURCE and DEST being copied, named in the into-itself message.
    top: (PathBuf, PathBuf),
    /// Whether the run has several sources (GNU keeps the two sets above only then).
    track: bool,
    pub failed: bool,
}

impl<'a> Copier<'a> {
    pub fn new(
        opts: &'a Options,
        config: Config,
        progress: Box<dyn ProgressSink>,
        several_sources: bool,
    ) -> Self {
        let umask = {
            let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o022));
            nix::sys::stat::umask(old);
            old.bits()
        };
        Copier {
            opts,
            config,
            engine: None,
            progress,
            umask,
            links: HashMap::new(),
            created: HashSet::new(),
            seen_sources: HashSet::new(),
            top_dirs: HashMap::new(),
            made_dirs: HashSet::new(),
            into_itself: false,
            top: Default::default(),
            track: several_sources,
            failed: false,
        }
    }

    /// Copies one top-level operand. The directories holding SOURCE and DEST are opened as
    /// the user named them; everything below goes through descriptors.
    pub fn copy_top(&mut self, src: &Path, dst: &Path, parents_of: Option<&Path>) {
        self.top = (src.to_path_buf(), dst.to_path_buf());
        self.into_itself = false;
        let (src_dir, src_name) = open_parent(src);
        let mut made_parents = Vec::new();
        let (dst_dir, dst_name) = match parents_of {
            Some(target) => match self.make_parents(src, dst, target, &mut made_parents) {
                Ok(made) => made,
                Err(Reported) => {
                    self.failed = true;
                    return;
                }
            },
            None => open_parent(dst),
        };
        let (src_dir, dst_dir) = (Rc::new(src_dir), Rc::new(dst_dir));
        let src_at = At {
            dir: &src_dir,
            name: &src_name,
            path: src,
        };
        let dst_at = At {
            dir: &dst_dir,
            name: &dst_name,
            path: dst,
        };
        if self.copy_entry(src_at, dst_at, true, None).is_err() {
            self.failed = true;
        }
        // Like GNU, the directories --parents made get their attributes once DEST is in
        // (setting times earlier would be undone by creating entries inside them).
        for made in made_parents.iter().rev() {
            if self.finish_parent(made).is_err() {
                self.failed = true;
            }
        }
    }

    /// --parents: creates DEST's missing ancestors below TARGET, each like its source
    /// directory, each made and entered through its parent's descriptor. Returns DEST's
    /// directory and DEST's name in it.
    fn make_parents(
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
            let made_here = match dir.stat(name, false) {
                Ok(m) if m.is_dir() => None,
                Ok(_) => return Err(fail(format!("{} exists but is not a directory", quote(&d)))),
                Err(_) => Some(self.make_parent(&dir, name, &s, &d)?),
            };
            let cannot = |e: io::Error| fail_os("cannot access", &d, &e);
            dir = dir.open_child(name, false).map_err(cannot)?;
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
            println!("{} -> {}", s.display(), d.display());
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
    fn finish_parent(&self, made: &MadeParent) -> Step {
        let p = self.opts.preserve;
        let restore = made.restore_mode.filter(|_| !p.mode);
        if !(p.mode || p.ownership || p.timestamps || p.xattr || restore.is_some()) {
            return Ok(());
        }
        let f = made
            .dir
            .readable()
            .map_err(|e| fail_os("cannot open", &made.dst, &e))?;
        let src_dir = (p.xattr || p.mode)
            .then(|| File::open(&made.src).ok())
            .flatten();
        attrs::apply(
            &f,
            &made.dst,
            src_dir.as_ref(),
            &made.src_meta,
            self.opts,
            false,
            self.umask,
        )?;
        if let Some(mode) = restore {
            nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(mode))
                .map_err(|e| fail_os("failed to preserve permissions for", &made.dst, &e.into()))?;
        }
        Ok(())
    }

    fn follows(&self, top: bool) -> bool {
        match self.opts.deref {
            Deref::Always => true,
            Deref::Never => false,
            Deref::CommandLine => top,
        }
    }

    /// Copies SRC to DST; prints its own errors. `parent_dev` is the device of the directory
    /// being copied (for -x).
    fn copy_entry(&mut self, src: At<'_>, dst: At<'_>, top: bool, parent_dev: Option<u64>) -> Step {
        if self.config.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Reported); // interrupted: main says so once
        }
        let opts = self.opts;
        let follow = self.follows(top);
        let src_meta = src
            .dir
            .stat(src.name, follow)
            .map_err(|e| fail_os("cannot stat", src.path, &e))?;
        let src_kind = src_meta.kind();

        if src_kind == FileKind::Dir && !opts.recursive {
            return Err(fail(format!(
                "-r not specified; omitting directory {}",
                quote(src.path)
            )));
        }
        if top && self.track && src_kind != FileKind::Dir && opts.backup.is_none() {
            let key = (src_meta.id(), name_key(src.path));
            if !self.seen_sources.insert(key) {
                error(&format!(
                    "warning: source file {} specified more than once",
                    quote(src.path)
                ));
                return Ok(());
            }
        }

        let mut dst_lmeta = match dst.dir.stat(dst.name, false) {
            Ok(m) => Some(m),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(fail_os("cannot stat", dst.path, &e)),
        };
        // cp writes a file's data through a DEST symlink; what DEST is matters through the
        // link only then, not when DEST is replaced (links, backups, removal) or recreated.
        let src_as_link = src_kind == FileKind::Symlink;
        let through = match src_kind {
            FileKind::File => true,
            FileKind::Dir | FileKind::Symlink => false,
            _ => !opts.recursive || opts.copy_contents,
        } && !(opts.symbolic_link
            || opts.hard_link
            || opts.backup.is_some()
            || opts.remove_destination);
        let dst_meta = match &dst_lmeta {
            Some(m) if m.is_symlink() && through => {
                match dst.dir.stat(dst.name, true) {
                    Ok(m) => Some(m),
                    // Dangling: DEST is treated as new, and refused below.
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
                    // A symlink loop can't be written through; -f replaces it.
                    Err(e) if e.raw_os_error() == Some(libc::ELOOP) && opts.force => {
                        remove(dst)?;
                        dst_lmeta = None;
                        None
                    }
                    Err(e) => return Err(fail_os("cannot stat", dst.path, &e)),
                }
            }
            other => *other,
        };

        if src_kind == FileKind::Dir {
            if let Some(dm) = &dst_meta {
                if !dm.is_dir() {
                    return Err(fail(format!(
                        "cannot overwrite non-directory {} with directory {}",
                        quote(dst.path),
                        quote(src.path)
                    )));
                }
            }
            // A directory this run created showing up as a source means DEST is inside SOURCE.
            if self.made_dirs.contains(&src_meta.id()) {
                self.into_itself = true;
                return Err(fail(format!(
                    "cannot copy a directory, {}, into itself, {}",
                    quote(&self.top.0),
                    quote(&self.top.1)
                )));
            }
            // A command-line directory copied to the same DEST entry once already.
            if top {
                let place = (dst.dir.stat_self().ok().map(|m| m.id()), name_key(dst.path));
                match self.top_dirs.get(&src_meta.id()) {
                    Some(first) if *first == place => {
                        error(&format!(
                            "warning: source directory {} specified more than once",
                            quote(src.path)
                        ));
                        return Ok(());
                    }
                    Some(_) => {}
                    None => {
                        self.top_dirs.insert(src_meta.id(), place);
                    }
                }
            }
            return self.copy_dir(src, dst, &src_meta, dst_meta.as_ref(), follow, parent_dev);
        }

        // Non-directory SOURCE from here on.
        let mut dst_exists = dst_lmeta.is_some();
        if let Some(dl) = &dst_lmeta {
            if let Some(dm) = &dst_meta {
                let same = dm.id() == src_meta.id()
                    && (!src_as_link || dl.is_symlink() && dl.id() == src_meta.id());
                if same
                    && !(opts.backup.is_some() && opts.force && src_meta.is_file())
                    && (!opts.hard_link || follow)
                {
                    return Err(fail(format!(
                        "{} and {} are the same file",
                        quote(src.path),
                        quote(dst.path)
                    )));
                }
            }
            // What follows looks at DEST as cp stat'ed it: through a symlink SOURCE's data
            // would be written through; a dangling one counts as new (and is refused below).
            if let Some(dm) = &dst_meta {
                if opts.update_older
                    && dst_is_current(src_meta.mtime(), dm, opts.preserve.timestamps)
                {
                    return self.keep_current(dst, &src_meta);
                }
                match opts.clobber {
                    Clobber::Overwrite => {}
                    Clobber::SkipSilently => return Ok(()),
                    Clobber::SkipAndFail => {
                        return Err(fail(format!("not replacing {}", quote(dst.path))));
                    }
                    Clobber::Ask => {
                        if !ask(&self.overwrite_question(dst, dm)) {
                            return Ok(());
                        }
                    }
                }
                // Don't let a second source replace what the first just made (b/f would be
                // lost in `cp a/f b/f c`); numbered backups keep both.
                if top
                    && self.track
                    && !dm.is_dir()
                    && opts.backup != Some(BackupKind::Numbered)
                    && self.created.contains(&(dm.id(), name_key(dst.path)))
                {
                    return Err(fail(format!(
                        "will not overwrite just-created {} with {}",
                        quote(dst.path),
                        quote(src.path)
                    )));
                }
                if dm.is_dir() {
                    return Err(fail(format!(
                        "cannot overwrite directory {} with non-directory",
                        quote(dst.path)
                    )));
                }
            }
        } else if dst.path.as_os_str().as_bytes().ends_with(b"/") {
            return Err(fail(format!(
                "cannot create regular file {}: Not a directory",
                quote(dst.path)
            )));
        }

        let mut backup_path = None;
        if dst_exists {
            if let Some(kind) = opts.backup {
                let suffix = backup::suffix(dst.dir, dst.name, kind, &opts.suffix);
                let bpath = PathBuf::from(backup::with_suffix(dst.path.as_os_str(), &suffix));
                dst.dir
                    .rename(dst.name, &backup::with_suffix(dst.name, &suffix))
                    .map_err(|e| fail_os("cannot backup", dst.path, &e))?;
                backup_path = Some(bpath);
                dst_exists = false;
            } else if self.unlinks_first(&src_meta, dst_meta.as_ref().or(dst_lmeta.as_ref())) {
                remove(dst)?;
                if opts.verbose {
                    println!("removed {}", quote(dst.path));
                }
                dst_exists = false;
            }
        }
        if top && self.track && opts.backup.is_none() && dst_exists {
            if let Some(dl) = dst_lmeta.filter(Stat::is_symlink) {
                if self.created.contains(&(dl.id(), name_key(dst.path))) {
                    return Err(fail(format!(
                        "will not copy {} through just-created symlink {}",
                        quote(src.path),
                        quote(dst.path)
                    )));
                }
            }
        }

        if opts.verbose {
            match &backup_path {
                Some(b) => println!(
                    "{} -> {} (backup: {})",
                    quote(src.path),
                    quote(dst.path),
                    quote(b)
                ),
                None => println!("{} -> {}", quote(src.path), quote(dst.path)),
            }
        }
        if dst_exists && dst_meta.is_none() {
            return Err(fail(format!(
                "not writing through dangling symlink {}",
                quote(dst.path)
            )));
        }

        let earlier = self
            .links
            .get(&src_meta.id())
            .filter(|_| self.remembers_link(&src_meta, top))
            .map(|f| (Rc::clone(&f.dir), f.name.clone(), f.path.clone()));
        if opts.symbolic_link {
            self.symlink_to_source(src, dst)?;
        } else if opts.hard_link {
            let replace = opts.force || opts.clobber == Clobber::Ask;
            self.link_to(src, dst, follow, replace)?;
        } else if let Some((dir, name, path)) = earlier {
            // Another name of an inode already copied: link to that copy.
            let from = At {
                dir: &dir,
                name: &name,
                path: &path,
            };
            self.link_to(from, dst, false, true)?;
        } else {
            // What DEST is, when it is still there to be written (followed through a symlink).
            let existing = dst_meta.filter(|_| dst_exists);
            match src_kind {
                FileKind::Symlink => self.copy_symlink(src, dst, &src_meta),
                FileKind::File => self.copy_file(src, dst, &src_meta, existing.as_ref(), follow),
                _ if opts.recursive && !opts.copy_contents => {
                    self.make_special(src, dst, &src_meta)
                }
                _ => self.copy_file(src, dst, &src_meta, existing.as_ref(), follow),
            }?;
            if self.remembers_link(&src_meta, top) {
                let first = FirstCopy {
                    dir: Rc::clone(dst.dir),
                    name: dst.name.to_os_string(),
                    path: dst.path.to_path_buf(),
                };
                self.links.insert(src_meta.id(), first);
            }
        }
        // cp remembers what each command-line operand made, to refuse overwriting it.
        if top && self.track {
            if let Ok(m) = dst.dir.stat(dst.name, false) {
                self.created.insert((m.id(), name_key(dst.path)));
            }
        }
        Ok(())
    }

    /// -s: DST made a symlink to SOURCE as named (relative names only in the current
    /// directory, where they stay right); with -f it replaces an existing DST.
    fn symlink_to_source(&self, src: At<'_>, dst: At<'_>) -> Step {
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
        let target = src.path.as_os_str();
        make_or_replace(dst, self.opts.force, |name| dst.dir.symlink(target, name))
            .map(|_| ())
            .map_err(|e| {
                fail(format!(
                    "cannot create symbolic link {} to {}: {}",
                    quote(dst.path),
                    quote(src.path),
                    os_text(&e)
                ))
            })
    }

    /// Recreates the symlink SRC as DST. A DEST still there (cp removed it before only in
    /// the cases `unlinks_first` names) is replaced with -f, or else refused.
    fn copy_symlink(&mut self, src: At<'_>, dst: At<'_>, meta: &Stat) -> Step {
        let target = src
            .dir
            .read_link(src.name)
            .map_err(|e| fail_os("cannot read symbolic link", src.path, &e))?;
        make_or_replace(dst, self.opts.force, |name| dst.dir.symlink(&target, name))
            .map_err(|e| fail_os("cannot create symbolic link", dst.path, &e))?;
        attrs::apply_by_name(src, dst, meta, self.opts)
    }

    /// Whether an existing non-directory DEST is removed before SOURCE is copied, as cp
    /// decides it: always with --remove-destination; when data is copied, if DEST has other
    /// hard links that --preserve=links must not write through, or if SOURCE (not followed)
    /// is not a regular file, so it is recreated rather than written into.
    fn unlinks_first(&self, src_meta: &Stat, dst_meta: Option<&Stat>) -> bool {
        let opts = self.opts;
        let Some(dm) = dst_meta.filter(|m| !m.is_dir()) else {
            return false;
        };
        opts.remove_destination
            || !opts.attributes_only
                && (opts.preserve.links && dm.nlink() > 1
                    || opts.deref == Deref::Never && !src_meta.is_file())
    }

    /// Whether SOURCE's inode is remembered, so a later name for it is linked to this DEST
    /// (--preserve=links): files with other links, and with -H or -L also single-link files
    /// reached twice through symlinks.
    fn remembers_link(&self, src_meta: &Stat, top: bool) -> bool {
        let opts = self.opts;
        opts.preserve.links
            && !opts.hard_link
            && (src_meta.nlink() > 1
                || opts.deref == Deref::Always
                || top && opts.deref == Deref::CommandLine)
    }

    /// Makes DST a hard link to FROM (`follow`: to what a symlink FROM names); an existing
    /// DST is replaced when `replace`, which -v reports as cp does.
    fn link_to(&self, from: At<'_>, dst: At<'_>, follow: bool, replace: bool) -> Step {
        let replaced = make_or_replace(dst, replace, |name| dst.dir.hard_link(name, from, follow))
            .map_err(|e| {
                fail(format!(
                    "cannot create hard link {} to {}: {}",
                    quote(dst.path),
                    quote(from.path),
                    os_text(&e)
                ))
            })?;
        if replaced && self.opts.verbose && !self.opts.hard_link {
            println!("removed {}", quote(dst.path));
        }
        Ok(())
    }

    /// -u found DEST up to date. cp still maps SOURCE's inode to it, and makes a later name
    /// of that inode a link to this DEST, replacing whatever was there.
    fn keep_current(&mut self, dst: At<'_>, src_meta: &Stat) -> Step {
        match self.links.get(&src_meta.id()) {
            Some(first) => {
                let (dir, name, path) = (
                    Rc::clone(&first.dir),
                    first.name.clone(),
                    first.path.clone(),
                );
                let from = At {
                    dir: &dir,
                    name: &name,
                    path: &path,
                };
                self.link_to(from, dst, false, true)
            }
            None => {
                let first = FirstCopy {
                    dir: Rc::clone(dst.dir),
                    name: dst.name.to_os_string(),
                    path: dst.path.to_path_buf(),
                };
                self.links.insert(src_meta.id(), first);
                Ok(())
            }
        }
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

    /// Copies a directory: DEST made (owner-only until its contents are in) or merged into,
    /// both opened by descriptor and checked to be what was stat'ed, the entries copied in
    /// inode order, then DEST's mode and attributes set on its descriptor.
    fn copy_dir(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        dst_meta: Option<&Stat>,
        follow: bool,
        parent_dev: Option<u64>,
    ) -> Step {
        let opts = self.opts;
        let new_dir = dst_meta.is_none();
        if new_dir {
            dst.dir
                .mkdir(dst.name, 0o700)
                .map_err(|e| fail_os("cannot create directory", dst.path, &e))?;
            if opts.verbose {
                println!("{} -> {}", quote(src.path), quote(dst.path));
            }
        }
        let dst_dir = dst
            .dir
            .open_child(dst.name, false)
            .and_then(|d| Ok((d.stat_self()?, d)))
            .map_err(|e| fail_os("cannot open", dst.path, &e))?;
        let (dst_now, dst_dir) = (dst_dir.0, Rc::new(dst_dir.1));
        if dst_meta.is_some_and(|m| m.id() != dst_now.id()) {
            return Err(replaced(dst.path));
        }
        if new_dir {
            self.made_dirs.insert(dst_now.id());
        }
        let mut ok = true;
        let skip_contents = opts.one_file_system && parent_dev.is_some_and(|d| d != src_meta.dev());
        let src_dir = if skip_contents {
            None
        } else {
            match self.open_source_dir(src, src_meta, follow) {
                Ok(d) => Some(d),
                Err(Reported) => {
                    ok = false;
                    None
                }
            }
        };
        if let Some(src_dir) = &src_dir {
            let mut entries = src_dir.entries().unwrap_or_else(|e| {
                error(&format!(
                    "cannot access {}: {}",
                    quote(src.path),
                    os_text(&e)
                ));
                ok = false;
                Vec::new()
            });
            // GNU reads directories in inode order (fast on ext4); keep the same order so
            // -v output and the first of a hard-linked set match.
            entries.sort();
            for (_, name) in entries {
                let s = join(src.path, Path::new(&name));
                let d = join(dst.path, Path::new(&name));
                let child_src = At {
                    dir: src_dir,
                    name: &name,
                    path: &s,
                };
                let child_dst = At {
                    dir: &dst_dir,
                    name: &name,
                    path: &d,
                };
                if self
                    .copy_entry(child_src, child_dst, false, Some(src_meta.dev()))
                    .is_err()
                {
                    ok = false;
                }
                if self.into_itself {
                    break;
                }
            }
        }
        let p = opts.preserve;
        if !(new_dir || p.mode || p.ownership || p.timestamps || p.xattr) {
            return if ok { Ok(()) } else { Err(Reported) };
        }
        let f = dst_dir
            .readable()
            .map_err(|e| fail_os("cannot open", dst.path, &e))?;
        if new_dir && !opts.preserve.mode {
            let mode = attrs::new_mode(src_meta, &opts.preserve, self.umask);
            nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(mode)).map_err(|e| {
                fail(format!(
                    "setting permissions for {}: {}",
                    quote(dst.path),
                    os_text(&e.into())
                ))
            })?;
        }
        // SOURCE's own descriptor, read by attrs::apply only for xattrs and ACLs.
        let xattr_src = src_dir
            .filter(|_| opts.preserve.xattr || opts.preserve.mode)
            .and_then(|d| d.readable().ok());
        attrs::apply(
            &f,
            dst.path,
            xattr_src.as_ref(),
            src_meta,
            opts,
            new_dir,
            self.umask,
        )?;
        if ok {
            Ok(())
        } else {
            Err(Reported)
        }
    }

    /// Opens SOURCE's directory by descriptor and checks it is the one stat'ed.
    fn open_source_dir(
        &self,
        src: At<'_>,
        src_meta: &Stat,
        follow: bool,
    ) -> Result<Rc<OpenDir>, Reported> {
        let cannot = |e: io::Error| fail_os("cannot access", src.path, &e);
        let dir = src.dir.open_child(src.name, follow).map_err(cannot)?;
        let now = dir.stat_self().map_err(cannot)?;
        if now.id() != src_meta.id() {
            return Err(replaced(src.path));
        }
        Ok(Rc::new(dir))
    }

    fn copy_file(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        existing: Option<&Stat>,
        follow: bool,
    ) -> Step {
        let opts = self.opts;
        let mut flags = OFlag::O_RDONLY | OFlag::O_NOCTTY;
        if !follow {
            flags |= OFlag::O_NOFOLLOW;
        }
        // Opening a FIFO waits for a writer, out of reach of the first signal; open it
        // without waiting and wait in poll() instead (below).
        let fifo = src_meta.kind() == FileKind::Fifo;
        if fifo {
            flags |= OFlag::O_NONBLOCK;
        }
        let cannot_open = |e: &io::Error| {
            fail(format!(
                "cannot open {} for reading: {}",
                quote(src.path),
                os_text(e)
            ))
        };
        let src_file = src
            .dir
            .open_file(src.name, flags, 0)
            .map_err(|e| cannot_open(&e))?;
        let opened = Stat::of(&src_file).map_err(|e| fail_os("cannot fstat", src.path, &e))?;
        if opened.id() != src_meta.id() {
            return Err(replaced(src.path));
        }
        if fifo {
            // Wait for the writer as cp's open() would, before DEST is touched.
            let fd = src_file.as_fd();
            if !fileio::wait_readable(fd, &self.config.cancel).map_err(|e| cannot_open(&e))? {
                return Err(Reported); // interrupted: main says so once
            }
            fileio::clear_flag(fd, OFlag::O_NONBLOCK).map_err(|e| cannot_open(&e))?;
        }

        // The backend and its first buffer come before DEST is touched: if the backend
        // cannot start the run ends, if the buffer cannot be had this file fails, and either
        // way DEST is neither created nor truncated.
        if !opts.attributes_only && !opts.reflink_always {
            start_engine(&mut self.engine, &self.config)
                .prepare(src.path)
                .map_err(|e| fail(e.to_string()))?;
        }
        if opts.atomic {
            return self.copy_file_atomic(src.path, dst, &src_file, &opened, existing);
        }

        let (dst_file, created) = self.open_dst(dst, &opened, existing)?;
        let dst_now = Stat::of(&dst_file).map_err(|e| fail_os("cannot fstat", dst.path, &e))?;
        if dst_now.id() == opened.id() {
            return Err(fail(format!(
                "{} and {} are the same file",
                quote(src.path),
                quote(dst.path)
            )));
        }
        self.fill(src.path, dst.path, &src_file, &opened, &dst_file)?;
        attrs::apply(
            &dst_file,
            dst.path,
            Some(&src_file),
            &opened,
            opts,
            created,
            self.umask,
        )?;
        if opts.fsync {
            sync(&dst_file, dst, created)?;
        }
        Ok(())
    }

    /// Opens DEST the way cp does: an existing file truncated in place (its inode, owner and
    /// mode kept; with -f removed and recreated when it can't be opened), a new one created
    /// O_EXCL with SOURCE's permission bits less set-id/sticky (the kernel applies the umask).
    fn open_dst(
        &mut self,
        dst: At<'_>,
        src_meta: &Stat,
        existing: Option<&Stat>,
    ) -> Result<(File, bool), Reported> {
        let opts = self.opts;
        if let Some(existing) = existing {
            let mut flags = OFlag::O_WRONLY | OFlag::O_NOCTTY;
            if !opts.attributes_only {
                flags |= OFlag::O_TRUNC;
            }
            // Opening a FIFO for writing waits for a reader, out of reach of the first signal:
            // ask without waiting (ENXIO while there is none) every 100 ms instead.
            let fifo = existing.kind() == FileKind::Fifo;
            if fifo {
                flags |= OFlag::O_NONBLOCK;
            }
            let opened = loop {
                match dst.dir.open_file(dst.name, flags, 0) {
                    Err(e) if fifo && e.raw_os_error() == Some(libc::ENXIO) => {
                        if self.config.cancel.load(std::sync::atomic::Ordering::SeqCst) {
                            return Err(Reported); // interrupted: main says so once
                        }
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    other => break other,
                }
            };
            let opened = opened.and_then(|f| {
                if fifo {
                    fileio::clear_flag(f.as_fd(), OFlag::O_NONBLOCK)?;
                }
                Ok(f)
            });
            match opened {
                Ok(f) => return Ok((f, false)),
                Err(_) if opts.force => remove(dst)?,
                Err(e) => return Err(fail_os("cannot create regular file", dst.path, &e)),
            }
        }
        let mut mode = if opts.preserve.default_mode {
            0o666
        } else {
            src_meta.mode() & 0o777
        };
        if opts.preserve.ownership {
            // Others get no access until the owner is set (GNU does the same).
            mode &= 0o700;
        }
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOCTTY;
        let f = dst
            .dir
            .open_file(dst.name, flags, mode)
            .map_err(|e| fail_os("cannot create regular file", dst.path, &e))?;
        Ok((f, true))
    }

    /// Moves the data (unless --attributes-only), refusing --reflink=always as cp does where
    /// the filesystem cannot clone.
    fn fill(
        &mut self,
        src: &Path,
        dst: &Path,
        src_file: &File,
        src_meta: &Stat,
        dst_file: &File,
    ) -> Step {
        let opts = self.opts;
        if opts.attributes_only {
            return Ok(());
        }
        if opts.reflink_always {
            return Err(fail(format!(
                "failed to clone {} from {}: Operation not supported",
                quote(dst),
                quote(src)
            )));
        }
        // /proc and /sys files report a size that is not their length: stream anything
        // that is not a regular file, and regular files claiming to be empty.
        let src_kind = if src_meta.is_file() && src_meta.len() > 0 {
            SourceKind::Regular {
                len: src_meta.len(),
            }
        } else {
            SourceKind::Stream
        };
        let job = DataJob {
            src: src_file,
            src_name: src,
            src_kind,
            dst: dst_file,
            dst_name: dst,
            sparse: opts.sparse,
        };
        let engine = start_engine(&mut self.engine, &self.config);
        let res = engine.copy(&job, &*self.progress);
        res.map(|_| ()).map_err(|e| match e {
            // main reports the interruption once, after the engine has stopped.
            aiscp::engine::CopyError::Interrupted => Reported,
            e => fail(e.to_string()),
        })
    }

    /// --atomic: the data goes to a temporary file beside DEST, which is fsynced and renamed
    /// over DEST only when complete; any failure removes it.
    fn copy_file_atomic(
        &mut self,
        src: &Path,
        dst: At<'_>,
        src_file: &File,
        src_meta: &Stat,
        existing: Option<&Stat>,
    ) -> Step {
        let opts = self.opts;
        let dir_path = parent_path(dst.path);
        // An existing DEST keeps its permissions across the replacement, as cp keeps them.
        let mode = existing.map_or(src_meta.mode() & 0o777, |m| m.mode() & 0o7777);
        let (tmp, tmp_file) = temp_file(dst, mode & 0o700)
            .map_err(|e| fail_os("cannot create temporary file in", &dir_path, &e))?;
        let guard = TempGuard {
            dir: dst.dir,
            name: Some(tmp.clone()),
        };
        self.fill(src, dst.path, src_file, src_meta, &tmp_file)?;
        let fd = tmp_file.as_raw_fd();
        let set_mode = |m: u32| {
            nix::sys::stat::fchmod(fd, Mode::from_bits_truncate(m)).map_err(|e| {
                fail(format!(
                    "setting permissions for {}: {}",
                    quote(dst.path),
                    os_text(&e.into())
                ))
            })
        };
        match existing {
            Some(m) => {
                let _ = nix::unistd::fchown(fd, Some(m.uid().into()), Some(m.gid().into()));
                set_mode(m.mode() & 0o7777)?;
                attrs::apply(
                    &tmp_file,
                    dst.path,
                    Some(src_file),
                    src_meta,
                    opts,
                    false,
                    self.umask,
                )?;
            }
            None => {
                set_mode(attrs::new_mode(src_meta, &opts.preserve, self.umask))?;
                attrs::apply(
                    &tmp_file,
                    dst.path,
                    Some(src_file),
                    src_meta,
                    opts,
                    true,
                    self.umask,
                )?;
            }
        }
        tmp_file
            .sync_all()
            .map_err(|e| fail_os("error syncing", dst.path, &e))?;
        dst.dir.rename(&tmp, dst.name).map_err(|e| {
            fail(format!(
                "cannot rename {} to {}: {}",
                quote(join(
                    &dir_path,
                    Path::new(Path::new(&tmp).file_name().unwrap_or_default())
                )),
                quote(dst.path),
                os_text(&e)
            ))
        })?;
        guard.disarm();
        sync_dir(dst)
    }
}

/// Brings the engine up the first time a file has data to copy (so -s, -l, --attributes-only
/// and directory-only runs never load a GPU library); a failure ends the run.
fn start_engine<'e>(slot: &'e mut Option<Engine>, config: &Config) -> &'e mut Engine {
    if slot.is_none() {
        let quiet = config.quiet;
        let mut warn = |w: &str| {
            if !quiet {
                error(&format!("warning: {w}"));
            }
        };
        match Engine::start(config.clone(), &mut warn) {
            Ok(e) => *slot = Some(e),
            Err(e) => {
                error(&e.to_string());
                std::process::exit(1);
            }
        }
    }
    slot.as_mut().expect("engine started above")
}

/// Removes the non-directory DEST, with cp's message on failure.
fn remove(dst: At<'_>) -> Step {
    dst.dir
        .unlink(dst.name)
        .map_err(|e| fail_os("cannot remove", dst.path, &e))
}

/// Creates DST with `make(name)`. Where DST exists and `replace` is set, the new entry is
/// made under a temporary name beside it and renamed over it, so DST is never missing (cp's
/// force_linkat and force_symlinkat). Returns whether an existing DST was replaced.
fn make_or_replace(
    dst: At<'_>,
    replace: bool,
    make: impl Fn(&OsStr) -> io::Result<()>,
) -> io::Result<bool> {
    match make(dst.name) {
        Err(e) if replace && e.raw_os_error() == Some(libc::EEXIST) => {}
        other => return other.map(|()| false),
    }
    for attempt in 0..100u32 {
        let tmp = sibling_name(dst, &format!(".aiscp-{}-{attempt}", std::process::id()));
        match make(&tmp) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => continue,
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        return match dst.dir.rename(&tmp, dst.name) {
            Ok(()) => Ok(true),
            Err(e) => {
                let _ = dst.dir.unlink(&tmp);
                Err(e)
            }
        };
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// `leaf` as a name in DST's directory: where that directory could not be opened,
/// `dst.name` is the whole path, and the directory part is kept.
fn sibling_name(dst: At<'_>, leaf: &str) -> OsString {
    let mut name = match dst.name.as_bytes().iter().rposition(|&b| b == b'/') {
        Some(i) => OsStr::from_bytes(&dst.name.as_bytes()[..=i]).to_os_string(),
        None => OsString::new(),
    };
    name.push(leaf);
    name
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

/// GNU's words for a file that is no longer the one that was checked.
fn replaced(path: &Path) -> Reported {
    fail(format!(
        "skipping file {}, as it was replaced while being copied",
        quote(path)
    ))
}

/// The directory part of a path as messages name it ("." for a bare name).
fn parent_path(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Removes the temporary file unless disarmed (--atomic).
struct TempGuard<'a> {
    dir: &'a OpenDir,
    name: Option<OsString>,
}
impl TempGuard<'_> {
    fn disarm(mut self) {
        self.name = None;
    }
}
impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if let Some(n) = self.name.take() {
            let _ = self.dir.unlink(&n);
        }
    }
}

/// Creates a fresh temporary file beside DEST (same directory descriptor), returning its
/// name relative to that directory.
fn temp_file(dst: At<'_>, mode: u32) -> io::Result<(OsString, File)> {
    let base = dst
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Where DEST's directory could not be opened, `dst.name` is the whole path: keep the
    // temporary beside it all the same.
    let prefix = match dst.name.as_bytes().iter().rposition(|&b| b == b'/') {
        Some(i) => OsStr::from_bytes(&dst.name.as_bytes()[..=i]).to_os_string(),
        None => OsString::new(),
    };
    let pid = std::process::id();
    for attempt in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let mut name = prefix.clone();
        name.push(format!(".{base}.aiscp-{pid}-{nanos:x}{attempt}"));
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOCTTY | OFlag::O_NOFOLLOW;
        match dst.dir.open_file(&name, flags, mode) {
            Ok(f) => return Ok((name, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// --fsync: DEST's data, and for a new DEST the directory entry naming it.
fn sync(f: &File, dst: At<'_>, created: bool) -> Step {
    f.sync_all()
        .map_err(|e| fail_os("error syncing", dst.path, &e))?;
    if created {
        sync_dir(dst)?;
    }
    Ok(())
}

/// fsync of the directory DEST is in, through its descriptor.
fn sync_dir(dst: At<'_>) -> Step {
    let d = dst
        .dir
        .readable()
        .map_err(|e| fail_os("cannot open directory", parent_path(dst.path), &e))?;
    d.sync_all()
        .map_err(|e| fail_os("error syncing directory of", dst.path, &e))
}

/// The prompt of -i, on stderr; an answer starting with y or Y means yes.
fn ask(question: &str) -> bool {
    eprint!("{}: {question}", crate::messages::program());
    let _ = io::stderr().flush();
    let mut line = String::new();
    match io::stdin().lock().read_line(&mut line) {
        Ok(n) if n > 0 => line.starts_with('y') || line.starts_with('Y'),
        _ => false,
    }
}

/// A name's identity for GNU's "same name" checks: its basename.
fn name_key(p: &Path) -> PathBuf {
    p.file_name().map(PathBuf::from).unwrap_or_default()
}

fn same_dir(a: &Path, b: &Path) -> bool {
    let cwd = OpenDir::cwd();
    match (cwd.stat(a.as_os_str(), true), cwd.stat(b.as_os_str(), true)) {
        (Ok(x), Ok(y)) => x.id() == y.id(),
        _ => false,
    }
}
