//! The run's copier: its state across operands (what it has copied, for cp's rules that
//! look back; the files in flight; the counts), and how one operand is started.

use super::atomic::Aside;
use super::inflight::Inflight;
use super::walk;
use crate::cp::options::{BackupKind, Deref, Options};
use crate::cp::plan::CopyJob;
use crate::data::local_engine::EngineSlot;
use crate::data::mover::DataMover;
use crate::progress::{Files, Staged};
use crate::settings::Settings;
use crate::sys::messages::Reported;
use crate::sys::open_dir::{open_parent, At, OpenDir};
use crate::sys::stat::{FileId, Stat};
use aiscp_engine::digest::Algorithm;
use aiscp_engine::{Config, Copied, ProgressSink, Verify};
use nix::sys::stat::Mode;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::rc::Rc;

pub(super) type Step = Result<(), Reported>;

/// What became of one entry, as the steps that decide it return it; the run's file counts
/// are added up from these values ([`count`]).
pub(super) enum Disposition {
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
pub(super) fn count(files: &mut Files, result: &Result<Disposition, Reported>) {
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
pub(super) struct Found {
    /// DEST's stat, followed or not as cp looked at it; None where nothing is there (or a
    /// symlink loop -f will replace).
    pub(super) sb: Option<Stat>,
    /// DEST is known not to exist (any more).
    pub(super) new: bool,
    pub(super) aside: Aside,
    /// The backup's name in DEST's directory and as messages name it.
    pub(super) backup: Option<(OsString, PathBuf)>,
}

/// Where the first DEST made from a multiply-linked SOURCE lives, to link the others to it.
pub(super) struct FirstCopy {
    pub(super) dir: Rc<OpenDir>,
    pub(super) name: OsString,
    pub(super) path: PathBuf,
}

/// What a run remembers of what it has copied, for cp's rules that look back: hard links
/// kept, sources named twice, DEST inside SOURCE, cycles, files not to be overwritten.
#[derive(Default)]
pub(super) struct RunMemory {
    /// Source inode -> first DEST made from it, to keep hard links (--preserve=links).
    pub(super) links: HashMap<FileId, FirstCopy>,
    /// --preserve=links: each SOURCE directory copied, by inode, and the DEST made of it: a
    /// directory reached again where no symlink was followed to it would be a hard link to
    /// a directory, which cp refuses.
    pub(super) dir_links: HashMap<FileId, PathBuf>,
    /// Files this run created, keyed with their name: cp won't overwrite them from another source.
    pub(super) created: HashSet<(FileId, PathBuf)>,
    /// Command-line sources already copied (warn when one is named twice).
    pub(super) seen_sources: HashSet<(FileId, PathBuf)>,
    /// Directories this run created: met again as a source, DEST lies inside SOURCE.
    pub(super) made_dirs: HashSet<FileId>,
    /// Set once the into-itself case is met: like GNU, stop copying that tree.
    pub(super) into_itself: bool,
    /// The top-level SOURCE and DEST being copied, named in the into-itself message.
    pub(super) top: (PathBuf, PathBuf),
    /// Whether the run has several sources (GNU keeps the two sets above only then).
    pub(super) track: bool,
    /// The SOURCE directories being copied, outermost first, with their DEST: met again,
    /// they are a cycle.
    pub(super) active: Vec<(FileId, PathBuf)>,
    /// Command-line directories copied: (SOURCE, DEST's directory and name).
    pub(super) top_dirs: HashSet<(FileId, (Option<FileId>, OsString))>,
}

pub struct Copier<'a> {
    pub(super) opts: &'a Options,
    pub(super) config: Config,
    pub(super) engine: EngineSlot,
    pub(super) progress: std::sync::Arc<dyn ProgressSink + Send + Sync>,
    pub(super) umask: u32,
    /// What the run has copied so far, for cp's rules that look back.
    pub(super) memory: RunMemory,
    /// How DEST is backed up for the operand being copied (none for `cp -fb a a`).
    pub(super) backup: Option<BackupKind>,
    /// POSIXLY_CORRECT: a dangling DEST symlink is written through, creating its target.
    pub(super) open_dangling: bool,
    /// Files whose data is in flight (see `inflight`).
    pub(super) inflight: Inflight,
    /// Moves file data in the engine's place (MPI ranks share each file out); None: the
    /// engine copies it here.
    pub mover: Option<Box<dyn DataMover + 'a>>,
    pub failed: bool,
    /// The backend could not start (or a signal came while it started): the run copies
    /// nothing more, but finishes the directories it made (their modes are set after their
    /// contents) before it exits.
    pub backend_failed: bool,
    /// The files counted so far (see [`count`]).
    pub(super) files: Files,
}

impl Copier<'_> {
    /// The digest each file's copy takes: --sums's, or BLAKE3 for --verify=sums alone.
    pub(super) fn digest(&self) -> Option<Algorithm> {
        let verify_sums = self.config.verify == Some(Verify::Sums);
        self.opts.sums.or(verify_sums.then_some(Algorithm::Blake3))
    }

    /// Adds DEST's digest, where its copy took one, to the --sums manifest.
    pub(super) fn list_digest(&self, dst: &Path, copied: &Copied) {
        if let (Some(_), Some(digest)) = (self.opts.sums, &copied.digest) {
            crate::sys::messages::digest_line(crate::cp::sums::line(dst, digest));
        }
    }
}

impl<'a> Copier<'a> {
    /// What this process's engine and the mover (the staging service) staged through, with
    /// their stage times; neither when no file had data to copy.
    pub fn staged(&self) -> Staged {
        Staged {
            here: self.engine.running().map(|e| (e.info(), e.run_stages())),
            service: self.mover.as_ref().and_then(|m| m.info()),
        }
    }

    /// Lets this process's engine end its digest kernels' compile (at most a few seconds),
    /// so that the next run finds them kept: call it once the copies are over.
    pub fn wait_for_digest_compile(&mut self) {
        if let Some(engine) = self.engine.running_mut() {
            engine.wait_for_digest_compile();
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
        settings: &Settings,
    ) -> Self {
        let umask = {
            let old = nix::sys::stat::umask(Mode::from_bits_truncate(0o022));
            nix::sys::stat::umask(old);
            old.bits()
        };
        Copier {
            opts,
            config,
            engine: EngineSlot::Unstarted,
            progress: progress.into(),
            umask,
            memory: RunMemory {
                track: several_sources,
                ..RunMemory::default()
            },
            backup: opts.backup,
            open_dangling: settings.posixly_correct,
            inflight: Inflight::new(settings.queue_limits),
            mover: None,
            failed: false,
            backend_failed: false,
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

    pub(super) fn follows(&self, top: bool) -> bool {
        match self.opts.deref {
            Deref::Always => true,
            Deref::Never => false,
            Deref::CommandLine => top,
        }
    }
}
