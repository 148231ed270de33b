//! The socket and the threads on it: the socket bound (with the lock that tells a stale
//! socket from a live service), connections accepted, each client's handshake, then one
//! thread per client reading its requests into [`Event`]s for the scheduler.

use super::places::{Place, Places};
use super::{say, ClientId, Shared, HELLO_TIMEOUT, MAX_CLIENTS, MAX_PENDING};
use crate::service::users::Users;
use crate::service::wire::{self, FileRequest, Handover, Inbox, Reply, Request, WireError};
use crate::service::SocketDir;
use crate::sys::messages;
use aiscp_engine::quote::quote;
use nix::fcntl::{Flock, FlockArg, OFlag};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType};
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

/// The socket bound: its directory (held open, see [`SocketDir`]), its name there, and the
/// lock beside it, held while the socket is served: a socket whose lock is free is stale
/// (its service died), one whose lock is held belongs to a live service.
pub(super) struct Bound {
    dir: SocketDir,
    name: OsString,
    _lock: Flock<File>,
}

impl Bound {
    /// Removes the socket, from the directory it was bound in, then frees the lock.
    pub(super) fn remove(self) {
        let _ = self.dir.dir().unlink(&self.name);
    }
}

/// Starts taking connections on a socket [`bind`] made: only once the service is what it
/// will be for them (a shared one has given up its capabilities).
pub(super) fn listen(fd: &OwnedFd, path: &Path) -> Result<(), String> {
    socket::listen(
        fd,
        socket::Backlog::new(128).unwrap_or(socket::Backlog::MAXCONN),
    )
    .map_err(|e| format!("cannot listen on {}: {e}", quote(path)))
}

/// Makes the socket (not yet listening: see [`listen`]): its directory private (created 0700 when missing), the lock taken, a
/// stale socket removed, the new one bound 0600. A service `shared` with other users needs
/// their connections: its directory 0755 (no one else may write there) and its socket 0666
/// (who is served is then SO_PEERCRED's answer, checked on every connection). The directory
/// is checked and used through one descriptor.
pub(super) fn bind(path: &Path, shared: bool) -> Result<(OwnedFd, Bound), String> {
    // The lock goes beside the socket, inside the directory checked below.
    let (dir, name) =
        crate::service::split_socket_path(path).map_err(|e| format!("not serving: {e}"))?;
    if !dir.exists() {
        make_socket_dir(&dir, shared)?;
    }
    let held = SocketDir::open(&dir, shared).map_err(|e| format!("not serving: {e}"))?;
    crate::sys::test_hook::pause("socket-dir-checked");
    let lock = take_lock(&held, (&dir, &name), path)?;
    match held.dir().unlink(&name) {
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
    let addr = held
        .address(&name)
        .map_err(|e| format!("cannot bind {}: {e}", quote(path)))?;
    // 0600 (0666 shared) from the start: the umask is the process's, and no other thread
    // makes files now (the engine's workers only read and write descriptors).
    let mask = if shared { 0o111 } else { 0o177 };
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(mask));
    let bound = socket::bind(fd.as_raw_fd(), &addr);
    nix::sys::stat::umask(old);
    bound.map_err(|e| format!("cannot bind {}: {e}", quote(path)))?;
    let bound = Bound {
        dir: held,
        name,
        _lock: lock,
    };
    Ok((fd, bound))
}

/// Creates the socket's directory: 0700, or 0755 for a service `shared` with other users.
fn make_socket_dir(dir: &Path, shared: bool) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let mode = if shared { 0o755 } else { 0o700 };
    let cannot =
        |e: std::io::Error| format!("cannot create {}: {}", quote(dir), messages::os_text(&e));
    std::fs::DirBuilder::new()
        .mode(mode)
        .create(dir)
        .map_err(cannot)?;
    // The umask may have taken bits the mode needs (others entering a shared one).
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(cannot)
}

/// Takes the lock beside the socket `name` in the directory `held` (at `dir`): one service
/// per socket (`path`, for the message when another holds it).
fn take_lock(
    held: &SocketDir,
    (dir, name): (&Path, &OsStr),
    path: &Path,
) -> Result<Flock<File>, String> {
    let mut lock_name = dir.join(name).into_os_string();
    lock_name.push(".lock");
    let mut lock_leaf = name.to_os_string();
    lock_leaf.push(".lock");
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW;
    let lock_file = held
        .dir()
        .open_file(&lock_leaf, flags, 0o600)
        .map_err(|e| {
            format!(
                "cannot open {}: {}",
                quote(Path::new(&lock_name)),
                messages::os_text(&e)
            )
        })?;
    Flock::lock(lock_file, FlockArg::LockExclusiveNonblock)
        .map_err(|_| format!("another staging service is serving at {}", quote(path)))
}

/// What the reader threads tell the scheduler.
pub(super) enum Event {
    Join(ClientId, Joined),
    /// The files of one copy request, in order.
    Jobs(ClientId, Vec<Job>),
    Cancel(ClientId),
    Gone(ClientId),
}

/// A client that said hello.
pub(super) struct Joined {
    pub(super) sock: Arc<OwnedFd>,
    pub(super) pid: i32,
    pub(super) cancel: Arc<AtomicBool>,
    /// Files sent and not yet answered (the reader refuses more than [`MAX_PENDING`]).
    pub(super) unanswered: Arc<AtomicUsize>,
    /// One of the [`MAX_CLIENTS`] seats, given back when the client is forgotten.
    _seat: Place,
}

/// One file a client sent.
pub(super) struct Job {
    pub(super) id: u64,
    pub(super) src: File,
    pub(super) dst: File,
    pub(super) src_name: PathBuf,
    pub(super) dst_name: PathBuf,
    pub(super) sparse: aiscp_engine::SparseMode,
    pub(super) handover: Handover,
    /// The digest the client asked for (--sums).
    pub(super) digest: Option<aiscp_engine::digest::Algorithm>,
}

pub(super) fn accept_loop(
    listener: OwnedFd,
    events: Sender<Event>,
    shared: &Arc<Shared>,
    users: &Users,
) {
    let uid = nix::unistd::getuid().as_raw();
    let greeting = Places::new(MAX_CLIENTS, users.places_each(MAX_CLIENTS));
    let refusing = Places::new(REFUSING, REFUSING);
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
        // Who connects is the kernel's answer, known at once: a uid this service does not
        // serve is refused before it holds any place (so it cannot keep others out).
        let peer_uid = match crate::service::peer(&conn) {
            Ok((_, peer_uid)) if users.admits(peer_uid, uid) => peer_uid,
            Ok((_, peer_uid)) => {
                refuse_briefly(conn, users.refusal(peer_uid), &refusing);
                continue;
            }
            Err(_) => continue,
        };
        // Connections still saying hello are bounded too, per uid as well; past that they are
        // closed unheard.
        let Ok(greeted) = greeting.take(peer_uid) else {
            continue;
        };
        let (id, events, shared) = (next, events.clone(), Arc::clone(shared));
        next += 1;
        let spawned = std::thread::Builder::new()
            .name(format!("aiscp-client-{id}"))
            .spawn(move || {
                let seat = greet(conn, peer_uid, &shared, greeted);
                if let Some((conn, seat, pid)) = seat {
                    read_client(id, conn, seat, pid, &events, &shared);
                }
            });
        if spawned.is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Connections being refused at once, each on a thread of its own for at most
/// [`REFUSAL_WAIT`]; past that many a refused connection is closed unheard.
const REFUSING: usize = 16;
/// How long a refused connection's hello is waited for.
const REFUSAL_WAIT: Duration = Duration::from_millis(250);

/// Tells a connection of a uid this service does not serve why, on a thread of its own: its
/// hello is read first (a socket closed with a message unread resets the connection, and the
/// client would lose the answer), for at most REFUSAL_WAIT, holding none of the places that
/// served users need.
fn refuse_briefly(conn: OwnedFd, why: String, refusing: &Arc<Places>) {
    let Ok(place) = refusing.take(0) else {
        return; // too many at once: closed unheard
    };
    let _ = std::thread::Builder::new()
        .name("aiscp-refuse".into())
        .spawn(move || {
            let wait =
                nix::sys::time::TimeVal::new(0, REFUSAL_WAIT.as_micros() as libc::suseconds_t);
            if socket::setsockopt(&conn, socket::sockopt::ReceiveTimeout, &wait).is_ok() {
                let _ = wire::receive::<Request>(conn.as_fd());
            }
            let _ = wire::send_now(conn.as_fd(), &Reply::Refused { why });
            drop(place);
        });
}

/// The handshake of a client of `uid` (already admitted): its hello is read first (so a
/// refusal is read by the client, not lost to a connection reset), then its version and a
/// free seat are checked. Returns the connection, its seat and the client's pid when it is to
/// be served.
fn greet(
    conn: OwnedFd,
    uid: u32,
    shared: &Shared,
    _greeting: Place,
) -> Option<(OwnedFd, Place, i32)> {
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
    let pid = match crate::service::peer(&conn) {
        Ok((pid, _)) => pid,
        Err(e) => return refuse(format!("cannot tell who is connecting: {e}")),
    };
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
    let seat = match shared.seats.take(uid) {
        Ok(seat) => seat,
        Err(full) => return refuse(format!("busy: {full}")),
    };
    timeout(None).ok()?;
    wire::send(conn.as_fd(), &Reply::Welcome(shared.welcome.clone()), &[]).ok()?;
    Some((conn, seat, pid))
}

/// One client's requests after its welcome: each file checked and handed to the scheduler.
/// Anything malformed ends the connection (the client then copies in-process).
fn read_client(
    id: ClientId,
    conn: OwnedFd,
    seat: Place,
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
    if !shared.send(events, Event::Join(id, joined)) {
        return;
    }
    // However this thread ends (a panic included), the client's files stop and its seat is
    // given back.
    let _leaving = Leaving {
        id,
        cancel: Arc::clone(&cancel),
        events,
    };
    let mut inbox = Inbox::default();
    loop {
        let got = inbox.receive::<Request>(sock.as_fd());
        let event = match got {
            Ok((request, fds)) => match event_of(request, fds, id, &cancel, &unanswered) {
                Some(event) => event,
                None => {
                    let status = Reply::Status(shared.status());
                    match wire::send(sock.as_fd(), &status, &[]) {
                        Ok(()) => continue,
                        Err(_) => break,
                    }
                }
            },
            Err(WireError::Malformed(m)) => Err(m),
            Err(_) => break,
        };
        match event {
            Ok(e) => {
                if !shared.send(events, e) {
                    break;
                }
            }
            Err(why) => {
                let _ = wire::send(sock.as_fd(), &Reply::Refused { why }, &[]);
                break;
            }
        }
    }
}

/// What client `id`'s `request` (with the descriptors `fds` it carried) tells the
/// scheduler, or why the client is refused; None for a status request, which the reader
/// answers itself. `cancel` stops the client's files; `unanswered` counts its files that
/// have no answer yet (at most [`MAX_PENDING`]).
fn event_of(
    request: Request,
    fds: Vec<OwnedFd>,
    id: ClientId,
    cancel: &AtomicBool,
    unanswered: &AtomicUsize,
) -> Option<Result<Event, String>> {
    Some(match request {
        Request::Copy { files }
            if unanswered.load(Ordering::SeqCst) + files.len() > MAX_PENDING =>
        {
            Err(format!("more than {MAX_PENDING} files unanswered"))
        }
        Request::Copy { files } => jobs_of(files, fds).map(|jobs| {
            unanswered.fetch_add(jobs.len(), Ordering::SeqCst);
            Event::Jobs(id, jobs)
        }),
        Request::Cancel => {
            cancel.store(true, Ordering::SeqCst);
            Ok(Event::Cancel(id))
        }
        Request::Status => return None,
        Request::Hello { .. } => Err("hello twice".to_owned()),
    })
}

/// A client's reader thread ending: its files stop at once (before the scheduler hears of
/// it, so no write of theirs begins after this), then the scheduler is told it left.
struct Leaving<'e> {
    id: ClientId,
    cancel: Arc<AtomicBool>,
    events: &'e Sender<Event>,
}

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        let _ = self.events.send(Event::Gone(self.id));
    }
}

/// A copy request's files as the scheduler takes them: their descriptors checked (two per
/// file, in order), their names as paths.
fn jobs_of(files: Vec<FileRequest>, fds: Vec<OwnedFd>) -> Result<Vec<Job>, String> {
    if files.is_empty() || files.len() > wire::MAX_FILES || fds.len() != 2 * files.len() {
        return Err(format!(
            "a copy of {} file(s) with {} descriptor(s)",
            files.len(),
            fds.len()
        ));
    }
    let mut fds = fds.into_iter();
    let mut jobs = Vec::with_capacity(files.len());
    for file in files {
        // No file holds more than off_t counts; a length past that is not a file's.
        let len = match file.handover {
            Handover::InFlight { len, .. } | Handover::InTurn { len: Some(len) } => len,
            Handover::InTurn { len: None } => 0,
        };
        if i64::try_from(len).is_err() {
            return Err(format!("a file of {len} bytes"));
        }
        let (Some(src), Some(dst)) = (fds.next(), fds.next()) else {
            return Err("fewer descriptors than files".into());
        };
        let (src, dst, held) = checked_files([src, dst])?;
        // A length is only where the plan stops (reading goes on to EOF either way): one
        // past what SOURCE holds now buys a client nothing but the service's memory.
        let handover = match file.handover {
            Handover::InFlight { len, truncate } => Handover::InFlight {
                len: len.min(held),
                truncate,
            },
            Handover::InTurn { len: Some(len) } => Handover::InTurn {
                len: Some(len.min(held)),
            },
            sequential => sequential,
        };
        jobs.push(Job {
            id: file.id,
            src,
            dst,
            src_name: PathBuf::from(OsString::from_vec(file.src_name)),
            dst_name: PathBuf::from(OsString::from_vec(file.dst_name)),
            sparse: file.sparse.into(),
            handover,
            digest: file.sums.map(Into::into),
        });
    }
    Ok(jobs)
}

/// SOURCE and DEST as a copy request must pass them: two regular files, SOURCE open for
/// reading, DEST for writing and not appending (the engine writes at offsets). Returns them
/// with SOURCE's size now.
fn checked_files([src, dst]: [OwnedFd; 2]) -> Result<(File, File, u64), String> {
    let mut held = 0;
    for (fd, write) in [(&src, false), (&dst, true)] {
        let st = nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| format!("fstat: {e}"))?;
        if !write {
            held = u64::try_from(st.st_size).unwrap_or(0);
        }
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
    Ok((File::from(src), File::from(dst), held))
}
