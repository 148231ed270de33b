//! Many clients sharing one service: byte-exact copies, fair turns, --gpu all, what --stats
//! and --verify see, idle exit, AISCP_SERVICE=auto, messages in the client's locale.

use super::*;

#[test]
fn eight_concurrent_clients_byte_exact() {
    for backend in BACKENDS {
        let d = dir();
        // 1 MiB slices: the 3 MiB file is copied in turn, the rest fly.
        let svc = Service::start(backend, d.path(), &["--chunk-size", "1M"], &[]);
        let mut runs = Vec::new();
        for c in 0..8u64 {
            let src = d.path().join(format!("src{c}"));
            tree(&src, 30, 3 << 20, c + 1);
            let out = svc
                .client()
                .arg("-r")
                .arg("--stats")
                .arg(&src)
                .arg(d.path().join(format!("dst{c}")))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            runs.push((src, out));
        }
        for (c, (src, run)) in runs.into_iter().enumerate() {
            let out = run.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success() && stderr.is_empty(),
                "{backend:?} {c}: {stderr}"
            );
            let stats = String::from_utf8_lossy(&out.stdout);
            let through = format!("the staging service (pid {}, ", svc.pid());
            let staged = crate::support::stats_value(&stats, "Staged through");
            assert!(staged.is_some_and(|s| s.starts_with(&through)), "{stats}");
            assert_eq!(listing(&src), listing(&d.path().join(format!("dst{c}"))));
        }
        let log = svc.log();
        assert_eq!(log.matches("connected").count(), 8, "{log}");
        assert!(svc.stop().success());
    }
}

/// --sums through the service: each file's digest comes back with its answer, for files in
/// flight and for a file copied in turn in parts, and is the digest of DEST as written.
#[test]
fn digests_come_back_with_each_answer() {
    use base64::Engine as _;
    for backend in BACKENDS {
        let d = dir();
        let svc = Service::start(backend, d.path(), &["--chunk-size", "1M"], &[]);
        let src = d.path().join("src");
        tree(&src, 30, (3 << 20) + 777, 5);
        let dst = d.path().join("dst");
        let out = svc
            .client()
            .current_dir(d.path())
            .args(["-r", "--sums=crc64nvme", "--stats", "src", "dst"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stderr.is_empty(),
            "{backend:?}: {stderr}"
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let through = format!("the staging service (pid {}, ", svc.pid());
        let staged = crate::support::stats_value(&text, "Staged through");
        assert!(staged.is_some_and(|s| s.starts_with(&through)), "{text}");
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("  dst/")).collect();
        assert_eq!(lines.len(), 31, "{backend:?}: {text}");
        let crc = crc::Crc::<u64>::new(&crc::CRC_64_NVME);
        for line in lines {
            let (digest, name) = line.split_once("  ").unwrap();
            let bytes = fs::read(d.path().join(name)).unwrap();
            let want = base64::engine::general_purpose::STANDARD
                .encode(crc.checksum(&bytes).to_be_bytes());
            assert_eq!(digest, want, "{backend:?}: {name}");
        }
        assert_eq!(listing(&src), listing(&dst));
        assert!(svc.stop().success());
    }
}

/// Trees that another process rewrites, shrinks and grows during the copy, copied through
/// the service on host memory and on the fake GPU (its default route): no DEST gains a
/// byte SOURCE never held, and every copy went through the service.
#[test]
fn a_tree_changed_during_a_copy_through_the_service_never_gains_nul_bytes() {
    for backend in BACKENDS {
        let d = dir();
        let svc = Service::start(backend, d.path(), &[], &[]);
        crate::source_changes::race_through_a_service(&svc.socket, 3);
        let log = svc.log();
        assert_eq!(log.matches(" connected").count(), 4, "{backend:?}: {log}");
        assert!(svc.stop().success(), "{backend:?}");
    }
}

/// A client's large file does not wait behind another client's files: while one client's
/// file in flight is held (paused before its first slice), another client's file too large
/// to fly is copied on a free slot and its run ends.
#[test]
fn a_large_file_does_not_wait_behind_another_clients_files() {
    for backend in BACKENDS {
        let d = dir();
        let flag = d.path().join("paused");
        let pause = format!("slice:{}", flag.display());
        // Files fly on the bounce route only (the library route copies them one at a time).
        let args: &[&str] = match backend {
            Backend::Host => &["--chunk-size", "64K", "--streams", "2"],
            _ => &["--chunk-size", "64K", "--streams", "2", "--route", "bounce"],
        };
        let svc = Service::start(backend, d.path(), args, &[("AISCP_TEST_PAUSE", &pause)]);
        // Small files only: all of them fly.
        let held = d.path().join("held");
        fs::create_dir(&held).unwrap();
        for i in 0..6 {
            write_random(&held.join(format!("f{i}")), 10_000 + i, 31 + i as u64);
        }
        let holder = svc
            .client()
            .arg("-r")
            .arg(&held)
            .arg(d.path().join("held-copy"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_flag(&flag);
        let big = d.path().join("big");
        write_random(&big, (3 << 20) + 5, 32);
        let mut large = svc
            .client()
            .arg("--debug")
            .arg(&big)
            .arg(d.path().join("big-copy"))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let ended = loop {
            if let Some(st) = large.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "{backend:?}: still waiting:\n{}",
                svc.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(large.stderr.as_mut().unwrap(), &mut err).unwrap();
        assert!(ended.success(), "{backend:?}: {err}");
        assert!(err.contains("through the staging service"), "{err}");
        assert_eq!(
            fs::read(&big).unwrap(),
            fs::read(d.path().join("big-copy")).unwrap()
        );
        // The holder is still held; let it go and it finishes too.
        fs::remove_file(&flag).unwrap();
        let out = holder.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(listing(&held), listing(&d.path().join("held-copy")));
        assert!(svc.stop().success());
    }
}

/// `--serve --gpu all` on the fake library with two devices: the clients' files (in flight
/// and in turn) spread over both GPUs, as one copy's do.
#[test]
fn a_gpu_all_service_spreads_files_over_every_gpu() {
    let d = dir();
    let svc = Service::start(
        Backend::FakeGpu,
        d.path(),
        &["--gpu", "all", "--chunk-size", "64K", "--streams", "2"],
        &[("AISCP_FAKE_GPU_DEVICES", "2")],
    );
    let src = d.path().join("src");
    tree(&src, 30, 1 << 20, 21);
    let clients: Vec<_> = (0..2)
        .map(|c| {
            svc.client()
                .args(["-r", "--stats"])
                .env("AISCP_FAKE_GPU_DEVICES", "2")
                .arg(&src)
                .arg(d.path().join(format!("dst{c}")))
                .output()
                .unwrap()
        })
        .collect();
    for (c, out) in clients.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("Staged through: the staging service (pid ")
                && stdout.contains(") on GPUs 0,1\n"),
            "{stdout}"
        );
        assert_eq!(listing(&src), listing(&d.path().join(format!("dst{c}"))));
    }
    let report = svc.report.clone();
    assert!(svc.stop().success());
    // Two slots on each device, both devices used.
    let devices = Report::read(&report).devices;
    assert_eq!(devices.mallocs, [2, 2], "{devices:?}");
    assert!(devices.bytes.iter().all(|&b| b > 0), "{devices:?}");
}

/// --stats names what staged the data: only the service for a run it copied whole; both
/// sides, each with the files it copied, for a run that lost the service mid-tree and
/// finished in-process (text and JSON).
#[test]
fn stats_name_each_side_that_copied_files() {
    for backend in BACKENDS {
        let d = dir();
        let mut svc = Service::start(backend, d.path(), &[], &[]);
        let src = d.path().join("src");
        for side in ["a", "z"] {
            fs::create_dir_all(src.join(side)).unwrap();
            for i in 0..10 {
                let len = 1 + i * 6000;
                write_random(&src.join(side).join(format!("{i}")), len, len as u64);
            }
        }
        write_random(&src.join("big"), 1 << 20, 70);
        let dst = d.path().join("dst");
        fs::create_dir(&dst).unwrap();
        write_random(&dst.join("big"), 100, 71);
        let pid = svc.pid();
        // -i asks before overwriting dst/big, once every file before it is done (through
        // the service); the service is killed while the question waits, so big and z/ are
        // copied in-process.
        let mut client = svc
            .client()
            .args(["-r", "-i", "--stats"])
            .args(["a", "big", "z"].map(|n| src.join(n)))
            .arg(&dst)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = client.stderr.take().unwrap();
        let mut said = Vec::new();
        while !String::from_utf8_lossy(&said).contains("overwrite ") {
            let mut buf = [0; 256];
            let n = std::io::Read::read(&mut stderr, &mut buf).unwrap();
            assert!(n > 0, "{backend:?}: {}", String::from_utf8_lossy(&said));
            said.extend_from_slice(&buf[..n]);
        }
        signal(pid, nix::sys::signal::Signal::SIGKILL);
        let mut child = svc.child.take().unwrap();
        wait_for(&mut child, Duration::from_secs(10));
        let mut answer = client.stdin.take().unwrap();
        std::io::Write::write_all(&mut answer, b"y\n").unwrap();
        drop(answer);
        let out = client.wait_with_output().unwrap();
        std::io::Read::read_to_end(&mut stderr, &mut said).unwrap();
        let said = String::from_utf8_lossy(&said);
        assert!(out.status.success(), "{backend:?}: {said}");
        assert!(said.contains("copying in-process"), "{said}");
        assert_eq!(listing(&src), listing(&dst));
        let text = String::from_utf8_lossy(&out.stdout);
        let staged = crate::support::stats_value(&text, "Staged through").expect(&text);
        let through = format!("the staging service (pid {pid}, ");
        let (service, in_process) = staged.split_once("; ").expect(&text);
        assert!(service.starts_with(&through), "{text}");
        assert!(service.ends_with(" for 10 files"), "{text}");
        assert!(
            in_process.ends_with(" for 11 files copied in-process"),
            "{text}"
        );
        assert!(!in_process.contains("staging service"), "{text}");
        // Wholly through a service: only the service is named.
        let again = d.path().join("again");
        fs::create_dir(&again).unwrap();
        let svc = Service::start(backend, &again, &[], &[]);
        let pid = svc.pid();
        let small = d.path().join("small");
        fs::create_dir(&small).unwrap();
        fs::copy(src.join("a/1"), small.join("1")).unwrap();
        let out = svc
            .client()
            .args(["-r", "--stats=json"])
            .arg(&small)
            .arg(d.path().join("small-copy"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend:?}: {out:?}");
        let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let staged = stats["staged"].as_array().expect("staged");
        assert_eq!(staged.len(), 1, "{stats}");
        assert_eq!(staged[0]["by"], "service", "{stats}");
        assert_eq!(staged[0]["files"], 1, "{stats}");
        let library = stats["library"].as_str().unwrap_or_default();
        assert!(library.starts_with(&format!("the staging service (pid {pid}, ")));
        let text = svc
            .client()
            .args(["-r", "--stats"])
            .arg(&small)
            .arg(d.path().join("small-text"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        let staged = crate::support::stats_value(&text, "Staged through").expect(&text);
        assert!(staged.starts_with(&format!("the staging service (pid {pid}, ")));
        assert!(!staged.contains("in-process"), "{text}");
        assert!(svc.stop().success());
        backend.assert_report_clean(&d.path().join("client-report"));
    }
}

/// --verify through the service reads files in flight back on the engine's read-back
/// threads, as an in-process run does: while one file's read-back waits (a test pause, its
/// DEST changed meanwhile), the client goes on and the next file is copied and checked; the
/// change is still caught, and cp's order of lines is kept.
#[test]
fn verify_through_the_service_reads_back_beside_later_files() {
    let mut attempts = 0;
    let mut backends = BACKENDS.to_vec();
    while let Some(backend) = backends.first().copied() {
        let d = dir();
        // One worker: the service answers a before it copies b. Files fly (on the GPU, the
        // bounce route: the library route copies files in turn).
        let args: &[&str] = match backend {
            Backend::Host => &["--streams", "1"],
            Backend::FakeGpu => &["--streams", "1", "--route", "bounce"],
        };
        let svc = Service::start(backend, d.path(), args, &[]);
        write_random(&d.path().join("a"), 100_000, 5);
        write_random(&d.path().join("b"), 50_000, 6);
        fs::create_dir(d.path().join("dst")).unwrap();
        let flag = d.path().join("paused");
        let mut client = svc
            .client()
            .current_dir(d.path())
            .env("AISCP_TEST_PAUSE", format!("verify:{}", flag.display()))
            .args(["--verify", "-v", "a", "b", "dst"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !flag.exists() {
            if client.try_wait().unwrap().is_some() {
                panic!("{backend:?}: never paused: {:?}", client.wait_with_output());
            }
            assert!(Instant::now() < deadline, "{backend:?}: never paused");
            std::thread::sleep(Duration::from_millis(5));
        }
        // a's read-back waits; b is copied meanwhile.
        let b = fs::read(d.path().join("b")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while fs::read(d.path().join("dst/b")).ok().as_ref() != Some(&b) {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: b not copied meanwhile"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // The client reads files back on several threads: b's may have reached the pause
        // first, a then checked already (its -v line out). That run proves nothing: again.
        let mut out_pipe = client.stdout.take().unwrap();
        nix::fcntl::fcntl(
            out_pipe.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let mut early = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out_pipe, &mut early);
        if !early.is_empty() {
            fs::remove_file(&flag).unwrap();
            let _ = client.wait();
            attempts += 1;
            assert!(
                attempts < 10,
                "{backend:?}: b's read-back paused first 10 times"
            );
            continue;
        }
        client.stdout = Some(out_pipe);
        let dst_a = fs::OpenOptions::new()
            .write(true)
            .open(d.path().join("dst/a"))
            .unwrap();
        let old = fs::read(d.path().join("a")).unwrap()[7];
        std::os::unix::fs::FileExt::write_all_at(&dst_a, &[!old], 7).unwrap();
        fs::remove_file(&flag).unwrap();
        let out = client.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {stderr}");
        assert!(
            stderr.contains("verification failed: 'dst/a' differs from 'a' at offset 7"),
            "{backend:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{backend:?}: {stderr}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout, "'a' -> 'dst/a'\n'b' -> 'dst/b'\n", "{backend:?}");
        assert!(svc.stop().success());
        backends.remove(0);
    }
}

#[test]
fn idle_exit_releases_the_gpu() {
    let d = dir();
    let mut svc = Service::start(Backend::FakeGpu, d.path(), &["--idle-exit", "1"], &[]);
    let src = d.path().join("a");
    write_random(&src, 300_000, 6);
    assert_copies(&svc, &src, &d.path().join("b"));
    let mut child = svc.child.take().unwrap();
    let started = Instant::now();
    let st = wait_for(&mut child, Duration::from_secs(10));
    assert!(st.success(), "{}", svc.log());
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(svc.log().contains("releasing the GPU"), "{}", svc.log());
    let report = Report::read(&svc.report);
    report.assert_clean();
    assert!(report.devices.mallocs.iter().sum::<u64>() > 0, "{report}");
    assert!(!svc.socket.exists(), "socket removed at exit");
}

/// `--idle-exit` counts from the service's last work: it does not exit while a client that
/// sends nothing is connected, nor while a file is in flight whose client is gone (killed
/// mid-file), and it exits one idle time, within a bound, after that file ended.
#[test]
fn idle_exit_waits_for_a_connected_client_and_a_file_in_flight() {
    let d = dir();
    let (mut svc, flag) = paused_between_slices(Backend::Host, d.path(), &["--idle-exit", "1s"]);
    // A client that said hello and nothing more, for 2.5 idle times.
    let quiet = welcomed(&svc);
    std::thread::sleep(Duration::from_millis(2500));
    assert!(
        svc.alive(),
        "exited with a client connected:\n{}",
        svc.log()
    );
    // A file stopped between its slices; its client killed, the quiet one gone too.
    let src = d.path().join("a");
    write_random(&src, 4 << 20, 71);
    let mut client = svc
        .client()
        .arg(&src)
        .arg(d.path().join("b"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_flag(&flag);
    drop(quiet);
    client.kill().unwrap();
    client.wait().unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(svc.alive(), "exited with a file in flight:\n{}", svc.log());
    // Let go, the file ends at its next slice; the service exits an idle time later.
    let let_go = Instant::now();
    fs::remove_file(&flag).unwrap();
    let mut child = svc.child.take().unwrap();
    let st = wait_for(&mut child, Duration::from_secs(10));
    let took = let_go.elapsed();
    assert!(st.success(), "{}", svc.log());
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(3),
        "exited {took:?} after its last file was let go:\n{}",
        svc.log()
    );
    assert!(svc.log().contains("no client for 1.0 s"), "{}", svc.log());
}

#[test]
fn auto_starts_a_service_that_later_clients_share() {
    let d = dir();
    let runtime = d.path().join("xdg");
    fs::create_dir(&runtime).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    let src = d.path().join("a");
    write_random(&src, 50_000, 7);
    let run = |to: &str| {
        let out = aiscp_command()
            .env("AISCP_BACKEND", "host")
            .env("AISCP_SERVICE", "auto")
            .env("XDG_RUNTIME_DIR", &runtime)
            .arg("--debug")
            .arg(&src)
            .arg(d.path().join(to))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let pid = stderr
            .split("through the staging service (pid ")
            .nth(1)
            .and_then(|s| s.split(')').next())
            .unwrap_or_else(|| panic!("{stderr}"))
            .to_owned();
        (pid, stderr)
    };
    let (first, log) = run("b");
    let _started = AutoStarted(first.parse().unwrap());
    assert!(log.contains("starting one"), "{log}");
    let (second, log) = run("c");
    assert_eq!(first, second, "{log}");
    assert!(!log.contains("starting one"), "{log}");
    assert!(runtime.join("aiscp/service.sock").exists());
    signal(first.parse().unwrap(), nix::sys::signal::Signal::SIGTERM);
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(d.path().join("c")).unwrap()
    );
}

/// A failure message names files as the client's locale quotes them, whatever the service's
/// locale: a service under LC_ALL=C would write `'dst/caf'$'\303\251'`, a UTF-8 client run
/// in-process writes `'dst/café'`.
#[test]
fn a_failure_through_the_service_quotes_names_in_the_clients_locale() {
    let d = dir();
    let faults = ("AISCP_FAKE_GPU_FAULTS", "write=EIO");
    let env = [faults, ("LC_ALL", "C")];
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--route", "library"], &env);
    write_random(&d.path().join("caf\u{e9}"), 300_000, 12);
    let run = |service: bool| {
        let mut cmd = svc.client();
        if !service {
            cmd.env("AISCP_SERVICE", "off").env(faults.0, faults.1);
        }
        cmd.current_dir(d.path())
            .env("LC_ALL", "C.UTF-8")
            .args(["--route", "library", "caf\u{e9}", "d\u{e9}"])
            .output()
            .unwrap()
    };
    let (here, there) = (run(false), run(true));
    let text = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(here.status.code(), Some(1), "{}", text(&here));
    assert!(text(&here).contains("'d\u{e9}'"), "{}", text(&here));
    assert_eq!(text(&there), text(&here));
    assert_eq!(there.status.code(), Some(1));
    assert!(svc.stop().success());
}

/// `auto` whose service cannot start (its lock's name taken by a directory) copies
/// in-process at once, saying why the service could not start, instead of waiting for it.
#[test]
fn auto_with_a_service_that_cannot_start_says_why_at_once() {
    let d = dir();
    let runtime = d.path().join("xdg");
    fs::create_dir_all(runtime.join("aiscp/service.sock.lock")).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(runtime.join("aiscp"), fs::Permissions::from_mode(0o700)).unwrap();
    let src = d.path().join("a");
    write_random(&src, 50_000, 8);
    let started = Instant::now();
    let out = aiscp_command()
        .env("AISCP_BACKEND", "host")
        .env("AISCP_SERVICE", "auto")
        .env("XDG_RUNTIME_DIR", &runtime)
        .arg(&src)
        .arg(d.path().join("b"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        stderr.contains("the service it started exited") && stderr.contains("Is a directory"),
        "{stderr}"
    );
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(d.path().join("b")).unwrap()
    );
}

/// The service `auto` starts holds nothing of its client's: a pipe the client's shell
/// waits on ends with the client (not with the service's idle exit), and the service runs
/// in `/`, in a session of its own, with the short idle exit `auto` gives it (30 s).
#[test]
fn auto_starts_a_detached_service() {
    let d = dir();
    let runtime = d.path().join("xdg");
    fs::create_dir(&runtime).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    let src = d.path().join("a");
    write_random(&src, 50_000, 9);
    let started = Instant::now();
    // `3>&1 | cat`: cat ends when every holder of the pipe's write end has gone.
    let mut bash = Command::new("bash");
    let out = hermetic(&mut bash)
        .arg("-c")
        .arg(r#""$0" --debug "$1" "$2" 3>&1 2>"$3" | cat"#)
        .arg(program())
        .arg(&src)
        .arg(d.path().join("b"))
        .arg(d.path().join("err"))
        .env("AISCP_BACKEND", "host")
        .env("AISCP_SERVICE", "auto")
        .env("XDG_RUNTIME_DIR", &runtime)
        .current_dir(d.path())
        .output()
        .unwrap();
    let stderr = fs::read_to_string(d.path().join("err")).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let pid: i32 = stderr
        .split("through the staging service (pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    let _started = AutoStarted(pid);
    let cwd = fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, Path::new("/"));
    let sid = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))).unwrap();
    assert_eq!(sid.as_raw(), pid, "a session of its own");
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert_eq!(args.get(1).map(String::as_str), Some("--serve"), "{args:?}");
    assert!(args.iter().any(|a| a == "--idle-exit=30s"), "{args:?}");
    signal(pid, nix::sys::signal::Signal::SIGTERM);
}

/// A long file copied in turn does not hold another client's small file for its whole
/// length: files in turn take parts of 16 chunks in rotation. On the library route (every
/// file in turn) with every library write slowed to 40 ms, a 16 MiB file takes seconds; a
/// small file sent meanwhile by another client ends within about one part of it.
#[test]
fn a_long_file_in_turn_does_not_hold_another_clients_small_one() {
    let d = dir();
    let slow = ("AISCP_FAKE_GPU_FAULTS", "write=stall:40");
    let args = ["--route", "library", "--chunk-size", "64K"];
    let svc = Service::start(Backend::FakeGpu, d.path(), &args, &[slow]);
    write_random(&d.path().join("long"), 16 << 20, 31);
    write_random(&d.path().join("small"), 100_000, 32);
    let started = Instant::now();
    let mut long = svc
        .client()
        .arg(d.path().join("long"))
        .arg(d.path().join("long.copy"))
        .spawn()
        .unwrap();
    // Once the long file is moving.
    while fs::metadata(d.path().join("long.copy")).map_or(0, |m| m.len()) == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "{}", svc.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    let small_started = Instant::now();
    assert_copies(&svc, &d.path().join("small"), &d.path().join("small.copy"));
    let small_took = small_started.elapsed();
    let long_status = wait_for(&mut long, Duration::from_secs(60));
    let long_took = started.elapsed();
    assert!(long_status.success());
    assert_eq!(
        fs::read(d.path().join("long")).unwrap(),
        fs::read(d.path().join("long.copy")).unwrap()
    );
    // One part of the long file is 16 slices, four rounds of 40 ms writes on four workers.
    assert!(
        small_took < Duration::from_millis(1500) && small_took * 2 < long_took,
        "small {small_took:?}, long {long_took:?}"
    );
    assert!(svc.stop().success());
}

/// The service's VmRSS, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `--doctor`'s line about the service at `svc`.
fn doctor_line(svc: &Service) -> String {
    let out = svc.client().arg("--doctor").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find(|l| l.contains("serving: pid"))
        .unwrap_or_else(|| panic!("{text}"))
        .to_owned()
}

/// An idle service gives its staging memory back (`--idle-release`), says so in
/// `--doctor`, and allocates again for the next file; a hand-started service exits after
/// 30 idle minutes by default.
#[test]
fn an_idle_service_gives_its_staging_memory_back() {
    for backend in BACKENDS {
        let d = dir();
        let svc = Service::start(backend, d.path(), &["--idle-release", "3s"], &[]);
        let src = d.path().join("a");
        write_random(&src, 40 << 20, 7);
        assert_copies(&svc, &src, &d.path().join("b"));
        let busy = rss_kib(svc.pid());
        assert!(
            !doctor_line(&svc).contains(" 0 B held now"),
            "{}",
            doctor_line(&svc)
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !doctor_line(&svc).contains(" 0 B held now") {
            assert!(Instant::now() < deadline, "{}", svc.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            svc.log().contains("staging memory given back"),
            "{}",
            svc.log()
        );
        // Four 16 MiB slots on host memory; on the fake GPU its pinned windows.
        let idle = rss_kib(svc.pid());
        assert!(
            idle + (32 << 10) < busy,
            "{backend:?}: {busy} KiB, then {idle} KiB"
        );
        assert_copies(&svc, &src, &d.path().join("c"));
        assert!(svc.stop().success());
    }
    let help = aiscp_command().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("[default: 30m]"), "{help}");
}

/// The copy of SOURCE (holes, then data, then a hole at the end) that the long file of
/// [`a_file_alone_in_turn_is_one_part_that_gives_way`] is.
fn sparse_source(path: &Path, len: u64, seed: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; len as usize];
    let data = crate::support::random_bytes((len / 2) as usize, seed);
    let at = (len / 4) as usize;
    bytes[at..at + data.len()].copy_from_slice(&data);
    let f = fs::File::create(path).unwrap();
    use std::os::unix::fs::FileExt;
    f.write_all_at(&data, at as u64).unwrap();
    f.set_len(len).unwrap();
    bytes
}

/// A file copied in turn with no other work is one part to its end (a part's end drains
/// the pipeline), which gives way at its next slice to whatever comes: here three clients'
/// small files, the first copied while the long one runs. On each route and with each
/// --sparse, the long file has holes and lands over a longer DEST of other bytes, with
/// --sums: DEST ends as SOURCE, and the digest that comes back is DEST's, however its parts
/// were cut.
#[test]
fn a_file_alone_in_turn_is_one_part_that_gives_way() {
    for (route, sparse) in [
        ("--route=library", "--sparse=auto"),
        ("--route=bounce", "--sparse=never"),
        ("--async", "--sparse=always"),
    ] {
        let d = dir();
        // Slow writes on every route: the library's own, and the bounce route's downloads.
        let slow = ("AISCP_FAKE_GPU_FAULTS", "write=stall:10;dtoh=stall:10");
        let args = [route, "--chunk-size", "64K", "--debug"];
        let svc = Service::start(Backend::FakeGpu, d.path(), &args, &[slow]);
        let copies = |svc: &Service, name: &str| {
            svc.log()
                .lines()
                .filter(|l| l.contains(&format!("{name}': ")) && l.contains(" slice(s)"))
                .count()
        };
        // Alone: 40 chunks, over twice a part of 16, in one part.
        let alone = sparse_source(&d.path().join("alone"), (40 << 16) + 777, 33);
        assert_copies(&svc, &d.path().join("alone"), &d.path().join("alone.copy"));
        assert_eq!(fs::read(d.path().join("alone.copy")).unwrap(), alone);
        assert_eq!(copies(&svc, "alone.copy"), 1, "{route}: {}", svc.log());

        // Seconds of slices, so that a small file comes while it runs however loaded the
        // machine is (one comes in a few hundred milliseconds).
        const CHUNKS: u64 = 640;
        let long = sparse_source(&d.path().join("long"), (CHUNKS << 16) + 4097, 34);
        fs::write(d.path().join("long.copy"), vec![0xa5; 700 << 16]).unwrap();
        let started = Instant::now();
        let mut run = svc
            .client()
            .current_dir(d.path())
            .args(["--sums=blake3", sparse, "long", "long.copy"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Once the long file is moving: it was cut to 0, then written from its start.
        while fs::metadata(d.path().join("long.copy")).map_or(0, |m| m.len()) >= 700 << 16 {
            assert!(started.elapsed() < Duration::from_secs(20), "{}", svc.log());
            std::thread::sleep(Duration::from_millis(5));
        }
        for i in 0..3 {
            let small = d.path().join(format!("small{i}"));
            write_random(&small, 100_000, 40 + i);
            assert_copies(&svc, &small, &d.path().join(format!("small{i}.copy")));
            if i == 0 {
                let running = run.try_wait().unwrap().is_none();
                assert!(
                    running,
                    "{route}: the long file ended before a small one came"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = run.wait_with_output().unwrap();
        assert!(out.status.success(), "{route}: {}", svc.log());
        let dest = fs::read(d.path().join("long.copy")).unwrap();
        assert!(dest == long, "{route} {sparse}: DEST differs from SOURCE");
        let want = format!("{}  long.copy\n", blake3::hash(&dest).to_hex());
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            want,
            "{route} {sparse}"
        );
        // It gave way to the small files: more than one part, fewer than parts of 16
        // chunks would have made.
        let parts = copies(&svc, "long.copy");
        assert!(
            (2..CHUNKS as usize / 16).contains(&parts),
            "{route}: {parts} parts: {}",
            svc.log()
        );
        assert!(svc.stop().success());
    }
}

/// SIGTERM reaches a file copied in turn alone at its next slice, as it reached one between
/// parts before: the service stops within about a slice's time, not the file's, and the
/// client copies the file in-process instead.
#[test]
fn a_stop_signal_ends_a_file_alone_in_turn_at_its_next_slice() {
    let d = dir();
    let slow = ("AISCP_FAKE_GPU_FAULTS", "write=stall:40");
    let args = ["--route", "library", "--chunk-size", "64K"];
    let svc = Service::start(Backend::FakeGpu, d.path(), &args, &[slow]);
    write_random(&d.path().join("long"), 32 << 20, 35);
    let started = Instant::now();
    let mut long = svc
        .client()
        .arg(d.path().join("long"))
        .arg(d.path().join("long.copy"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    while fs::metadata(d.path().join("long.copy")).map_or(0, |m| m.len()) == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "{}", svc.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    // 32 MiB is 512 slices, 128 rounds of 40 ms writes: seconds still to go.
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    let status = svc.stop();
    let took = asked.elapsed();
    assert!(status.success(), "{status:?}");
    assert!(
        took < Duration::from_millis(1500),
        "the service took {took:?} to stop"
    );
    assert!(wait_for(&mut long, Duration::from_secs(120)).success());
    assert_eq!(
        fs::read(d.path().join("long")).unwrap(),
        fs::read(d.path().join("long.copy")).unwrap()
    );
}
