//! A service or a client that fails: the service killed mid-tree, a client killed mid-copy,
//! SIGINT, a stale socket, a service of another version or overloaded. The copy ends as it
//! would in-process.

use super::*;

#[test]
fn service_killed_mid_tree_client_finishes_as_in_process() {
    for backend in BACKENDS {
        let d = dir();
        let (mut svc, flag) = paused_between_slices(backend, d.path(), &[]);
        let src = d.path().join("src");
        tree(&src, 40, 1 << 20, 9);
        // DEST files with old bytes: those in flight are cut back and copied again.
        let dst = d.path().join("dst");
        let here = d.path().join("here");
        for t in [&dst, &here] {
            fs::create_dir_all(t.join("sub/deeper")).unwrap();
            write_random(&t.join("big"), 3 << 20, 77);
            write_random(&t.join("sub/f1"), 300_000, 78);
        }
        let client = svc
            .client()
            .args(["-r", "--stats", "--progress"])
            .arg(src.join("."))
            .arg(&dst)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_flag(&flag);
        signal(svc.pid(), nix::sys::signal::Signal::SIGKILL);
        let mut child = svc.child.take().unwrap();
        wait_for(&mut child, Duration::from_secs(10));
        assert!(!svc.alive_after_kill());
        let out = client.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {stderr}");
        let (progress, other): (Vec<&str>, Vec<&str>) =
            stderr.lines().partition(|l| l.contains(": progress: "));
        assert_eq!(other.len(), 1, "one warning: {stderr}");
        assert!(stderr.contains("warning: staging service at"), "{stderr}");
        assert!(stderr.contains("copying in-process"), "{stderr}");
        // The progress view's last line counts each file once, those redone here too.
        let last = progress.last().expect(&stderr);
        assert!(last.contains(" 41/41 files"), "{last}");
        // Each file counts once, the one cut by the service's death and redone here too.
        let stats = String::from_utf8_lossy(&out.stdout);
        let value = |label| crate::support::stats_value(&stats, label);
        assert_eq!(value("Files copied").as_deref(), Some("41"), "{stats}");
        assert_eq!(value("Files failed").as_deref(), Some("0"), "{stats}");
        // And its bytes once: those the service reported before it died are not added again.
        let bytes = tree_bytes(&src);
        let data = value("Data copied").unwrap_or_default();
        assert!(data.ends_with(&format!("({bytes} bytes)")), "{stats}");
        // The same copy in-process gives the same tree.
        let mut alone = aiscp_command();
        backend.apply(&mut alone, &d.path().join("alone-report"));
        let st = alone
            .env("AISCP_SERVICE", "off")
            .args(["-r"])
            .arg(src.join("."))
            .arg(&here)
            .status()
            .unwrap();
        assert!(st.success());
        assert_eq!(listing(&dst), listing(&here));
        assert_eq!(listing(&dst), listing(&src));
        let _ = fs::remove_file(&flag);
        backend.assert_report_clean(&d.path().join("client-report"));
    }
}

/// A file copied in turn whose service is killed after reporting some of its bytes is copied
/// again in-process from its start: --stats counts its bytes and the file once.
#[test]
fn a_file_redone_after_the_service_died_counts_once() {
    for backend in BACKENDS {
        let d = dir();
        // The paused service's one worker: the slice before the pause has been reported
        // when the service stops.
        let (mut svc, flag) = paused_between_slices(backend, d.path(), &[]);
        let len = (4 << 20) + 4097;
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        write_random(&a, len, 41);
        let client = svc
            .client()
            .arg("--stats=json")
            .arg(&a)
            .arg(&b)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_flag(&flag);
        signal(svc.pid(), nix::sys::signal::Signal::SIGKILL);
        let mut child = svc.child.take().unwrap();
        wait_for(&mut child, Duration::from_secs(10));
        let out = client.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {stderr}");
        assert!(stderr.contains("copying in-process"), "{stderr}");
        assert_eq!(fs::read(&a).unwrap(), fs::read(&b).unwrap(), "{backend:?}");
        let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(stats["bytes"], len as u64, "{backend:?}: {stats}");
        assert_eq!(stats["files"], 1, "{backend:?}: {stats}");
        // The service copied none of it: only this process is named.
        let staged = stats["staged"].as_array().expect("staged");
        assert_eq!(staged.len(), 1, "{stats}");
        assert_eq!(staged[0]["by"], "in-process", "{stats}");
        assert_eq!(staged[0]["files"], 1, "{stats}");
        backend.assert_report_clean(&d.path().join("client-report"));
    }
}

/// A file the service copied whose --verify read-back fails here (the service's first
/// device-to-host copy flips a byte) counts none of its bytes in --stats, in turn or in
/// flight: only the other file's (the client used to add every file's bytes first).
#[test]
fn a_file_failing_its_check_after_the_service_counts_no_bytes() {
    for in_flight in ["0", "64"] {
        let d = dir();
        let faults = [("AISCP_FAKE_GPU_FAULTS", "dtoh#1=corrupt")];
        let svc = Service::start(Backend::FakeGpu, d.path(), &["--route", "bounce"], &faults);
        let (a_len, c_len) = (300_000usize, 100_000usize);
        write_random(&d.path().join("a"), a_len, 51);
        write_random(&d.path().join("c"), c_len, 52);
        fs::create_dir(d.path().join("out")).unwrap();
        let out = svc
            .client()
            .current_dir(d.path())
            .env("AISCP_IN_FLIGHT", in_flight)
            .args(["--verify", "--debug", "--stats=json", "a", "c", "out"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{in_flight}: {stderr}");
        assert!(stderr.contains("through the staging service"), "{stderr}");
        let failed = ["a", "c"]
            .into_iter()
            .find(|f| stderr.contains(&format!("'out/{f}' differs from '{f}'")))
            .unwrap_or_else(|| panic!("no file failed its check: {stderr}"));
        let copied = if failed == "a" { c_len } else { a_len };
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (&v["bytes"], &v["files"], &v["files_failed"]),
            (&copied.into(), &1.into(), &1.into()),
            "{in_flight}: {v}"
        );
        svc.stop();
    }
}

#[test]
fn client_killed_mid_copy_service_serves_on() {
    for backend in BACKENDS {
        let d = dir();
        let (mut svc, flag) = paused_between_slices(backend, d.path(), &[]);
        write_random(&d.path().join("a"), 4 << 20, 1);
        let mut client = svc
            .client()
            .arg(d.path().join("a"))
            .arg(d.path().join("b"))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_flag(&flag);
        client.kill().unwrap();
        client.wait().unwrap();
        fs::remove_file(&flag).unwrap();
        // Its file stops and its connection is forgotten.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !svc.log().contains("left") {
            assert!(Instant::now() < deadline, "{}", svc.log());
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(svc.alive());
        // Stopped between slices, not finished for a client that is gone.
        let left = fs::metadata(d.path().join("b")).unwrap().len();
        assert!(left < 4 << 20, "{backend:?}: {left}");
        assert_copies(&svc, &d.path().join("a"), &d.path().join("c"));
        assert!(svc.stop().success());
    }
}

#[test]
fn sigint_stops_a_client_once_the_service_stops_its_file_and_it_serves_on() {
    let backend = Backend::FakeGpu;
    let d = dir();
    let (mut svc, flag) = paused_between_slices(backend, d.path(), &[]);
    write_random(&d.path().join("a"), 4 << 20, 2);
    let mut client = svc
        .client()
        .arg(d.path().join("a"))
        .arg(d.path().join("b"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_flag(&flag);
    signal(client.id() as i32, nix::sys::signal::Signal::SIGINT);
    // Held mid-file, the service cannot say the file stopped: the client waits for it.
    std::thread::sleep(Duration::from_millis(300));
    assert!(client.try_wait().unwrap().is_none());
    let released = Instant::now();
    fs::remove_file(&flag).unwrap();
    let st = wait_for(&mut client, Duration::from_secs(5));
    assert!(
        released.elapsed() < Duration::from_millis(1500),
        "{:?}",
        released.elapsed()
    );
    // Killed by the signal after its cleanup, as cp is (a shell shows 130).
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGINT)
    );
    assert!(svc.alive());
    assert_copies(&svc, &d.path().join("a"), &d.path().join("c"));
    assert!(svc.stop().success());
}

#[test]
fn a_stale_socket_is_replaced_and_meanwhile_clients_copy_in_process() {
    let d = dir();
    let run = d.path().join("run");
    fs::create_dir(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
    let socket = run.join("service.sock");
    // What a killed service leaves: a socket nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let src = d.path().join("a");
    write_random(&src, 70_000, 4);
    let refused = "cannot connect: Connection refused";
    assert_copies_in_process(&socket, &src, &d.path().join("b"), refused);
    // The default per-user socket is not looked for when missing: silence.
    let out = aiscp_command()
        .env("AISCP_BACKEND", "host")
        .env("XDG_RUNTIME_DIR", d.path().join("nothing-here"))
        .env_remove("AISCP_SERVICE")
        .arg(&src)
        .arg(d.path().join("b2"))
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    // The same stale socket at the per-user place (what a socket-activation check leaves,
    // with no lock beside it, or a killed service's free lock): silence there too.
    let xdg = d.path().join("xdg");
    fs::create_dir(&xdg).unwrap();
    fs::set_permissions(&xdg, fs::Permissions::from_mode(0o700)).unwrap();
    fs::create_dir(xdg.join("aiscp")).unwrap();
    fs::set_permissions(xdg.join("aiscp"), fs::Permissions::from_mode(0o700)).unwrap();
    drop(std::os::unix::net::UnixListener::bind(xdg.join("aiscp/service.sock")).unwrap());
    for lock in [false, true] {
        if lock {
            fs::write(xdg.join("aiscp/service.sock.lock"), b"").unwrap();
        }
        let out = aiscp_command()
            .env("AISCP_BACKEND", "host")
            .env("XDG_RUNTIME_DIR", &xdg)
            .env_remove("AISCP_SERVICE")
            .arg(&src)
            .arg(d.path().join("b3"))
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "lock {lock}: {out:?}"
        );
    }
    let svc = Service::start(Backend::Host, d.path(), &[], &[]);
    assert!(
        svc.log().contains("removed a stale socket"),
        "{}",
        svc.log()
    );
    let out = svc
        .client()
        .arg("--debug")
        .arg(&src)
        .arg(d.path().join("c"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("through the staging service (pid"),
        "{stderr}"
    );
    // --doctor reports it.
    let doctor = aiscp_command()
        .args(["--doctor", "--backend", "host"])
        .env("AISCP_SERVICE", &socket)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    let serving = format!("  serving: pid {}, up ", svc.pid());
    assert!(text.contains(&serving), "{text}");
    assert!(
        text.contains("host memory; 1 client(s) connected"),
        "{text}"
    );
    assert!(text.contains("1 file(s), 68.36 KiB copied"), "{text}");
    // A second service on the same socket refuses to start.
    let second = refused_to_serve(
        aiscp_command()
            .args(["--serve", "--backend", "host", "--socket"])
            .arg(&socket),
    );
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another staging service"));
    assert!(svc.stop().success());
}

#[test]
fn a_service_of_another_version_or_overloaded_is_not_used() {
    let d = dir();
    let run = d.path().join("run");
    fs::create_dir(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
    let socket = run.join("old.sock");
    // A stand-in for an older service: it welcomes every client as version 0.0.1.
    let listener = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    socket::bind(listener.as_raw_fd(), &UnixAddr::new(&socket).unwrap()).unwrap();
    socket::listen(&listener, socket::Backlog::new(8).unwrap()).unwrap();
    std::thread::spawn(move || loop {
        let Ok(fd) = socket::accept(listener.as_raw_fd()) else {
            return;
        };
        // SAFETY: accept returned a new descriptor owned by nothing else.
        let conn = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let _ = read_message(&conn);
        let old = br#"{"type":"welcome","protocol":1,"version":"0.0.1","pid":1,"backend":"host memory","library":null,"gpus":[],"queue_max":65536}"#;
        send_raw(&conn, old, &[]);
        std::thread::sleep(Duration::from_millis(200));
    });
    let src = d.path().join("a");
    write_random(&src, 90_000, 8);
    let copy = |sock: &Path, to: &str| {
        let out = host_client(sock)
            .arg(&src)
            .arg(d.path().join(to))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert_eq!(
            fs::read(&src).unwrap(),
            fs::read(d.path().join(to)).unwrap()
        );
        stderr
    };
    let stderr = copy(&socket, "b");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("another version (aiscp 0.0.1"), "{stderr}");
    // The real service refuses a client of another version the same way.
    let svc = Service::start(Backend::Host, d.path(), &[], &[]);
    let sock = dial(&svc.socket).unwrap();
    send_raw(
        &sock,
        br#"{"type":"hello","protocol":1,"version":"0.0.1"}"#,
        &[],
    );
    let answer = read_message(&sock);
    assert!(answer.contains("another version"), "{answer}");
    // Overloaded: every seat taken by clients that said hello, the next copy is refused.
    let hello = hello();
    let seats: Vec<OwnedFd> = (0..64)
        .map(|_| {
            let s = dial(&svc.socket).unwrap();
            send_raw(&s, &hello, &[]);
            assert!(read_message(&s).contains("welcome"));
            s
        })
        .collect();
    let stderr = copy(&svc.socket, "c");
    assert!(
        stderr.contains("refused: busy: 64 clients already"),
        "{stderr}"
    );
    drop(seats);
    // Seats come back when those clients go.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = svc
            .client()
            .arg("--debug")
            .arg(&src)
            .arg(d.path().join("e"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("through the staging service") {
            break;
        }
        assert!(Instant::now() < deadline, "{stderr}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(svc.stop().success());
}

/// SIGINT at a client whose service has stopped answering (here SIGSTOP; a service busy
/// copying another client's large file in turn looks the same): the client gives its files
/// up after a grace and dies by the signal as cp does. A DEST the service never wrote to
/// goes again (the run made it; as in-process), so what is left is what cp leaves: whole
/// files, and at most one partial (here: the file the walk had just made).
#[test]
fn sigint_while_the_service_is_stopped_ends_by_the_signal_leaving_what_cp_leaves() {
    use nix::sys::signal::Signal;
    let d = dir();
    let svc = Service::start(Backend::Host, d.path(), &[], &[]);
    let src = d.path().join("src");
    for i in 0..2000 {
        let sub = src.join(format!("d{}", i / 100));
        fs::create_dir_all(&sub).unwrap();
        write_random(&sub.join(format!("f{i}")), 8192, 300 + i as u64);
    }
    let dst = d.path().join("dst");
    let mut client = svc
        .client()
        .arg("-r")
        .arg(&src)
        .arg(&dst)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let files_at = |root: &Path| {
        fs::read_dir(root)
            .map(|dirs| {
                dirs.flatten()
                    .filter_map(|e| fs::read_dir(e.path()).ok())
                    .map(|f| f.count())
                    .sum::<usize>()
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while files_at(&dst) < 50 {
        assert!(Instant::now() < deadline, "the copy never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(svc.pid(), Signal::SIGSTOP);
    std::thread::sleep(Duration::from_millis(300));
    signal(client.id() as i32, Signal::SIGINT);
    let st = wait_for(&mut client, Duration::from_secs(10));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    let partial: Vec<PathBuf> = fs::read_dir(&dst)
        .unwrap()
        .flatten()
        .flat_map(|e| fs::read_dir(e.path()).unwrap().flatten())
        .map(|f| f.path())
        .filter(|p| {
            let from = src.join(p.strip_prefix(&dst).unwrap());
            fs::read(p).unwrap() != fs::read(from).unwrap()
        })
        .collect();
    signal(svc.pid(), Signal::SIGCONT);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGINT),
        "{st:?}: {stderr}"
    );
    assert!(
        partial.len() <= 1,
        "{} partial: {:?}",
        partial.len(),
        &partial[..2]
    );
    assert!(svc.stop().success());
}
