//! The per-file work of cp: every decision about one SOURCE/DEST pair (same file, overwrite
//! rules, backups, links, directories, special files, attributes), with the file data handed
//! to the engine. Errors are printed where they happen and the run goes on; `Copier::failed`
//! tells `main` to exit 1.

use crate::attrs;
use crate::backup;
use crate::messages::{error, io_text};
use crate::options::{Clobber, Deref, Options};
use crate::plan::join;
use crate::quote::{quote, quote_if_needed};
use aiscp::engine::{Config, DataJob, Engine, ProgressSink, SourceKind};
use nix::sys::stat::{Mode, SFlag};
use std::collections::{HashMap, HashSet};
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// A failure already reported on stderr.
#[derive(Debug)]
pub struct Reported;

type Step = Result<(), Reported>;

fn fail(msg: String) -> Reported {
    error(&msg);
    Reported
}

/// (device, inode): what identifies a file across names.
type FileId = (u64, u64);

fn id(m: &Metadata) -> FileId {
    (m.dev(), m.ino())
}

pub struct Copier<'a> {
    opts: &'a Options,
    config: Config,
    engine: Option<Engine>,
    progress: Box<dyn ProgressSink>,
    umask: u32,
    /// Source inode -> first DEST made from it, to keep hard links (--preserve=links).
    links: HashMap<FileId, PathBuf>,
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

    /// Copies one top-level operand.
    pub fn copy_top(&mut self, src: &Path, dst: &Path, parents_of: Option<&Path>) {
        self.top = (src.to_path_buf(), dst.to_path_buf());
        self.into_itself = false;
        if let Some(target) = parents_of {
            if self.make_parents(src, dst, target).is_err() {
                self.failed = true;
                return;
            }
        }
        if self.copy_entry(src, dst, true, None).is_err() {
            self.failed = true;
        }
    }

    /// --parents: creates DEST's missing ancestors, each like its source directory.
    fn make_parents(&mut self, src: &Path, dst: &Path, target: &Path) -> Step {
        let rel = dst.strip_prefix(target).unwrap_or(dst);
        let comps: Vec<_> = rel.components().collect();
        let src_is_abs = src.is_absolute();
        let mut s = if src_is_abs {
            PathBuf::from("/")
        } else {
            PathBuf::new()
        };
        let mut d = target.to_path_buf();
        for c in comps.iter().take(comps.len().saturating_sub(1)) {
            s.push(c);
            d = join(&d, Path::new(c.as_os_str()));
            match std::fs::symlink_metadata(&d) {
                Ok(m) if m.is_dir() => continue,
                Ok(_) => return Err(fail(format!("{} exists but is not a directory", quote(&d)))),
                Err(_) => {}
            }
            let sm = std::fs::metadata(&s).map_err(|e| {
                fail(format!(
                    "failed to get attributes of {}: {}",
                    quote(&s),
                    io_text(&e)
                ))
            })?;
            if !sm.is_dir() {
                return Err(fail(format!(
                    "failed to get attributes of {}: Not a directory",
                    quote(&s)
                )));
            }
            nix::unistd::mkdir(&d, Mode::from_bits_truncate(sm.mode() & 0o7777))
                .map_err(|e| fail(format!("cannot make directory {}: {}", quote(&d), e.desc())))?;
            if self.opts.verbose {
                println!("{} -> {}", s.display(), d.display());
            }
            if self.opts.preserve.mode
                || self.opts.preserve.ownership
                || self.opts.preserve.timestamps
            {
                let f = File::open(&d)
                    .map_err(|e| fail(format!("cannot open {}: {}", quote(&d), io_text(&e))))?;
                attrs::apply(&f, &d, &s, &sm, self.opts, true)?;
            }
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
    fn copy_entry(&mut self, src: &Path, dst: &Path, top: bool, parent_dev: Option<u64>) -> Step {
        if self.config.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(Reported); // interrupted: main says so once
        }
        let opts = self.opts;
        let follow = self.follows(top);
        let src_meta = if follow {
            std::fs::metadata(src)
        } else {
            std::fs::symlink_metadata(src)
        }
        .map_err(|e| fail(format!("cannot stat {}: {}", quote(src), io_text(&e))))?;
        let src_ft = src_meta.file_type();

        if src_ft.is_dir() && !opts.recursive {
            return Err(fail(format!(
                "-r not specified; omitting directory {}",
                quote(src)
            )));
        }
        if top && self.track && !src_ft.is_dir() && opts.backup.is_none() {
            let key = (id(&src_meta), name_key(src));
            if !self.seen_sources.insert(key) {
                error(&format!(
                    "warning: source file {} specified more than once",
                    quote(src)
                ));
                return Ok(());
            }
        }

        let dst_lmeta = std::fs::symlink_metadata(dst).ok();
        // A DEST symlink is written through (when SRC is not itself copied as a link).
        let src_as_link = src_ft.is_symlink();
        let dst_meta = match &dst_lmeta {
            Some(m) if m.file_type().is_symlink() && !src_as_link && !src_ft.is_dir() => {
                std::fs::metadata(dst).ok()
            }
            other => other.clone(),
        };

        if src_ft.is_dir() {
            if let Some(dm) = &dst_meta {
                if !dm.is_dir() {
                    return Err(fail(format!(
                        "cannot overwrite non-directory {} with directory {}",
                        quote(dst),
                        quote(src)
                    )));
                }
            }
            // A directory this run created showing up as a source means DEST is inside SOURCE.
            if self.made_dirs.contains(&id(&src_meta)) {
                self.into_itself = true;
                return Err(fail(format!(
                    "cannot copy a directory, {}, into itself, {}",
                    quote(&self.top.0),
                    quote(&self.top.1)
                )));
            }
            return self.copy_dir(src, dst, &src_meta, dst_meta.as_ref(), parent_dev);
        }

        // Non-directory SOURCE from here on.
        let mut dst_exists = dst_lmeta.is_some();
        if let Some(dl) = &dst_lmeta {
            if let Some(dm) = &dst_meta {
                let same = id(dm) == id(&src_meta)
                    && (!src_as_link || dl.file_type().is_symlink() && id(dl) == id(&src_meta));
                if same
                    && !(opts.backup.is_some() && opts.force && src_meta.is_file())
                    && (!opts.hard_link || follow)
                {
                    return Err(fail(format!(
                        "{} and {} are the same file",
                        quote(src),
                        quote(dst)
                    )));
                }
                if dm.is_dir() {
                    return Err(fail(format!(
                        "cannot overwrite directory {} with non-directory",
                        quote(dst)
                    )));
                }
            }
            if self.track && self.created.contains(&(id(dl), name_key(dst))) {
                return Err(fail(format!(
                    "will not overwrite just-created {} with {}",
                    quote(dst),
                    quote(src)
                )));
            }
            if opts.update_older {
                if let Some(dm) = &dst_meta {
                    let dst_t = (dm.mtime(), dm.mtime_nsec());
                    let src_t = (src_meta.mtime(), src_meta.mtime_nsec());
                    if dst_t >= src_t {
                        return Ok(());
                    }
                }
            }
            match opts.clobber {
                Clobber::Overwrite => {}
                Clobber::SkipSilently => return Ok(()),
                Clobber::SkipAndFail => {
                    return Err(fail(format!("not replacing {}", quote(dst))));
                }
                Clobber::Ask => {
                    if !ask(&format!("overwrite {}? ", quote(dst))) {
                        return Ok(());
                    }
                }
            }
        } else if dst.as_os_str().as_encoded_bytes().ends_with(b"/") {
            return Err(fail(format!(
                "cannot create regular file {}: Not a directory",
                quote(dst)
            )));
        }

        let mut backup_name = None;
        if dst_exists {
            if let Some(kind) = opts.backup {
                let name = backup::name(dst, kind, &opts.suffix);
                std::fs::rename(dst, &name)
                    .map_err(|e| fail(format!("cannot backup {}: {}", quote(dst), io_text(&e))))?;
                backup_name = Some(name);
                dst_exists = false;
            } else if opts.remove_destination
                || (dst_lmeta
                    .as_ref()
                    .is_some_and(|m| m.file_type().is_symlink())
                    && (src_as_link || opts.hard_link || opts.symbolic_link))
                || opts.hard_link && opts.force
                || opts.symbolic_link && opts.force
            {
                std::fs::remove_file(dst)
                    .map_err(|e| fail(format!("cannot remove {}: {}", quote(dst), io_text(&e))))?;
                if opts.verbose && opts.remove_destination {
                    println!("removed {}", quote(dst));
                }
                dst_exists = false;
            } else if dst_meta.is_none() {
                return Err(fail(format!(
                    "not writing through dangling symlink {}",
                    quote(dst)
                )));
            }
        }

        let verbose_line = || {
            if opts.verbose {
                match &backup_name {
                    Some(b) => println!("{} -> {} (backup: {})", quote(src), quote(dst), quote(b)),
                    None => println!("{} -> {}", quote(src), quote(dst)),
                }
            }
        };

        if opts.symbolic_link {
            if !src.is_absolute() {
                let parent = dst.parent().unwrap_or(Path::new(""));
                let here = parent.as_os_str().is_empty()
                    || parent == Path::new(".")
                    || same_dir(parent, Path::new("."));
                if !here {
                    return Err(fail(format!(
                        "{}: can make relative symbolic links only in current directory",
                        quote_if_needed(dst)
                    )));
                }
            }
            std::os::unix::fs::symlink(src, dst).map_err(|e| {
                fail(format!(
                    "cannot create symbolic link {} to {}: {}",
                    quote(dst),
                    quote(src),
                    io_text(&e)
                ))
            })?;
            verbose_line();
            return Ok(());
        }
        if opts.hard_link {
            let flags = if follow {
                nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW
            } else {
                nix::fcntl::AtFlags::empty()
            };
            nix::unistd::linkat(None, src, None, dst, flags).map_err(|e| {
                fail(format!(
                    "cannot create hard link {} to {}: {}",
                    quote(dst),
                    quote(src),
                    e.desc()
                ))
            })?;
            verbose_line();
            return Ok(());
        }

        // Hard links within the copied set.
        if opts.preserve.links && src_meta.nlink() > 1 {
            if let Some(first) = self.links.get(&id(&src_meta)).cloned() {
                if dst_exists {
                    std::fs::remove_file(dst).map_err(|e| {
                        fail(format!("cannot remove {}: {}", quote(dst), io_text(&e)))
                    })?;
                }
                std::fs::hard_link(&first, dst).map_err(|e| {
                    fail(format!(
                        "cannot create hard link {} to {}: {}",
                        quote(dst),
                        quote(&first),
                        io_text(&e)
                    ))
                })?;
                verbose_line();
                return Ok(());
            }
        }

        verbose_line();
        let special = !(src_ft.is_file() || src_ft.is_symlink());
        let result = if src_ft.is_symlink() {
            self.copy_symlink(src, dst, &src_meta, dst_exists)
        } else if special && opts.recursive && !opts.copy_contents {
            self.make_special(src, dst, &src_meta)
        } else {
            self.copy_file(src, dst, &src_meta, dst_exists, follow)
        };
        result?;
        if opts.preserve.links && src_meta.nlink() > 1 {
            self.links.insert(id(&src_meta), dst.to_path_buf());
        }
        if self.track {
            if let Ok(m) = std::fs::symlink_metadata(dst) {
                self.created.insert((id(&m), name_key(dst)));
            }
        }
        Ok(())
    }

    fn copy_symlink(&mut self, src: &Path, dst: &Path, meta: &Metadata, dst_exists: bool) -> Step {
        let target = std::fs::read_link(src).map_err(|e| {
            fail(format!(
                "cannot read symbolic link {}: {}",
                quote(src),
                io_text(&e)
            ))
        })?;
        if dst_exists {
            std::fs::remove_file(dst)
                .map_err(|e| fail(format!("cannot remove {}: {}", quote(dst), io_text(&e))))?;
        }
        std::os::unix::fs::symlink(&target, dst).map_err(|e| {
            fail(format!(
                "cannot create symbolic link {}: {}",
                quote(dst),
                io_text(&e)
            ))
        })?;
        attrs::apply_to_symlink(dst, meta, self.opts)
    }

    fn make_special(&mut self, src: &Path, dst: &Path, meta: &Metadata) -> Step {
        let ft = meta.file_type();
        let kind = if ft.is_fifo() {
            SFlag::S_IFIFO
        } else if ft.is_char_device() {
            SFlag::S_IFCHR
        } else if ft.is_block_device() {
            SFlag::S_IFBLK
        } else {
            SFlag::S_IFSOCK
        };
        let perm = Mode::from_bits_truncate(meta.mode() & 0o777);
        let res = if ft.is_fifo() {
            nix::unistd::mkfifo(dst, perm)
        } else {
            nix::sys::stat::mknod(dst, kind, perm, meta.rdev())
        };
        res.map_err(|e| {
            let what = if ft.is_fifo() {
                "cannot create fifo"
            } else {
                "cannot create special file"
            };
            fail(format!("{what} {}: {}", quote(dst), e.desc()))
        })?;
        let _ = src;
        attrs::apply_path(dst, meta, self.opts)
    }

    fn copy_dir(
        &mut self,
        src: &Path,
        dst: &Path,
        src_meta: &Metadata,
        dst_meta: Option<&Metadata>,
        parent_dev: Option<u64>,
    ) -> Step {
        let opts = self.opts;
        let new_dir = dst_meta.is_none();
        if new_dir {
            // Owner-only until the contents are in; the final mode is set afterwards.
            nix::unistd::mkdir(dst, Mode::S_IRWXU).map_err(|e| {
                fail(format!(
                    "cannot create directory {}: {}",
                    quote(dst),
                    e.desc()
                ))
            })?;
            if opts.verbose {
                println!("{} -> {}", quote(src), quote(dst));
            }
        }
        if new_dir {
            if let Ok(m) = std::fs::symlink_metadata(dst) {
                self.made_dirs.insert(id(&m));
            }
        }
        let mut ok = true;
        let skip_contents = opts.one_file_system && parent_dev.is_some_and(|d| d != src_meta.dev());
        if !skip_contents {
            let mut entries: Vec<(u64, std::ffi::OsString)> = match std::fs::read_dir(src) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok())
                    .map(|e| {
                        use std::os::unix::fs::DirEntryExt;
                        (e.ino(), e.file_name())
                    })
                    .collect(),
                Err(e) => {
                    error(&format!("cannot access {}: {}", quote(src), io_text(&e)));
                    ok = false;
                    Vec::new()
                }
            };
            // GNU reads directories in inode order (fast on ext4); keep the same order so
            // -v output and the first of a hard-linked set match.
            entries.sort();
            for (_, name) in entries {
                let s = join(src, Path::new(&name));
                let d = join(dst, Path::new(&name));
                if self
                    .copy_entry(&s, &d, false, Some(src_meta.dev()))
                    .is_err()
                {
                    ok = false;
                }
                if self.into_itself {
                    break;
                }
            }
        }
        let f = File::open(dst)
            .map_err(|e| fail(format!("cannot open {}: {}", quote(dst), io_text(&e))))?;
        if new_dir || opts.preserve.mode {
            let mode = if opts.preserve.mode {
                src_meta.mode() & 0o7777
            } else if opts.preserve.default_mode {
                0o777 & !self.umask
            } else {
                src_meta.mode() & 0o1777 & !self.umask
            };
            if !opts.preserve.mode {
                nix::sys::stat::fchmod(
                    std::os::fd::AsRawFd::as_raw_fd(&f),
                    Mode::from_bits_truncate(mode),
                )
                .map_err(|e| {
                    fail(format!(
                        "setting permissions for {}: {}",
                        quote(dst),
                        e.desc()
                    ))
                })?;
            }
        }
        attrs::apply(&f, dst, src, src_meta, opts, new_dir)?;
        if ok {
            Ok(())
        } else {
            Err(Reported)
        }
    }

    fn copy_file(
        &mut self,
        src: &Path,
        dst: &Path,
        src_meta: &Metadata,
        dst_exists: bool,
        follow: bool,
    ) -> Step {
        let opts = self.opts;
        let mut oo = OpenOptions::new();
        oo.read(true);
        let mut flags = libc::O_NOCTTY;
        if !follow {
            flags |= libc::O_NOFOLLOW;
        }
        oo.custom_flags(flags);
        let src_file = oo.open(src).map_err(|e| {
            fail(format!(
                "cannot open {} for reading: {}",
                quote(src),
                io_text(&e)
            ))
        })?;
        let opened = src_file
            .metadata()
            .map_err(|e| fail(format!("cannot fstat {}: {}", quote(src), io_text(&e))))?;
        if id(&opened) != id(src_meta) {
            return Err(fail(format!(
                "skipping file {}, as it was replaced while being copied",
                quote(src)
            )));
        }

        if opts.atomic {
            return self.copy_file_atomic(src, dst, &src_file, &opened, dst_exists);
        }

        let (dst_file, created) = self.open_dst(src, dst, &opened, dst_exists)?;
        let dst_id = dst_file
            .metadata()
            .map_err(|e| fail(format!("cannot fstat {}: {}", quote(dst), io_text(&e))))?;
        if id(&dst_id) == id(&opened) {
            return Err(fail(format!(
                "{} and {} are the same file",
                quote(src),
                quote(dst)
            )));
        }
        self.fill(src, dst, &src_file, &opened, &dst_file)?;
        attrs::apply(&dst_file, dst, src, &opened, opts, created)?;
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
        src: &Path,
        dst: &Path,
        src_meta: &Metadata,
        dst_exists: bool,
    ) -> Result<(File, bool), Reported> {
        let opts = self.opts;
        if dst_exists {
            let mut oo = OpenOptions::new();
            oo.write(true).truncate(!opts.attributes_only);
            oo.custom_flags(libc::O_NOCTTY);
            match oo.open(dst) {
                Ok(f) => return Ok((f, false)),
                Err(e) if opts.force => {
                    std::fs::remove_file(dst).map_err(|e2| {
                        fail(format!("cannot remove {}: {}", quote(dst), io_text(&e2)))
                    })?;
                    let _ = e;
                }
                Err(e) => {
                    return Err(fail(format!(
                        "cannot create regular file {}: {}",
                        quote(dst),
                        io_text(&e)
                    )))
                }
            }
        }
        let _ = src;
        let mut mode = if opts.preserve.default_mode {
            0o666
        } else {
            src_meta.mode() & 0o777
        };
        if opts.preserve.ownership {
            // Others get no access until the owner is set (GNU does the same).
            mode &= 0o700;
        }
        let mut oo = OpenOptions::new();
        oo.write(true).create_new(true).mode(mode);
        oo.custom_flags(libc::O_NOCTTY);
        let f = oo.open(dst).map_err(|e| {
            fail(format!(
                "cannot create regular file {}: {}",
                quote(dst),
                io_text(&e)
            ))
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
        src_meta: &Metadata,
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
        let sparse = opts.sparse;
        let job = DataJob {
            src: src_file,
            src_name: src,
            src_kind,
            dst: dst_file,
            dst_name: dst,
            sparse,
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
        dst: &Path,
        src_file: &File,
        src_meta: &Metadata,
        dst_exists: bool,
    ) -> Step {
        let opts = self.opts;
        let dir = match dst.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // An existing DEST keeps its permissions across the replacement, as cp keeps them.
        let old = if dst_exists {
            std::fs::metadata(dst).ok()
        } else {
            None
        };
        let mode = old
            .as_ref()
            .map_or(src_meta.mode() & 0o777, |m| m.mode() & 0o7777);
        let (tmp, tmp_file) = temp_file(&dir, dst, mode & 0o700).map_err(|e| {
            fail(format!(
                "cannot create temporary file in {}: {}",
                quote(&dir),
                io_text(&e)
            ))
        })?;
        let guard = TempGuard(Some(tmp.clone()));
        self.fill(src, dst, src_file, src_meta, &tmp_file)?;
        match &old {
            Some(m) => {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&tmp_file);
                let _ = nix::unistd::fchown(fd, Some(m.uid().into()), Some(m.gid().into()));
                nix::sys::stat::fchmod(fd, Mode::from_bits_truncate(m.mode() & 0o7777)).map_err(
                    |e| {
                        fail(format!(
                            "setting permissions for {}: {}",
                            quote(dst),
                            e.desc()
                        ))
                    },
                )?;
                attrs::apply(&tmp_file, dst, src, src_meta, opts, false)?;
            }
            None => {
                let fd = std::os::fd::AsRawFd::as_raw_fd(&tmp_file);
                nix::sys::stat::fchmod(fd, Mode::from_bits_truncate(mode & !self.umask)).map_err(
                    |e| {
                        fail(format!(
                            "setting permissions for {}: {}",
                            quote(dst),
                            e.desc()
                        ))
                    },
                )?;
                attrs::apply(&tmp_file, dst, src, src_meta, opts, true)?;
            }
        }
        tmp_file
            .sync_all()
            .map_err(|e| fail(format!("error syncing {}: {}", quote(dst), io_text(&e))))?;
        std::fs::rename(&tmp, dst).map_err(|e| {
            fail(format!(
                "cannot rename {} to {}: {}",
                quote(&tmp),
                quote(dst),
                io_text(&e)
            ))
        })?;
        guard.disarm();
        sync_dir(&dir, dst)
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

/// Removes the temporary file unless disarmed (--atomic).
struct TempGuard(Option<PathBuf>);
impl TempGuard {
    fn disarm(mut self) {
        self.0 = None;
    }
}
impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn temp_file(dir: &Path, dst: &Path, mode: u32) -> io::Result<(PathBuf, File)> {
    let base = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pid = std::process::id();
    for attempt in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = join(
            dir,
            Path::new(&format!(".{base}.aiscp-{pid}-{nanos:x}{attempt}")),
        );
        let mut oo = OpenOptions::new();
        oo.write(true).create_new(true).mode(mode);
        oo.custom_flags(libc::O_NOCTTY | libc::O_NOFOLLOW);
        match oo.open(&name) {
            Ok(f) => return Ok((name, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from_raw_os_error(libc::EEXIST))
}

/// --fsync: DEST's data, and for a new DEST the directory entry naming it.
fn sync(f: &File, dst: &Path, created: bool) -> Step {
    f.sync_all()
        .map_err(|e| fail(format!("error syncing {}: {}", quote(dst), io_text(&e))))?;
    if created {
        let dir = match dst.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        sync_dir(&dir, dst)?;
    }
    Ok(())
}

fn sync_dir(dir: &Path, dst: &Path) -> Step {
    let d = File::open(dir).map_err(|e| {
        fail(format!(
            "cannot open directory {}: {}",
            quote(dir),
            io_text(&e)
        ))
    })?;
    d.sync_all().map_err(|e| {
        fail(format!(
            "error syncing directory of {}: {}",
            quote(dst),
            io_text(&e)
        ))
    })
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
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => id(&x) == id(&y),
        _ => false,
    }
}
