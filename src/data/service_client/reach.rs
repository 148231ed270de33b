//! Reaching the service: connecting on first use, starting one under
//! `AISCP_SERVICE=auto`, the handshake, and `--doctor`'s status request.

use super::{gpus_text, ServiceClient, State, Up};
use crate::service::wire::{self, Reply, Request, Welcome, WireError};
use crate::service::Choice;
use crate::sys::messages;
use aiscp_engine::quote::quote;
use aiscp_engine::{Backend, BackendChoice};
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How long the welcome may take (the service is up before it listens, so this only bounds
/// a service that hangs).
const WELCOME_TIMEOUT: Duration = Duration::from_secs(5);
/// `AISCP_SERVICE=auto`: how long a service started by a client waits for the next client.
pub const AUTO_IDLE_EXIT: Duration = Duration::from_secs(30);
/// ... and how long that client waits for it to come up (a GPU context takes 0.3-0.7 s).
const AUTO_START_WAIT: Duration = Duration::from_secs(10);

impl ServiceClient {
    /// Connects on first use; whether the service is up.
    pub(super) fn ensure(&mut self) -> bool {
        if let State::Untried = self.state {
            let started = Instant::now();
            self.state =
                match self.connect() {
                    Ok(welcome) => {
                        let up = Up {
                            sock: welcome.0,
                            inbox: wire::Inbox::default(),
                            welcome: welcome.1,
                            connected_in: started.elapsed(),
                        };
                        self.debug(&format!(
                        "through the staging service (pid {}) at {}: {}{}, connected in {:.3} ms",
                        up.welcome.pid,
                        quote(self.path()),
                        up.welcome.library.as_deref().unwrap_or(up.welcome.backend.name()),
                        gpus_text(&up.welcome.gpus),
                        up.connected_in.as_secs_f64() * 1e3
                    ));
                        self.reached = Some((up.welcome.clone(), up.connected_in));
                        State::Up(up)
                    }
                    Err(None) => State::Down,
                    Err(Some(why)) => {
                        self.warn(&why);
                        State::Down
                    }
                };
        }
        matches!(self.state, State::Up(_))
    }

    /// Connects (starting a service first under `auto`) and says hello. Err(None): not to
    /// be used, silently (another backend than this run asks for).
    fn connect(&mut self) -> Result<(OwnedFd, Welcome), Option<String>> {
        let path = self.path().to_path_buf();
        let sock = match dial(&path) {
            Ok(s) => s,
            // Not a place a service of ours can be: no service, said only where the user
            // named it. `auto` starts none there either, and copies in-process at once.
            Err(Unreached::Foreign(why)) => {
                self.debug(&format!("no staging service: {why}"));
                return match self.choice {
                    Choice::Path(_) => Err(Some(why)),
                    _ => Err(None),
                };
            }
            Err(e) if matches!(self.choice, Choice::Auto(_)) => {
                self.debug(&format!(
                    "no staging service at {} ({}): starting one",
                    quote(&path),
                    e.text()
                ));
                self.start_service(&path)?
            }
            // The per-user socket left by a service that is gone (or by a socket-activation
            // check) is no service: said once in --debug, not warned about on every copy.
            Err(e) if matches!(self.choice, Choice::WhenThere(_)) && stale(&path, &e) => {
                self.debug(&format!(
                    "no staging service: {} is stale ({}; its lock is free)",
                    quote(&path),
                    e.text()
                ));
                return Err(None);
            }
            Err(e) => return Err(Some(e.text())),
        };
        let welcome = handshake(&sock).map_err(Some)?;
        // A run that names its backend gets that backend: a service of another one is not
        // used (without a warning: the user asked for exactly this).
        let fits = match self.config.backend {
            BackendChoice::Auto => true,
            BackendChoice::Gpu => welcome.backend != Backend::Host,
            BackendChoice::HipFile => welcome.backend == Backend::HipFile,
            BackendChoice::CuFile => welcome.backend == Backend::CuFile,
            BackendChoice::Host => welcome.backend == Backend::Host,
        };
        if !fits {
            self.debug(&format!(
                "not using the staging service: it stages through {}",
                welcome.backend
            ));
            return Err(None);
        }
        Ok((sock, welcome))
    }

    /// `AISCP_SERVICE=auto`: starts `aiscp --serve` detached (a session of its own, so the
    /// terminal's signals do not reach it; working directory `/`; nothing of this run's open
    /// but its standard streams, its stderr the log beside the socket) with this run's
    /// staging flags and a short idle exit, and waits for it to answer, or to exit: then
    /// the reason is the last line of its log. Several clients may race here: the lock
    /// beside the socket lets one service serve, and the others exit.
    fn start_service(&mut self, path: &Path) -> Result<OwnedFd, Option<String>> {
        let exe = std::env::current_exe().map_err(|e| Some(e.to_string()))?;
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
        }
        let log = service_log(path).map_err(|e| Some(format!("cannot start it: {e}")))?;
        let mut child = self
            .serve_command(exe, path)
            .stderr(log)
            .spawn()
            .map_err(|e| Some(format!("cannot start it: {e}")))?;
        let deadline = Instant::now() + AUTO_START_WAIT;
        loop {
            if let Ok(s) = dial(path) {
                // Reaped by a thread so no zombie outlives this run's wait.
                std::thread::spawn(move || child.wait());
                return Ok(s);
            }
            // It exited: another client's service won the race, or it could not start.
            if let Ok(Some(status)) = child.try_wait() {
                return dial(path).map_err(|_| Some(start_failure(path, status)));
            }
            if Instant::now() > deadline || self.config.cancel.load(Ordering::SeqCst) {
                return Err(Some(format!(
                    "the service started did not answer within {} s",
                    AUTO_START_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `aiscp --serve` at `path` with this run's staging flags, detached from this run.
    fn serve_command(&self, exe: std::path::PathBuf, path: &Path) -> std::process::Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("--serve")
            .arg("--socket")
            .arg(path)
            .arg(format!("--idle-exit={}s", AUTO_IDLE_EXIT.as_secs()))
            .args(crate::cli::staging::service_args(&self.config))
            .arg("-q")
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null());
        // SAFETY: between fork and exec the closure only makes system calls (setsid,
        // close_range, fcntl), which are async-signal-safe, and allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                nix::unistd::setsid()?;
                keep_only_standard_streams();
                Ok(())
            });
        }
        cmd
    }
}

/// Marks every descriptor past the standard streams close-on-exec, so a service started
/// here holds none of its client's (a pipe the client's shell waits on, a directory a
/// `umount` would find busy). Runs between fork and exec.
fn keep_only_standard_streams() {
    // SAFETY: close_range only changes descriptor flags; it takes plain integers.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if marked == 0 {
        return;
    }
    // Kernels before 5.11: one by one, up to the descriptor limit.
    let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft.min(1 << 20));
    for fd in 3..limit as i32 {
        // SAFETY: F_SETFD on any integer is harmless; EBADF where nothing is open.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
}

/// The log of a service started by `auto`, beside its socket: its stderr (quiet but for
/// why it could not start or why it stopped).
fn service_log(socket: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut name = socket.as_os_str().to_owned();
    name.push(".log");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(name)
}

/// Why a service started by `auto` exited without serving: its log's last line.
fn start_failure(socket: &Path, status: std::process::ExitStatus) -> String {
    let mut name = socket.as_os_str().to_owned();
    name.push(".log");
    let log = std::fs::read_to_string(name).unwrap_or_default();
    match log.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(line) => format!("the service it started exited ({status}): {}", line.trim()),
        None => format!("the service it started exited ({status})"),
    }
}

/// Why `--doctor` got no status.
pub enum NoStatus {
    /// No service of this user's can be there (see [`Unreached::Foreign`]).
    Foreign(String),
    NotAnswering(String),
}

/// Asks the service at `path` how it is doing (for `--doctor`).
pub fn status(path: &Path) -> Result<wire::Status, NoStatus> {
    let sock = match dial(path) {
        Ok(sock) => sock,
        Err(Unreached::Foreign(why)) => return Err(NoStatus::Foreign(why)),
        Err(e) => return Err(NoStatus::NotAnswering(e.text())),
    };
    status_of(&sock).map_err(NoStatus::NotAnswering)
}

fn status_of(sock: &OwnedFd) -> Result<wire::Status, String> {
    handshake(sock)?;
    wire::send(sock.as_fd(), &Request::Status, &[]).map_err(|e| messages::os_text(&e))?;
    if !wait_readable(sock, WELCOME_TIMEOUT) {
        return Err(format!("no answer within {} s", WELCOME_TIMEOUT.as_secs()));
    }
    match wire::receive::<Reply>(sock.as_fd()) {
        Ok((Reply::Status(s), _)) => Ok(s),
        Ok(_) => Err("unexpected answer".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Checks who serves on `sock` (this uid or root: the descriptors handed over give their
/// holder this user's access, which root has anyway), says hello and takes the welcome; a
/// service of another version is an error.
fn handshake(sock: &OwnedFd) -> Result<Welcome, String> {
    let (_, uid) = crate::service::peer(sock).map_err(|e| e.to_string())?;
    let me = nix::unistd::getuid().as_raw();
    if uid != me && uid != 0 {
        return Err(format!("it runs as uid {uid}, not {me}"));
    }
    let hello = Request::Hello {
        protocol: wire::PROTOCOL,
        version: wire::VERSION.to_owned(),
    };
    // A service that refuses at once (too many clients) says why and closes before the
    // hello arrives: its answer is read even when the hello could not be sent.
    let sent = wire::send(sock.as_fd(), &hello, &[]);
    let wait = match sent {
        Ok(()) => WELCOME_TIMEOUT,
        Err(_) => Duration::ZERO,
    };
    let welcome = match (wait_readable(sock, wait), &sent) {
        (true, _) => wire::receive::<Reply>(sock.as_fd()),
        (false, Ok(())) => {
            return Err(format!(
                "the service did not answer within {} s",
                WELCOME_TIMEOUT.as_secs()
            ))
        }
        (false, Err(_)) => Err(WireError::Closed),
    };
    let welcome = match (welcome, sent) {
        (Ok((Reply::Welcome(w), _)), Ok(())) => w,
        (Ok((Reply::Refused { why }, _)), _) => return Err(format!("refused: {why}")),
        // Closed (or reset) without a word: the service is going away, or refused us
        // before the hello and the answer was lost.
        (Err(e), sent) if sent.is_err() || closed(&e) => {
            return Err("the service closed the connection".into())
        }
        (Err(e), _) => return Err(e.to_string()),
        (Ok(_), _) => return Err("unexpected answer".into()),
    };
    if welcome.protocol != wire::PROTOCOL || welcome.version != wire::VERSION {
        return Err(format!(
            "another version (aiscp {}, protocol {})",
            welcome.version, welcome.protocol
        ));
    }
    Ok(welcome)
}

/// Whether a receive failed because the peer closed or reset the connection.
fn closed(e: &WireError) -> bool {
    match e {
        WireError::Closed => true,
        WireError::Io(e) => matches!(e.raw_os_error(), Some(libc::ECONNRESET | libc::EPIPE)),
        WireError::Malformed(_) => false,
    }
}

/// Whether the socket at `path`, which refused a connection, is stale: no service holds
/// the lock beside it (absent, or free to take), so none is starting there either.
fn stale(path: &Path, refused: &Unreached) -> bool {
    use nix::fcntl::{Flock, FlockArg};
    use std::os::unix::fs::OpenOptionsExt;
    let Unreached::Io(e) = refused else {
        return false;
    };
    if e.raw_os_error() != Some(libc::ECONNREFUSED) {
        return false;
    }
    let mut lock = path.as_os_str().to_owned();
    lock.push(".lock");
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(lock);
    match opened {
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        Ok(file) => Flock::lock(file, FlockArg::LockSharedNonblock).is_ok(),
    }
}

/// How long a connect may wait for room in the service's backlog.
const CONNECT_WAIT: Duration = Duration::from_millis(250);

/// Why no connection was made.
pub(super) enum Unreached {
    /// The socket's directory is not one a service of this user's (or root's) can be in:
    /// someone else made it, or it is not a directory.
    Foreign(String),
    Io(std::io::Error),
}

impl Unreached {
    pub(super) fn text(&self) -> String {
        match self {
            Unreached::Foreign(why) => why.clone(),
            Unreached::Io(e) => format!("cannot connect: {}", messages::os_text(e)),
        }
    }
}

/// A connected socket to `path`: its directory checked first, as the service checks its
/// own ([`crate::service::SocketDir::open_to_connect`]), and connected through what was
/// checked; a backlog that stays full for [`CONNECT_WAIT`] is an error, not a wait.
fn dial(path: &Path) -> Result<OwnedFd, Unreached> {
    use crate::service::{NotOurs, SocketDir};
    let (dir, name) = SocketDir::open_to_connect(path).map_err(|e| match e {
        NotOurs::Unopened(e) => Unreached::Io(e),
        NotOurs::Foreign(why) => Unreached::Foreign(why),
    })?;
    let io = |e: nix::errno::Errno| Unreached::Io(e.into());
    let sock = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(io)?;
    let addr = dir.address(&name).map_err(io)?;
    let deadline = Instant::now() + CONNECT_WAIT;
    loop {
        match socket::connect(sock.as_raw_fd(), &addr) {
            Ok(()) => break,
            Err(nix::errno::Errno::EAGAIN)
                if Instant::now() < deadline && !crate::sys::signals::stop_asked() =>
            {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(nix::errno::Errno::EINTR) if !crate::sys::signals::stop_asked() => {}
            Err(e) => return Err(io(e)),
        }
    }
    // Blocking from here, each wait bounded: receives by poll, sends by a timeout.
    nix::fcntl::fcntl(
        sock.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .map_err(io)?;
    let limit = nix::sys::time::TimeVal::new(SEND_LIMIT.as_secs() as libc::time_t, 0);
    socket::setsockopt(&sock, socket::sockopt::SendTimeout, &limit).map_err(io)?;
    Ok(sock)
}

/// How long a send to the service may wait for room: one that does not take a message for
/// this long is stuck.
pub(super) const SEND_LIMIT: Duration = Duration::from_secs(5);

/// Whether `sock` has something to read (or has closed) within `wait`.
pub(super) fn wait_readable(sock: &OwnedFd, wait: Duration) -> bool {
    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    let ms = PollTimeout::try_from(wait.as_millis().min(i32::MAX as u128) as i32)
        .unwrap_or(PollTimeout::MAX);
    match nix::poll::poll(&mut fds, ms) {
        Ok(n) => n > 0,
        // A signal (SIGINT): the caller looks at the cancel flag.
        Err(nix::errno::Errno::EINTR) => false,
        // Let the read say what is wrong.
        Err(_) => true,
    }
}
