//! Copies that cannot end by themselves: a -i prompt waiting for an answer, a library call
//! that sleeps, a source that hangs or has no writer yet; one signal (or a second) ends them.

use super::*;

/// One signal ends a -i prompt that waits for an answer (it kills cp there); DEST is kept.
#[test]
fn a_signal_ends_the_interactive_prompt() {
    for prog in [program(), PathBuf::from("cp")] {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("src"), b"new\n").unwrap();
        fs::write(dir.path().join("dst"), b"old\n").unwrap();
        let mut cmd = Command::new(&prog);
        hermetic(&mut cmd)
            .current_dir(dir.path())
            .args(["-i", "src", "dst"])
            .stdin(Stdio::piped()) // no answer ever comes
            .stderr(Stdio::piped());
        Backend::Host.apply(&mut cmd, &dir.path().join("report"));
        let mut child = cmd.spawn().unwrap();
        thread::sleep(Duration::from_millis(300));
        assert_running(&mut child, &format!("{prog:?}, at its prompt"));
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let (status, stderr) = exit_within(&mut child);
        assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"old\n");
        // Both die of it, and say nothing after the prompt.
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGINT), "{prog:?}: {stderr}");
        assert!(stderr.ends_with("? "), "{prog:?}: {stderr}");
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
    let mut cmd = aiscp_command();
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
        assert_running(&mut child, "aiscp, before its first write");
        assert!(Instant::now() < deadline, "the first write never landed");
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(100)); // into the stalled second write
    let pid = Pid::from_raw(child.id() as i32);
    kill(pid, Signal::SIGINT).unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_running(
        &mut child,
        "a copy stuck in a library call, after the first signal (else the test proves nothing)",
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
    stops_on(Signal::SIGINT, &["--atomic"], |copy| {
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
        assert_interrupted(status, &stderr, Signal::SIGTERM);
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
    // Dead of it either way: stopped on the first one, or killed by the second.
    assert_eq!(status.signal(), Some(libc::SIGINT), "{status:?}: {stderr}");
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
        assert_interrupted(status, &stderr, Signal::SIGINT);
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
        assert_interrupted(status, &stderr, Signal::SIGINT);
        assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"old contents\n");
    }
}
