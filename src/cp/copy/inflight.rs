//! Many files in flight, reported in cp's order.
//!
//! The walk makes every decision for a file on this thread (checks, prompts, opening and
//! creating DEST) and then, for a regular file small enough, queues only its data to the
//! engine (or to the mover's queue: other MPI ranks) and goes on to the next file. What must
//! follow the data (the attributes, a failure's message, exit status) happens here again,
//! file by file in the order they were queued.
//!
//! Output keeps cp's order: while files are in flight, whatever this thread prints (-v lines,
//! errors of later files, --debug lines) is held in one queue behind them, and comes out once
//! every file queued before it has been finished. A prompt first waits for every file in
//! flight (it must follow their messages, and its answer may depend on them).

use super::copier::{Copier, Disposition, Found};
use super::pending::{MadeDir, Pending};
use crate::cp::attrs;
use crate::sys::messages::{self, error, Held, Reported};
use crate::sys::stat::{FileId, Stat};
use aiscp_engine::{CopyError, Finished, QueueLimits, QueuedJob, Ticket};
use rustc_hash::FxHashMap as HashMap;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// How long [`Copier::finish_in_turn`] waits for files still in flight: not at all (only
/// what has ended), until one file is finished (to make room), until every one is.
#[derive(Clone, Copy)]
enum Until {
    Nothing,
    OneFile,
    All,
}

/// What comes out next: a held message, a queued file's own -v line, or its ending.
enum Item {
    Said(Held),
    /// Out only once the file's copy is known to have begun: -v names no file a stop left
    /// untouched (or removed again).
    Line(Ticket, Held),
    File(Ticket),
    /// A directory made here: a stop that cuts off the files before it removes it again.
    Dir(MadeDir),
}

#[derive(Default)]
pub(super) struct Inflight {
    order: Rc<RefCell<VecDeque<Item>>>,
    pending: HashMap<Ticket, Pending>,
    /// Results that came in before their turn.
    finished: HashMap<Ticket, Finished>,
    holding: bool,
    /// The limits files in flight run under (the run's settings).
    limits: QueueLimits,
    /// SOURCE and DEST inodes of the files in flight (with counts): a file that would write
    /// what one of them reads or writes, or read what one writes, waits for them.
    reading: HashMap<FileId, usize>,
    pub(super) writing: HashMap<FileId, usize>,
    /// The run was stopped before a queued file's turn came: what the walk said and the
    /// directories it made after that point go, as cp, dying at the signal, never got there.
    cut_off: bool,
    unmade: Vec<MadeDir>,
    /// A file in flight met a full disk: from then on files are copied one at a time, as
    /// cp copies them, so each meets the disk as cp's would.
    out_of_space: bool,
}

impl Inflight {
    /// No file in flight yet; at most `limits` at once.
    pub(super) fn new(limits: QueueLimits) -> Inflight {
        Inflight {
            limits,
            ..Inflight::default()
        }
    }
}

/// A regular file's two names and what was found of them once both were open: SOURCE's
/// stat as opened, DEST's now.
pub(super) struct Opened<'a> {
    pub(super) src: &'a Path,
    pub(super) dst: &'a Path,
    pub(super) src_stat: &'a Stat,
    pub(super) dst_stat: &'a Stat,
}

impl Copier<'_> {
    /// Queues the data of a regular file whose DEST is open and empty, when the engine takes
    /// it; the files come back (Err) when it is to be copied here and now.
    pub(super) fn queue_data(
        &mut self,
        sides: &Opened<'_>,
        src_file: File,
        dst_file: File,
        found: &Found,
        created: bool,
    ) -> Result<(), (File, File)> {
        let Opened {
            src,
            dst,
            src_stat: opened,
            dst_stat: dst_now,
        } = *sides;
        let len = opened.len();
        let Some(limits) = self.may_fly(opened, dst_now, found) else {
            return Err((src_file, dst_file));
        };
        self.wait_for_room(opened, dst_now, len, limits);
        let job = QueuedJob {
            src: src_file,
            src_name: src.to_path_buf(),
            len,
            dst: dst_file,
            dst_name: dst.to_path_buf(),
            sparse: self.opts.sparse,
            may_have_holes: opened.may_have_holes(),
            digest: self.digest(),
            truncate: !created,
            progress: self.progress.clone(),
        };
        // The queue may have gone while this file waited for room (the staging service given
        // up after SIGINT, its files all ended): then it is copied in turn, where the
        // interruption ends it.
        let Some(queue) = self.file_queue() else {
            return Err((job.src, job.dst));
        };
        let ticket = match queue.submit(job) {
            Ok(t) => t,
            Err(refused) => return Err((refused.0.src, refused.0.dst)),
        };
        let pending = Pending {
            dst_path: dst.to_path_buf(),
            src_meta: *opened,
            created,
            dst_id: dst_now.id(),
            src_id: opened.id(),
        };
        self.remember_in_flight(ticket, pending);
        crate::sys::test_hook::pause("queued");
        Ok(())
    }

    /// The limits files in flight run under, when this file may fly: a queue takes it and
    /// nothing must happen between its data and the next file (--fsync, a backup put back on
    /// failure, a hard link remembered to this DEST, --atomic's rename).
    fn may_fly(&mut self, opened: &Stat, dst_now: &Stat, found: &Found) -> Option<QueueLimits> {
        let opts = self.opts;
        let remembers = opts.preserve.links
            && !opts.hard_link
            && (opened.nlink() > 1 || opts.deref != crate::cp::options::Deref::Never);
        let eligible = !(opts.atomic || opts.attributes_only || opts.reflink_always || opts.fsync)
            && found.backup.is_none()
            && !remembers
            && opened.is_file()
            && dst_now.is_file();
        let limits = self.inflight.limits;
        let eligible = eligible && !self.inflight.out_of_space;
        let queue = self.file_queue().filter(|_| eligible)?;
        queue.set_limits(limits);
        let fits = queue.queue_max().is_some_and(|max| opened.len() <= max);
        fits.then_some(limits)
    }

    /// Waits until a file of `len` bytes may join the files in flight: copies in flight run in
    /// any order, so one that touches the same data as another waits for them all (as cp would
    /// have finished the earlier one first); then files are finished in turn until there is
    /// room (files that ended but wait for an earlier one still hold their descriptors).
    fn wait_for_room(&mut self, opened: &Stat, dst_now: &Stat, len: u64, limits: QueueLimits) {
        let w = &self.inflight.writing;
        if w.contains_key(&dst_now.id())
            || w.contains_key(&opened.id())
            || self.inflight.reading.contains_key(&dst_now.id())
        {
            self.settle();
        }
        while self.inflight.pending.len() >= limits.files
            || !self.file_queue().is_some_and(|q| q.has_room(len))
        {
            if !self.finish_in_turn(Until::OneFile) {
                break;
            }
        }
    }

    /// Records a file now in flight: what it reads and writes, and its place in cp's order
    /// (with its -v line, held until the file is finished); from the first such file on,
    /// every message is held in that order.
    fn remember_in_flight(&mut self, ticket: Ticket, pending: Pending) {
        *self.inflight.reading.entry(pending.src_id).or_default() += 1;
        *self.inflight.writing.entry(pending.dst_id).or_default() += 1;
        self.inflight.pending.insert(ticket, pending);
        let mut order = self.inflight.order.borrow_mut();
        if self.opts.verbose {
            // The file's -v line is the last line for stdout held since the previous file
            // ("removed 'DEST'" comes before it).
            let since = order
                .iter()
                .rposition(|i| matches!(i, Item::File(_)))
                .map_or(0, |i| i + 1);
            let own = (since..order.len())
                .rev()
                .find(|&i| matches!(order[i], Item::Said(Held::Stdout(_))));
            if let Some(Item::Said(line)) = own.and_then(|i| order.remove(i)) {
                order.push_back(Item::Line(ticket, line));
            }
        }
        order.push_back(Item::File(ticket));
        drop(order);
        self.hold_output();
    }

    /// Holds every message from here on in cp's order (see the module comment), if not yet:
    /// from the first file in flight, and from a file's `-v` line, before it is known
    /// whether the file will fly. A line printed before the hold could name a file the stop
    /// then left untouched or removed.
    pub(super) fn hold_output(&mut self) {
        if !self.inflight.holding {
            let order = Rc::clone(&self.inflight.order);
            messages::hold(Some(Box::new(move |h| {
                order.borrow_mut().push_back(Item::Said(h))
            })));
            self.inflight.holding = true;
        }
    }

    /// Finishes the files in flight that have ended, in turn, without waiting, and lets out
    /// what was held behind them (all of it when none is in flight). Called once the walk has
    /// recorded what it made for a file, never from inside [`Self::queue_data`]: a copy that
    /// failed at once would be finished before DEST was remembered as just-created, and then
    /// remembered after it was forgotten.
    pub(super) fn finish_ended(&mut self) {
        if !self.inflight.pending.is_empty() || self.inflight.holding {
            self.finish_in_turn(Until::Nothing);
        }
    }

    /// Where queued files go: the mover's queue where the mover has one (it sees every
    /// file), else the engine, once started.
    fn file_queue(&mut self) -> Option<&mut dyn crate::data::mover::FileQueue> {
        // A mover without a queue (now) leaves files in flight to the engine.
        let mover_queues = self.mover.as_mut().is_some_and(|m| m.queue().is_some());
        match &mut self.mover {
            Some(mover) if mover_queues => mover.queue(),
            _ => self
                .engine
                .running_mut()
                .map(|e| e as &mut dyn crate::data::mover::FileQueue),
        }
    }

    /// Ends every file in flight and prints what was held: before a prompt, a check that
    /// depends on an earlier file's outcome, and at the end of the run.
    pub fn settle(&mut self) {
        self.finish_in_turn(Until::All);
    }

    /// Puts a directory just made in cp's order, behind the files in flight, if any.
    pub(super) fn made_dir(&mut self, made: MadeDir) {
        if self.inflight.holding {
            self.inflight.order.borrow_mut().push_back(Item::Dir(made));
        }
    }

    /// Whether DEST (its inode and name) was made by this run from another operand, once
    /// the files in flight that may have made it have ended.
    pub(super) fn just_created(&mut self, key: &(FileId, PathBuf)) -> bool {
        if self.memory.created.contains(key) && !self.inflight.pending.is_empty() {
            self.settle();
        }
        self.memory.created.contains(key)
    }

    /// Prints held messages and finishes queued files from the front of the order, as far
    /// as results are in, waiting for them `until` says. Returns whether a file was finished.
    fn finish_in_turn(&mut self, until: Until) -> bool {
        let mut finished_one = false;
        loop {
            let front = self.inflight.order.borrow_mut().pop_front();
            match front {
                None => {
                    if self.inflight.holding {
                        messages::hold(None);
                        self.inflight.holding = false;
                    }
                    self.inflight
                        .unmade
                        .drain(..)
                        .rev()
                        .for_each(|d| d.remove());
                    return finished_one;
                }
                Some(Item::Dir(made)) if self.inflight.cut_off => self.inflight.unmade.push(made),
                Some(Item::Dir(_)) => {}
                Some(Item::Said(held)) => {
                    if !self.inflight.cut_off {
                        messages::release(held);
                    }
                }
                Some(Item::Line(..)) if self.inflight.cut_off => {}
                Some(Item::Line(ticket, held)) => {
                    let block = blocks(until, finished_one);
                    match self.result_of(ticket, block) {
                        Some(f) if !never_began(f) => messages::release(held),
                        Some(_) => {}
                        None if block => messages::release(held), // never silent on a loss
                        None => {
                            let mut order = self.inflight.order.borrow_mut();
                            order.push_front(Item::Line(ticket, held));
                            return finished_one;
                        }
                    }
                }
                Some(Item::File(ticket)) => {
                    let block = blocks(until, finished_one);
                    if self.result_of(ticket, block).is_none() && !block {
                        self.inflight
                            .order
                            .borrow_mut()
                            .push_front(Item::File(ticket));
                        return finished_one;
                    }
                    let finished = self.inflight.finished.remove(&ticket);
                    finished_one = true;
                    let pending = self.inflight.pending.remove(&ticket);
                    // Its own messages come out now, in its turn.
                    let hold = messages::hold(None);
                    match (pending, finished) {
                        (Some(p), Some(f)) => {
                            if let Some(result) = self.finish_file(p, &f) {
                                super::copier::count(&mut self.files, &result);
                            }
                            // Its files are closed off this thread, the one a tree of
                            // small files waits on.
                            if let Some(queue) = self.file_queue() {
                                queue.retire(f.job);
                            }
                        }
                        // The engine lost the file (cannot happen): never a silent success.
                        (p, _) => {
                            if let Some(p) = p {
                                error(&format!(
                                    "error writing {}: the copy did not finish",
                                    aiscp_engine::quote::quote(&p.dst_path)
                                ));
                            }
                            self.failed = true;
                            super::copier::count(&mut self.files, &Err(Reported));
                        }
                    }
                    messages::hold(hold);
                }
            }
        }
    }

    /// The result of the queued file `ticket`, taking what has ended from the queue (waiting
    /// for it if `block`); None if it has not ended (or the queue lost it).
    fn result_of(&mut self, ticket: Ticket, block: bool) -> Option<&Finished> {
        while !self.inflight.finished.contains_key(&ticket) {
            let f = self.file_queue().and_then(|q| q.next_finished(block))?;
            self.inflight.finished.insert(f.ticket, f);
        }
        self.inflight.finished.get(&ticket)
    }

    /// What follows a queued file's data, as `copy_file` does it for a file copied in turn:
    /// the error, or the attributes. Returns what became of the file; None for one the run
    /// was stopped before (neither copied nor failed).
    fn finish_file(&mut self, p: Pending, f: &Finished) -> Option<Result<Disposition, Reported>> {
        for (set, id) in [
            (&mut self.inflight.reading, p.src_id),
            (&mut self.inflight.writing, p.dst_id),
        ] {
            if let Some(n) = set.get_mut(&id) {
                *n -= 1;
                if *n == 0 {
                    set.remove(&id);
                }
            }
        }
        // Past the file a stop came before, cp would not have begun this one, whatever a
        // worker did with it (its -v line is dropped): a DEST this run made for it goes.
        if self.inflight.cut_off && !never_began(f) {
            p.remove_made(false);
            return None;
        }
        let copied = match &f.result {
            // Stopped before its turn: a DEST made for it by this run goes again (it was
            // never written; cp would not have made it).
            Err(CopyError::Interrupted) if never_began(f) => {
                self.inflight.cut_off = true;
                p.remove_made(true);
                None
            }
            // Interrupted: main dies of the signal once the engine has stopped.
            Err(CopyError::Interrupted) => None,
            // Not copied where it was sent (an MPI rank no longer found it by name): copied
            // here in turn, through the descriptors this process holds, as it would have been.
            Err(CopyError::NotMoved) => self.copy_here(&p, f),
            // The first file (in cp's order) to meet a full disk shared it with the files
            // in flight after it, which cp had not begun: they give their space back, and
            // this one is copied again in turn, to keep what cp keeps.
            Err(e) if e.is_disk_full() && !self.inflight.out_of_space => {
                self.give_back_space();
                let _ = f.job.dst.set_len(0);
                self.copy_here(&p, f)
            }
            Err(e) => {
                error(&e.to_string());
                None
            }
            Ok(copied) => {
                self.list_digest(&p.dst_path, copied);
                self.apply_attrs(&p, f).then_some(copied.size)
            }
        };
        if let Some(bytes) = copied {
            return Some(Ok(Disposition::Made { bytes }));
        }
        self.failed = true;
        // A failed copy is not "just created" (as when copied in turn).
        let name = super::names::name_key(&p.dst_path);
        self.memory.created.remove(&(p.dst_id, name));
        (!never_began(f)).then_some(Err(Reported))
    }

    /// After a full disk: every file in flight (all later than the one that met it in cp's
    /// order) is waited for, cut to nothing and left to be copied again in its turn, one at
    /// a time, where cp would have found the disk as full as they will.
    fn give_back_space(&mut self) {
        self.inflight.out_of_space = true;
        let later: Vec<Ticket> = self.inflight.pending.keys().copied().collect();
        for ticket in later {
            if self.result_of(ticket, true).is_none() {
                continue;
            }
            let Some(f) = self.inflight.finished.get_mut(&ticket) else {
                continue;
            };
            if !matches!(f.result, Err(CopyError::Interrupted)) {
                let _ = f.job.dst.set_len(0);
                f.result = Err(CopyError::NotMoved);
            }
        }
    }

    /// A queued file whose data was not moved, copied now as `copy_file` copies one in
    /// turn: DST (untouched so far) cut, the data, the attributes. Returns the bytes copied;
    /// None when it failed (reported).
    fn copy_here(&mut self, p: &Pending, f: &Finished) -> Option<u64> {
        if !p.created {
            if let Err(e) = f.job.dst.set_len(0) {
                messages::fail_os("cannot create regular file", &p.dst_path, &e);
                return None;
            }
        }
        let job = &f.job;
        self.fill_and_finish(
            &job.src_name,
            &p.dst_path,
            &job.src,
            &p.src_meta,
            &job.dst,
            p.created,
        )
        .ok()
    }

    /// The attributes a finished file's DEST takes from its SOURCE (-p, -a, the new file's
    /// mode), as `copy_file` sets them after the data.
    fn apply_attrs(&self, p: &Pending, f: &Finished) -> bool {
        let job = &f.job;
        attrs::apply(
            &job.dst,
            &p.dst_path,
            Some(&job.src),
            &p.src_meta,
            self.opts,
            p.created,
            self.umask,
        )
        .is_ok()
    }
}

/// Whether [`Copier::finish_in_turn`] waits for a file's result, `until` says, once
/// `finished_one` file has been finished.
fn blocks(until: Until, finished_one: bool) -> bool {
    match until {
        Until::Nothing => false,
        Until::OneFile => !finished_one,
        Until::All => true,
    }
}

/// A file the run was stopped before its turn came.
fn never_began(f: &Finished) -> bool {
    matches!(f.result, Err(CopyError::Interrupted)) && !f.started
}
