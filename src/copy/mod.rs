//! The per-file work of cp: every decision about one SOURCE/DEST pair (same file, overwrite
//! rules, backups, links, directories, special files, attributes), with the file data handed
//! to the engine. Errors are printed where they happen and the run goes on; `Copier::failed`
//! tells `main` to exit 1.
//!
//! Every file is reached as a name inside an open directory ([`At`]): SOURCE trees are walked
//! and DEST trees built through directory descriptors, so a directory swapped for a symlink
//! mid-run can't redirect a read or a write (see `open_dir`).

mod atomic;
mod create;
mod entry;
mod file;
mod inflight;
mod parents;
mod walk;

use crate::messages::{fail, fail_os, Reported};
use crate::open_dir::{open_parent, At, OpenDir};
use crate::options::{BackupKind, Deref, Options};
use crate::plan::CopyJob;
use crate::progress::{Files, Staged};
use crate::stat::{FileId, Stat};
use aiscp_engine::quote::quote;
use aiscp_engine::{
    Config, CopyError, DataJob, Engine, Finished, ProgressSink, QueueLimits, QueuedJob, Ticket,
};
use atomic::Aside;
pub use inflight::check_in_flight_setting;
pub use inflight::queue_limits;
use nix::sys::stat::Mode;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

type Step = Result<(), Reported>;

/// What became of one entry, as the steps that decide it return it; the run's file counts
/// are added up from these values ([`count`]).
enum Disposition {
    /// DEST made: a file's data copied (and checked, under --verify), a link or a special
    /// file made. `bytes`: the data copied into it (0 for a link or a special file).
    Made { bytes: u64 },
    /// A directory made or merged into: its entries count on their own. The level entered,
    /// for the walk to copy them; None for a directory named twice, copied once.
    Directory(Option<Box<walk::DirFrame>>),
    /// The file's data is in flight: it counts once it is finished (see `inflight`).
    InFlight,
    /// cp's rules left DEST as it was: -n, -u, -i answered no, a source named twice, the
    /// same file.
    Skipped,
}

/// Counts one entry in the run's files by the result its steps returned. A failure is an
/// entry cp reported an error for (a directory that could not be made or read included); an
/// error on a directory's attributes counts only in the exit status. A file's bytes count
/// here, with the file, and only once it is copied: a file whose copy or check failed
/// counts none, whatever its data phase had moved (and shown on the progress view).
fn count(files: &mut Files, result: &Result<Disposition, Reported>) {
    match result {
        Ok(Disposition::Made { bytes }) => {
            files.copied += 1;
            files.bytes += bytes;
        }
        Ok(Disposition::Skipped) => files.skipped += 1,
        Ok(Disposition::Directory(_) | Disposition::InFlight) => {}
        Err(Reported) => files.failed += 1,
    }
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

/// Where the first DEST made from a multiply-linked SOURCE lives, to link the others to it.
struct FirstCopy {
    dir: Rc<OpenDir>,
    name: OsString,
    path: PathBuf,
}

/// What a run remembers of what it has copied, for cp's rules that look back: hard links
/// kept, sources named twice, DEST inside SOURCE, cycles, files not to be overwritten.
#[derive(Default)]
struct RunMemory {
    /// Source inode -> first DEST made from it, to keep hard links (--preserve=links).
    links: HashMap<FileId, FirstCopy>,
    /// --preserve=links: each SOURCE directory copied, by inode, and the DEST made of it: a
    /// directory reached again where no symlink was followed to it would be a hard link to
    /// a directory, which cp refuses.
    dir_links: HashMap<FileId, PathBuf>,
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
    /// The SOURCE directories being copied, outermost first, with their DEST: met again,
    /// they are a cycle.
    active: Vec<(FileId, PathBuf)>,
    /// Command-line directories copied: (SOURCE, DEST's directory and name).
    top_dirs: HashSet<(FileId, (Option<FileId>, OsString))>,
}

pub struct Copier<'a> {
    opts: &'a Options,
    config: Config,
    engine: Option<Engine>,
    progress: std::sync::Arc<dyn ProgressSink + Send + Sync>,
    umask: u32,
    /// What the run has copied so far, for cp's rules that look back.
    memory: RunMemory,
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
    /// The files counted so far (see [`count`]).
    files: Files,
}

/// This process's engine, brought up the first time it is asked for: a mover that moves
/// the data elsewhere (the staging service) may never need it.
pub struct LocalEngine<'e> {
    slot: &'e mut Option<Engine>,
    config: &'e Config,
}

impl LocalEngine<'_> {
    pub fn get(&mut self) -> &mut Engine {
        file::start_engine(self.slot, self.config)
    }
}

/// Copies one file's data, given the engine this process would use.
pub trait DataMover {
    /// Copies a file in turn (its result is needed before the walk goes on).
    fn copy(
        &mut self,
        engine: &mut LocalEngine<'_>,
        job: &DataJob<'_>,
        progress: &dyn ProgressSink,
    ) -> Result<u64, CopyError>;

    /// Whether this process's engine must be up (with its first staging slot) before DEST
    /// is touched, as when it copies the data itself; false while the data goes elsewhere.
    fn needs_engine(&mut self) -> bool {
        true
    }

    /// What the staging service staged through for this run, with its stage times and the
    /// files it copied (for --stats); None for a mover that stages nothing itself.
    fn info(&self) -> Option<(aiscp_engine::EngineInfo, aiscp_engine::StageTimes)> {
        None
    }

    /// Where whole files go to be copied while the walk goes on; None: every file is
    /// copied in turn.
    fn queue(&mut self) -> Option<&mut dyn FileQueue> {
        None
    }
}

/// Where files in flight are copied (this process's engine, or other processes): each
/// comes back with its ticket as its copy ends, in any order; `inflight` restores cp's.
pub trait FileQueue {
    /// How many files (and bytes) may be in flight.
    fn set_limits(&mut self, limits: QueueLimits);
    /// The largest file [`FileQueue::submit`] takes; None: none.
    fn queue_max(&self) -> Option<u64>;
    /// Whether a file of `len` bytes may be queued now.
    fn has_room(&self, len: u64) -> bool;
    /// Queues a whole file; it comes back when it cannot be (copy it in turn then).
    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>>;
    /// A queued file whose copy has ended; with `block`, waits while any is in flight.
    fn next_finished(&mut self, block: bool) -> Option<Finished>;
}

impl FileQueue for Engine {
    fn set_limits(&mut self, limits: QueueLimits) {
        self.set_queue_limits(limits);
    }
    fn queue_max(&self) -> Option<u64> {
        Engine::queue_max(self)
    }
    fn has_room(&self, len: u64) -> bool {
        Engine::has_room(self, len)
    }
    fn submit(&mut self, job: QueuedJob) -> Result<Ticket, Box<(QueuedJob, CopyError)>> {
        Engine::submit(self, job)
    }
    fn next_finished(&mut self, block: bool) -> Option<Finished> {
        Engine::next_finished(self, block)
    }
}

impl<'a> Copier<'a> {
    /// What this process's engine and the mover (the staging service) staged through, with
    /// their stage times; neither when no file had data to copy.
    pub fn staged(&self) -> Staged {
        Staged {
            here: self.engine.as_ref().map(|e| (e.info(), e.run_stages())),
            service: self.mover.as_ref().and_then(|m| m.info()),
        }
    }

    /// The run's files so far by what became of them; files still in flight count once
    /// [`Copier::settle`] has finished them.
    pub fn files(&self) -> Files {
        self.files
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
            memory: RunMemory {
                track: several_sources,
                ..RunMemory::default()
            },
            backup: opts.backup,
            open_dangling: std::env::var_os("POSIXLY_CORRECT").is_some(),
            inflight: Default::default(),
            mover: None,
            failed: false,
            files: Files::default(),
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
        self.memory.top = (src.to_path_buf(), dst.to_path_buf());
        self.memory.into_itself = false;
        let (src_dir, src_name) = open_parent(src);
        let mut made_parents = Vec::new();
        let (dst_dir, dst_name) = match parents_of {
            Some(target) => match self.make_parents(src, dst, target, &mut made_parents) {
                Ok(made) => made,
                Err(Reported) => {
                    self.failed = true;
                    count(&mut self.files, &Err(Reported));
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

    fn follows(&self, top: bool) -> bool {
        match self.opts.deref {
            Deref::Always => true,
            Deref::Never => false,
            Deref::CommandLine => top,
        }
    }
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
        match crate::fd_wait::wait_readable(stdin.as_fd(), cancel) {
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
