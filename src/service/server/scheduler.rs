//! The main thread's part: clients' files into the one engine, a fair share each taken
//! round-robin, a file too large to fly copied in turn, and each file's answer sent back.

use super::connections::{Event, Job, Joined};
use super::handover::{how_it_flies, Flying, Queues};
use super::recorder::{progress_to, Recorder};
use super::turn::{Turn, TURN_CHUNKS};
use super::{debug_line, ClientId, Shared};
use crate::service::wire::{self, FileDone, Handover, Outcome, Reply, Stages};
use aiscp_engine::{
    Copied, CopyError, Engine, GiveWay, ProgressSink, QueueLimits, QueuedJob, Ticket,
};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A client as the scheduler keeps it.
struct Client {
    joined: Joined,
    pending: VecDeque<Job>,
    in_flight: usize,
    /// Answers not sent yet: those of one pass over the files that ended go together, before
    /// anything else is started.
    outbox: Vec<FileDone>,
    gone: bool,
    files: u64,
    bytes: u64,
}

pub(super) struct Scheduler {
    engine: Engine,
    /// Files copied in turn, at most one per client, each given a part in its turn.
    turns: VecDeque<Turn>,
    /// How much of a file one turn copies: [`TURN_CHUNKS`] chunks.
    turn_part: u64,
    clients: BTreeMap<ClientId, Client>,
    /// Files in the engine's flight: whose, their id, their route.
    tickets: HashMap<Ticket, (ClientId, u64, Arc<Recorder>)>,
    last_served: ClientId,
    limits: QueueLimits,
    debug: bool,
    shared: Arc<Shared>,
}

impl Scheduler {
    pub(super) fn new(
        engine: Engine,
        limits: QueueLimits,
        debug: bool,
        shared: Arc<Shared>,
    ) -> Scheduler {
        Scheduler {
            turns: VecDeque::new(),
            turn_part: engine.chunk_bytes() * TURN_CHUNKS,
            engine,
            clients: BTreeMap::new(),
            tickets: HashMap::new(),
            last_served: 0,
            limits,
            debug,
            shared,
        }
    }

    /// Stops every client's files (dropping the scheduler then lands them).
    pub(super) fn cancel_all(&self) {
        for c in self.clients.values() {
            c.joined.cancel.store(true, Ordering::SeqCst);
        }
    }

    /// Serves clients until `stop` is set, the events end, or no client has come for
    /// `idle_exit` (zero: never); staging memory goes back after `idle_release` without work.
    pub(super) fn serve(
        &mut self,
        events: &Receiver<Event>,
        stop: &AtomicBool,
        (idle_exit, idle_release): (Duration, Duration),
    ) {
        let mut idle_since = Instant::now();
        let mut worked_at = Instant::now();
        let mut nap = Duration::ZERO;
        while !stop.load(Ordering::SeqCst) {
            let moved = self.pass(stop);
            if self.has_work() {
                worked_at = Instant::now();
            } else if !idle_release.is_zero() && worked_at.elapsed() >= idle_release {
                self.release_idle(idle_release);
            }
            let held = self.engine.staging_held();
            self.shared.staging_held.store(held, Ordering::SeqCst);
            if !self.clients.is_empty() || self.engine.in_flight() > 0 || !self.turns.is_empty() {
                idle_since = Instant::now();
            } else if !idle_exit.is_zero() && idle_since.elapsed() >= idle_exit {
                if self.debug {
                    debug_line(&format!(
                        "no client for {:.1} s: releasing the GPU and exiting",
                        idle_exit.as_secs_f64()
                    ));
                }
                return;
            }
            // Files in flight end without an event: look again soon, backing off from 20 µs
            // to 1 ms while nothing happens.
            nap = match moved {
                true => Duration::ZERO,
                false => (nap * 2).clamp(Duration::from_micros(20), Duration::from_millis(1)),
            };
            let idle_left =
                (!idle_exit.is_zero()).then(|| idle_exit.saturating_sub(idle_since.elapsed()));
            match self.take_events(events, self.wait(nap, idle_left)) {
                Some(true) => nap = Duration::ZERO,
                Some(false) => {}
                None => return,
            }
        }
    }

    /// One pass over the work: answers for the files that ended, new files started, the
    /// next part of a file in turn (cut short once `stop` is set), clients gone forgotten.
    /// Whether anything moved.
    fn pass(&mut self, stop: &AtomicBool) -> bool {
        let mut moved = self.collect_finished();
        self.send_answers();
        moved |= self.schedule();
        self.send_answers();
        moved |= self.step_turn(stop);
        self.reap();
        moved
    }

    /// Nothing to copy for `idle` now: the staging memory goes back, the context stays.
    fn release_idle(&mut self, idle: Duration) {
        if self.engine.staging_held() == 0 {
            return;
        }
        self.engine.release_staging();
        if self.debug {
            debug_line(&format!(
                "no work for {:.1} s: staging memory given back",
                idle.as_secs_f64()
            ));
        }
    }

    /// How long to wait for an event: not at all while a file is in turn, `nap` while files
    /// fly, else up to 250 ms (less where the idle exit, `idle_left` away, comes first).
    fn wait(&self, nap: Duration, idle_left: Option<Duration>) -> Duration {
        let most = Duration::from_millis(250);
        if !self.turns.is_empty() {
            Duration::ZERO
        } else if self.engine.in_flight() > 0 {
            nap
        } else if let (true, Some(left)) = (self.clients.is_empty(), idle_left) {
            left.min(most)
        } else {
            most
        }
    }

    /// Takes the events that come within `wait`: Some(true) when there were any,
    /// Some(false) when none came, None when the senders are gone.
    fn take_events(&mut self, events: &Receiver<Event>, wait: Duration) -> Option<bool> {
        match events.recv_timeout(wait) {
            Ok(e) => {
                self.take(e);
                while let Ok(e) = events.try_recv() {
                    self.take(e);
                }
                Some(true)
            }
            Err(RecvTimeoutError::Timeout) => Some(false),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Whether any file is waiting, in flight or in turn.
    fn has_work(&self) -> bool {
        self.engine.in_flight() > 0
            || !self.turns.is_empty()
            || self.clients.values().any(|c| !c.pending.is_empty())
    }

    fn take(&mut self, event: Event) {
        self.shared.seen(&event);
        match event {
            Event::Join(id, joined) => {
                if self.debug {
                    debug_line(&format!("client pid {} connected", joined.pid));
                }
                let client = Client {
                    joined,
                    pending: VecDeque::new(),
                    in_flight: 0,
                    outbox: Vec::new(),
                    gone: false,
                    files: 0,
                    bytes: 0,
                };
                self.clients.insert(id, client);
            }
            Event::Jobs(id, jobs) => {
                if let Some(c) = self.clients.get_mut(&id) {
                    c.pending.extend(jobs);
                }
            }
            Event::Cancel(id) => {
                if let Some(c) = self.clients.get_mut(&id) {
                    for job in std::mem::take(&mut c.pending) {
                        let outcome = Outcome::Interrupted { started: false };
                        answer(c, job.id, outcome);
                    }
                }
            }
            Event::Gone(id) => {
                if let Some(c) = self.clients.get_mut(&id) {
                    c.gone = true;
                    c.pending.clear();
                }
            }
        }
    }

    /// Answers the files in flight that have ended; whether any had.
    fn collect_finished(&mut self) -> bool {
        let mut any = false;
        while let Some(f) = self.engine.next_finished(false) {
            any = true;
            let Some((client, id, recorder)) = self.tickets.remove(&f.ticket) else {
                continue;
            };
            let outcome = recorder.outcome(f.result, f.started, Stages::from(&f.stages));
            self.count(&outcome);
            // Closed before the answer: the client sets DEST's attributes next.
            drop(f.job);
            if let Some(c) = self.clients.get_mut(&client) {
                c.in_flight -= 1;
                answer(c, id, outcome);
            }
        }
        any
    }

    /// Starts clients' files, round-robin, while there is room; whether any started.
    fn schedule(&mut self) -> bool {
        let mut started = false;
        loop {
            let waiting: Vec<ClientId> = self
                .clients
                .iter()
                .filter(|(_, c)| !c.gone && !c.pending.is_empty())
                .map(|(&id, _)| id)
                .collect();
            if waiting.is_empty() {
                return started;
            }
            let share = (self.limits.files / waiting.len()).max(1);
            let (after, upto): (Vec<_>, Vec<_>) =
                waiting.iter().partition(|&&id| id > self.last_served);
            let mut moved = false;
            for id in after.into_iter().chain(upto) {
                moved |= self.start_one(id, share);
            }
            if !moved {
                return started;
            }
            started = true;
        }
    }

    /// Starts the first waiting file of client `id`, if its share and the engine allow.
    fn start_one(&mut self, id: ClientId, share: usize) -> bool {
        let queues = Queues {
            max: self.engine.queue_max(),
            large: self.engine.flies_large_files(),
        };
        let others_busy = self
            .clients
            .iter()
            .any(|(&o, c)| o != id && !c.gone && (!c.pending.is_empty() || c.in_flight > 0));
        let Some(c) = self.clients.get_mut(&id) else {
            return false;
        };
        let Some(front) = c.pending.front() else {
            return false;
        };
        let Some(flying) = how_it_flies(front, &c.joined.sock, &queues, others_busy) else {
            if self.turns.iter().any(|t| t.client == id) {
                return false; // its client waits for that one first
            }
            let job = c.pending.pop_front().expect("front exists");
            self.last_served = id;
            self.begin_turn(id, job);
            return true;
        };
        if c.in_flight >= share || !self.engine.has_room(flying.len) {
            return false;
        }
        let job = c.pending.pop_front().expect("front exists");
        self.last_served = id;
        c.files += 1;
        c.bytes = c.bytes.saturating_add(flying.len);
        self.fly(id, job, flying);
        true
    }

    /// Queues client `id`'s `job` in the engine's flight; a file the engine cannot queue
    /// is copied in turn instead.
    fn fly(&mut self, id: ClientId, job: Job, flying: Flying) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let Flying {
            len,
            truncate,
            reports,
        } = flying;
        let recorder = Arc::new(Recorder {
            route: Mutex::default(),
            progress: reports,
        });
        let queued = QueuedJob {
            src: job.src,
            src_name: job.src_name,
            len,
            dst: job.dst,
            dst_name: job.dst_name,
            sparse: job.sparse,
            may_have_holes: true,
            digest: job.digest,
            truncate,
            progress: Arc::clone(&recorder) as Arc<dyn ProgressSink + Send + Sync>,
        };
        match self
            .engine
            .submit_cancellable(queued, Arc::clone(&c.joined.cancel))
        {
            Ok(ticket) => {
                c.in_flight += 1;
                self.tickets.insert(ticket, (id, job.id, recorder));
            }
            Err(refused) => {
                let (q, _) = *refused;
                let job = Job {
                    id: job.id,
                    src: q.src,
                    dst: q.dst,
                    src_name: q.src_name,
                    dst_name: q.dst_name,
                    sparse: q.sparse,
                    digest: q.digest,
                    handover: Handover::InTurn {
                        len: (len > 0).then_some(len),
                    },
                };
                self.begin_turn(id, job);
            }
        }
    }

    /// Begins copying client `id`'s `job` in turn, with every slot, a part at a time
    /// ([`Scheduler::step_turn`]).
    fn begin_turn(&mut self, id: ClientId, job: Job) {
        // What other clients were told meanwhile (a Cancel's answers) goes before this copy.
        self.send_answers();
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let recorder = Recorder {
            route: Mutex::default(),
            progress: Some(progress_to(&c.joined.sock, job.id)),
        };
        self.turns.push_back(Turn::new(id, job, recorder));
    }

    /// Copies the next part of the first file in turn, or ends it (the finish, its
    /// answer), then puts it last; whether there was one. Between parts the scheduler
    /// serves everyone else, and the other files in turn get theirs.
    fn step_turn(&mut self, stop: &AtomicBool) -> bool {
        let Some(mut turn) = self.turns.pop_front() else {
            return false;
        };
        let Some(c) = self.clients.get(&turn.client) else {
            return true; // its client is forgotten: the files close with it
        };
        let cancel = Arc::clone(&c.joined.cancel);
        // Alone, the file is copied to its end in one part that gives way when a client
        // sends files or the service is to stop (a part's end drains the pipeline:
        // BENCHMARKS.md, "Pinned windows on huge pages"); beside other work, a part of
        // TURN_CHUNKS chunks at a time.
        let alone = self.turns.is_empty()
            && self.engine.in_flight() == 0
            && self.clients.values().all(|c| c.pending.is_empty())
            && !self.shared.files_waiting();
        let give_way_now = || self.shared.files_waiting() || stop.load(Ordering::SeqCst);
        let (span, give_way) = match alone {
            true => (u64::MAX, Some(&give_way_now as GiveWay<'_>)),
            false => (self.turn_part, None),
        };
        match turn.step(&mut self.engine, span, (&cancel, give_way)) {
            Some(result) => self.end_turn(turn, result),
            None => self.turns.push_back(turn),
        }
        true
    }

    /// Answers the file in turn, which ended as `result`.
    fn end_turn(&mut self, turn: Turn, result: Result<Copied, CopyError>) {
        let Turn {
            client,
            job,
            recorder,
            stages,
            ..
        } = turn;
        let outcome = recorder.outcome(result, true, Stages::from(&stages));
        self.shared.count(&outcome);
        drop(job.src);
        drop(job.dst);
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        if let Outcome::Copied { end, .. } = &outcome {
            c.bytes = c.bytes.saturating_add(*end);
        }
        c.files += 1;
        answer(c, job.id, outcome);
        // Its client waits for this one answer.
        send_answers(c);
    }

    /// Sends every client's answers recorded since the last time.
    fn send_answers(&mut self) {
        for c in self.clients.values_mut() {
            send_answers(c);
        }
    }

    fn count(&self, outcome: &Outcome) {
        self.shared.count(outcome);
    }

    /// Forgets clients that have gone and whose files have all ended.
    fn reap(&mut self) {
        let debug = self.debug;
        self.clients.retain(|_, c| {
            let keep = !(c.gone && c.in_flight == 0);
            if !keep && debug {
                debug_line(&format!(
                    "client pid {} left: {} file(s), {} bytes",
                    c.joined.pid, c.files, c.bytes
                ));
            }
            keep
        });
    }
}

/// Records a file's answer, sent with the others of its client by [`send_answers`].
fn answer(c: &mut Client, id: u64, outcome: Outcome) {
    c.joined.unanswered.fetch_sub(1, Ordering::SeqCst);
    c.outbox.push(FileDone { id, outcome });
}

/// Sends client `c`'s answers, as few messages as fit. A client that cannot take them is
/// let go, its connection shut: it sees the end at once and copies what it has left
/// in-process (waiting instead for answers that never come would hang it).
fn send_answers(c: &mut Client) {
    if c.outbox.is_empty() {
        return;
    }
    let files = std::mem::take(&mut c.outbox);
    // Never waits: the scheduler serves every client. A client's answers (at most
    // MAX_PENDING, and progress held back above PROGRESS_ROOM) always fit its socket unless
    // it does not read them. An answer too long for a message even alone (a failure naming
    // two very long paths) lets the client go too.
    let sock = c.joined.sock.as_fd();
    let sent = files.chunks(wire::MAX_FILES).try_for_each(|batch| {
        let reply = |files: &[FileDone]| Reply::Done {
            files: files.to_vec(),
        };
        match wire::send_now(sock, &reply(batch)) {
            // Long messages go one by one.
            Err(e) if wire::too_long(&e) => batch
                .chunks(1)
                .try_for_each(|one| wire::send_now(sock, &reply(one))),
            other => other,
        }
    });
    if sent.is_err() {
        let _ = nix::sys::socket::shutdown(sock.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        c.gone = true;
        c.joined.cancel.store(true, Ordering::SeqCst);
        c.pending.clear();
    }
}
