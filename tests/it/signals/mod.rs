//! SIGINT and SIGTERM during a copy: the binary stops within a second, waits for its I/O,
//! gives back every GPU resource, then dies of the signal silently, as cp does.
//!
//! The copy is made slow deterministically: SRC is a FIFO that the test feeds at about
//! 3 MB/s, so the copy is surely running when the signal comes and cannot end by itself.

mod death;
mod fifo;
mod stuck;
mod tree;

use crate::support::{
    aiscp_command, fake_gpu_lib, hermetic, program, random_bytes, Backend, BACKENDS,
};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use test_support::child::assert_running;

const PIECE: usize = 16 * 1024;
const PAUSE: Duration = Duration::from_millis(5);
/// The most a stop may take after the signal.
const STOP_WITHIN: Duration = Duration::from_secs(1);

/// Feeds `fifo` with `data` in pieces until told to stop, the data runs out, or the reader
/// goes away. With `stall_after`, stops writing after that many bytes but keeps the FIFO
/// open (a source that hangs).
fn feeder(
    fifo: PathBuf,
    data: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    stall_after: Option<usize>,
) -> JoinHandle<()> {
    thread::spawn(move || {
        let mut f = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let mut sent = 0;
        while !stop.load(Ordering::SeqCst) && sent < data.len() {
            if stall_after.is_some_and(|n| sent >= n) {
                thread::sleep(PAUSE);
                continue;
            }
            let end = (sent + PIECE).min(data.len());
            if f.write_all(&data[sent..end]).is_err() {
                return; // EPIPE: the reader is gone (Rust ignores SIGPIPE)
            }
            sent = end;
            thread::sleep(PAUSE);
        }
    })
}

struct Copy {
    dir: tempfile::TempDir,
    child: Child,
    feeder: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    data: Arc<Vec<u8>>,
    backend: Backend,
}

impl Copy {
    /// Starts `aiscp [extra] src dst` reading from a FIFO fed slowly; DST holds `old_dst`
    /// first if given.
    fn start(
        backend: Backend,
        extra: &[&str],
        stall_after: Option<usize>,
        old_dst: Option<&[u8]>,
    ) -> Copy {
        Copy::start_ignoring(backend, extra, stall_after, old_dst, &[])
    }

    /// [`Copy::start`], with aiscp started with `ignored` signals set to SIG_IGN (as a shell
    /// starts a background job, or `nohup` a command).
    fn start_ignoring(
        backend: Backend,
        extra: &[&str],
        stall_after: Option<usize>,
        old_dst: Option<&[u8]>,
        ignored: &[Signal],
    ) -> Copy {
        let dir = tempfile::tempdir().unwrap();
        if let Some(old) = old_dst {
            fs::write(dir.path().join("dst"), old).unwrap();
        }
        let fifo = dir.path().join("src");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // 16 MiB (five seconds of feeding): 1 MiB of random bytes, repeated, is cheap to
        // make and still shows a misplaced block.
        let block = random_bytes(1 << 20, 42);
        let data = Arc::new(block.repeat(16));
        let stop = Arc::new(AtomicBool::new(false));
        let mut cmd = aiscp_command();
        cmd.current_dir(dir.path())
            .args(["--chunk-size", "64K"])
            .args(extra)
            .args(["src", "dst"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        backend.apply(&mut cmd, &dir.path().join("report"));
        ignore_in_child(&mut cmd, ignored);
        let child = cmd.spawn().unwrap();
        let feeder = feeder(fifo, Arc::clone(&data), Arc::clone(&stop), stall_after);
        Copy {
            dir,
            child,
            feeder: Some(feeder),
            stop,
            data,
            backend,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Waits until the copy has written `bytes` somewhere in the directory (DST or the
    /// --atomic temporary), so the signal lands mid-copy.
    fn wait_for_progress(&mut self, bytes: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let written: u64 = fs::read_dir(self.dir.path())
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| e.file_name() != "report")
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum();
            if written >= bytes {
                return;
            }
            assert_running(&mut self.child, "aiscp, before the signal");
            assert!(Instant::now() < deadline, "no progress from aiscp");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits at most `limit` for the exit; kills and fails the test past it.
    fn wait_within(&mut self, limit: Duration) -> (ExitStatus, String) {
        let Some(status) = test_support::child::wait_within(&mut self.child, limit) else {
            panic!("aiscp did not stop within {limit:?} of the signal");
        };
        self.stop.store(true, Ordering::SeqCst);
        if let Some(f) = self.feeder.take() {
            f.join().unwrap();
        }
        let mut stderr = String::new();
        use std::io::Read;
        self.child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        (status, stderr)
    }

    /// DST, if any, holds a prefix of what was fed.
    fn assert_dst_is_a_prefix(&self) {
        if let Ok(got) = fs::read(self.path("dst")) {
            assert!(got.len() <= self.data.len());
            assert!(got == self.data[..got.len()], "DST is not a prefix of SRC");
        }
    }

    fn assert_no_leaks(&self) {
        self.backend.assert_report_clean(&self.path("report"));
    }

    /// Names in the directory other than the FIFO, DST and the report: temporaries.
    fn leftovers(&self) -> Vec<String> {
        fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !["src", "dst", "report"].contains(&n.as_str()))
            .collect()
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        // A failed assertion must not leave aiscp or the feeder running.
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Makes `cmd` start with the signals these tests send at their defaults, whatever this test
/// process inherited (a suite run under `nohup` ignores SIGHUP, and an ignored signal stays
/// ignored in aiscp, as in cp), and with `ignored` signals set to SIG_IGN.
fn ignore_in_child(cmd: &mut Command, ignored: &[Signal]) {
    use nix::sys::signal::{signal, SigHandler};
    use std::os::unix::process::CommandExt;
    let ignored = ignored.to_vec();
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            for sig in [Signal::SIGHUP, Signal::SIGINT, Signal::SIGTERM] {
                signal(sig, SigHandler::SigDfl)?;
            }
            for &sig in &ignored {
                signal(sig, SigHandler::SigIgn)?;
            }
            Ok(())
        });
    }
}

/// Stopped cleanly, then dead of `sig` without a word, as cp dies of it (a shell shows 128 +
/// the signal, and stops its loop or script).
fn assert_interrupted(status: ExitStatus, stderr: &str, sig: Signal) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(sig as i32),
        "{status:?}: not dead of {sig}: {stderr}"
    );
    assert_eq!(stderr, "", "cp says nothing when a signal ends it");
}

fn stops_on(sig: Signal, extra: &[&str], also: impl Fn(&Copy)) {
    for backend in BACKENDS {
        let mut copy = Copy::start(backend, extra, None, None);
        copy.wait_for_progress(256 * 1024);
        copy.signal(sig);
        let (status, stderr) = copy.wait_within(STOP_WITHIN);
        assert_interrupted(status, &stderr, sig);
        copy.assert_dst_is_a_prefix();
        copy.assert_no_leaks();
        assert!(
            copy.leftovers().is_empty(),
            "left behind: {:?}",
            copy.leftovers()
        );
        also(&copy);
    }
}

#[test]
fn sigint_stops_the_copy_and_dies_of_it() {
    stops_on(Signal::SIGINT, &[], |_| {});
}

#[test]
fn sigterm_stops_the_copy_and_dies_of_it() {
    stops_on(Signal::SIGTERM, &[], |_| {});
}

/// The largest --chunk-size (0x7ffff000: one slice of almost 2 GiB) still stops within a
/// second of SIGINT, on the host route and the fake GPU's library, bounce and --async routes: no
/// single read, write or library call is asked for more than 64 MiB, and the stop flag is
/// looked at between them. (A 3 GiB hole read with --sparse=never: zeros, without disk
/// reads, yet every byte goes through the slot.)
#[test]
fn the_largest_chunk_stops_within_a_second() {
    for (backend, route) in [
        (Backend::Host, &["--route", "auto"][..]),
        (Backend::FakeGpu, &["--route", "library"]),
        (Backend::FakeGpu, &["--route", "bounce"]),
        // --async: each part of the slice its own queued read and write.
        (Backend::FakeGpu, &["--route", "library", "--async"]),
    ] {
        let dir = tempfile::tempdir().unwrap();
        fs::File::create(dir.path().join("src"))
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let mut cmd = aiscp_command();
        cmd.current_dir(dir.path())
            .args(["-q", "--chunk-size", "0x7ffff000", "--streams", "1"])
            .arg("--sparse=never")
            .args(route)
            .args(["src", "dst"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        backend.apply(&mut cmd, &dir.path().join("report"));
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !dir.path().join("dst").exists() {
            assert_running(&mut child, "aiscp, before DST appeared");
            assert!(Instant::now() < deadline, "DST never appeared");
            thread::sleep(Duration::from_millis(5));
        }
        thread::sleep(Duration::from_millis(300)); // well inside the first slice
        assert_running(&mut child, "the copy, before the signal");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let (status, stderr) = exit_within(&mut child);
        assert_interrupted(status, &stderr, Signal::SIGINT);
        backend.assert_report_clean(&dir.path().join("report"));
    }
}

#[test]
fn sighup_stops_the_copy_and_dies_of_it() {
    stops_on(Signal::SIGHUP, &[], |_| {});
}

#[test]
fn sighup_during_atomic_leaves_no_temporary_and_no_dst() {
    stops_on(Signal::SIGHUP, &["--atomic"], |copy| {
        assert!(!copy.path("dst").exists(), "a partial DST was renamed");
    });
}

/// SIGPIPE (a -v listing piped into `head`, a FIFO DEST whose reader left, or `kill -PIPE`)
/// ends cp at once; aiscp stops cleanly first (no --atomic temporary left), then dies of
/// SIGPIPE silently, as cp does.
#[test]
fn sigpipe_during_atomic_stops_cleanly_then_dies_of_sigpipe() {
    use std::os::unix::process::ExitStatusExt;
    for backend in BACKENDS {
        let mut copy = Copy::start(backend, &["--atomic"], None, Some(b"old\n"));
        copy.wait_for_progress(256 * 1024);
        copy.signal(Signal::SIGPIPE);
        let (status, stderr) = copy.wait_within(STOP_WITHIN);
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}: {stderr}");
        assert_eq!(stderr, "", "cp dies of SIGPIPE without a word");
        assert_eq!(fs::read(copy.path("dst")).unwrap(), b"old\n");
        assert!(
            copy.leftovers().is_empty(),
            "left behind: {:?}",
            copy.leftovers()
        );
    }
}

/// A signal inherited as ignored (a script's background job, nohup) stays ignored, as it
/// does for cp: the copy runs on to the end.
#[test]
fn signals_inherited_as_ignored_stay_ignored() {
    let ignored = [Signal::SIGINT, Signal::SIGHUP, Signal::SIGTERM];
    let mut copy = Copy::start_ignoring(Backend::Host, &[], None, None, &ignored);
    copy.wait_for_progress(256 * 1024);
    for sig in ignored {
        copy.signal(sig);
    }
    thread::sleep(Duration::from_millis(300));
    assert_running(&mut copy.child, "the copy, after signals it ignores");
    let (status, stderr) = copy.wait_within(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        fs::read(copy.path("dst")).unwrap() == *copy.data,
        "DST differs"
    );
}

/// Starts `aiscp src dst` in `dir` and checks that it is still waiting 300 ms later.
fn start_waiting(backend: Backend, dir: &std::path::Path) -> Child {
    let mut cmd = aiscp_command();
    cmd.current_dir(dir)
        .args(["src", "dst"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    backend.apply(&mut cmd, &dir.join("report"));
    let mut child = cmd.spawn().unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_running(&mut child, "aiscp, waiting on its source");
    child
}

/// Waits up to [`STOP_WITHIN`] for `child` to exit; kills it and fails past that.
fn exit_within(child: &mut Child) -> (ExitStatus, String) {
    use std::io::Read;
    let Some(status) = test_support::child::wait_within(child, STOP_WITHIN) else {
        panic!("aiscp did not stop within {STOP_WITHIN:?} of the signal");
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).unwrap();
    }
    (status, stderr)
}
