//! SIGINT and SIGTERM during a copy: the binary stops within a second, waits for its I/O,
//! gives back every GPU resource, prints "interrupted" once and exits 128 + the signal.
//!
//! The copy is made slow deterministically: SRC is a FIFO that the test feeds at about
//! 3 MB/s, so the copy is surely running when the signal comes and cannot end by itself.

use crate::support::{program, random_bytes, Backend, BACKENDS};
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
        let mut cmd = Command::new(program());
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
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("aiscp ended before the signal: {status:?}");
            }
            assert!(Instant::now() < deadline, "no progress from aiscp");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits at most `limit` for the exit; kills and fails the test past it.
    fn wait_within(&mut self, limit: Duration) -> (ExitStatus, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("aiscp did not stop within {limit:?} of the signal");
            }
            thread::sleep(Duration::from_millis(5));
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

/// Makes `cmd` start with `ignored` signals set to SIG_IGN.
fn ignore_in_child(cmd: &mut Command, ignored: &[Signal]) {
    use nix::sys::signal::{signal, SigHandler};
    use std::os::unix::process::CommandExt;
    let ignored = ignored.to_vec();
    // SAFETY: signal() is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            for &sig in &ignored {
                signal(sig, SigHandler::SigIgn)?;
            }
            Ok(())
        });
    }
}

fn assert_interrupted(status: ExitStatus, stderr: &str, code: i32) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        None,
        "killed by a signal instead of stopping: {stderr}"
    );
    assert_eq!(status.code(), Some(code), "stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [format!("{}: interrupted", program().display())],
        "exactly one message"
    );
}

fn stops_on(sig: Signal, code: i32, extra: &[&str], also: impl Fn(&Copy)) {
    for backend in BACKENDS {
        let mut copy = Copy::start(backend, extra, None, None);
        copy.wait_for_progress(256 * 1024);
        copy.signal(sig);
        let (status, stderr) = copy.wait_within(STOP_WITHIN);
        assert_interrupted(status, &stderr, code);
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
fn sigint_stops_the_copy_and_exits_130() {
    stops_on(Signal::SIGINT, 130, &[], |_| {});
}

#[test]
fn sigterm_stops_the_copy_and_exits_143() {
    stops_on(Signal::SIGTERM, 143, &[], |_| {});
}

/// The largest --chunk-size (0x7ffff000: one slice of almost 2 GiB) still stops within a
/// second of SIGINT, on the host route and the fake GPU's library and bounce routes: no
/// single read, write or library call is asked for more than 64 MiB, and the stop flag is
/// looked at between them. (A 3 GiB hole read with --sparse=never: zeros, without disk
/// reads, yet every byte goes through the slot.)
#[test]
fn the_largest_chunk_stops_within_a_second() {
    for (backend, route) in [
        (Backend::Host, "auto"),
        (Backend::FakeGpu, "library"),
        (Backend::FakeGpu, "bounce"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        fs::File::create(dir.path().join("src"))
            .unwrap()
            .set_len(3 << 30)
            .unwrap();
        let mut cmd = Command::new(program());
        cmd.current_dir(dir.path())
            .args(["-q", "--chunk-size", "0x7ffff000", "--streams", "1"])
            .args(["--sparse=never", "--route", route, "src", "dst"])
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        backend.apply(&mut cmd, &dir.path().join("report"));
        let mut child = cmd.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !dir.path().join("dst").exists() {
            assert!(child.try_wait().unwrap().is_none(), "aiscp ended early");
            assert!(Instant::now() < deadline, "DST never appeared");
            thread::sleep(Duration::from_millis(5));
        }
        thread::sleep(Duration::from_millis(300)); // well inside the first slice
        assert!(
            child.try_wait().unwrap().is_none(),
            "the copy ended before the signal"
        );
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let (status, stderr) = exit_within(&mut child);
        assert_interrupted(status, &stderr, 130);
        backend.assert_report_clean(&dir.path().join("report"));
    }
}

#[test]
fn sighup_stops_the_copy_and_exits_129() {
    stops_on(Signal::SIGHUP, 129, &[], |_| {});
}

#[test]
fn sighup_during_atomic_leaves_no_temporary_and_no_dst() {
    stops_on(Signal::SIGHUP, 129, &["--atomic"], |copy| {
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
    assert!(
        copy.child.try_wait().unwrap().is_none(),
        "an ignored signal stopped the copy"
    );
    let (status, stderr) = copy.wait_within(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        fs::read(copy.path("dst")).unwrap() == *copy.data,
        "DST differs"
    );
}

/// One signal ends a -i prompt that waits for an answer (it kills cp there); DEST is kept.
#[test]
fn a_signal_ends_the_interactive_prompt() {
    for prog in [program(), PathBuf::from("cp")] {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("src"), b"new\n").unwrap();
        fs::write(dir.path().join("dst"), b"old\n").unwrap();
        let mut cmd = Command::new(&prog);
        cmd.current_dir(dir.path())
            .args(["-i", "src", "dst"])
            .stdin(Stdio::piped()) // no answer ever comes
            .stderr(Stdio::piped());
        Backend::Host.apply(&mut cmd, &dir.path().join("report"));
        let mut child = cmd.spawn().unwrap();
        thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none(), "{prog:?} did not wait");
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let (status, stderr) = exit_within(&mut child);
        assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"old\n");
        if prog == program() {
            assert_eq!(status.code(), Some(130), "{stderr}");
            assert!(stderr.ends_with(": interrupted\n"), "{stderr}");
        } else {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(libc::SIGINT));
        }
    }
}

/// A copy stuck inside one library call (the fake GPU's write sleeps 20 s) cannot act on the
/// first signal; the second one kills it at once, and removes the --atomic temporary first.
#[test]
fn a_second_signal_kills_a_copy_stuck_in_a_library_call() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("src"), random_bytes(4 << 20, 11)).unwrap();
    fs::write(dir.path().join("dst"), b"old\n").unwrap();
    let mut cmd = Command::new(program());
    cmd.current_dir(dir.path())
        .args([
            "--atomic",
            "--chunk-size",
            "1M",
            "--streams",
            "1",
            "src",
            "dst",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .env("AISCP_FAKE_GPU_FAULTS", "write#2=stall:20000");
    Backend::FakeGpu.apply(&mut cmd, &dir.path().join("report"));
    let mut child = cmd.spawn().unwrap();
    let temporaries = || -> Vec<fs::DirEntry> {
        fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".dst."))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !temporaries()
        .iter()
        .any(|e| e.metadata().is_ok_and(|m| m.len() >= 1 << 20))
    {
        assert!(child.try_wait().unwrap().is_none(), "aiscp ended early");
        assert!(Instant::now() < deadline, "the first write never landed");
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(100)); // into the stalled second write
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGINT).unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first signal ended a copy stuck in a library call: the test proves nothing"
    );
    kill(pid, Signal::SIGINT).unwrap();
    let (status, stderr) = exit_within(&mut child);
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {stderr}");
    assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"old\n");
    let left: Vec<_> = temporaries().iter().map(|e| e.file_name()).collect();
    assert!(left.is_empty(), "temporary left behind: {left:?}");
}

#[test]
fn an_interrupted_atomic_copy_leaves_no_temporary_and_no_dst() {
    stops_on(Signal::SIGINT, 130, &["--atomic"], |copy| {
        assert!(
            !copy.path("dst").exists(),
            "a partial DST was renamed into place"
        );
    });
}

#[test]
fn an_interrupted_atomic_copy_keeps_the_old_dst() {
    for backend in BACKENDS {
        let mut copy = Copy::start(backend, &["--atomic"], None, Some(b"old contents\n"));
        copy.wait_for_progress(256 * 1024);
        copy.signal(Signal::SIGTERM);
        let (status, stderr) = copy.wait_within(STOP_WITHIN);
        assert_interrupted(status, &stderr, 143);
        assert_eq!(fs::read(copy.path("dst")).unwrap(), b"old contents\n");
        assert!(
            copy.leftovers().is_empty(),
            "left behind: {:?}",
            copy.leftovers()
        );
        copy.assert_no_leaks();
    }
}

#[test]
fn a_second_signal_ends_a_stuck_copy_at_once() {
    use std::os::unix::process::ExitStatusExt;
    // The source stalls: the first signal cannot be acted on until more data comes, and a
    // user who presses Ctrl-C again must not have to wait for it.
    let mut copy = Copy::start(Backend::Host, &[], Some(512 * 1024), None);
    copy.wait_for_progress(256 * 1024);
    copy.signal(Signal::SIGINT);
    thread::sleep(Duration::from_millis(200));
    copy.signal(Signal::SIGINT);
    let (status, stderr) = copy.wait_within(STOP_WITHIN);
    // Either it had stopped on the first one (130), or the second one killed it.
    assert!(
        status.code() == Some(130) || status.signal() == Some(libc::SIGINT),
        "{status:?}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn one_signal_stops_a_copy_whose_source_hangs() {
    // The source stops sending but stays open: the read waits for data that never comes.
    // The first signal must still end the copy cleanly (the read waits in short polls and
    // looks at the stop flag between them), on every backend.
    for backend in BACKENDS {
        let mut copy = Copy::start(backend, &[], Some(512 * 1024), None);
        copy.wait_for_progress(256 * 1024);
        thread::sleep(Duration::from_millis(300)); // let the feeder stall
        copy.signal(Signal::SIGINT);
        let (status, stderr) = copy.wait_within(STOP_WITHIN);
        assert_interrupted(status, &stderr, 130);
        copy.assert_dst_is_a_prefix();
        copy.assert_no_leaks();
    }
}

#[test]
fn one_signal_stops_a_copy_waiting_for_a_fifo_writer() {
    // No writer ever opens the FIFO: cp would sit in open(). One signal ends the wait,
    // before DST is touched, on every backend.
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("src");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::write(dir.path().join("dst"), b"old contents\n").unwrap();
        let mut child = start_waiting(backend, dir.path());
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let (status, stderr) = exit_within(&mut child);
        assert_interrupted(status, &stderr, 130);
        assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"old contents\n");
    }
}

/// Starts `aiscp src dst` in `dir` and checks that it is still waiting 300 ms later.
fn start_waiting(backend: Backend, dir: &std::path::Path) -> Child {
    let mut cmd = Command::new(program());
    cmd.current_dir(dir)
        .args(["src", "dst"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    backend.apply(&mut cmd, &dir.join("report"));
    let mut child = cmd.spawn().unwrap();
    thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "aiscp did not wait");
    child
}

/// Waits up to [`STOP_WITHIN`] for `child` to exit; kills it and fails past that.
fn exit_within(child: &mut Child) -> (ExitStatus, String) {
    use std::io::Read;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > STOP_WITHIN {
            let _ = child.kill();
            panic!("aiscp did not stop within {STOP_WITHIN:?} of the signal");
        }
        thread::sleep(Duration::from_millis(5));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut stderr).unwrap();
    }
    (status, stderr)
}

#[test]
fn one_signal_stops_a_copy_waiting_for_a_fifo_reader() {
    // DEST is a FIFO nobody reads: cp would sit in open(). One signal ends the wait.
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("src"), random_bytes(100_000, 5)).unwrap();
        let fifo = dir.path().join("dst");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let mut child = start_waiting(backend, dir.path());
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let (status, stderr) = exit_within(&mut child);
        assert_interrupted(status, &stderr, 130);
    }
}

#[test]
fn a_fifo_dest_gets_the_data_once_a_reader_comes() {
    use std::io::Read;
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let data = random_bytes(300_000, 6);
        fs::write(dir.path().join("src"), &data).unwrap();
        let fifo = dir.path().join("dst");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let mut cmd = Command::new(program());
        cmd.current_dir(dir.path()).args(["src", "dst"]);
        backend.apply(&mut cmd, &dir.path().join("report"));
        let child = cmd.spawn().unwrap();
        thread::sleep(Duration::from_millis(250));
        let mut got = Vec::new();
        fs::File::open(&fifo)
            .unwrap()
            .read_to_end(&mut got)
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(
            got == data,
            "the reader got {} of {} bytes",
            got.len(),
            data.len()
        );
    }
}

/// A writer that opens the FIFO and closes it without a byte: an empty copy, as with cp.
#[test]
fn a_fifo_whose_writer_sends_nothing_copies_as_empty() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("src");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::write(dir.path().join("dst"), b"old contents\n").unwrap();
        let mut cmd = Command::new(program());
        cmd.current_dir(dir.path()).args(["src", "dst"]);
        backend.apply(&mut cmd, &dir.path().join("report"));
        let child = cmd.spawn().unwrap();
        thread::sleep(Duration::from_millis(200));
        drop(fs::OpenOptions::new().write(true).open(&fifo).unwrap());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"");
    }
}

/// Guards the FIFO set-up: fed to the end without a signal, the copy completes.
#[test]
fn the_fifo_copy_completes_without_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("src");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let data = Arc::new(random_bytes(300_000, 7));
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = feeder(fifo, Arc::clone(&data), stop, None);
    let out = Command::new(program())
        .current_dir(dir.path())
        .args(["--backend", "host", "src", "dst"])
        .output()
        .unwrap();
    feeder.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(dir.path().join("dst")).unwrap(), *data);
}

/// A tree copied with many files in flight and stopped: the `-v` lines name only files whose
/// copy began (cp, dying at the signal, names at most the one it was copying), DESTs it never
/// reached keep their old bytes, and new DESTs it never reached are not left behind empty.
#[test]
fn a_stopped_tree_names_and_leaves_only_what_it_began() {
    use std::io::{BufRead, BufReader};
    const FILES: usize = 1500;
    let dir = tempfile::tempdir().unwrap();
    let (src, old, new) = (
        dir.path().join("src"),
        dir.path().join("old"),
        dir.path().join("new"),
    );
    for d in [&src, &old] {
        fs::create_dir(d).unwrap();
    }
    for i in 0..FILES {
        fs::write(
            src.join(format!("f{i}")),
            random_bytes(256 * 1024, i as u64),
        )
        .unwrap();
        fs::write(old.join(format!("f{i}")), b"old\n").unwrap();
    }
    for (dst, existing) in [(&old, true), (&new, false)] {
        let mut child = Command::new(program())
            .env("AISCP_BACKEND", "host")
            .arg("-v")
            .arg("-r")
            .arg(src.join("."))
            .arg(dst)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // 200 -v lines: the walk is well ahead, many files are in flight, and most of the
        // tree is still to come.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        for _ in 0..200 {
            out.read_line(&mut first).unwrap();
        }
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(143), "not stopped by the signal");
        let named: Vec<String> = first
            .lines()
            .chain(rest.lines())
            .map(|l| {
                l.rsplit('/')
                    .next()
                    .unwrap()
                    .trim_end_matches('\'')
                    .to_owned()
            })
            .collect();
        assert!(named.len() < FILES, "every file named: not interrupted");
        // Named but never begun: at most the one whose line came out before its turn.
        let untouched_but_named = named
            .iter()
            .filter(|n| fs::read(dst.join(n)).is_ok_and(|b| b == b"old\n"))
            .count();
        assert!(
            untouched_but_named <= 1,
            "{untouched_but_named} files named by -v were never copied"
        );
        if existing {
            // Everything not named still has its old bytes.
            for i in 0..FILES {
                let name = format!("f{i}");
                if !named.contains(&name) {
                    assert_eq!(
                        fs::read(old.join(&name)).unwrap(),
                        b"old\n",
                        "{name} touched"
                    );
                }
            }
        } else {
            // New DESTs left empty: only files whose copy began (at most the workers').
            let empty = fs::read_dir(&new)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().metadata().unwrap().len() == 0)
                .count();
            assert!(empty <= 8, "{empty} empty files left behind");
        }
    }
}
