//! The per-file work of cp: every decision about one SOURCE/DEST pair (same file, overwrite
//! rules, backups, links, directories, special files, attributes), with the file data handed
//! to the engine. Errors are printed where they happen and the run goes on; `Copier::failed`
//! tells `main` to exit 1.
//!
//! Every file is reached as a name inside an open directory ([`At`]): SOURCE trees are walked
//! and DEST trees built through directory descriptors, so a directory swapped for a symlink
//! mid-run can't redirect a read or a write (see `open_dir`).

mod atomic;
mod inflight;

use crate::attrs;
use crate::backup;
use crate::messages::{error, os_text, say};
use crate::open_dir::{open_parent, At, OpenDir};
use crate::options::{BackupKind, Clobber, Deref, Options, Preserve};
use crate::plan::{join, CopyJob};
use crate::quote::{quote, quote_if_needed};
use crate::same_file::{self, Verdict};
use crate::stat::{dst_is_current, FileId, FileKind, Stat};
use aiscp_engine::{fileio, Config, DataJob, Engine, ProgressSink, SourceKind};
use atomic::Aside;
use nix::fcntl::OFlag;
use nix::sys::stat::{Mode, SFlag};
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

mod walk;

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

/// What cp found at DEST and did (or, under --atomic, leaves to the rename) before the new
/// file is made.
struct Found {
    /// DEST's stat, followed or not as cp looked at it; None where nothing is there (or a
    /// symlink loop -f will replace).
    sb: Option<Stat>,
    /// DEST is known not to exist (any more).
    new: bool,
    aside: Aside,
    /// The backup's name in DEST's directory and as messages name it.
    backup: Option<(OsString, PathBuf)>,
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
    progress: std::sync::Arc<dyn ProgressSink + Send + Sync>,
    umask: u32,
    /// Source inode -> first DEST made from it, to keep hard links (--preserve=links).
    links: HashMap<FileId, FirstCopy>,
    /// Files this run created, keyed with their name: cp won't overwrite them from another source.
    created: HashSet<(FileId, PathBuf)>,
    /// Command-line sources already copied (warn when one is named twice).
    seen_sources: HashSet<(FileId, PathBuf)>,
    /// Directories this run created: met again as a source, DEST lies inside SOURCE.
    made_dirs: HashSet<FileId>,
    /// Set once the into-itself case is met: like GNU, stop copying that tree.
    into_itself: bool,
    /// The top-level SOURCE and DEST being copied, named in the into-itself message.
    top: (PathBuf, PathBuf),
    /// Whether the run has several sources (GNU keeps the two sets above only then).
    track: bool,
    /// A directory `copy_entry` has just entered, for the walk to copy its entries.
    entered: Option<walk::DirFrame>,
    /// The SOURCE directories being copied, outermost first, with their DEST: met again,
    /// they are a cycle.
    active: Vec<(FileId, PathBuf)>,
    /// Command-line directories copied: (SOURCE, DEST's directory and name).
    top_dirs: HashSet<(FileId, (Option<FileId>, OsString))>,
    /// How DEST is backed up for the operand being copied (none for `cp -fb a a`).
    backup: Option<BackupKind>,
    /// POSIXLY_CORRECT: a dangling DEST symlink is written through, creating its target.
    open_dangling: bool,
    /// Files whose data is in flight (see `inflight`).
    inflight: inflight::Inflight,
    /// Moves file data in the engine's place (MPI ranks share each file out); None: the
    /// engine copies it here.
    pub mover: Option<Box<dyn DataMover + 'a>>,
    pub failed: bool,
}

/// Copies one file's data, given the engine this process would use.
pub trait DataMover {
    fn copy(
        &mut self,
        engine: &mut Engine,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, aiscp_engine::CopyError>;
}

impl<'a> Copier<'a> {
    /// What the engine staged through and where its time went; None when no file had data
    /// to copy.
    pub fn engine_info(&self) -> Option<(aiscp_engine::EngineInfo, aiscp_engine::StageTimes)> {
        self.engine.as_ref().map(|e| (e.info(), e.run_stages()))
    }

    pub fn new(
        opts: &'a Options,
        config: Config,
        progress: Box<dyn ProgressSink + Send + Sync>,
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
            progress: progress.into(),
            umask,
            links: HashMap::new(),
            created: HashSet::new(),
            seen_sources: HashSet::new(),
            made_dirs: HashSet::new(),
            into_itself: false,
            top: Default::default(),
            track: several_sources,
            entered: None,
            active: Vec::new(),
            top_dirs: HashSet::new(),
            backup: opts.backup,
            open_dangling: std::env::var_os("POSIXLY_CORRECT").is_some(),
            inflight: Default::default(),
            mover: None,
            failed: false,
        }
    }

    /// Copies one top-level operand. The directories holding SOURCE and DEST are opened as
    /// the user named them; everything below goes through descriptors.
    pub fn copy_top(&mut self, job: &CopyJob) {
        let (src, dst, parents_of) = (&*job.src, &*job.dst, job.parents_of.as_deref());
        self.backup = if job.no_backup {
            None
        } else {
            self.opts.backup
        };
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
        if self.copy_tree(src_at, dst_at).is_err() {
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
    fn finish_parent(&self, made: &MadeParent) -> Step {
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
        if top && self.track && src_kind != FileKind::Dir && self.backup.is_none() {
            let key = (src_meta.id(), name_key(src.path));
            if !self.seen_sources.insert(key) {
                error(&format!(
                    "warning: source file {} specified more than once",
                    quote(src.path)
                ));
                return Ok(());
            }
        }

        // DEST as cp looks at it: followed only when a regular file will be written through
        // it; a DEST that is unlinked, backed up or replaced by a link is taken as it is.
        let copy_as_regular = !opts.recursive || opts.copy_contents;
        let use_lstat = (src_kind != FileKind::File
            && (!copy_as_regular || matches!(src_kind, FileKind::Dir | FileKind::Symlink)))
            || opts.symbolic_link
            || opts.hard_link
            || self.backup.is_some()
            || opts.remove_destination;
        let mut new_dst = false;
        let dst_sb = match dst.dir.stat(dst.name, !use_lstat) {
            Ok(m) => Some(m),
            // A symlink loop: -f unlinks it once opening it fails.
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) && opts.force => None,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                new_dst = true;
                None
            }
            Err(e) => return Err(fail_os("cannot stat", dst.path, &e)),
        };

        // --atomic leaves a backup or a removal of DEST to the rename that puts the complete
        // new file in place (see `atomic`).
        let atomic_data = opts.atomic
            && !opts.attributes_only
            && !opts.symbolic_link
            && !opts.hard_link
            && (src_kind == FileKind::File
                || (copy_as_regular && !matches!(src_kind, FileKind::Dir | FileKind::Symlink)))
            && !(self.remembers_link(&src_meta, top) && self.links.contains_key(&src_meta.id()));
        let mut deferred = Aside::Keep;
        let mut backup: Option<(OsString, PathBuf)> = None;
        if let Some(dm) = &dst_sb {
            let mut done = false;
            if opts.clobber != Clobber::SkipSilently {
                match same_file::check(src, &src_meta, dst, dm, opts, self.backup.is_some()) {
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
                if opts.update_older
                    && dst_is_current(src_meta.mtime(), dm, opts.preserve.timestamps)
                {
                    return self.keep_current(dst, &src_meta, follow);
                }
                match opts.clobber {
                    Clobber::Overwrite => {}
                    Clobber::SkipSilently => return Ok(()),
                    Clobber::SkipAndFail => {
                        return Err(fail(format!("not replacing {}", quote(dst.path))));
                    }
                    Clobber::Ask => {
                        self.settle();
                        match ask(&self.overwrite_question(dst, dm), &self.config.cancel) {
                            Some(true) => {}
                            Some(false) => return Ok(()),
                            None => return Err(Reported), // interrupted: main says so once
                        }
                    }
                }
            }
            if done {
                return Ok(());
            }
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
                    && self.track
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
            let src_base = same_file::last_component(src.path.as_os_str());
            let dot_or_dotdot = src_base == "." || src_base == "..";
            if let (Some(kind), false, false) = (self.backup, dot_or_dotdot, dm.is_dir()) {
                if kind != BackupKind::Numbered
                    && self.source_is_dst_backup(src_base, &src_meta, dst)
                {
                    return Err(fail(format!(
                        "backing up {} might destroy source;  {} not copied",
                        quote(dst.path),
                        quote(src.path)
                    )));
                }
                let suffix = backup::suffix(dst.dir, dst.name, kind, &opts.suffix);
                let name = backup::with_suffix(dst.name, &suffix);
                let path = PathBuf::from(backup::with_suffix(dst.path.as_os_str(), &suffix));
                if atomic_data {
                    deferred = Aside::Backup(name.clone());
                    backup = Some((name, path));
                } else {
                    match dst.dir.rename(dst.name, &name) {
                        Ok(()) => backup = Some((name, path)),
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                        Err(e) => return Err(fail_os("cannot backup", dst.path, &e)),
                    }
                }
                new_dst = true;
            } else if !dm.is_dir()
                && (opts.remove_destination
                    || (!opts.attributes_only
                        && ((opts.preserve.links && dm.nlink() > 1)
                            || (opts.deref == Deref::Never && src_kind != FileKind::File))))
            {
                // Unlinked first: with --preserve=links DEST's other names keep their data.
                // (-v says so here, in cp's order, also when --atomic removes it at the rename.)
                if atomic_data {
                    deferred = Aside::Remove;
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
                new_dst = true;
            }
        }

        // Never write through a symlink this run made from an earlier SOURCE.
        if top && self.track && self.backup.is_none() {
            let lstat = if use_lstat {
                dst_sb
            } else {
                dst.dir.stat(dst.name, false).ok()
            };
            if let Some(l) = lstat.filter(Stat::is_symlink) {
                if self.created.contains(&(l.id(), name_key(dst.path))) {
                    return Err(fail(format!(
                        "will not copy {} through just-created symlink {}",
                        quote(src.path),
                        quote(dst.path)
                    )));
                }
            }
        }

        let found = Found {
            sb: dst_sb,
            new: new_dst,
            aside: deferred,
            backup,
        };
        let result = self.create(src, dst, &src_meta, &found, top, parent_dev);
        if result.is_err() && found.aside == Aside::Keep {
            // Put the backup back where the copy failed (GNU's un_backup).
            if let Some((name, path)) = &found.backup {
                match dst.dir.rename(name, dst.name) {
                    Err(e) => error(&format!(
                        "cannot un-backup {}: {}",
                        quote(dst.path),
                        os_text(&e)
                    )),
                    Ok(()) if opts.verbose => say(format_args!(
                        "{} -> {} (unbackup)",
                        quote(path),
                        quote(dst.path)
                    )),
                    Ok(()) => {}
                }
            }
        }
        result
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

    /// -u found DEST up to date. cp still maps SOURCE's inode to it, and makes a later name
    /// of that inode a link to this DEST, replacing whatever was there.
    fn keep_current(&mut self, dst: At<'_>, src_meta: &Stat, follow: bool) -> Step {
        let Some(first) = self.links.get(&src_meta.id()) else {
            let first = FirstCopy {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
            };
            self.links.insert(src_meta.id(), first);
            return Ok(());
        };
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

    /// Makes DEST once the checks have passed: a directory, a link, a regular file's data or
    /// a special file.
    fn create(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
        top: bool,
        parent_dev: Option<u64>,
    ) -> Step {
        let follow = self.follows(top);
        let opts = self.opts;
        let src_kind = src_meta.kind();
        if src_kind == FileKind::Dir {
            // A directory this run created showing up as a source means DEST is inside SOURCE.
            if self.made_dirs.contains(&src_meta.id()) {
                self.into_itself = true;
                return Err(fail(format!(
                    "cannot copy a directory, {}, into itself, {}",
                    quote(&self.top.0),
                    quote(&self.top.1)
                )));
            }
            if top {
                // The same directory named twice for one DEST: copied once, with a warning.
                let dst_id = dst.dir.stat_self().map(|m| m.id()).ok();
                let key = (dst_id, same_file::last_component(dst.name).to_os_string());
                if !self.top_dirs.insert((src_meta.id(), key)) {
                    error(&format!(
                        "warning: source directory {} specified more than once",
                        quote(src.path)
                    ));
                    return Ok(());
                }
            }
            let dst_meta = if found.new { None } else { found.sb.as_ref() };
            return self.enter_dir(src, dst, src_meta, dst_meta, follow, parent_dev);
        }

        if opts.verbose {
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

        // Hard links within the copied set.
        if self.remembers_link(src_meta, top) {
            if let Some(first) = self.links.get(&src_meta.id()) {
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
                if replaced && opts.verbose {
                    say(format_args!("removed {}", quote(dst.path)));
                }
                return Ok(());
            }
        }

        if opts.symbolic_link {
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
            force_symlink(dst, src.path.as_os_str(), opts.force).map_err(|e| {
                fail(format!(
                    "cannot create symbolic link {} to {}: {}",
                    quote(dst.path),
                    quote(src.path),
                    os_text(&e)
                ))
            })?;
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
            let copy_as_regular = !opts.recursive || opts.copy_contents;
            match src_kind {
                FileKind::File => self.copy_file(src, dst, src_meta, found, follow)?,
                FileKind::Symlink => self.copy_symlink(src, dst, src_meta)?,
                _ if copy_as_regular => self.copy_file(src, dst, src_meta, found, follow)?,
                _ => self.make_special(src, dst, src_meta)?,
            }
        }
        if self.remembers_link(src_meta, top) {
            let first = FirstCopy {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
            };
            self.links.insert(src_meta.id(), first);
        }
        // cp remembers what each command-line operand made, to refuse overwriting it.
        if top && self.track {
            if let Ok(m) = dst.dir.stat(dst.name, false) {
                self.created.insert((m.id(), name_key(dst.path)));
            }
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

    fn copy_file(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
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
        crate::test_hook::pause("source-open");
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
        if opts.atomic && !opts.attributes_only {
            let plan = self.plan_atomic(src.path, dst, &opened, found)?;
            if let Some(plan) = plan {
                return self.copy_file_atomic(src.path, dst, &src_file, &opened, plan);
            }
        }

        crate::test_hook::pause("dest-open");
        let (dst_file, created) = self.open_dst(dst, &opened, found.sb.as_ref(), found.new)?;
        let dst_now = Stat::of(&dst_file).map_err(|e| fail_os("cannot fstat", dst.path, &e))?;
        if dst_now.id() == opened.id() {
            return Err(fail(format!(
                "{} and {} are the same file",
                quote(src.path),
                quote(dst.path)
            )));
        }
        let queued = self.queue_data(
            src.path, dst.path, src_file, dst_file, &opened, &dst_now, found, created,
        );
        let Err((src_file, dst_file)) = queued else {
            return Ok(()); // the rest follows the data (see `inflight`)
        };
        if !created && !opts.attributes_only && dst_now.is_file() {
            dst_file
                .set_len(0)
                .map_err(|e| fail_os("cannot create regular file", dst.path, &e))?;
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

    /// Opens DEST the way cp's copy_reg does: an existing file truncated in place (its inode,
    /// owner and mode kept; with -f removed and recreated when it can't be opened), a new one
    /// created O_EXCL with SOURCE's permission bits less set-id/sticky (the kernel applies
    /// the umask). A dangling symlink is refused (followed under POSIXLY_CORRECT).
    fn open_dst(
        &mut self,
        dst: At<'_>,
        src_meta: &Stat,
        dst_sb: Option<&Stat>,
        mut new_dst: bool,
    ) -> Result<(File, bool), Reported> {
        let opts = self.opts;
        if !new_dst {
            // No O_TRUNC: DEST is cut only once its descriptor is known not to be SOURCE
            // (`copy_file`), so a DEST swapped for SOURCE's name can't empty SOURCE.
            let mut flags = OFlag::O_WRONLY | OFlag::O_NOCTTY;
            // Opening a FIFO for writing waits for a reader, out of reach of the first signal:
            // ask without waiting (ENXIO while there is none) every 100 ms instead.
            let fifo = dst_sb.is_some_and(|m| m.kind() == FileKind::Fifo);
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
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => new_dst = true,
                Err(_) if opts.force => {
                    match dst.dir.unlink(dst.name) {
                        Ok(()) if opts.verbose => say(format_args!("removed {}", quote(dst.path))),
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                        Err(e) => return Err(fail_os("cannot remove", dst.path, &e)),
                    }
                    new_dst = true;
                }
                Err(e) => return Err(fail_os("cannot create regular file", dst.path, &e)),
            }
        }
        debug_assert!(new_dst);
        let mut mode = if opts.preserve.default_mode {
            0o666
        } else {
            src_meta.mode() & 0o777
        };
        if opts.preserve.ownership {
            // Others get no access until the owner is set (GNU does the same).
            mode &= 0o700;
        }
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOCTTY;
        let mut res = dst.dir.open_file(dst.name, flags | OFlag::O_EXCL, mode);
        if let Err(e) = &res {
            // EEXIST on a name that is a symlink: a dangling one, which cp won't resolve
            // (racy) unless POSIXLY_CORRECT asks it to.
            if e.raw_os_error() == Some(libc::EEXIST) && dst.dir.read_link(dst.name).is_ok() {
                if !self.open_dangling {
                    return Err(fail(format!(
                        "not writing through dangling symlink {}",
                        quote(dst.path)
                    )));
                }
                res = dst.dir.open_file(dst.name, flags, mode);
            }
        }
        let f = res.map_err(|e| {
            let trailing_slash = dst.path.as_os_str().as_bytes().ends_with(b"/");
            let e = match e.raw_os_error() {
                Some(libc::EISDIR) if trailing_slash => io::Error::from_raw_os_error(libc::ENOTDIR),
                _ => e,
            };
            fail_os("cannot create regular file", dst.path, &e)
        })?;
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
        let res = match &mut self.mover {
            Some(mover) => mover.copy(engine, &job, &*self.progress),
            None => engine.copy(&job, &*self.progress),
        };
        res.map(|_| ()).map_err(|e| match e {
            // main reports the interruption once, after the engine has stopped.
            aiscp_engine::CopyError::Interrupted => Reported,
            e => fail(e.to_string()),
        })
    }
}

/// Brings the engine up the first time a file has data to copy (so -s, -l, --attributes-only
/// and directory-only runs never load a GPU library); a failure ends the run.
fn start_engine<'e>(slot: &'e mut Option<Engine>, config: &Config) -> &'e mut Engine {
    if slot.is_none() {
        let diagnostics = Box::new(StderrDiagnostics {
            quiet: config.quiet,
        });
        match Engine::start(config.clone(), diagnostics) {
            Ok(e) => *slot = Some(e),
            Err(e) => {
                error(&e.to_string());
                crate::messages::exit(1);
            }
        }
    }
    slot.as_mut().expect("engine started above")
}

/// The engine's warnings and --debug lines, on stderr.
struct StderrDiagnostics {
    quiet: bool,
}

impl aiscp_engine::Diagnostics for StderrDiagnostics {
    fn warn(&mut self, line: &str) {
        if !self.quiet {
            crate::messages::own_warning(line);
        }
    }
    fn debug(&mut self, since_start: std::time::Duration, line: &str) {
        // Through messages, so a failed stderr ends the run as cp's would, not in a panic.
        crate::progress::suspend(|| {
            crate::messages::to_stderr_raw(&format!(
                "aiscp: debug: +{:.3}s {line}\n",
                since_start.as_secs_f64()
            ));
        });
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

/// The prompt of -i, on stderr; an answer starting with y or Y means yes. None: a signal
/// came while waiting (the answer is read in short polls so that one can end the wait, as
/// it kills cp at its prompt). Reads stdin unbuffered, one line per prompt.
fn ask(question: &str, cancel: &std::sync::atomic::AtomicBool) -> Option<bool> {
    // The progress line stays wiped until the answer is in.
    crate::progress::suspend(|| ask_wiped(question, cancel))
}

fn ask_wiped(question: &str, cancel: &std::sync::atomic::AtomicBool) -> Option<bool> {
    crate::messages::to_stderr_raw(&format!("{}: {question}", crate::messages::program()));
    let stdin = io::stdin();
    let mut first = None;
    loop {
        match fileio::wait_readable(stdin.as_fd(), cancel) {
            Ok(true) => {}
            Ok(false) => return None,
            Err(_) => return Some(false),
        }
        let mut byte = [0u8];
        match nix::unistd::read(stdin.as_raw_fd(), &mut byte) {
            Ok(0) => break,
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) => {
                first.get_or_insert(byte[0]);
            }
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::EAGAIN) => {}
            Err(_) => break,
        }
    }
    Some(matches!(first, Some(b'y' | b'Y')))
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

/// Makes DEST a symlink to `target`; an existing DEST is replaced (atomically, through a
/// temporary name) only when `force` says so (gnulib's force_symlinkat).
fn force_symlink(dst: At<'_>, target: &OsStr, force: bool) -> io::Result<()> {
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
fn force_link(dst: At<'_>, from: At<'_>, replace: bool, follow: bool) -> io::Result<bool> {
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
