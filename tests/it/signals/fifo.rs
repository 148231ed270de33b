//! A FIFO DEST: a signal while no reader has come, the data once one comes, an empty writer,
//! and the FIFO set-up itself.

use super::*;

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
        assert_interrupted(status, &stderr, Signal::SIGINT);
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
        let mut cmd = aiscp_command();
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
        let mut cmd = aiscp_command();
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
    let out = aiscp_command()
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
