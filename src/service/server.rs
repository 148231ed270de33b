//! `aiscp --serve`: one engine (one context, one slot pool) brought up once, serving every
//! client that connects, until a signal or `--idle-exit`.
//!
//! Threads: one accepts connections; one per client reads its requests (so a slow or hostile
//! client blocks only itself); the main thread owns the engine and schedules. Clients' files
//! go into the engine's files in flight, a fair share each (the in-flight limit divided by
//! the clients with work), taken round-robin. A file too large to fly as its client sees it
//! flies all the same, on one slot, while other clients have work (so no client with work
//! waits behind another's large file); with no one else waiting it is copied in turn with
//! every slot, on this thread: alone, as one part to its end that gives way at its next
//! slice when a client sends files; beside other work, a part of 16 chunks at a time, other
//! clients' files scheduled between parts and other files in turn (the library route's,
//! whose large files never fly) given parts in rotation. A source without a length (read to its end) always flies, so it
//! never holds this thread. Each client has its own cancel flag: Cancel from it, or its
//! connection closing, stops its files (and only its files) before their next write, and
//! its queued files are dropped at once; the engine then leaves its DESTs as they are.
//!
//! Bounds: [`MAX_CLIENTS`] connections, [`MAX_PENDING`] unanswered files per client, each
//! message at most [`wire::MAX_MESSAGE`] bytes with the descriptors of [`wire::MAX_FILES`]
//! files, so a client costs at most about MAX_PENDING x MAX_MESSAGE bytes and
//! 2 x (MAX_PENDING + MAX_FILES) descriptors.

mod connections;
mod handover;
mod places;
mod recorder;
mod scheduler;
mod turn;

use super::users::Users;
use super::wire::{self, Outcome, Status, Welcome};
use crate::sys::messages;
use aiscp_engine::quote::quote;
use aiscp_engine::{Config, Engine, QueueLimits};
use connections::{accept_loop, bind, listen};
use scheduler::Scheduler;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
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
    /// How long without a file to copy before the staging memory goes back (zero: never).
    pub idle_release: Duration,
    /// The limits on files in flight that the run's settings give.
    pub queue_limits: QueueLimits,
}

/// Runs the service in the foreground; returns the exit status.
pub fn run(config: Config, args: ServeArgs) -> i32 {
    match serve(config, args) {
        Ok(()) => 0,
        Err(why) => {
            messages::error(&why);
            1
        }
    }
}

/// The service's life: the socket and the engine brought up, clients served until a signal
/// or the idle limit, the socket removed. Err: why it could not start.
fn serve(config: Config, args: ServeArgs) -> Result<(), String> {
    if args.users.shared() && !nix::unistd::geteuid().is_root() {
        // A client hands its descriptors only to a service of its own uid or root's.
        return Err(
            "--allow-users needs a service run as root: other users' runs use only \
                    their own service or root's"
                .into(),
        );
    }
    let inherited = socket_passed()?;
    let stop = stop_on_signals()?;
    let (quiet, debug) = (config.quiet, config.debug);
    let (engine, limits, slots_bytes) = start_engine(config, args.queue_limits)?;
    let path = args.socket.clone().unwrap_or_else(super::default_socket);
    let (listener, bound) = open_socket(inherited, &path, args.users.shared())?;
    let info = engine.info();
    let per_uid = args.users.places_each(MAX_CLIENTS);
    let shared = Arc::new(Shared::new(&info, engine.queue_max(), slots_bytes, per_uid));
    if !quiet {
        announce(&info, bound.is_some().then_some(&path));
    }
    let (events_tx, events_rx) = mpsc::channel();
    let accepting = {
        let shared = Arc::clone(&shared);
        let users = args.users.clone();
        std::thread::Builder::new()
            .name("aiscp-accept".into())
            .spawn(move || accept_loop(listener, events_tx, &shared, &users))
    };
    accepting.map_err(|e| format!("cannot start the service's threads: {e}"))?;
    let mut scheduler = Scheduler::new(engine, limits, debug, shared);
    scheduler.serve(&events_rx, &stop, (args.idle_exit, args.idle_release));
    // Every client's files stop; dropping the engine lands them and releases the GPU.
    scheduler.cancel_all();
    drop(scheduler);
    if let Some(bound) = bound {
        bound.remove();
    }
    Ok(())
}

/// The engine every client's files go through, with its queue limits and the staging
/// memory its slots take.
fn start_engine(
    config: Config,
    settings: QueueLimits,
) -> Result<(Engine, QueueLimits, u64), String> {
    let slots = config
        .slots_per_gpu
        .unwrap_or(aiscp_engine::DEFAULT_SLOTS_PER_GPU) as u64;
    let diag = messages::EngineLines::new(config.quiet, String::new());
    let mut engine = Engine::start(config, diag).map_err(|e| e.to_string())?;
    let slots_bytes = engine.chunk_bytes() * slots;
    // No byte bound on the files in flight: it keeps one copier from running too far ahead of
    // its data, which each client still does for itself; here files in flight hold no memory
    // beyond the fixed slots, and each client's descriptors are bounded (MAX_PENDING).
    // Each file is sent at once: the scheduler polls for files that ended without waiting.
    let limits = QueueLimits {
        bytes: u64::MAX,
        batch: 1,
        ..settings
    };
    engine.set_queue_limits(limits);
    Ok((engine, limits, slots_bytes))
}

/// The socket clients connect to: the one passed in (`inherited`), or one bound at `path`
/// and listening (None: nothing to remove at the end). A service `shared` with other users
/// then keeps only the capabilities reopening descriptors needs.
fn open_socket(
    inherited: Option<OwnedFd>,
    path: &Path,
    shared: bool,
) -> Result<(OwnedFd, Option<connections::Bound>), String> {
    let (listener, bound) = match inherited {
        Some(fd) => (fd, None),
        None => bind(path, shared).map(|(fd, bound)| (fd, Some(bound)))?,
    };
    if shared {
        keep_only_reopening()?;
    }
    if bound.is_some() {
        listen(&listener, path)?;
    }
    Ok((listener, bound))
}

/// A service shared with other users keeps, once its socket is bound and its engine is up,
/// only the capabilities the I/O libraries need to reopen a passed descriptor through
/// /proc/self/fd: none of root's others, so what it writes for a user stays within that
/// user's quota and out of the blocks a filesystem keeps for root.
fn keep_only_reopening() -> Result<(), String> {
    use caps::{CapSet, Capability, CapsHashSet};
    let keep: CapsHashSet = [
        Capability::CAP_DAC_OVERRIDE,
        Capability::CAP_DAC_READ_SEARCH,
    ]
    .into_iter()
    .collect();
    let failed = |e: caps::errors::CapsError| format!("cannot give up capabilities: {e}");
    // The bounding set first: dropping from it needs CAP_SETPCAP, about to go. What a unit
    // (CapabilityBoundingSet=) already took is not dropped again.
    let bounding = caps::read(None, CapSet::Bounding).map_err(failed)?;
    for cap in bounding.difference(&keep) {
        caps::drop(None, CapSet::Bounding, *cap).map_err(failed)?;
    }
    caps::clear(None, CapSet::Ambient).map_err(failed)?;
    caps::clear(None, CapSet::Inheritable).map_err(failed)?;
    caps::set(None, CapSet::Effective, &keep).map_err(failed)?;
    caps::set(None, CapSet::Permitted, &keep).map_err(failed)?;
    Ok(())
}

/// The socket systemd passed (socket activation), if any. Read, and cleared from the
/// environment, before any thread starts.
fn socket_passed() -> Result<Option<OwnedFd>, String> {
    let mut activated = listenfd::ListenFd::from_env();
    activated
        .take_custom::<OwnedFd>(
            0,
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET,
            "unix seqpacket socket",
        )
        .map_err(|e| format!("cannot use the socket systemd passed: {e}"))
}

/// A flag SIGINT, SIGTERM and SIGHUP set, for the service to stop cleanly.
fn stop_on_signals() -> Result<Arc<AtomicBool>, String> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    }
    Ok(stop)
}

/// The line saying the service is up: where (`path`, or the socket systemd passed when
/// None), its pid, what it stages through and how long it took to start.
fn announce(info: &aiscp_engine::EngineInfo, path: Option<&PathBuf>) {
    let gpus = match info.gpus.len() {
        0 => String::new(),
        1 => format!(" on GPU {}", info.gpus[0]),
        _ => format!(" on GPUs {:?}", info.gpus),
    };
    say(&format!(
        "serving at {} (pid {}): {}{gpus}, up in {:.3} s",
        match path {
            Some(path) => quote(path),
            None => "the socket systemd passed".to_owned(),
        },
        std::process::id(),
        info.library.as_deref().unwrap_or(info.backend.name()),
        info.startup.as_secs_f64()
    ));
}

type ClientId = u64;

/// What every thread of the service reads: what clients are told, and the counts
/// `--doctor` shows.
struct Shared {
    welcome: Welcome,
    /// The clients served, each holding its place.
    seats: Arc<places::Places>,
    started: Instant,
    files: AtomicU64,
    bytes: AtomicU64,
    staging_bytes: u64,
    /// What the engine's slots hold now, as the scheduler last saw it.
    staging_held: AtomicU64,
    /// Messages of files that clients' threads have sent (or are sending) and the scheduler
    /// has not taken yet: a file copied in turn alone gives way while there are any.
    files_unseen: AtomicUsize,
}

impl Shared {
    /// What clients are told (the engine `info` and its largest file in flight), counts at
    /// zero; `slots_bytes`: one GPU's staging.
    fn new(
        info: &aiscp_engine::EngineInfo,
        queue_max: Option<u64>,
        slots_bytes: u64,
        per_uid: usize,
    ) -> Shared {
        let welcome = Welcome {
            protocol: wire::PROTOCOL,
            version: wire::VERSION.to_owned(),
            pid: std::process::id(),
            backend: info.backend,
            library: info.library.clone(),
            gpus: info.gpus.clone(),
            queue_max,
        };
        Shared {
            staging_bytes: slots_bytes * info.gpus.len().max(1) as u64,
            welcome,
            seats: places::Places::new(MAX_CLIENTS, per_uid),
            started: Instant::now(),
            files: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            staging_held: AtomicU64::new(0),
            files_unseen: AtomicUsize::new(0),
        }
    }

    /// Sends `event` to the scheduler, files counted unseen from before they are sent until
    /// it takes them ([`Shared::seen`]); false once the scheduler is gone.
    fn send(&self, events: &mpsc::Sender<connections::Event>, event: connections::Event) -> bool {
        if matches!(event, connections::Event::Jobs(..)) {
            self.files_unseen.fetch_add(1, Ordering::SeqCst);
        }
        events.send(event).is_ok()
    }

    /// The scheduler took `event`.
    fn seen(&self, event: &connections::Event) {
        if matches!(event, connections::Event::Jobs(..)) {
            self.files_unseen.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether files have been sent that the scheduler has not taken yet.
    fn files_waiting(&self) -> bool {
        self.files_unseen.load(Ordering::SeqCst) > 0
    }

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
            clients: self.seats.count(),
            files: self.files.load(Ordering::SeqCst),
            bytes: self.bytes.load(Ordering::SeqCst),
            staging_bytes: self.staging_bytes,
            staging_held: self.staging_held.load(Ordering::SeqCst),
        }
    }
}

/// A line of the service's own on stderr (not a warning: what it is doing).
fn say(line: &str) {
    messages::to_stderr_raw(&format!("{}: {line}\n", messages::program()));
}

fn debug_line(line: &str) {
    messages::debug(&format!("service: {line}"));
}
