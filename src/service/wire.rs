//! What a client and the staging service say to each other: one JSON object per
//! SOCK_SEQPACKET message (so a message is never split or merged), at most [`MAX_MESSAGE`]
//! bytes, with SOURCE and DEST riding along as SCM_RIGHTS descriptors on a copy request.
//!
//! Unlike the MPI ranks' format, the other end may be any process of the service's user (or
//! a stale binary of another version), so decoding never panics: a message that does not
//! parse, is too long, or carries the wrong number of descriptors is an error the caller
//! answers by dropping that client.

mod digest;
mod failure;

pub use digest::{Sums, WireDigest};
pub use failure::Failure;

use aiscp_engine::{Backend, Route, SparseMode, StageTimes};
use nix::sys::socket::{self, ControlMessage, MsgFlags};
use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};
use serde::{Deserialize, Serialize};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

/// Bumped whenever a message changes shape; a client and a service that differ here (or in
/// the program's version) do not talk, and the client copies in-process.
pub const PROTOCOL: u32 = 5;
/// The program's version, which a client must share with its service.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The largest message either side sends or takes: a copy request carries two names, so
/// this bounds a client's cost per request; a file whose names do not fit is copied
/// in-process by its client.
pub const MAX_MESSAGE: usize = 64 << 10;
/// Files one copy request carries at most: a client that walks a tree of small files sends
/// them together, and each batch costs one message each way instead of one per file
/// (bench/results/HISTORY.md, "Small files through the service").
pub const MAX_FILES: usize = 16;
/// Descriptors one message may carry (SOURCE and DEST of each file); more are closed and
/// refused.
const MAX_FDS: usize = 2 * MAX_FILES;

/// How holes are treated, as cp's `--sparse` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sparse {
    Auto,
    Never,
    Always,
}

impl From<SparseMode> for Sparse {
    fn from(m: SparseMode) -> Sparse {
        match m {
            SparseMode::Auto => Sparse::Auto,
            SparseMode::Never => Sparse::Never,
            SparseMode::Always => Sparse::Always,
        }
    }
}

impl From<Sparse> for SparseMode {
    fn from(s: Sparse) -> SparseMode {
        match s {
            Sparse::Auto => SparseMode::Auto,
            Sparse::Never => SparseMode::Never,
            Sparse::Always => SparseMode::Always,
        }
    }
}

/// How the client's copier hands the file over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Handover {
    /// A whole file for the service's files in flight (`len` at open; `truncate`: DEST holds
    /// old bytes, which the engine cuts once its staging exists), answered when it ends while
    /// the client walks on.
    InFlight { len: u64, truncate: bool },
    /// A file the client waits for (DEST already empty); `len` None: read to EOF.
    InTurn { len: Option<u64> },
}

/// One file of a copy request: SOURCE and DEST are its pair of the message's descriptors.
/// Names are bytes (paths need not be UTF-8) and only ever appear in messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRequest {
    pub id: u64,
    #[serde(with = "name")]
    pub src_name: Vec<u8>,
    #[serde(with = "name")]
    pub dst_name: Vec<u8>,
    pub sparse: Sparse,
    pub handover: Handover,
    /// The digest to take of DEST's bytes (--sums).
    #[serde(default)]
    pub sums: Option<Sums>,
}

/// Client to service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// First message of a connection.
    Hello { protocol: u32, version: String },
    /// Copy these files (at most [`MAX_FILES`]), each SOURCE into DEST: the descriptors come
    /// in the files' order, two per file.
    Copy { files: Vec<FileRequest> },
    /// Stop every file of this client (SIGINT at the client); each is still answered.
    Cancel,
    /// How the service is doing (`aiscp --doctor`).
    Status,
}

/// What the service is, told to each client it welcomes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Welcome {
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
    /// "hipFile", "cuFile" or "host memory".
    pub backend: Backend,
    pub library: Option<String>,
    pub gpus: Vec<u32>,
    /// The largest file it keeps in flight (None: every file in turn).
    pub queue_max: Option<u64>,
}

/// The service's state, for `aiscp --doctor`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    pub welcome: Welcome,
    pub uptime_secs: f64,
    /// Clients connected now, the one asking included.
    pub clients: usize,
    /// Files and bytes copied since it started.
    pub files: u64,
    pub bytes: u64,
    /// The staging memory its slots may hold (slots per GPU x chunk x GPUs).
    pub staging_bytes: u64,
    /// What they hold now: nothing once it has been idle a while (given back).
    #[serde(default)]
    pub staging_held: u64,
}

/// How one file ended in the service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Outcome {
    /// DEST's final size, the route its bytes took (read, write) when it had data, where
    /// its time went.
    Copied {
        end: u64,
        route: Option<(Route, Route)>,
        stages: Stages,
        /// DEST's digest, where the request asked for one.
        #[serde(default)]
        digest: Option<WireDigest>,
    },
    /// Why it failed, for the client to word.
    Failed { failure: Failure },
    /// Stopped before it began (`started` false: DEST untouched) or, from a peer that cuts
    /// DEST itself, after.
    Interrupted { started: bool },
    /// Stopped by the client's Cancel after it began: DEST left as the service's last write
    /// left it, holding SOURCE's bytes on `[0, good)`; the client, still there to read
    /// this, cuts it to `good`. The service never changes DEST's size after a stop, since
    /// a client that is gone may already be writing DEST again.
    Stopped { good: u64 },
}

/// Service to client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    Welcome(Welcome),
    /// Not served (another uid, another version, too many clients, a malformed message):
    /// the client copies in-process.
    Refused {
        why: String,
    },
    /// Files that ended, in the order they ended.
    Done {
        files: Vec<FileDone>,
    },
    /// Bytes of a file copied in turn since the last report (a few a second), so the
    /// client's progress moves during a large file.
    Progress {
        id: u64,
        bytes: u64,
    },
    Status(Status),
}

/// How one file of a client's ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDone {
    pub id: u64,
    pub outcome: Outcome,
}

/// Names as the wire carries them: a JSON string when the bytes are UTF-8 (as nearly every
/// path is; an array of numbers costs six times the bytes to write and to parse), an array
/// of bytes otherwise. Either form is taken back.
mod name {
    use serde::de::{self, SeqAccess, Visitor};
    use serde::{Deserializer, Serialize, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(bytes) {
            Ok(text) => s.serialize_str(text),
            Err(_) => bytes.serialize(s),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct Bytes;
        impl<'de> Visitor<'de> for Bytes {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a name: a string or an array of bytes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Vec<u8>, E> {
                Ok(v.as_bytes().to_vec())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(out)
            }
        }
        d.deserialize_any(Bytes)
    }
}

/// Where a file's time went, stage by stage, in seconds ([`StageTimes`] on the wire).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stages {
    pub open: f64,
    pub read: f64,
    pub copy_queue: f64,
    pub copy_wait: f64,
    pub write: f64,
    pub digest: f64,
}

impl From<&StageTimes> for Stages {
    fn from(t: &StageTimes) -> Stages {
        Stages {
            open: t.open.as_secs_f64(),
            read: t.read.as_secs_f64(),
            copy_queue: t.copy_queue.as_secs_f64(),
            copy_wait: t.copy_wait.as_secs_f64(),
            write: t.write.as_secs_f64(),
            digest: t.digest.as_secs_f64(),
        }
    }
}

impl From<Stages> for StageTimes {
    /// Negative or odd values read as zero.
    fn from(s: Stages) -> StageTimes {
        let d = |x: f64| Duration::try_from_secs_f64(x).unwrap_or_default();
        StageTimes {
            open: d(s.open),
            read: d(s.read),
            copy_queue: d(s.copy_queue),
            copy_wait: d(s.copy_wait),
            write: d(s.write),
            digest: d(s.digest),
        }
    }
}

/// A message that could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("{}", crate::sys::messages::os_text(.0))]
    Io(#[from] io::Error),
    /// The peer closed the connection.
    #[error("connection closed")]
    Closed,
    #[error("malformed message: {0}")]
    Malformed(String),
}

/// Sends one message with `fds` attached. MSG_NOSIGNAL: a peer that is gone is an error
/// here, not a SIGPIPE that would stop the run.
pub fn send<T: Serialize>(sock: BorrowedFd<'_>, msg: &T, fds: &[RawFd]) -> io::Result<()> {
    send_with(sock, msg, fds, MsgFlags::MSG_NOSIGNAL)
}

/// [`send`] that never waits: a peer whose socket has no room (it does not read what it is
/// sent) gets an error (`WouldBlock`) instead of holding the sender.
pub fn send_now<T: Serialize>(sock: BorrowedFd<'_>, msg: &T) -> io::Result<()> {
    send_with(
        sock,
        msg,
        &[],
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
    )
}

/// Bytes sent on `sock` and not yet read by its peer (SIOCOUTQ).
pub fn unread(sock: BorrowedFd<'_>) -> io::Result<usize> {
    let mut queued: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int through the pointer, which points at `queued`.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(queued).unwrap_or(0))
}

fn send_with<T: Serialize>(
    sock: BorrowedFd<'_>,
    msg: &T,
    fds: &[RawFd],
    flags: MsgFlags,
) -> io::Result<()> {
    let bytes = serde_json::to_vec(msg).map_err(io::Error::other)?;
    if bytes.len() > MAX_MESSAGE {
        return Err(io::Error::other("message too long"));
    }
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
    loop {
        match socket::sendmsg::<()>(
            sock.as_raw_fd(),
            &[IoSlice::new(&bytes)],
            cmsgs,
            flags,
            None,
        ) {
            Ok(_) => return Ok(()),
            // A client stopping on a signal does not wait on a service that takes nothing.
            Err(nix::errno::Errno::EINTR) if crate::sys::signals::stop_asked() => {
                return Err(io::ErrorKind::Interrupted.into())
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether a send failed because the message does not fit [`MAX_MESSAGE`] (not the
/// kernel's error: the peer is still there).
pub fn too_long(e: &io::Error) -> bool {
    e.raw_os_error().is_none()
}

/// Receives one message on a connection that has no [`Inbox`] of its own (a handshake, a
/// status request).
pub fn receive<T: for<'de> Deserialize<'de>>(
    sock: BorrowedFd<'_>,
) -> Result<(T, Vec<OwnedFd>), WireError> {
    Inbox::default().receive(sock)
}

/// Where one connection's messages arrive, kept from message to message: receiving costs
/// no allocation and no clearing of [`MAX_MESSAGE`] bytes each time.
pub struct Inbox {
    buf: Vec<u8>,
    space: Vec<MaybeUninit<u8>>,
}

impl Default for Inbox {
    fn default() -> Inbox {
        Inbox {
            buf: vec![0u8; MAX_MESSAGE],
            space: vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))],
        }
    }
}

impl Inbox {
    /// Receives one message and the descriptors that came with it (every one is owned, so an
    /// error closes them). Blocks unless the socket is non-blocking.
    pub fn receive<T: for<'de> Deserialize<'de>>(
        &mut self,
        sock: BorrowedFd<'_>,
    ) -> Result<(T, Vec<OwnedFd>), WireError> {
        self.take(sock, RecvFlags::empty())
    }

    /// [`Self::receive`] that never waits: None when nothing has arrived.
    pub fn receive_now<T: for<'de> Deserialize<'de>>(
        &mut self,
        sock: BorrowedFd<'_>,
    ) -> Result<Option<(T, Vec<OwnedFd>)>, WireError> {
        match self.take(sock, RecvFlags::DONTWAIT) {
            Ok(got) => Ok(Some(got)),
            Err(WireError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn take<T: for<'de> Deserialize<'de>>(
        &mut self,
        sock: BorrowedFd<'_>,
        flags: RecvFlags,
    ) -> Result<(T, Vec<OwnedFd>), WireError> {
        let (len, got, fds) = loop {
            let mut control = RecvAncillaryBuffer::new(&mut self.space);
            let mut iov = [IoSliceMut::new(&mut self.buf)];
            match recvmsg(
                sock,
                &mut iov,
                &mut control,
                RecvFlags::CMSG_CLOEXEC | flags,
            ) {
                Ok(msg) => {
                    // Owned before anything can fail: whatever the message turns out to be,
                    // every descriptor it brought is closed with it.
                    let mut fds = Vec::new();
                    for c in control.drain() {
                        if let RecvAncillaryMessage::ScmRights(passed) = c {
                            fds.extend(passed);
                        }
                    }
                    break (msg.bytes, msg.flags, fds);
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(WireError::Io(e.into())),
            }
        };
        if got.contains(ReturnFlags::TRUNC) {
            return Err(WireError::Malformed("message too long".into()));
        }
        // More descriptors than a message may carry, or this process could not take them
        // all (out of descriptors): those it took are closed with `fds`.
        if got.contains(ReturnFlags::CTRUNC) {
            return Err(WireError::Malformed(
                "descriptors not taken (too many, or this process is out of descriptors)".into(),
            ));
        }
        if len == 0 && fds.is_empty() {
            return Err(WireError::Closed);
        }
        let msg = serde_json::from_slice(&self.buf[..len])
            .map_err(|e| WireError::Malformed(e.to_string()))?;
        Ok((msg, fds))
    }
}

#[cfg(test)]
mod tests;
