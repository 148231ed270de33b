//! What a hostile or broken peer cannot do: leak the service's descriptors, make it allocate
//! for a claimed length, leave it more than 128 files unanswered, hang a client behind a
//! stopped service, or hang and sway a copy through a socket directory someone else made.

use super::*;

/// The descriptors process `pid` has open.
fn open_fds(pid: i32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

#[test]
fn messages_with_too_many_descriptors_leak_none() {
    let d = dir();
    let mut svc = Service::start(Backend::Host, d.path(), &[], &[]);
    let file = fs::File::open(program()).unwrap();
    // More than a message may carry (32): the kernel truncates, and the service must close
    // those it was given. 40 of the same file, as many times over.
    let fds = vec![file.as_raw_fd(); 40];
    let request = copy_request(r#"{"in_turn":{"len":5}}"#, "auto");
    let _ = welcomed(&svc); // the service's threads and buffers exist before the count
    let before = open_fds(svc.pid());
    for i in 0..3000 {
        let sock = welcomed(&svc);
        send_raw(&sock, &request, &fds);
        let answer = read_message(&sock);
        assert!(
            answer.contains("refused") && answer.contains("descriptors not taken"),
            "message {i}: {answer}"
        );
    }
    // Its reader threads close their connections as they end.
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_fds(svc.pid()) > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // None kept (the warm-up connection may still have been open at the first count).
    assert!(
        open_fds(svc.pid()) <= before,
        "{} > {before}",
        open_fds(svc.pid())
    );
    assert!(svc.alive());
    write_random(&d.path().join("a"), 70_000, 61);
    assert_copies(&svc, &d.path().join("a"), &d.path().join("b"));
    assert!(svc.stop().success());
}

#[test]
fn a_claimed_length_past_source_costs_the_service_nothing() {
    for backend in BACKENDS {
        let d = dir();
        let mut svc = Service::start(backend, d.path(), &[], &[]);
        write_random(&d.path().join("a"), 5000, 62);
        for handover in [
            r#"{"in_turn":{"len":4611686018427387904}}"#,
            r#"{"in_flight":{"len":4611686018427387904,"truncate":true}}"#,
        ] {
            let src = fs::File::open(d.path().join("a")).unwrap();
            let dst = fs::File::create(d.path().join("b")).unwrap();
            let sock = welcomed(&svc);
            let started = Instant::now();
            send_raw(
                &sock,
                &copy_request(handover, "never"),
                &[src.as_raw_fd(), dst.as_raw_fd()],
            );
            // Progress may come first.
            let answer = std::iter::repeat_with(|| read_message(&sock))
                .take(100)
                .find(|m| !m.contains(r#""type":"progress""#))
                .unwrap_or_default();
            assert!(
                answer.contains(r#""type":"copied""#) && answer.contains(r#""end":5000"#),
                "{backend:?} {handover}: {answer}\n{}",
                svc.log()
            );
            assert!(started.elapsed() < Duration::from_secs(5));
            assert_eq!(
                fs::read(d.path().join("b")).unwrap(),
                fs::read(d.path().join("a")).unwrap()
            );
        }
        assert!(svc.alive(), "{}", svc.log());
        assert!(svc.stop().success());
    }
}

#[test]
fn a_stopped_service_fails_its_files_naming_it() {
    let d = dir();
    let (svc, flag) = paused_between_slices(Backend::Host, d.path(), &[]);
    let (src, dst) = (d.path().join("a"), d.path().join("b"));
    write_random(&src, 4 << 20, 63);
    let client = svc
        .client()
        .arg(&src)
        .arg(&dst)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_flag(&flag);
    // Frozen mid-file: it neither answers nor closes.
    signal(svc.pid(), nix::sys::signal::Signal::SIGSTOP);
    let waited = Instant::now();
    let mut client = client;
    let st = test_support::child::wait_within(&mut client, Duration::from_secs(30));
    signal(svc.pid(), nix::sys::signal::Signal::SIGCONT);
    let st = st.expect("the client waited on a stopped service for 30 s");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    // It asks after 1 s of silence and gives up 5 s later.
    assert!(
        waited.elapsed() < Duration::from_secs(15),
        "{:?}",
        waited.elapsed()
    );
    assert_eq!(st.code(), Some(1), "{stderr}");
    let why = format!(
        "the staging service (pid {}) did not answer within 5 s",
        svc.pid()
    );
    assert!(
        stderr.contains(&format!("error writing '{}': {why}", dst.display())),
        "{stderr}"
    );
    fs::remove_file(&flag).unwrap();
    assert!(svc.stop().success());
}

/// A run with its per-user socket under `xdg` (XDG_RUNTIME_DIR) and no AISCP_SERVICE.
fn default_client(xdg: &Path) -> Command {
    let mut cmd = aiscp_command();
    cmd.env("AISCP_BACKEND", "host")
        .env("XDG_RUNTIME_DIR", xdg)
        .env_remove("AISCP_SERVICE")
        .stdin(Stdio::null());
    cmd
}

#[test]
fn a_socket_directory_someone_else_made_changes_nothing() {
    let d = dir();
    let src = d.path().join("a");
    write_random(&src, 300_000, 64);
    // What another local user can leave where a user's socket would be: a plain file; a
    // directory of theirs open to all, holding a socket whose backlog is full.
    let plain = d.path().join("plain");
    fs::create_dir(&plain).unwrap();
    fs::write(plain.join("aiscp"), b"squat").unwrap();
    let squatted = d.path().join("squatted");
    let theirs = squatted.join("aiscp");
    fs::create_dir_all(&theirs).unwrap();
    let listener = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    let addr = UnixAddr::new(&theirs.join("service.sock")).unwrap();
    socket::bind(listener.as_raw_fd(), &addr).unwrap();
    socket::listen(&listener, socket::Backlog::new(0).unwrap()).unwrap();
    // Its backlog filled: a blocking connect there waits for ever.
    let pending = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .unwrap();
    let _ = socket::connect(pending.as_raw_fd(), &addr);
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o777)).unwrap();
    nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    for (xdg, mode, doctor_says) in [
        (&plain, "plain file", "none there"),
        (
            &squatted,
            "another user's directory",
            "not a place of this user's",
        ),
    ] {
        for auto in [false, true] {
            let started = Instant::now();
            let mut cmd = default_client(xdg);
            if auto {
                cmd.env("AISCP_SERVICE", "auto");
            }
            let mut child = cmd
                .arg(&src)
                .arg(d.path().join("b"))
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let st = test_support::child::wait_within(&mut child, Duration::from_secs(20))
                .unwrap_or_else(|| panic!("{mode}: the copy hung"));
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            assert!(st.success() && stderr.is_empty(), "{mode}: {stderr}");
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "{mode}, auto {auto}: {:?}",
                started.elapsed()
            );
            assert_eq!(
                fs::read(&src).unwrap(),
                fs::read(d.path().join("b")).unwrap()
            );
        }
        let doctor = default_client(xdg).arg("--doctor").output().unwrap();
        let text = String::from_utf8_lossy(&doctor.stdout);
        assert!(text.contains(doctor_says), "{mode}: {text}");
    }
    drop(listener);
}

#[test]
fn serving_at_a_path_without_a_file_name_is_refused() {
    let d = dir();
    let out = refused_to_serve(
        aiscp_command()
            .args(["--serve", "--backend", "host", "--socket"])
            .arg(format!("{}/", d.path().display())),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("names no socket file"), "{stderr}");
    assert_eq!(fs::read_dir(d.path()).unwrap().count(), 0);
}

/// Each malformed copy request is refused in words, at once, naming what is wrong (not
/// dropped unanswered), and the service serves a real client meanwhile.
#[test]
fn malformed_copy_requests_are_refused_in_words() {
    let d = dir();
    let mut svc = Service::start(Backend::Host, d.path(), &[], &[]);
    write_random(&d.path().join("a"), 1000, 65);
    let src = fs::File::open(d.path().join("a")).unwrap();
    let sink = fs::File::create(d.path().join("sink")).unwrap();
    let appending = fs::OpenOptions::new()
        .append(true)
        .open(d.path().join("sink"))
        .unwrap();
    let pipe = nix::unistd::pipe().unwrap();
    let dirfd = fs::File::open(d.path()).unwrap();
    let one = copy_request(r#"{"in_turn":{"len":1000}}"#, "auto");
    let two = br#"{"type":"copy","files":[{"id":1,"src_name":"a","dst_name":"b","sparse":"auto","handover":{"in_turn":{"len":5}}},{"id":2,"src_name":"a","dst_name":"b","sparse":"auto","handover":{"in_turn":{"len":5}}}]}"#;
    let cases: [(&[u8], Vec<i32>, &str); 6] = [
        (
            &one,
            vec![pipe.0.as_raw_fd(), sink.as_raw_fd()],
            "not a regular file",
        ),
        (
            &one,
            vec![src.as_raw_fd(), dirfd.as_raw_fd()],
            "not a regular file",
        ),
        (
            &one,
            vec![src.as_raw_fd(), src.as_raw_fd()],
            "open the wrong way",
        ),
        (
            &one,
            vec![src.as_raw_fd(), appending.as_raw_fd()],
            "open the wrong way",
        ),
        (&one, vec![src.as_raw_fd()], "1 descriptor(s)"),
        (
            two,
            vec![src.as_raw_fd(), sink.as_raw_fd()],
            "2 file(s) with 2 descriptor(s)",
        ),
    ];
    for (msg, fds, why) in cases {
        let sock = welcomed(&svc);
        let sent = Instant::now();
        send_raw(&sock, msg, &fds);
        let answer = read_message(&sock);
        assert!(
            answer.contains("refused") && answer.contains(why),
            "{why}: {answer}"
        );
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "{why}: {:?}",
            sent.elapsed()
        );
        assert_copies(&svc, &d.path().join("a"), &d.path().join("b"));
    }
    assert!(svc.alive());
    assert!(svc.stop().success());
}

/// A client may leave at most 128 files unanswered: 128 are taken (eight requests of 16,
/// the most one carries), a 129th is refused in words, at once, and another client is
/// served meanwhile. The files stay unanswered because every write of the fake library
/// stalls for a second (the library route, each file copied in turn).
#[test]
fn more_than_128_unanswered_files_are_refused_in_words() {
    let d = dir();
    let slow = ("AISCP_FAKE_GPU_FAULTS", "write=stall:1000");
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--route", "library"], &[slow]);
    write_random(&d.path().join("a"), 1 << 20, 66);
    let src = fs::File::open(d.path().join("a")).unwrap();
    let sink = fs::File::create(d.path().join("sink")).unwrap();
    let batch = |first: usize, n: usize| {
        let files: Vec<String> = (first..first + n)
            .map(|id| {
                format!(
                    r#"{{"id":{id},"src_name":"a","dst_name":"sink","sparse":"auto","handover":{{"in_turn":{{"len":1048576}}}}}}"#
                )
            })
            .collect();
        let msg = format!(r#"{{"type":"copy","files":[{}]}}"#, files.join(","));
        let fds = [src.as_raw_fd(), sink.as_raw_fd()].repeat(n);
        (msg.into_bytes(), fds)
    };
    // Messages up to the next that is not progress (none: empty).
    let next = |sock: &OwnedFd| {
        std::iter::repeat_with(|| read_message(sock))
            .take(1000)
            .find(|m| !m.contains(r#""type":"progress""#))
            .unwrap_or_default()
    };
    let sock = welcomed(&svc);
    for b in 0..8 {
        let (msg, fds) = batch(b * 16, 16);
        send_raw(&sock, &msg, &fds);
    }
    // All 128 taken: a status request after them is answered, nothing refused before it.
    send_raw(&sock, br#"{"type":"status"}"#, &[]);
    let status = next(&sock);
    assert!(status.contains(r#""type":"status""#), "{status}");
    let (msg, fds) = batch(128, 1);
    send_raw(&sock, &msg, &fds);
    let answer = next(&sock);
    assert!(
        answer.contains(r#""type":"refused""#) && answer.contains("more than 128 files unanswered"),
        "{answer}\n{}",
        svc.log()
    );
    write_random(&d.path().join("b"), 100_000, 67);
    assert_copies(&svc, &d.path().join("b"), &d.path().join("c"));
    assert!(svc.stop().success());
}
