//! The staging service (`aiscp --serve`) end to end, on host memory and on the fake GPU
//! library: many clients sharing one service (`clients`), a service or a client failing
//! (`failures`), who a service serves (`users`), hostile and odd messages (`wire`). This
//! module holds what they share: a service started per test, and raw messages.

use crate::support::{
    aiscp_command, hermetic, listing, program, write_random, Backend, Report, BACKENDS,
};
use nix::sys::socket::{self, AddressFamily, MsgFlags, SockFlag, SockType, UnixAddr};
use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod after_client;
mod clients;
mod failures;
mod hostile;
mod routes;
mod users;
mod wire;

/// A service started for one test, stopped (SIGTERM) when dropped.
struct Service {
    child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
    report: PathBuf,
    backend: Backend,
    client_report: PathBuf,
}

impl Service {
    /// Starts `aiscp --serve --debug` on `backend` with its socket under `dir/run`, and
    /// waits until it answers.
    fn start(backend: Backend, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Service {
        let socket = dir.join("run").join("service.sock");
        let log = dir.join("service.log");
        let report = dir.join("service-report");
        let mut cmd = aiscp_command();
        cmd.arg("--serve")
            .arg("--socket")
            .arg(&socket)
            .arg("--debug")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap());
        backend.apply(&mut cmd, &report);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while dial(&socket).is_err() {
            if let Some(st) = child.try_wait().unwrap() {
                panic!(
                    "service ended ({st}):\n{}",
                    fs::read_to_string(&log).unwrap()
                );
            }
            assert!(Instant::now() < deadline, "service never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
        Service {
            child: Some(child),
            socket,
            log,
            report,
            backend,
            client_report: dir.join("client-report"),
        }
    }

    fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// An aiscp run that uses this service.
    fn client(&self) -> Command {
        let mut cmd = aiscp_command();
        self.backend.apply(&mut cmd, &self.client_report);
        cmd.env("AISCP_SERVICE", &self.socket)
            .env_remove("AISCP_TEST_PAUSE")
            .stdin(Stdio::null());
        cmd
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap()
    }

    fn alive(&mut self) -> bool {
        self.child.as_mut().unwrap().try_wait().unwrap().is_none()
    }

    /// SIGTERM, then the exit status; on the fake GPU its report must be clean.
    fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        signal(child.id() as i32, nix::sys::signal::Signal::SIGTERM);
        let st = wait_for(&mut child, Duration::from_secs(20));
        self.backend.assert_report_clean(&self.report);
        st
    }

    /// After SIGKILL the socket is left behind, stale.
    fn alive_after_kill(&self) -> bool {
        dial(&self.socket).is_ok()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `cmd`, an `aiscp --serve` that must refuse to serve, to its end, and returns its
/// output. One that serves instead (a check it should have made, dropped) is killed after
/// 10 s and fails the test, rather than hanging the suite.
#[track_caller]
fn refused_to_serve(cmd: &mut Command) -> std::process::Output {
    use std::io::Read;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = test_support::child::wait_within(&mut child, Duration::from_secs(10));
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    let Some(status) = status else {
        panic!(
            "still serving after 10 s (killed), where it should have refused:\n{}",
            String::from_utf8_lossy(&stderr)
        )
    };
    std::process::Output {
        status,
        stdout,
        stderr,
    }
}

/// A service that `AISCP_SERVICE=auto` started (detached: not this test's child), killed when
/// dropped, so that a failing test leaves none behind (one that missed its idle exit would
/// run for ever).
struct AutoStarted(i32);

impl Drop for AutoStarted {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    }
}

/// An aiscp run on host memory that uses the service at `socket` (a path, or "auto").
fn host_client(socket: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut cmd = aiscp_command();
    cmd.env("AISCP_BACKEND", "host")
        .env("AISCP_SERVICE", socket);
    cmd
}

/// A host-memory client pointed at `socket` copies `src` to `dst` in-process, with exactly
/// one warning, which says `why`: exit 0, DEST equal to SOURCE.
fn assert_copies_in_process(socket: &Path, src: &Path, dst: &Path, why: &str) {
    let out = host_client(socket).arg(src).arg(dst).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("{why}; copying in-process")),
        "{stderr}"
    );
    assert_eq!(fs::read(src).unwrap(), fs::read(dst).unwrap());
}

/// A client of `svc` copies `src` to `dst`: exit 0, nothing on stderr, DEST equal to SOURCE.
fn assert_copies(svc: &Service, src: &Path, dst: &Path) {
    let out = svc.client().arg(src).arg(dst).output().unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    assert_eq!(fs::read(src).unwrap(), fs::read(dst).unwrap());
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig).unwrap();
}

fn wait_for(child: &mut Child, limit: Duration) -> ExitStatus {
    test_support::child::wait_within(child, limit)
        .unwrap_or_else(|| panic!("process did not end in {limit:?}"))
}

fn dial(path: &Path) -> nix::Result<OwnedFd> {
    let s = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    socket::connect(s.as_raw_fd(), &UnixAddr::new(path)?)?;
    Ok(s)
}

/// A tree of `files` random files (sizes up to 200 KiB, some empty) and one of `big` bytes.
fn tree(root: &Path, files: usize, big: usize, seed: u64) {
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    for i in 0..files {
        let dir = match i % 3 {
            0 => root.to_path_buf(),
            1 => root.join("sub"),
            _ => root.join("sub/deeper"),
        };
        let len = (seed as usize * 7919 + i * 104_729) % (200 << 10) * usize::from(i % 7 != 0);
        write_random(&dir.join(format!("f{i}")), len, seed + i as u64);
    }
    write_random(&root.join("big"), big, seed ^ 0xb19);
}

/// The bytes of the regular files under `root`.
fn tree_bytes(root: &Path) -> u64 {
    fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| match e.file_type().unwrap().is_dir() {
            true => tree_bytes(&e.path()),
            false => e.metadata().unwrap().len(),
        })
        .sum()
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Waits for the pause flag `flag` (AISCP_TEST_PAUSE) to appear.
/// A service on `backend` with one worker whose copies stop between slices of 64 KiB (and
/// `args`) until the pause flag it returns is removed.
fn paused_between_slices(backend: Backend, dir: &Path, args: &[&str]) -> (Service, PathBuf) {
    let flag = dir.join("paused");
    let pause = format!("between-slices:{}", flag.display());
    // One worker: the pause holds the file itself mid-way, whatever its parts (a file alone
    // in turn is one part now, which other workers would otherwise copy to its end).
    let args: Vec<&str> = ["--chunk-size", "64K", "--streams", "1"]
        .iter()
        .chain(args)
        .copied()
        .collect();
    let svc = Service::start(backend, dir, &args, &[("AISCP_TEST_PAUSE", &pause)]);
    (svc, flag)
}

fn wait_flag(flag: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "never paused");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One message from the service, as text (empty once it has closed).
fn read_message(sock: &OwnedFd) -> String {
    let tv = nix::sys::time::TimeVal::new(10, 0);
    socket::setsockopt(sock, socket::sockopt::ReceiveTimeout, &tv).unwrap();
    let mut buf = vec![0u8; 70_000];
    let n = socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The wire protocol this build speaks (the service's `wire::PROTOCOL`).
const PROTOCOL: u32 = 5;

/// A hello of this build.
fn hello() -> Vec<u8> {
    format!(
        r#"{{"type":"hello","protocol":{PROTOCOL},"version":"{}"}}"#,
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

/// A connection that has said hello and been welcomed.
fn welcomed(svc: &Service) -> OwnedFd {
    let sock = dial(&svc.socket).unwrap();
    send_raw(&sock, &hello(), &[]);
    let welcome = read_message(&sock);
    assert!(welcome.contains("welcome"), "{welcome}");
    sock
}

/// A copy request of one file, SOURCE `a` into DEST `b`, handed over as `handover`.
fn copy_request(handover: &str, sparse: &str) -> Vec<u8> {
    format!(
        r#"{{"type":"copy","files":[{{"id":7,"src_name":"a","dst_name":"b","sparse":"{sparse}","handover":{handover}}}]}}"#
    )
    .into_bytes()
}

fn send_raw(sock: &OwnedFd, msg: &[u8], fds: &[i32]) {
    let cmsg = [socket::ControlMessage::ScmRights(fds)];
    let cmsgs: &[socket::ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
    let _ = socket::sendmsg::<()>(
        sock.as_fd().as_raw_fd(),
        &[std::io::IoSlice::new(msg)],
        cmsgs,
        MsgFlags::MSG_NOSIGNAL,
        None,
    );
}

/// Every `aiscp --serve` the suite starts is bounded: none is run to its end by `.output()`
/// or `.status()`, which would wait for ever on a service that serves where it should have
/// refused (a check dropped); such a run goes through [`refused_to_serve`], and a service
/// meant to serve is killed when its test ends ([`Service`], `Other`, `Killed`). Read by
/// statement: from each `"--serve"` or `serve_shared(` to the next `;`.
#[test]
fn every_service_the_suite_starts_is_bounded() {
    let files = crate::support::suite_sources();
    // Spelled in two parts, so that this test's own text does not match.
    let starts = [concat!("\"--", "serve\""), concat!("serve_", "shared(")];
    let mut found = 0;
    let mut wrong = Vec::new();
    for (name, text) in &files {
        for start in starts {
            for (at, _) in text.match_indices(start) {
                found += 1;
                let statement = text[at..].split(';').next().unwrap();
                if statement.contains(".output()") || statement.contains(".status()") {
                    let line = text[..at].lines().count();
                    wrong.push(format!("{name}:{line}: {start} run unbounded"));
                }
            }
        }
    }
    assert!(found > 15, "{found} starts of a service found");
    assert!(wrong.is_empty(), "{wrong:#?}");
}
