//! `aiscp --serve`: one engine (one context, one slot pool) brought up once, serving every
//! client that connects, until a signal or `--idle-exit`.
//!
//! Threads: one accepts connections; one per client reads its requests (so a slow or hostile
//! client blocks only itself); the main thread owns the engine and schedules. Clients' files
//! go into the engine's files in flight, a fair share each (the in-flight limit divided by
//! the clients with work), taken round-robin. A file too large to fly as its client sees it
//! flies all the same, on one slot, while other clients have work (so no client waits behind
//! another's large file); with no one else waiting it is copied in turn with every slot. On
//! the library route nothing flies: files are copied in turn, one at a time. Each client has
//! its own cancel flag: Cancel from it, or its connection closing, stops its files (and only
//! its files) between slices, and its queued files are dropped at once.
//!
//! Bounds: [`MAX_CLIENTS`] connections, [`MAX_PENDING`] unanswered files per client, each
//! message at most [`wire::MAX_MESSAGE`] bytes, so a client costs at most about
//! MAX_PENDING x MAX_MESSAGE bytes and 2 x MAX_PENDING descriptors.

use super::users::Users;
use super::wire::{self, Handover, Outcome, Reply, Request, Status, Welcome, WireError};
use crate::messages;
use aiscp_engine::quote::quote;
use aiscp_engine::{
    Config, CopyError, DataJob, Diagnostics, Engine, ProgressSink, QueueLimits, QueuedJob,
    SourceKind, Ticket,
};
use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections served at once; more are refused (those clients copy in-process).
pub const MAX_CLIENTS: usize = 64;
/// Files one client may have sent and not had answered: twice the copier's own in-flight
/// limit, so a well-behaved client never meets it.
pub const MAX_PENDING: usize = 128;
/// How long a new connection has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What `--serve` was asked for.
pub struct ServeArgs {
    pub socket: Option<PathBuf>,
    /// Who besides the service's own user may connect.
    pub users: Users,
    /// Zero: never.
    pub idle_exit: Duration,
}

/// Runs the service in the foreground; returns the exit status.
pub fn run(config: Config, args: ServeArgs) -> i32 {
    // Read (and cleared from the environment) before any thread starts.
    let mut activated = listenfd::ListenFd::from_env();
    let inherited = match activated.take_custom::<OwnedFd>(
        0,
        libc::AF_UNIX,
        libc::SOCK_SEQPACKET,
        "unix seqpacket socket",
    ) {
        Ok(fd) => fd,
        Err(e) => {
            messages::error(&format!("cannot use the socket systemd passed: {e}"));
            return 1;
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        if let Err(e) = signal_hook::flag::register(sig, Arc::clone(&stop)) {
            messages::error(&format!("cannot install signal handlers: {e}"));
            return 1;
        }
    }
    let (quiet, debug) = (config.quiet, config.debug);
    let slots_bytes =
        config.chunk_size.bytes() * config.streams.unwrap_or(aiscp_engine::DEFAULT_STREAMS) as u64;
    let diag = Box::new(ServiceDiagnostics { quiet });
    let mut engine = match Engine::start(config, diag) {
        Ok(e) => e,
        Err(e) => {
            messages::error(&e.to_string());
            return 1;
        }
    };
    // No byte bound on the files in flight: it keeps one copier from running too far ahead of
    // its data, which each client still does for itself; here files in flight hold no memory
    // beyond the fixed slots, and each client's descriptors are bounded (MAX_PENDING).
    let limits = QueueLimits {
        bytes: u64::MAX,
        ..crate::copy::queue_limits()
    };
    engine.set_queue_limits(limits);
    let path = args.socket.clone().unwrap_or_else(super::default_socket);
    let (listener, bound) = match inherited {
        Some(fd) => (fd, None),
        None => match bind(&path, args.users.shared()) {
            Ok((fd, lock)) => (fd, Some(lock)),
            Err(why) => {
                messages::error(&why);
                return 1;
            }
        },
    };
    let info = engine.info();
    let welcome = Welcome {
        protocol: wire::PROTOCOL,
        version: wire::VERSION.to_owned(),
        pid: std::process::id(),
        backend: info.backend.to_owned(),
        library: info.library.clone(),
        gpus: info.gpus.clone(),
        queue_max: engine.queue_max(),
    };
    let shared = Arc::new(Shared {
        staging_bytes: slots_bytes * info.gpus.len().max(1) as u64,
        welcome,
        seats: Arc::new(AtomicUsize::new(0)),
        started: Instant::now(),
        files: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    if !quiet {
        let gpus = match info.gpus.len() {
            0 => String::new(),
            1 => format!(" on GPU {}", info.gpus[0]),
            _ => format!(" on GPUs {:?}", info.gpus),
        };
        say(&format!(
            "serving at {} (pid {}): {}{gpus}, up in {:.3} s",
            if bound.is_some() {
                quote(&path)
            } else {
                "the socket systemd passed".to_owned()
            },
            std::process::id(),
            info.library.as_deref().unwrap_or(info.backend),
            info.startup.as_secs_f64()
        ));
    }
    let (events_tx, events_rx) = mpsc::channel();
    let accepting = {
        let shared = Arc::clone(&shared);
        let users = args.users.clone();
        std::thread::Builder::new()
            .name("aiscp-accept".into())
            .spawn(move || accept_loop(listener, events_tx, &shared, &users))
    };
    if let Err(e) = accepting {
        messages::error(&format!("cannot start the service's threads: {e}"));
        return 1;
    }
    let mut scheduler = Scheduler {
        engine,
        clients: BTreeMap::new(),
        tickets: HashMap::new(),
        last_served: 0,
        limits,
        debug,
        shared,
    };
    scheduler.serve(&events_rx, &stop, args.idle_exit);
    // Every client's files stop; dropping the engine lands them and releases the GPU.
    for c in scheduler.clients.values() {
        c.joined.cancel.store(true, Ordering::SeqCst);
    }
    drop(scheduler);
    if let Some(lock) = bound {
        let _ = std::fs::remove_file(&path);
        drop(lock);
    }
    0
}

/// The lock beside the socket, held while the socket is served: a socket whose lock is free
/// is stale (its service died), one whose lock is held belongs to a live service.
type SocketLock = Flock<File>;

/// Makes the socket: its directory private (created 0700 when missing), the lock taken, a
/// stale socket removed, the new one bound 0600. A service `shared` with other users needs
/// their connections: its directory 0755 (no one else may write there) and its socket 0666
/// (who is served is then SO_PEERCRED's answer, checked on every connection).
fn bind(path: &Path, shared: bool) -> Result<(OwnedFd, SocketLock), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(if shared { 0o755 } else { 0o700 })
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {}", quote(&dir), messages::os_text(&e)))?;
    }
    super::socket_dir(&dir, shared).map_err(|e| format!("not serving: {e}"))?;
    let mut lock_name = path.as_os_str().to_owned();
    lock_name.push(".lock");
    use std::os::unix::fs::OpenOptionsExt;
    let lock_file = std::fs::OpenOptions::new()
        .mode(0o600)
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_name)
        .map_err(|e| {
            format!(
                "cannot open {}: {}",
                quote(Path::new(&lock_name)),
                messages::os_text(&e)
            )
        })?;
    let lock = Flock::lock(lock_file, FlockArg::LockExclusiveNonblock)
        .map_err(|_| format!("another staging service is serving at {}", quote(path)))?;
    match std::fs::remove_file(path) {
        Ok(()) => say(&format!("removed a stale socket at {}", quote(path))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(format!(
                "cannot remove the stale socket {}: {}",
                quote(path),
                messages::os_text(&e)
            ))
        }
    }
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| format!("cannot make a socket: {e}"))?;
    let addr = UnixAddr::new(path).map_err(|e| format!("cannot bind {}: {e}", quote(path)))?;
    // 0600 (0666 shared) from the start: the umask is the process's, and no other thread
    // makes files now (the engine's workers only read and write descriptors).
    let mask = if shared { 0o111 } else { 0o177 };
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(mask));
    let bound = socket::bind(fd.as_raw_fd(), &addr);
    nix::sys::stat::umask(old);
    bound.map_err(|e| format!("cannot bind {}: {e}", quote(path)))?;
    socket::listen(
        &fd,
        socket::Backlog::new(128).unwrap_or(socket::Backlog::MAXCONN),
    )
    .map_err(|e| format!("cannot listen on {}: {e}", quote(path)))?;
    Ok((fd, lock))
}

type ClientId = u64;

/// What every thread of the service reads: what clients are told, and the counts
/// `--doctor` shows.
struct Shared {
    welcome: Welcome,
    seats: Arc<AtomicUsize>,
    started: Instant,
    files: AtomicU64,
    bytes: AtomicU64,
    staging_bytes: u64,
}

impl Shared {
    /// Counts a file copied.
    fn count(&self, outcome: &Outcome) {
        if let Outcome::Copied { end, .. } = outcome {
            self.files.fetch_add(1, Ordering::SeqCst);
            self.bytes.fetch_add(*end, Ordering::SeqCst);
        }
    }

    fn status(&self) -> Status {
        Status {
            welcome: self.welcome.clone(),
            uptime_secs: self.started.elapsed().as_secs_f64(),
            clients: self.seats.load(Ordering::SeqCst),
            files: self.files.load(Ordering::SeqCst),
            bytes: self.bytes.load(Ordering::SeqCst),
            staging_bytes: self.staging_bytes,
        }
    }
}

/// What the reader threads tell the scheduler.
enum Event {
    Join(ClientId, Joined),
    Job(ClientId, Job),
    Cancel(ClientId),
    Gone(ClientId),
}

/// A client that said hello.
struct Joined {
    sock: Arc<OwnedFd>,
    pid: i32,
    cancel: Arc<AtomicBool>,
    /// Files sent and not yet answered (the reader refuses more than [`MAX_PENDING`]).
    unanswered: Arc<AtomicUsize>,
    _seat: Seat,
}

/// One of [`MAX_CLIENTS`] places, given back when the client is forgotten.
struct Seat(Arc<AtomicUsize>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One file a client sent.
struct Job {
    id: u64,
    src: File,
    dst: File,
    src_name: PathBuf,
    dst_name: PathBuf,
    sparse: aiscp_engine::SparseMode,
    handover: Handover,
}

fn accept_loop(listener: OwnedFd, events: Sender<Event>, shared: &Arc<Shared>, users: &Users) {
    let uid = nix::unistd::getuid().as_raw();
    let greeting = Arc::new(AtomicUsize::new(0));
    let mut next: ClientId = 1;
    loop {
        let conn = match socket::accept4(listener.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
            // SAFETY: accept4 returned a new descriptor that nothing else owns.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(nix::errno::Errno::EINTR | nix::errno::Errno::ECONNABORTED) => continue,
            Err(_) => {
                // Out of descriptors or memory: let clients leave before taking more.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        // Connections still saying hello are bounded too; past that they are closed unheard.
        if greeting.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
            greeting.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let greeted = Seat(Arc::clone(&greeting));
        let (id, events, shared, users) = (next, events.clone(), Arc::clone(shared), users.clone());
        next += 1;
        let spawned = std::thread::Builder::new()
            .name(format!("aiscp-client-{id}"))
            .spawn(move || {
                let seat = greet(conn, (uid, &users), &shared, greeted);
                if let Some((conn, seat, pid)) = seat {
                    read_client(id, conn, seat, pid, &events, &shared);
                }
            });
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The handshake: the client's hello is read first (so a refusal is read by the client, not
/// lost to a connection reset), then its uid, its version and a free seat are checked.
/// Returns the connection, its seat and the client's pid when it is to be served.
fn greet(
    conn: OwnedFd,
    (uid, users): (u32, &Users),
    shared: &Shared,
    _greeting: Seat,
) -> Option<(OwnedFd, Seat, i32)> {
    let refuse = |why: String| {
        let _ = wire::send(conn.as_fd(), &Reply::Refused { why }, &[]);
        None
    };
    let timeout = |t: Option<Duration>| {
        let tv = nix::sys::time::TimeVal::new(
            t.map_or(0, |t| t.as_secs() as libc::time_t),
            t.map_or(0, |t| t.subsec_micros() as libc::suseconds_t),
        );
        socket::setsockopt(&conn, socket::sockopt::ReceiveTimeout, &tv)
    };
    timeout(Some(HELLO_TIMEOUT)).ok()?;
    let hello = wire::receive::<Request>(conn.as_fd());
    let (pid, peer_uid) = match super::peer(&conn) {
        Ok(p) => p,
        Err(e) => return refuse(format!("cannot tell who is connecting: {e}")),
    };
    if !users.admits(peer_uid, uid) {
        return refuse(users.refusal(peer_uid));
    }
    match hello {
        Ok((Request::Hello { protocol, version }, _))
            if protocol == wire::PROTOCOL && version == wire::VERSION => {}
        Ok((Request::Hello { protocol, version }, _)) => {
            return refuse(format!(
                "another version: the service is aiscp {} (protocol {}), the client {version} \
                 (protocol {protocol})",
                wire::VERSION,
                wire::PROTOCOL
            ))
        }
        Ok(_) => return refuse("the first message must be hello".into()),
        Err(WireError::Malformed(m)) => return refuse(m),
        Err(_) => return None,
    }
    let seats = &shared.seats;
    if seats.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
        seats.fetch_sub(1, Ordering::SeqCst);
        return refuse(format!("busy: {MAX_CLIENTS} clients already"));
    }
    let seat = Seat(Arc::clone(seats));
    timeout(None).ok()?;
    wire::send(conn.as_fd(), &Reply::Welcome(shared.welcome.clone()), &[]).ok()?;
    Some((conn, seat, pid))
}

/// One client's requests after its welcome: each file checked and handed to the scheduler.
/// Anything malformed ends the connection (the client then copies in-process).
fn read_client(
    id: ClientId,
    conn: OwnedFd,
    seat: Seat,
    pid: i32,
    events: &Sender<Event>,
    shared: &Shared,
) {
    let sock = Arc::new(conn);
    let cancel = Arc::new(AtomicBool::new(false));
    let unanswered = Arc::new(AtomicUsize::new(0));
    let joined = Joined {
        sock: Arc::clone(&sock),
        pid,
        cancel: Arc::clone(&cancel),
        unanswered: Arc::clone(&unanswered),
        _seat: seat,
    };
    if events.send(Event::Join(id, joined)).is_err() {
        return;
    }
    loop {
        let event = match wire::receive::<Request>(sock.as_fd()) {
            Ok((Request::Copy { .. }, _)) if unanswered.load(Ordering::SeqCst) >= MAX_PENDING => {
                Err(format!("more than {MAX_PENDING} files unanswered"))
            }
            Ok((
                Request::Copy {
                    id: job,
                    src_name,
                    dst_name,
                    sparse,
                    handover,
                },
                fds,
            )) => checked_files(fds).map(|(src, dst)| {
                unanswered.fetch_add(1, Ordering::SeqCst);
                Event::Job(
                    id,
                    Job {
                        id: job,
                        src,
                        dst,
                        src_name: PathBuf::from(OsString::from_vec(src_name)),
                        dst_name: PathBuf::from(OsString::from_vec(dst_name)),
                        sparse: sparse.into(),
                        handover,
                    },
                )
            }),
            Ok((Request::Cancel, _)) => {
                cancel.store(true, Ordering::SeqCst);
                Ok(Event::Cancel(id))
            }
            Ok((Request::Status, _)) => {
                let status = Reply::Status(shared.status());
                match wire::send(sock.as_fd(), &status, &[]) {
                    Ok(()) => continue,
                    Err(_) => break,
                }
            }
            Ok((Request::Hello { .. }, _)) => Err("hello twice".to_owned()),
            Err(WireError::Malformed(m)) => Err(m),
            Err(_) => break,
        };
        match event {
            Ok(e) => {
                if events.send(e).is_err() {
                    break;
                }
            }
            Err(why) => {
                let _ = wire::send(sock.as_fd(), &Reply::Refused { why }, &[]);
                break;
            }
        }
    }
    // Its files stop now, before the scheduler hears of it.
    cancel.store(true, Ordering::SeqCst);
    let _ = events.send(Event::Gone(id));
}

/// SOURCE and DEST as a copy request must pass them: two regular files, SOURCE open for
/// reading, DEST for writing and not appending (the engine writes at offsets).
fn checked_files(fds: Vec<OwnedFd>) -> Result<(File, File), String> {
    let [src, dst]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|f: Vec<OwnedFd>| format!("a copy needs 2 descriptors, not {}", f.len()))?;
    for (fd, write) in [(&src, false), (&dst, true)] {
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| format!("fstat: {e}"))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err("a descriptor that is not a regular file".into());
        }
        let fl = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFL)
            .map_err(|e| format!("fcntl: {e}"))?;
        let fl = OFlag::from_bits_truncate(fl);
        let mode = fl & OFlag::O_ACCMODE;
        let ok = match write {
            false => mode != OFlag::O_WRONLY,
            true => mode != OFlag::O_RDONLY && !fl.contains(OFlag::O_APPEND),
        };
        if !ok {
            return Err("a descriptor open the wrong way".into());
        }
    }
    Ok((File::from(src), File::from(dst)))
}

/// A client as the scheduler keeps it.
struct Client {
    joined: Joined,
    pending: VecDeque<Job>,
    in_flight: usize,
    gone: bool,
    files: u64,
    bytes: u64,
}

/// The route the engine reports for a file, kept for its answer; for a file copied in turn,
/// also its progress, sent to the client every [`PROGRESS_EVERY`].
#[derive(Default)]
struct Recorder {
    route: Mutex<Option<(&'static str, &'static str)>>,
    progress: Option<ProgressTo>,
}

/// Where a file's progress goes, and what has not been sent yet.
struct ProgressTo {
    sock: Arc<OwnedFd>,
    id: u64,
    unsent: Mutex<(Instant, u64)>,
}

/// How often a file copied in turn reports its progress.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

impl ProgressSink for Recorder {
    fn file_started(&self, _: &Path, _: Option<u64>) {}
    fn advanced(&self, bytes: u64) {
        let Some(to) = &self.progress else {
            return;
        };
        let mut unsent = to.unsent.lock().unwrap_or_else(|p| p.into_inner());
        unsent.1 += bytes;
        if unsent.0.elapsed() >= PROGRESS_EVERY {
            let reply = Reply::Progress {
                id: to.id,
                bytes: unsent.1,
            };
            // A client that is gone stops the copy through its cancel flag, not here.
            let _ = wire::send(to.sock.as_fd(), &reply, &[]);
            *unsent = (Instant::now(), 0);
        }
    }
    fn file_finished(&self) {}
    fn route(&self, read: &'static str, write: &'static str) {
        *self.route.lock().unwrap_or_else(|p| p.into_inner()) = Some((read, write));
    }
}

impl Recorder {
    fn outcome(&self, result: Result<u64, CopyError>, started: bool, stages: [f64; 5]) -> Outcome {
        match result {
            Ok(end) => {
                let route = *self.route.lock().unwrap_or_else(|p| p.into_inner());
                Outcome::Copied {
                    end,
                    route: route.map(|(r, w)| (r.to_owned(), w.to_owned())),
                    stages,
                }
            }
            Err(CopyError::Interrupted) => Outcome::Interrupted { started },
            Err(e) => Outcome::Failed {
                message: e.to_string(),
            },
        }
    }
}

struct Scheduler {
    engine: Engine,
    clients: BTreeMap<ClientId, Client>,
    /// Files in the engine's flight: whose, their id, their route.
    tickets: HashMap<Ticket, (ClientId, u64, Arc<Recorder>)>,
    last_served: ClientId,
    limits: QueueLimits,
    debug: bool,
    shared: Arc<Shared>,
}

impl Scheduler {
    fn serve(&mut self, events: &Receiver<Event>, stop: &AtomicBool, idle_exit: Duration) {
        let mut idle_since = Instant::now();
        let mut nap = Duration::ZERO;
        while !stop.load(Ordering::SeqCst) {
            let mut moved = self.collect_finished();
            moved |= self.schedule();
            self.reap();
            if !self.clients.is_empty() || self.engine.in_flight() > 0 {
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
            let wait = if self.engine.in_flight() > 0 {
                nap
            } else if self.clients.is_empty() && !idle_exit.is_zero() {
                idle_exit
                    .saturating_sub(idle_since.elapsed())
                    .min(Duration::from_millis(250))
            } else {
                Duration::from_millis(250)
            };
            match events.recv_timeout(wait) {
                Ok(e) => {
                    self.take(e);
                    while let Ok(e) = events.try_recv() {
                        self.take(e);
                    }
                    nap = Duration::ZERO;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn take(&mut self, event: Event) {
        match event {
            Event::Join(id, joined) => {
                if self.debug {
                    debug_line(&format!("client pid {} connected", joined.pid));
                }
                let client = Client {
                    joined,
                    pending: VecDeque::new(),
                    in_flight: 0,
                    gone: false,
                    files: 0,
                    bytes: 0,
                };
                self.clients.insert(id, client);
            }
            Event::Job(id, job) => {
                if let Some(c) = self.clients.get_mut(&id) {
                    c.pending.push_back(job);
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
            let outcome = recorder.outcome(f.result, f.started, wire::stage_secs(&f.stages));
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
        let queue_max = self.engine.queue_max();
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
        let flight = match front.handover {
            Handover::InFlight { len, truncate } if queue_max.is_some_and(|m| len <= m) => {
                Some((len, truncate, None))
            }
            // A file too large to fly as the client sees it is copied with every slot while
            // no other client has work; while others do, it flies on one slot beside their
            // files, so no client waits behind another's large file.
            Handover::InTurn { len: Some(len) } if queue_max.is_some() && others_busy => {
                Some((len, true, Some(progress_to(c, front.id))))
            }
            _ => None,
        };
        if let Some((len, truncate, reports)) = flight {
            if c.in_flight >= share || !self.engine.has_room(len) {
                return false;
            }
            let job = c.pending.pop_front().expect("front exists");
            self.last_served = id;
            c.files += 1;
            c.bytes += len;
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
                        handover: Handover::InFlight { len, truncate },
                    };
                    self.copy_in_turn(id, job);
                }
            }
            return true;
        }
        let job = c.pending.pop_front().expect("front exists");
        self.last_served = id;
        self.copy_in_turn(id, job);
        true
    }

    /// Copies a file now (all slots), as one process copies a file it does not queue.
    fn copy_in_turn(&mut self, id: ClientId, job: Job) {
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        let recorder = Recorder {
            route: Mutex::default(),
            progress: Some(progress_to(c, job.id)),
        };
        // The engine cuts DEST once the staging exists, as for a copy in the client.
        let src_kind = match job.handover {
            Handover::InFlight { len: 0, .. } | Handover::InTurn { len: None } => {
                SourceKind::Stream
            }
            Handover::InFlight { len, .. } | Handover::InTurn { len: Some(len) } => {
                SourceKind::Regular { len }
            }
        };
        let data = DataJob {
            src: &job.src,
            src_name: &job.src_name,
            src_kind,
            dst: &job.dst,
            dst_name: &job.dst_name,
            sparse: job.sparse,
        };
        let result = self
            .engine
            .copy_cancellable(&data, &recorder, &c.joined.cancel);
        if let Ok(end) = result {
            c.bytes += end;
        }
        c.files += 1;
        let stages = wire::stage_secs(&self.engine.last_stages());
        let outcome = recorder.outcome(result, true, stages);
        self.shared.count(&outcome);
        drop(job.src);
        drop(job.dst);
        answer(c, job.id, outcome);
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

/// Where the progress of client `c`'s file `id` goes: its first bytes are reported at once
/// (the client's view shows the file moving), then every PROGRESS_EVERY.
fn progress_to(c: &Client, id: u64) -> ProgressTo {
    let long_ago = Instant::now().checked_sub(PROGRESS_EVERY);
    ProgressTo {
        sock: Arc::clone(&c.joined.sock),
        id,
        unsent: Mutex::new((long_ago.unwrap_or_else(Instant::now), 0)),
    }
}

/// Sends a file's answer; a client that cannot take it is gone.
fn answer(c: &mut Client, id: u64, outcome: Outcome) {
    c.joined.unanswered.fetch_sub(1, Ordering::SeqCst);
    let reply = Reply::Done { id, outcome };
    if wire::send(c.joined.sock.as_fd(), &reply, &[]).is_err() {
        c.gone = true;
        c.joined.cancel.store(true, Ordering::SeqCst);
        c.pending.clear();
    }
}

/// A line of the service's own on stderr (not a warning: what it is doing).
fn say(line: &str) {
    messages::to_stderr_raw(&format!("{}: {line}\n", messages::program()));
}

fn debug_line(line: &str) {
    messages::to_stderr_raw(&format!("aiscp: debug: service: {line}\n"));
}

/// The engine's warnings and --debug lines, on the service's stderr.
struct ServiceDiagnostics {
    quiet: bool,
}

impl Diagnostics for ServiceDiagnostics {
    fn warn(&mut self, line: &str) {
        if !self.quiet {
            messages::own_warning(line);
        }
    }
    fn debug(&mut self, since_start: Duration, line: &str) {
        messages::to_stderr_raw(&format!(
            "aiscp: debug: +{:.3}s {line}\n",
            since_start.as_secs_f64()
        ));
    }
}
