//! The staging service: `aiscp --serve` brings the staging backend up once and keeps it warm
//! (context, device buffers, pinned windows), and every `aiscp` that finds its socket hands it
//! only the data phase of each regular file, as SOURCE and DEST descriptors. Everything cp
//! decides stays in the client; the service never opens a path, so it reads and writes only
//! what the client could. As sccache's server, it is an accelerator: a client that cannot use
//! it copies in-process.
//!
//! `server` is the service, `wire` what crosses the socket; the copier's side is
//! [`crate::data::service_client`], a [`crate::data::mover::DataMover`]. This module holds
//! what both ends agree on: where the socket is, which service a client asks for, and who is
//! on the other end.

pub mod server;
pub mod users;
pub mod wire;

use crate::sys::open_dir::OpenDir;
use crate::sys::stat::Stat;
use nix::fcntl::OFlag;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials, UnixAddr};
use nix::sys::stat::Mode;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// The socket's file name in its directory.
const SOCKET_NAME: &str = "service.sock";

/// Which service a client uses: `AISCP_SERVICE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Never (`off`): copy in-process.
    Off,
    /// The per-user socket when it is there (unset or empty, the default): a service an
    /// operator or systemd started is used, and nothing is started otherwise.
    WhenThere(PathBuf),
    /// This socket (a PATH): a warning when it cannot be used.
    Path(PathBuf),
    /// The per-user socket, starting a service with a short idle exit when none answers
    /// (`auto`), as sccache starts its server on first use.
    Auto(PathBuf),
}

impl Choice {
    /// Reads `AISCP_SERVICE`.
    pub fn from_env() -> Choice {
        Choice::parse(std::env::var_os("AISCP_SERVICE"))
    }

    fn parse(value: Option<OsString>) -> Choice {
        match value {
            None => Choice::WhenThere(default_socket()),
            Some(v) if v.is_empty() => Choice::WhenThere(default_socket()),
            Some(v) if v == "off" => Choice::Off,
            Some(v) if v == "auto" => Choice::Auto(default_socket()),
            Some(v) => Choice::Path(PathBuf::from(v)),
        }
    }
}

impl Choice {
    /// The socket this choice looks at (None: off).
    pub fn socket(&self) -> Option<&Path> {
        match self {
            Choice::Off => None,
            Choice::WhenThere(p) | Choice::Path(p) | Choice::Auto(p) => Some(p),
        }
    }
}

/// The per-user socket: `$XDG_RUNTIME_DIR/aiscp/service.sock` (a tmpfs directory of the
/// user's own, 0700, that systemd empties at logout), else `/tmp/aiscp-UID/service.sock`.
pub fn default_socket() -> PathBuf {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("aiscp"),
        None => PathBuf::from(format!("/tmp/aiscp-{}", nix::unistd::getuid())),
    };
    dir.join(SOCKET_NAME)
}

/// The process on the other end of a connected socket: (pid, uid), as the kernel saw them
/// when the connection was made (SO_PEERCRED), not as the peer says.
pub fn peer(sock: impl AsFd) -> io::Result<(i32, u32)> {
    let cred = getsockopt(&sock, PeerCredentials)?;
    Ok((cred.pid(), cred.uid()))
}

/// A socket's directory, held open by an O_PATH descriptor: checked through that descriptor
/// and then used through it (the lock opened, a stale socket removed, the socket bound), so
/// a directory swapped in by path after the check (a root service whose socket sits under a
/// parent others may write) is never the one used.
pub struct SocketDir {
    dir: OpenDir,
}

impl SocketDir {
    /// Opens `dir` without following a final symlink and checks, on what was opened, that it
    /// is a directory owned by this user that no one else may enter (0700 or tighter): a
    /// socket inside it is reachable by this user (and root) only. For a service shared with
    /// other users (`shared`), others may enter it but no one else may write in it (0755 or
    /// 0711), so no one else can put another socket in its place.
    pub fn open(dir: &Path, shared: bool) -> io::Result<SocketDir> {
        let (fd, meta) = open_held(dir)?;
        let uid = nix::unistd::geteuid().as_raw();
        // Private: no one else may do anything there. Shared: others must enter (to reach the
        // socket) and no one else may write.
        let (fits, wanted) = match shared {
            false => (meta.mode() & 0o077 == 0, "0700 or tighter"),
            true => (
                meta.mode() & 0o022 == 0 && meta.mode() & 0o001 != 0,
                "0755 or 0711",
            ),
        };
        if !meta.is_dir() || meta.uid() != uid || !fits {
            return Err(io::Error::other(format!(
                "{} must be a directory of uid {uid} with mode {wanted} ({})",
                aiscp_engine::quote::quote(dir),
                what_it_is(&meta)
            )));
        }
        Ok(SocketDir {
            dir: OpenDir::held(fd),
        })
    }

    /// Opens, for a client about to connect, the directory of a socket at `path`, and checks
    /// on what was opened the rule both kinds of service directory keep: a directory (not
    /// a symlink) of this user or root in which no one else may write, so that no one else
    /// can have put a socket there. Err: why not (a directory another user made, a plain
    /// file), and no service of this user's can be there.
    pub fn open_to_connect(path: &Path) -> Result<(SocketDir, OsString), NotOurs> {
        let (dir, name) = split_socket_path(path).map_err(NotOurs::Foreign)?;
        let (fd, meta) = open_held(&dir).map_err(NotOurs::Unopened)?;
        let me = nix::unistd::geteuid().as_raw();
        let owner_ok = meta.uid() == me || meta.uid() == 0;
        if !meta.is_dir() || !owner_ok || meta.mode() & 0o022 != 0 {
            return Err(NotOurs::Foreign(format!(
                "{} is not a directory of uid {me} or root that only its owner may write ({})",
                aiscp_engine::quote::quote(&dir),
                what_it_is(&meta)
            )));
        }
        let held = SocketDir {
            dir: OpenDir::held(fd),
        };
        Ok((held, name))
    }

    /// The directory, for the `*at` calls made in it.
    pub fn dir(&self) -> &OpenDir {
        &self.dir
    }

    /// The address of `name` in this directory for bind and connect, which take no
    /// directory descriptor: `/proc/self/fd/N/NAME` resolves through the descriptor, not
    /// through the path checked. It must fit sun_path (108 bytes), which leaves the name
    /// about 88 bytes (a longer one fails as a too long path does).
    pub fn address(&self, name: &OsStr) -> nix::Result<UnixAddr> {
        let mut path = OsString::from(format!("/proc/self/fd/{}/", self.dir.raw_at()));
        path.push(name);
        UnixAddr::new(Path::new(&path))
    }
}

/// `dir` opened as itself (O_PATH, a final symlink not followed, so that it is refused as
/// what it is), and what fstat says of what was opened: the checks look at that, and the
/// descriptor is what is used after them.
fn open_held(dir: &Path) -> io::Result<(OwnedFd, Stat)> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::open(dir, flags, Mode::empty())?;
    // SAFETY: `fd` was just returned by open and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let meta = Stat::from(nix::sys::stat::fstat(fd.as_raw_fd())?);
    Ok((fd, meta))
}

/// A socket directory as a refusal describes it: "it is a directory, uid 0, mode 777".
fn what_it_is(meta: &Stat) -> String {
    format!(
        "it is {}, uid {}, mode {:o}",
        match meta.is_dir() {
            true => "a directory",
            false => "not a directory",
        },
        meta.uid(),
        meta.mode() & 0o7777
    )
}

/// Why a client finds no directory of its own at a socket's place.
pub enum NotOurs {
    /// It could not be opened (not there: no service has made it).
    Unopened(io::Error),
    /// It is not a place a service of this user's can be in: why.
    Foreign(String),
}

/// A socket path's directory and file name; a path without a file name (`/`, `..`) is no
/// socket's.
pub fn split_socket_path(path: &Path) -> Result<(PathBuf, OsString), String> {
    let name = match path.file_name() {
        Some(n) if !path.as_os_str().as_encoded_bytes().ends_with(b"/") => n.to_owned(),
        _ => {
            return Err(format!(
                "{} names no socket file",
                aiscp_engine::quote::quote(path)
            ))
        }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices() {
        let some = |s: &str| Some(OsString::from(s));
        assert_eq!(Choice::parse(some("off")), Choice::Off);
        assert_eq!(Choice::parse(some("auto")), Choice::Auto(default_socket()));
        assert_eq!(Choice::parse(None), Choice::WhenThere(default_socket()));
        assert_eq!(Choice::parse(some("")), Choice::WhenThere(default_socket()));
        assert_eq!(
            Choice::parse(some("/run/x.sock")),
            Choice::Path("/run/x.sock".into())
        );
    }
}
