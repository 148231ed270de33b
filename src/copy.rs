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
use crate::messages::{error, os_text, say};
use crate::open_dir::{open_parent, At, OpenDir};
use crate::options::{Clobber, Deref, Options};
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

/// A directory --parents created, whose attributes are set after the copy.
struct MadeParent {
    dir: OpenDir,
    src: PathBuf,
    dst: PathBuf,
    src_meta: Stat,
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
    /// What the engine staged through; None when no file had data to copy.
    pub fn engine_info(&self) -> Option<aiscp::engine::EngineInfo> {
        self.engine.as_ref().map(Engine::info)
    }

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
            if let Some(src_meta) = made_here {
                made.push(MadeParent {
                    dir: dir.try_clone().map_err(cannot)?,
                    src: s.clone(),
                    dst: d.clone(),
                    src_meta,
                });
            }
        }
        let last = match last {
            Component::Normal(n) => n.to_os_string(),
            other => other.as_os_str().to_os_string(),
        };
        Ok((dir, last))
    }

    /// One missing ancestor for --parents: `name` in `dir`, made like the directory `s`.
    fn make_parent(
        &mut self,
        dir: &OpenDir,
        name: &OsStr,
        s: &Path,
        d: &Path,
    ) -> Result<Stat, Reported> {
        let sm = OpenDir::cwd()
            .stat(s.as_os_str(), true)
            .map_err(|e| fail_os("failed to get attributes of", s, &e))?;
        if !sm.is_dir() {
            return Err(fail(format!(
                "failed to get attributes of {}: Not a directory",
                quote(s)
            )));
        }
        dir.mkdir(name, sm.mode() & 0o7777)
            .map_err(|e| fail_os("cannot make directory", d, &e))?;
        if self.opts.verbose {
            say!("{} -> {}", s.display(), d.display());
        }
        Ok(sm)
    }

    /// The attributes -p asks for, on a directory --parents made.
    fn finish_parent(&self, made: &MadeParent) -> Step {
        let p = self.opts.preserve;
        if !(p.mode || p.ownership || p.timestamps || p.xattr) {
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
            true,
            self.umask,
        )
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

        let dst_lmeta = match dst.dir.stat(dst.name, false) {
            Ok(m) => Some(m),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
            Err(e) => return Err(fail_os("cannot stat", dst.path, &e)),
        };
        // A DEST symlink is written through (when SRC is not itself copied as a link).
        let src_as_link = src_kind == FileKind::Symlink;
        let dst_meta = match &dst_lmeta {
            Some(m) if m.is_symlink() && !src_as_link && src_kind != FileKind::Dir => {
                dst.dir.stat(dst.name, true).ok()
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
                if dm.is_dir() {
                    return Err(fail(format!(
                        "cannot overwrite directory {} with non-directory",
                        quote(dst.path)
                    )));
                }
            }
            if self.track && self.created.contains(&(dl.id(), name_key(dst.path))) {
                return Err(fail(format!(
                    "will not overwrite just-created {} with {}",
                    quote(dst.path),
                    quote(src.path)
                )));
            }
            if opts.update_older {
                let truncate = opts.preserve.timestamps;
                if let Some(dm) = &dst_meta {
                    if dst_is_current(src_meta.mtime(), dm, truncate) {
                        return Ok(());
                    }
                }
            }
            match opts.clobber {
                Clobber::Overwrite => {}
                Clobber::SkipSilently => return Ok(()),
                Clobber::SkipAndFail => {
                    return Err(fail(format!("not replacing {}", quote(dst.path))));
                }
                Clobber::Ask => {
                    if !ask(&format!("overwrite {}? ", quote(dst.path))) {
                        return Ok(());
                    }
                }
            }
        } else if dst.path.as_os_str().as_bytes().ends_with(b"/") {
            // Like open(2) with O_CREAT on "x/": a missing directory on the way is ENOENT,
            // only a missing last component is ENOTDIR.
            let name = dst.name.as_bytes();
            let end = name.iter().rposition(|&c| c != b'/').map_or(0, |i| i + 1);
            let why = match name[..end].iter().rposition(|&c| c == b'/') {
                Some(slash) => match dst.dir.stat(OsStr::from_bytes(&name[..=slash]), true) {
                    Err(e) => os_text(&e),
                    Ok(_) => "Not a directory".to_owned(),
                },
                None => "Not a directory".to_owned(),
            };
            return Err(fail(format!(
                "cannot create regular file {}: {why}",
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
            } else if opts.remove_destination
                || (dst_lmeta.as_ref().is_some_and(Stat::is_symlink)
                    && (src_as_link || opts.hard_link || opts.symbolic_link))
                || opts.hard_link && opts.force
                || opts.symbolic_link && opts.force
            {
                remove(dst)?;
                if opts.verbose && opts.remove_destination {
                    say!("removed {}", quote(dst.path));
                }
                dst_exists = false;
            } else if dst_meta.is_none() {
                return Err(fail(format!(
                    "not writing through dangling symlink {}",
                    quote(dst.path)
                )));
            }
        }

        let verbose_line = || {
            if opts.verbose {
                match &backup_path {
                    Some(b) => say!(
                        "{} -> {} (backup: {})",
                        quote(src.path),
                        quote(dst.path),
                        quote(b)
                    ),
                    None => say!("{} -> {}", quote(src.path), quote(dst.path)),
                }
            }
        };

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
            dst.dir
                .symlink(src.path.as_os_str(), dst.name)
                .map_err(|e| {
                    fail(format!(
                        "cannot create symbolic link {} to {}: {}",
                        quote(dst.path),
                        quote(src.path),
                        os_text(&e)
                    ))
                })?;
            verbose_line();
            return Ok(());
        }
        if opts.hard_link {
            dst.dir.hard_link(dst.name, src, follow).map_err(|e| {
                fail(format!(
                    "cannot create hard link {} to {}: {}",
                    quote(dst.path),
                    quote(src.path),
                    os_text(&e)
                ))
            })?;
            verbose_line();
            return Ok(());
        }

        // Hard links within the copied set.
        if opts.preserve.links && src_meta.nlink() > 1 {
            if let Some(first) = self.links.get(&src_meta.id()) {
                if dst_exists {
                    remove(dst)?;
                }
                let from = At {
                    dir: &first.dir,
                    name: &first.name,
                    path: &first.path,
                };
                dst.dir.hard_link(dst.name, from, false).map_err(|e| {
                    fail(format!(
                        "cannot create hard link {} to {}: {}",
                        quote(dst.path),
                        quote(&first.path),
                        os_text(&e)
                    ))
                })?;
                verbose_line();
                return Ok(());
            }
        }

        verbose_line();
        // What DEST is, when it is still there to be written (followed through a symlink).
        let existing = dst_meta.filter(|_| dst_exists);
        let result = match src_kind {
            FileKind::Symlink => self.copy_symlink(src, dst, &src_meta, dst_exists),
            FileKind::File => self.copy_file(src, dst, &src_meta, existing.as_ref(), follow),
            _ if opts.recursive && !opts.copy_contents => self.make_special(src, dst, &src_meta),
            _ => self.copy_file(src, dst, &src_meta, existing.as_ref(), follow),
        };
        result?;
        if opts.preserve.links && src_meta.nlink() > 1 {
            let first = FirstCopy {
                dir: Rc::clone(dst.dir),
                name: dst.name.to_os_string(),
                path: dst.path.to_path_buf(),
            };
            self.links.insert(src_meta.id(), first);
        }
        if self.track {
            if let Ok(m) = dst.dir.stat(dst.name, false) {
                self.created.insert((m.id(), name_key(dst.path)));
            }
        }
        Ok(())
    }

    fn copy_symlink(&mut self, src: At<'_>, dst: At<'_>, meta: &Stat, dst_exists: bool) -> Step {
        let target = src
            .dir
            .read_link(src.name)
            .map_err(|e| fail_os("cannot read symbolic link", src.path, &e))?;
        if dst_exists {
            remove(dst)?;
        }
        dst.dir
            .symlink(&target, dst.name)
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
                say!("{} -> {}", quote(src.path), quote(dst.path));
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
    // The progress line stays wiped until the answer is in.
    crate::progress::suspend(|| {
        eprint!("{}: {question}", crate::messages::program());
        let _ = io::stderr().flush();
        let mut line = String::new();
        match io::stdin().lock().read_line(&mut line) {
            Ok(n) if n > 0 => line.starts_with('y') || line.starts_with('Y'),
            _ => false,
        }
    })
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
