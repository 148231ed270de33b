//! The walk through a SOURCE tree: a loop over an explicit stack of open directories, not
//! recursion, so a tree of any depth needs neither stack nor descriptors in proportion to
//! its depth.
//!
//! Each level holds two directory descriptors (SOURCE's and DEST's). Only the top level and
//! the deepest [`OPEN_LEVELS`] keep theirs; a level further up gives them back and takes them
//! again when the walk returns to it, through the ".." of the level below, checked to be the
//! directory it was (device and inode) — or, where ".." leads elsewhere (a directory reached
//! through a symlink under -L) or cannot be used (a SOURCE subdirectory that never opened,
//! an unsearchable one), by its names from the nearest open level or the operand's own
//! directory, each checked the same way. So, like GNU's fts, a copy of 2,000 nested directories runs in a few dozen
//! descriptors, and a directory moved mid-run is noticed instead of followed. Under a tight
//! open-file limit fewer levels stay open, down to the one being copied (see
//! [`open_window`]): a tree then copies in seven descriptors, two more than cp needs.
//!
//! A directory that is its own ancestor is refused with cp's messages: "cannot copy cyclic
//! symbolic link" where a symlink was followed to it (-L, -H), "will not create hard link"
//! where it was not (a bind mount inside itself).

use super::copier::Copier;
use super::copier::Disposition;
use super::copier::Step;
use super::entry::Parent;
use super::pending::MadeDir;
use super::steps::replaced;
use crate::cp::attrs;
use crate::cp::plan::join;
use crate::sys::messages::fail;
use crate::sys::messages::fail_os;
use crate::sys::messages::Reported;
use crate::sys::messages::{error, os_text, say};
use crate::sys::open_dir::{At, OpenDir};
use crate::sys::stat::{FileId, Stat};
use aiscp_engine::quote::quote;
use nix::sys::stat::Mode;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// Levels below the top whose descriptors stay open. Each level costs two descriptors;
/// going back up one closed level costs two openat and two fstat calls.
const OPEN_LEVELS: usize = 8;

/// Descriptors left to everything but the walk's open levels, beyond those open when the
/// walk starts (the standard ones, any inherited): a directory being listed, a file's
/// SOURCE and DEST.
const OTHER_DESCRIPTORS: u64 = 3;

/// How many of the deepest levels (the one being copied included) keep their descriptors,
/// and whether the top level keeps its own too: [`OPEN_LEVELS`] and the top where the
/// open-file limit has room for them, fewer under a tight limit (`ulimit -n 7`, where cp
/// copies a tree with 5), down to only the level being copied.
fn open_window() -> (usize, bool) {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let limit = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } == 0 {
        rl.rlim_cur
    } else {
        libc::RLIM_INFINITY
    };
    // Counted, not assumed: a shell or a parent may hand down more than the three
    // standard ones, and under a tight limit each takes a level's room.
    let open =
        std::fs::read_dir("/proc/self/fd").map_or(3, |d| (d.count() as u64).saturating_sub(1));
    let spare = limit.saturating_sub(open + OTHER_DESCRIPTORS);
    let levels = usize::try_from(spare / 2).unwrap_or(usize::MAX);
    if levels > OPEN_LEVELS + 1 {
        (OPEN_LEVELS + 1, true)
    } else {
        (levels.max(1), false)
    }
}

/// One side (SOURCE or DEST) of a directory being copied.
struct Side {
    /// None while given back (see the module comment).
    dir: Option<Rc<OpenDir>>,
    /// What the directory was when it was opened.
    id: FileId,
    /// Its name in the level above, and whether a symlink there was followed to reach it.
    name: OsString,
    follow: bool,
}

/// A directory whose entries are being copied.
pub(super) struct DirFrame {
    src_path: PathBuf,
    dst_path: PathBuf,
    src_meta: Stat,
    /// SOURCE's side; None when its contents are not copied (-x, or it could not be opened).
    src: Option<Side>,
    dst: Side,
    /// The entries still to copy, in inode order (readdir order among names of one inode).
    entries: std::vec::IntoIter<(u64, OsString)>,
    /// SOURCE's entries are still to be read: after the levels above have given back their
    /// descriptors, so reading them never needs one more than copying a file does.
    unlisted: bool,
    new_dir: bool,
    ok: bool,
}

impl Side {
    /// Opens this side again from the side one level below it (`child`, still open): its
    /// "..", kept only if it is the directory this side was.
    fn reopen_from_child(&mut self, child: &Side) -> io::Result<bool> {
        let Some(below) = &child.dir else {
            return Ok(false);
        };
        let up = below.open_child(OsStr::new(".."), false)?;
        if up.stat_self()?.id() != self.id {
            return Ok(false);
        }
        self.dir = Some(Rc::new(up));
        Ok(true)
    }
}

/// Opens the side chosen by `side` of `stack[i]` again, by the names of the levels between
/// it and the nearest open level above, each checked to be the directory it was. Where no
/// level above is open (a tight descriptor limit keeps only the deepest), from `root`, the
/// directory the top level was opened in: the operand's, held for the whole walk.
fn reopen_by_names(
    stack: &mut [DirFrame],
    i: usize,
    side: fn(&mut DirFrame) -> Option<&mut Side>,
    root: &Rc<OpenDir>,
) -> io::Result<()> {
    // The directory found by a name is not the one copied: it was moved or replaced.
    let moved = || io::Error::from_raw_os_error(libc::ENOENT);
    let open_above = (0..i)
        .rev()
        .find(|&j| side(&mut stack[j]).is_some_and(|s| s.dir.is_some()));
    let (dir, first) = match open_above {
        Some(j) => (side(&mut stack[j]).and_then(|s| s.dir.clone()), j + 1),
        None => (Some(Rc::clone(root)), 0),
    };
    let mut dir = dir.ok_or_else(moved)?;
    for frame in &mut stack[first..=i] {
        let s = side(frame).ok_or_else(moved)?;
        let next = dir.open_child(&s.name, s.follow)?;
        if next.stat_self()?.id() != s.id {
            return Err(moved());
        }
        dir = Rc::new(next);
    }
    if let Some(s) = side(&mut stack[i]) {
        s.dir = Some(dir);
    }
    Ok(())
}

fn src_side(f: &mut DirFrame) -> Option<&mut Side> {
    f.src.as_mut()
}

fn dst_side(f: &mut DirFrame) -> Option<&mut Side> {
    Some(&mut f.dst)
}

/// Makes both sides of the top of `stack` open again after the level below it (`child`)
/// was popped: through the child's "..", else by names (the child's SOURCE may never have
/// opened, or its ".." be unsearchable, as a 0000 directory's is). A failure is reported,
/// and the level's remaining entries are skipped. `roots`: the directories SOURCE's and
/// DEST's top levels were opened in.
fn reopen_top(stack: &mut [DirFrame], child: &DirFrame, roots: [&Rc<OpenDir>; 2]) {
    let Some(i) = stack.len().checked_sub(1) else {
        return;
    };
    for is_dst in [false, true] {
        let side: fn(&mut DirFrame) -> Option<&mut Side> = if is_dst { dst_side } else { src_side };
        let child_side = if is_dst {
            Some(&child.dst)
        } else {
            child.src.as_ref()
        };
        let Some(s) = side(&mut stack[i]) else {
            continue;
        };
        if s.dir.is_some() {
            continue;
        }
        crate::sys::test_hook::pause("walk-reopen");
        let via_dotdot = child_side.map_or(Ok(false), |c| s.reopen_from_child(c));
        let res = match via_dotdot {
            Ok(true) => Ok(()),
            _ => reopen_by_names(stack, i, side, roots[usize::from(is_dst)]),
        };
        if let Err(e) = res {
            let frame = &mut stack[i];
            let path = if is_dst {
                &frame.dst_path
            } else {
                &frame.src_path
            };
            error(&format!("cannot access {}: {}", quote(path), os_text(&e)));
            frame.ok = false;
            frame.entries = Vec::new().into_iter();
        }
    }
}

/// Reads the SOURCE entries of `frame` if they are still to be read; a failure is reported
/// and the level's copy fails.
fn list_entries(frame: &mut DirFrame) {
    if !std::mem::take(&mut frame.unlisted) {
        return;
    }
    let Some(dir) = frame.src.as_ref().and_then(|s| s.dir.as_ref()) else {
        return;
    };
    match dir.entries() {
        Ok(mut entries) => {
            // GNU reads a directory whole and sorts it by inode (fast on ext4), stably: names
            // of one inode keep their readdir order. The same order makes -v output, the
            // first of a hard-linked set and which DEST is written in place or unlinked match.
            entries.sort_by_key(|&(ino, _)| ino);
            frame.entries = entries.into_iter();
        }
        Err(e) => {
            error(&format!(
                "cannot access {}: {}",
                quote(&frame.src_path),
                os_text(&e)
            ));
            frame.ok = false;
        }
    }
}

impl Copier<'_> {
    /// Copies SRC to DST, walking a directory SRC with an explicit stack.
    pub(super) fn copy_tree(&mut self, src: At<'_>, dst: At<'_>) -> Step {
        let first = self.copy_entry(src, dst, true, None);
        super::copier::count(&mut self.files, &first);
        let Disposition::Directory(Some(frame)) = first? else {
            return Ok(());
        };
        let mut stack = vec![*frame];
        let (deepest, top_kept) = open_window();
        stack.iter_mut().for_each(list_entries);
        stack.iter().for_each(|level| self.count_unread(level));
        let mut result = Ok(());
        loop {
            let stop = self.memory.into_itself
                || self.backend_failed
                || self.config.cancel.load(Ordering::SeqCst);
            let Some(top) = stack.last_mut() else {
                break;
            };
            let next = if stop { None } else { top.entries.next() };
            if let Some((_, name)) = next {
                let result = self.copy_child(top, &name);
                super::copier::count(&mut self.files, &result);
                top.ok &= result.is_ok();
                if let Ok(Disposition::Directory(Some(child))) = result {
                    stack.push(*child);
                    // Give back the descriptors of the levels that left the open window.
                    let first = usize::from(top_kept);
                    let end = stack.len().saturating_sub(deepest);
                    for far in stack.iter_mut().take(end).skip(first) {
                        far.dst.dir = None;
                        if let Some(s) = &mut far.src {
                            s.dir = None;
                        }
                    }
                    if let Some(level) = stack.last_mut() {
                        list_entries(level);
                        self.count_unread(level);
                    }
                }
                continue;
            }
            let Some(done) = stack.pop() else {
                break;
            };
            self.memory.active.pop();
            // Finished before the level above is opened again: setting its attributes
            // takes a descriptor, which then is not needed beside that level's two.
            let res = self.finish_dir(&done);
            reopen_top(&mut stack, &done, [src.dir, dst.dir]);
            match stack.last_mut() {
                Some(parent) => parent.ok &= res.is_ok(),
                None => result = res,
            }
        }
        result
    }

    /// Counts a directory just entered as failed when it could not be opened or its entries
    /// read (cp reported it; its entries, if any were read, count on their own).
    fn count_unread(&mut self, level: &DirFrame) {
        if !level.ok {
            self.files.failed += 1;
        }
    }

    /// Copies the entry `name` of the directory `top`; a directory is entered, not yet copied.
    fn copy_child(&mut self, top: &DirFrame, name: &OsStr) -> Result<Disposition, Reported> {
        let (Some(src_dir), Some(dst_dir)) = (
            top.src.as_ref().and_then(|s| s.dir.as_ref()),
            top.dst.dir.as_ref(),
        ) else {
            return Err(Reported); // the level could not be reopened: already reported
        };
        let s = join(&top.src_path, Path::new(name));
        let d = join(&top.dst_path, Path::new(name));
        let child_src = At {
            dir: src_dir,
            name,
            path: &s,
        };
        let child_dst = At {
            dir: dst_dir,
            name,
            path: &d,
        };
        let parent = Parent {
            dev: top.src_meta.dev(),
            made: top.new_dir,
        };
        crate::sys::test_hook::pause("child");
        self.copy_entry(child_src, child_dst, false, Some(parent))
    }

    /// Starts copying a directory: DEST made (owner-only until its contents are in) or
    /// merged into, both opened by descriptor and checked to be what was stat'ed, SOURCE's
    /// entries listed. Returns the level for [`Copier::copy_tree`] to walk.
    pub(super) fn enter_dir(
        &mut self,
        src: At<'_>,
        dst: At<'_>,
        src_meta: &Stat,
        dst_meta: Option<&Stat>,
        follow: bool,
        parent_dev: Option<u64>,
    ) -> Result<DirFrame, Reported> {
        self.refuse_cycle(src, dst, src_meta, follow)?;
        let opts = self.opts;
        let new_dir = dst_meta.is_none();
        if new_dir {
            dst.dir
                .mkdir(dst.name, 0o700)
                .map_err(|e| fail_os("cannot create directory", dst.path, &e))?;
            if opts.verbose {
                say(format_args!("{} -> {}", quote(src.path), quote(dst.path)));
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
            self.memory.made_dirs.insert(dst_now.id());
            let (path, id) = (dst.path.to_path_buf(), dst_now.id());
            self.made_dir(MadeDir { path, id });
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
        self.memory
            .active
            .push((src_meta.id(), dst.path.to_path_buf()));
        Ok(DirFrame {
            src_path: src.path.to_path_buf(),
            dst_path: dst.path.to_path_buf(),
            src_meta: *src_meta,
            src: src_dir.map(|dir| Side {
                dir: Some(dir),
                id: src_meta.id(),
                name: src.name.to_os_string(),
                follow,
            }),
            dst: Side {
                dir: Some(dst_dir),
                id: dst_now.id(),
                name: dst.name.to_os_string(),
                follow: false,
            },
            entries: Vec::new().into_iter(),
            unlisted: true,
            new_dir,
            ok,
        })
    }

    /// A directory met again inside itself: through a followed symlink cp calls it a cyclic
    /// link; otherwise (a bind mount) it would be a hard link to a directory.
    fn refuse_cycle(&self, src: At<'_>, dst: At<'_>, src_meta: &Stat, follow: bool) -> Step {
        let active = &self.memory.active;
        let Some((_, outer)) = active.iter().find(|(id, _)| *id == src_meta.id()) else {
            return Ok(());
        };
        Err(fail(if follow {
            format!("cannot copy cyclic symbolic link {}", quote(src.path))
        } else {
            format!(
                "will not create hard link {} to directory {}",
                quote(dst.path),
                quote(outer)
            )
        }))
    }

    /// Ends a directory's copy: DEST's mode and attributes set on its descriptor.
    fn finish_dir(&mut self, frame: &DirFrame) -> Step {
        let opts = self.opts;
        let (new_dir, ok) = (frame.new_dir, frame.ok);
        let p = opts.preserve;
        if !(new_dir || p.mode || p.ownership || p.timestamps || p.xattr) {
            return if ok { Ok(()) } else { Err(Reported) };
        }
        // A stop removes the DESTs of files in flight that never began, which takes write
        // permission on their directory: they are ended before a mode without it is set
        // (SOURCE's mode is DEST's, less the umask), and before any directory is finished
        // once the run is stopping.
        let unwritable = frame.src_meta.mode() & 0o200 == 0;
        if unwritable || self.config.cancel.load(Ordering::SeqCst) {
            self.settle();
        }
        let Some(dst_dir) = &frame.dst.dir else {
            return Err(Reported); // it could not be reopened: already reported
        };
        let dst_path = &frame.dst_path;
        let f = dst_dir
            .readable()
            .map_err(|e| fail_os("cannot open", dst_path, &e))?;
        if new_dir && !opts.preserve.mode {
            let mode = attrs::new_mode(&frame.src_meta, &opts.preserve, self.umask);
            nix::sys::stat::fchmod(f.as_raw_fd(), Mode::from_bits_truncate(mode)).map_err(|e| {
                fail(format!(
                    "setting permissions for {}: {}",
                    quote(dst_path),
                    os_text(&e.into())
                ))
            })?;
        }
        // SOURCE's own descriptor, read by attrs::apply only for xattrs and ACLs.
        let xattr_src = frame
            .src
            .as_ref()
            .and_then(|s| s.dir.as_ref())
            .filter(|_| opts.preserve.xattr || opts.preserve.mode)
            .and_then(|d| d.readable().ok());
        attrs::apply(
            &f,
            dst_path,
            xattr_src.as_ref(),
            &frame.src_meta,
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
}
