//! How a signal ends aiscp as seen from outside: by the signal itself, as it ends cp, so a
//! calling shell stops; within a second whatever aiscp is blocked in; and the signals that
//! kill at once still take the --atomic temporary with them.

use super::*;
use std::os::unix::process::{CommandExt, ExitStatusExt};

/// A bash loop of three copies, one SIGINT to its process group (a Ctrl-C): bash stops the
/// loop when the child dies of SIGINT, as with cp, and runs on when it exits 130. Each copy
/// waits on a FIFO source no writer ever opens, so only the signal can end it.
#[test]
fn one_sigint_stops_a_shell_loop_as_with_cp() {
    for prog in [program(), PathBuf::from("cp")] {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("src"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let script = r#"for i in 1 2 3; do "$0" src "dst$i"; echo "after $i" >>log; done"#;
        let mut cmd = Command::new("bash");
        hermetic(&mut cmd)
            .current_dir(dir.path())
            .args(["-c", script])
            .arg(&prog)
            .env("AISCP_BACKEND", "host")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        ignore_in_child(&mut cmd, &[]);
        let mut bash = cmd.spawn().unwrap();
        thread::sleep(Duration::from_millis(500));
        assert_running(
            &mut bash,
            &format!("{prog:?}: the loop, waiting on its FIFO"),
        );
        kill(Pid::from_raw(-(bash.id() as i32)), Signal::SIGINT).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            if let Some(s) = bash.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = kill(Pid::from_raw(-(bash.id() as i32)), Signal::SIGKILL);
                let _ = bash.wait();
                let log = fs::read_to_string(dir.path().join("log")).unwrap_or_default();
                panic!("{prog:?}: the loop ran on after SIGINT: {log:?}");
            }
            thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(libc::SIGINT), "{prog:?}: {status:?}");
        assert!(
            !dir.path().join("log").exists(),
            "{prog:?}: the loop went on"
        );
    }
}

/// `-rv` into a pipe whose reader has stopped reading: aiscp is blocked writing a -v line
/// (a restarted write would wait for ever); one SIGTERM ends it within a second, by
/// SIGTERM, as it ends cp.
#[test]
fn a_stalled_output_pipe_does_not_hold_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    // 3,000 lines of over 200 bytes: several times a pipe's 64 KiB.
    let long = "n".repeat(100);
    for i in 0..3000 {
        fs::write(src.join(format!("{long}{i}")), b"x").unwrap();
    }
    for (prog, dst) in [(program(), "a"), (PathBuf::from("cp"), "c")] {
        let mut child = hermetic(&mut Command::new(&prog))
            .current_dir(dir.path())
            .env("AISCP_BACKEND", "host")
            .args(["-rv", "src", dst])
            .stdin(Stdio::null())
            .stdout(Stdio::piped()) // never read
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(1500));
        assert_running(&mut child, &format!("{prog:?}, blocked on its output"));
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let (status, _) = exit_within(&mut child);
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{prog:?}: {status:?}");
    }
}

/// A FIFO named as the GPU library on LD_LIBRARY_PATH: the loader's open() waits for a
/// writer for ever. One SIGINT ends aiscp within a second, by SIGINT, without a message.
/// The HIP runtime, loaded before it, is the fake's: with none on the machine aiscp would
/// stop there and never reach the FIFO.
#[test]
fn a_fifo_library_does_not_hold_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    fs::create_dir(&lib).unwrap();
    nix::unistd::mkfifo(&lib.join("libhipfile.so.0"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    fs::write(dir.path().join("a"), b"hi\n").unwrap();
    let mut cmd = aiscp_command();
    cmd.current_dir(dir.path())
        .env("LD_LIBRARY_PATH", &lib)
        .env_remove("AISCP_BACKEND")
        .env_remove("AISCP_HIPFILE_LIB")
        .env("AISCP_HIP_LIB", fake_gpu_lib())
        .args(["--backend", "hipfile", "a", "b"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    ignore_in_child(&mut cmd, &[]);
    let mut child = cmd.spawn().unwrap();
    thread::sleep(Duration::from_millis(500));
    assert_running(&mut child, "aiscp, opening the FIFO library");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let (status, stderr) = exit_within(&mut child);
    assert_interrupted(status, &stderr, Signal::SIGINT);
    assert!(!dir.path().join("b").exists());
}

/// Signals that kill at once (cp's fate for each) end aiscp at once too, but not before the
/// --atomic temporary is removed: DEST keeps its old bytes and nothing is left beside it.
#[test]
fn killing_signals_remove_the_atomic_temporary() {
    for sig in [
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGALRM,
        Signal::SIGVTALRM,
        Signal::SIGPROF,
    ] {
        for backend in BACKENDS {
            let mut copy = Copy::start(backend, &["--atomic"], None, Some(b"old\n"));
            copy.wait_for_progress(256 * 1024);
            copy.signal(sig);
            let (status, stderr) = copy.wait_within(STOP_WITHIN);
            assert_eq!(
                status.signal(),
                Some(sig as i32),
                "{sig}: {status:?}: {stderr}"
            );
            assert_eq!(fs::read(copy.path("dst")).unwrap(), b"old\n", "{sig}");
            assert!(
                copy.leftovers().is_empty(),
                "{sig} left behind: {:?}",
                copy.leftovers()
            );
        }
    }
}
