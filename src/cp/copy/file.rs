//! A regular file: SOURCE opened and checked against what was stat'ed, DEST opened the way
//! cp's copy_reg does, the data handed to the engine (or queued, or written aside for
//! --atomic), then attributes and --fsync.

use super::copier::Copier;
use super::copier::Disposition;
use super::copier::Found;
use super::inflight::Opened;
use super::steps::replaced;
use super::steps::sync;
use crate::cp::attrs;
use crate::data::local_engine::LocalEngine;
use crate::sys::messages::{fail, fail_os, Reported};
use crate::sys::messages::{os_text, say};
use crate::sys::open_dir::At;
use crate::sys::signals::stop_asked;
use crate::sys::stat::{FileKind, Stat};
use aiscp_engine::quote::quote;
use aiscp_engine::{DataJob, SourceKind};
use nix::fcntl::OFlag;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

impl Copier<'_> {
    pub(super) fn copy_file(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        found: &Found,
        follow: bool,
    ) -> Result<Disposition, Reported> {
        let opts = self.opts;
        let (src_file, opened) = self.open_source(src, src_meta, follow)?;
        // The backend and its first buffer come before DEST is touched: if the backend
        // cannot start the run ends (see `Copier::backend_failed`), if the buffer cannot be
        // had this file fails, and either way DEST is neither created nor truncated.
        let engine_here = self.mover.as_mut().is_none_or(|m| m.needs_engine());
        if !opts.attributes_only && !opts.reflink_always && engine_here {
            let engine = match self.engine.try_start(&self.config) {
                Ok(engine) => engine,
                Err(why) => {
                    self.backend_failed = true;
                    // A signal that cut the start short: the run dies of it, silently.
                    if !stop_asked() {
                        why.say();
                    }
                    return Err(Reported);
                }
            };
            engine.prepare(src.path).map_err(|e| fail(e.to_string()))?;
        }
        if opts.atomic && !opts.attributes_only {
            let plan = self.plan_atomic(src.path, dst, &opened, found)?;
            if let Some(plan) = plan {
                // Never in flight: the -v line goes out before the data, as cp's does.
                self.finish_ended();
                return self
                    .copy_file_atomic(src.path, dst, &src_file, &opened, plan)
                    .map(|bytes| Disposition::Made { bytes });
            }
        }

        crate::sys::test_hook::pause("dest-open");
        let (dst_file, created) = self.open_dst(dst, &opened, found.sb.as_ref(), found.new)?;
        crate::sys::test_hook::pause("dest-created");
        let dst_now = Stat::of(&dst_file).map_err(|e| fail_os("cannot fstat", dst.path, &e))?;
        if dst_now.id() == opened.id() {
            return Err(fail(format!(
                "{} and {} are the same file",
                quote(src.path),
                quote(dst.path)
            )));
        }
        let sides = Opened {
            src: src.path,
            dst: dst.path,
            src_stat: &opened,
            dst_stat: &dst_now,
        };
        let queued = self.queue_data(&sides, src_file, dst_file, found, created);
        let Err((src_file, dst_file)) = queued else {
            return Ok(Disposition::InFlight); // the rest follows the data (see `inflight`)
        };
        // Copied in turn: its -v line, held until now, goes out before the data.
        self.finish_ended();
        if !created && !opts.attributes_only && dst_now.is_file() {
            dst_file
                .set_len(0)
                .map_err(|e| fail_os("cannot create regular file", dst.path, &e))?;
        }
        let bytes =
            self.fill_and_finish(src.path, dst.path, &src_file, &opened, &dst_file, created)?;
        if opts.fsync {
            sync(&dst_file, dst, created)?;
        }
        Ok(Disposition::Made { bytes })
    }

    /// Opens SOURCE for reading and checks it is the file stat'ed; a FIFO's writer is
    /// waited for here, as cp's open() would, before DEST is touched.
    fn open_source(
        &self,
        src: At<'_>,
        src_meta: &Stat,
        follow: bool,
    ) -> Result<(File, Stat), Reported> {
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
        crate::sys::test_hook::pause("source-open");
        let src_file = src
            .dir
            .open_file(src.name, flags, 0)
            .map_err(|e| cannot_open(&e))?;
        let opened = Stat::of(&src_file).map_err(|e| fail_os("cannot fstat", src.path, &e))?;
        if opened.id() != src_meta.id() {
            return Err(replaced(src.path));
        }
        if fifo {
            let fd = src_file.as_fd();
            if !crate::sys::fd_wait::wait_readable(fd, &self.config.cancel)
                .map_err(|e| cannot_open(&e))?
            {
                return Err(Reported); // interrupted: main dies of the signal, silently
            }
            crate::sys::fd_wait::clear_nonblocking(fd).map_err(|e| cannot_open(&e))?;
        }
        Ok((src_file, opened))
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
        new_dst: bool,
    ) -> Result<(File, bool), Reported> {
        if !new_dst {
            if let Some(f) = self.open_existing_dst(dst, dst_sb)? {
                return Ok((f, false));
            }
        }
        self.create_dst(dst, src_meta).map(|f| (f, true))
    }

    /// An existing DEST opened for writing, not cut; None where it is gone or, with -f,
    /// removed because it could not be opened: a new one is to be made.
    fn open_existing_dst(
        &self,
        dst: At<'_>,
        dst_sb: Option<&Stat>,
    ) -> Result<Option<File>, Reported> {
        let opts = self.opts;
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
                        return Err(Reported); // interrupted: main dies of the signal, silently
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                other => break other,
            }
        };
        let opened = opened.and_then(|f| {
            if fifo {
                crate::sys::fd_wait::clear_nonblocking(f.as_fd())?;
            }
            Ok(f)
        });
        match opened {
            Ok(f) => Ok(Some(f)),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
            Err(_) if opts.force => {
                match dst.dir.unlink(dst.name) {
                    Ok(()) if opts.verbose => say(format_args!("removed {}", quote(dst.path))),
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
                    Err(e) => return Err(fail_os("cannot remove", dst.path, &e)),
                }
                Ok(None)
            }
            Err(e) => Err(fail_os("cannot create regular file", dst.path, &e)),
        }
    }

    /// A new DEST, created O_EXCL with SOURCE's permission bits less set-id/sticky (owner
    /// only while the owner is still to be set); a dangling symlink there is refused, or
    /// written through under POSIXLY_CORRECT.
    fn create_dst(&self, dst: At<'_>, src_meta: &Stat) -> Result<File, Reported> {
        let opts = self.opts;
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
        Ok(f)
    }

    /// A file copied in turn, once DEST is open and empty: the data, then SOURCE's
    /// attributes (also for a queued file that came back not copied). Returns the bytes
    /// copied (see [`Copier::fill`]).
    pub(super) fn fill_and_finish(
        &mut self,
        src: &Path,
        dst: &Path,
        src_file: &File,
        opened: &Stat,
        dst_file: &File,
        created: bool,
    ) -> Result<u64, Reported> {
        let bytes = self.fill(src, dst, src_file, opened, dst_file)?;
        attrs::apply(
            dst_file,
            dst,
            Some(src_file),
            opened,
            self.opts,
            created,
            self.umask,
        )?;
        Ok(bytes)
    }

    /// Moves the data (unless --attributes-only), refusing --reflink=always as cp does where
    /// the filesystem cannot clone. Returns the bytes copied: DEST's size, its data written
    /// (and read back, under --verify).
    pub(super) fn fill(
        &mut self,
        src: &Path,
        dst: &Path,
        src_file: &File,
        src_meta: &Stat,
        dst_file: &File,
    ) -> Result<u64, Reported> {
        let opts = self.opts;
        if opts.attributes_only {
            return Ok(0);
        }
        if opts.reflink_always {
            return Err(fail(format!(
                "failed to clone {} from {}: Operation not supported",
                quote(dst),
                quote(src)
            )));
        }
        // /proc and /sys files report a size that is not their length: read in order anything
        // that is not a regular file, and regular files claiming to be empty.
        let src_kind = if src_meta.is_file() && src_meta.len() > 0 {
            SourceKind::Regular {
                len: src_meta.len(),
            }
        } else {
            SourceKind::Sequential
        };
        let job = DataJob {
            src: src_file,
            src_name: src,
            src_kind,
            dst: dst_file,
            dst_name: dst,
            sparse: opts.sparse,
            digest: self.digest(),
        };
        let res = match &mut self.mover {
            Some(mover) => {
                let mut engine = LocalEngine::new(&mut self.engine, &self.config);
                mover.copy(&mut engine, &job, &*self.progress)
            }
            None => self
                .engine
                .start_or_exit(&self.config)
                .copy(&job, &*self.progress),
        };
        let copied = res.map_err(|e| match e {
            // Interrupted: main dies of the signal once the engine has stopped.
            aiscp_engine::CopyError::Interrupted => Reported,
            e => fail(e.to_string()),
        })?;
        self.list_digest(dst, &copied);
        Ok(copied.size)
    }
}
