//! The staging service (`aiscp --serve`) end to end, on host memory and on the fake GPU
//! library: many clients at once, a service killed mid-tree, a client killed mid-copy,
//! SIGINT at a client, another uid, a stale socket, garbage on the socket, idle exit.

use crate::support::{listing, program, write_random, Backend, Report, BACKENDS};
use nix::sys::socket::{self, AddressFamily, MsgFlags, SockFlag, SockType, UnixAddr};
use std::fs;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
        let mut cmd = Command::new(program());
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
        let mut cmd = Command::new(program());
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
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
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
fn wait_flag(flag: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(Instant::now() < deadline, "never paused");
        std::thread::sleep(Duration::from_millis(5));
    }
}

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

#[test]
fn service_killed_mid_tree_client_finishes_as_in_process() {
    for backend in BACKENDS {
        let d = dir();
        let flag = d.path().join("paused");
        let pause = format!("between-slices:{}", flag.display());
        let mut svc = Service::start(
            backend,
            d.path(),
            &["--chunk-size", "64K"],
            &[("AISCP_TEST_PAUSE", &pause)],
        );
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
        let mut alone = Command::new(program());
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
    for backend in BACKENDS {
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
    }
}

/// A file copied in turn whose service is killed after reporting some of its bytes is copied
/// again in-process from its start: --stats counts its bytes and the file once.
#[test]
fn a_file_redone_after_the_service_died_counts_once() {
    for backend in BACKENDS {
        let d = dir();
        let flag = d.path().join("paused");
        let pause = format!("between-slices:{}", flag.display());
        // One worker: the slice before the pause has been reported when the service stops.
        let mut svc = Service::start(
            backend,
            d.path(),
            &["--chunk-size", "64K", "--streams", "1"],
            &[("AISCP_TEST_PAUSE", &pause)],
        );
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

impl Service {
    /// After SIGKILL the socket is left behind, stale.
    fn alive_after_kill(&self) -> bool {
        dial(&self.socket).is_ok()
    }
}

#[test]
fn client_killed_mid_copy_service_serves_on() {
    for backend in BACKENDS {
        let d = dir();
        let flag = d.path().join("paused");
        let pause = format!("between-slices:{}", flag.display());
        let mut svc = Service::start(
            backend,
            d.path(),
            &["--chunk-size", "64K"],
            &[("AISCP_TEST_PAUSE", &pause)],
        );
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
        let out = svc
            .client()
            .arg(d.path().join("a"))
            .arg(d.path().join("c"))
            .output()
            .unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        assert_eq!(
            fs::read(d.path().join("a")).unwrap(),
            fs::read(d.path().join("c")).unwrap()
        );
        assert!(svc.stop().success());
    }
}

#[test]
fn sigint_stops_a_client_within_a_second_and_the_service_serves_on() {
    let backend = Backend::FakeGpu;
    let d = dir();
    let flag = d.path().join("paused");
    let pause = format!("between-slices:{}", flag.display());
    let mut svc = Service::start(
        backend,
        d.path(),
        &["--chunk-size", "64K"],
        &[("AISCP_TEST_PAUSE", &pause)],
    );
    write_random(&d.path().join("a"), 4 << 20, 2);
    let mut client = svc
        .client()
        .arg(d.path().join("a"))
        .arg(d.path().join("b"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_flag(&flag);
    let sent = Instant::now();
    signal(client.id() as i32, nix::sys::signal::Signal::SIGINT);
    let st = wait_for(&mut client, Duration::from_secs(5));
    assert!(
        sent.elapsed() < Duration::from_millis(1500),
        "{:?}",
        sent.elapsed()
    );
    // Killed by the signal after its cleanup, as cp is (a shell shows 130).
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGINT)
    );
    fs::remove_file(&flag).unwrap();
    assert!(svc.alive());
    let out = svc
        .client()
        .arg(d.path().join("a"))
        .arg(d.path().join("c"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        fs::read(d.path().join("a")).unwrap(),
        fs::read(d.path().join("c")).unwrap()
    );
    assert!(svc.stop().success());
}

#[test]
fn another_uid_is_refused() {
    let d = dir();
    // The service runs as nobody, in a directory of nobody's; root connects to it (root can
    // reach any socket, so only SO_PEERCRED stands in the way).
    let home = d.path().join("nobody");
    fs::create_dir(&home).unwrap();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    nix::unistd::chown(
        &home,
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
    let socket = home.join("service.sock");
    let mut child = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .arg(program())
        .args(["--serve", "--backend", "host", "--socket"])
        .arg(&socket)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let sock = loop {
        if let Ok(s) = dial(&socket) {
            break s;
        }
        assert!(Instant::now() < deadline, "service never answered");
        std::thread::sleep(Duration::from_millis(5));
    };
    // The drop happened: the service is nobody's.
    let status = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line.split_whitespace().skip(1).all(|u| u == "65534"),
        "{uid_line}"
    );
    // Refused as it connects, before any hello (which may then find the socket closed).
    let _ = socket::send(sock.as_raw_fd(), &hello(), MsgFlags::MSG_NOSIGNAL);
    let answer = read_message(&sock);
    assert!(
        answer.contains("refused") && answer.contains("uid 0 may not use this service"),
        "{answer}"
    );
    // aiscp as root copies in-process, with one warning.
    let src = d.path().join("a");
    write_random(&src, 100_000, 3);
    let out = Command::new(program())
        .env("AISCP_BACKEND", "host")
        .env("AISCP_SERVICE", &socket)
        .arg(&src)
        .arg(d.path().join("b"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("copying in-process"), "{stderr}");
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(d.path().join("b")).unwrap()
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `setpriv` that runs a command as `user:group` (names), in that group only.
fn as_user(user_group: &str) -> Command {
    let (user, group) = user_group.split_once(':').unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={user}"))
        .arg(format!("--regid={group}"))
        .args(["--clear-groups", "--"]);
    cmd
}

/// A service started without `Service::start` (as another user, or shared), killed when
/// dropped so a failing test leaves no process behind.
struct Other(Child);

impl Other {
    /// Spawns `cmd` and waits for its socket to answer.
    fn start(cmd: &mut Command, socket: &Path, log: &Path) -> Other {
        let mut child = Other(cmd.stderr(fs::File::create(log).unwrap()).spawn().unwrap());
        let deadline = Instant::now() + Duration::from_secs(20);
        while dial(socket).is_err() {
            if child.0.try_wait().unwrap().is_some() {
                panic!("service ended: {}", fs::read_to_string(log).unwrap());
            }
            assert!(Instant::now() < deadline, "service never answered");
            std::thread::sleep(Duration::from_millis(5));
        }
        child
    }
}

impl Drop for Other {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_shared_service_serves_the_users_it_allows_and_no_other() {
    let d = dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let socket = d.path().join("shared").join("service.sock");
    let log = d.path().join("service.log");
    // Under umask 077, which would keep others out of the directory it makes.
    let mut svc = Other::start(
        Command::new("sh")
            .arg("-c")
            .arg("umask 077; exec \"$0\" \"$@\"")
            .arg(program())
            .args(serve_shared("nobody"))
            .arg("--debug")
            .arg("--socket")
            .arg(&socket),
        &socket,
        &log,
    );
    // Others can reach it; no one else can put a socket in its place.
    let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(socket.parent().unwrap()), 0o755);
    assert_eq!(mode(&socket), 0o666);
    // Of root's capabilities it kept only the two that reopen a passed descriptor
    // (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH: bits 1 and 2).
    let status = fs::read_to_string(format!("/proc/{}/status", svc.0.id())).unwrap();
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = status.lines().find(|l| l.starts_with(set)).unwrap();
        let want = if set == "CapInh" || set == "CapAmb" {
            0
        } else {
            6
        };
        let bits = u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap();
        assert_eq!(bits, want, "{line}");
    }
    let src = d.path().join("a");
    write_random(&src, 300_000, 12);
    fs::set_permissions(&src, fs::Permissions::from_mode(0o644)).unwrap();
    let out_dir = d.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    fs::set_permissions(&out_dir, fs::Permissions::from_mode(0o777)).unwrap();
    let run = |user: &str, name: &str| {
        as_user(user)
            .arg(program())
            .args(["--backend", "host", "--debug"])
            .arg(&src)
            .arg(out_dir.join(name))
            .env("AISCP_SERVICE", &socket)
            .output()
            .unwrap()
    };
    // nobody is served: the data goes through the service, and DEST is nobody's file.
    let out = run("nobody:nogroup", "by-nobody");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("through the staging service"), "{stderr}");
    assert!(!stderr.contains("in-process"), "{stderr}");
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(out_dir.join("by-nobody")).unwrap()
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        fs::metadata(out_dir.join("by-nobody")).unwrap().uid(),
        65534
    );
    // daemon is not on the list: refused, it copies in-process with one warning.
    let out = run("daemon:daemon", "by-daemon");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("may not use this service (see its --allow-users)"),
        "{stderr}"
    );
    assert!(stderr.contains("copying in-process"), "{stderr}");
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(out_dir.join("by-daemon")).unwrap()
    );
    signal(svc.0.id() as i32, nix::sys::signal::Signal::SIGTERM);
    assert!(wait_for(&mut svc.0, Duration::from_secs(20)).success());
    let log = fs::read_to_string(&log).unwrap();
    assert_eq!(log.matches(" connected").count(), 1, "{log}");
}

#[test]
fn a_shared_service_needs_a_directory_no_one_else_writes() {
    let d = dir();
    let run = d.path().join("run");
    fs::create_dir(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o1777)).unwrap();
    let out = Command::new(program())
        .args(serve_shared("all"))
        .arg("--socket")
        .arg(run.join("service.sock"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("with mode 0755 or 0711 (it is a directory, uid 0, mode 1777)"),
        "{stderr}"
    );
    assert!(!run.join("service.sock").exists());
}

/// The socket's directory must be this user's alone (0700 or tighter): one others may enter
/// is refused, and so is a symlink to a good one (the check does not follow it).
#[test]
fn a_socket_directory_others_may_enter_or_a_symlink_is_refused() {
    let d = dir();
    let good = d.path().join("good");
    fs::create_dir(&good).unwrap();
    fs::set_permissions(&good, fs::Permissions::from_mode(0o700)).unwrap();
    let open = d.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&good, d.path().join("link")).unwrap();
    for (run, is) in [
        ("open", "it is a directory, uid 0, mode 755"),
        ("link", "it is not a directory, uid 0, mode 777"),
    ] {
        let socket = d.path().join(run).join("service.sock");
        let out = Command::new(program())
            .args(["--serve", "--backend", "host", "--socket"])
            .arg(&socket)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let wanted = format!(
            "not serving: '{}' must be a directory of uid 0 with mode 0700 or tighter ({is})",
            d.path().join(run).display()
        );
        assert!(stderr.contains(&wanted), "{stderr}");
        assert!(!socket.exists(), "{run}");
    }
    assert_eq!(fs::read_dir(&good).unwrap().count(), 0);
}

/// The socket's directory is checked and used through one descriptor: swapped, between the
/// check and the bind, for a symlink to a directory anyone may write, the service still binds
/// (and takes its lock) in the directory it checked, and removes its socket from there.
#[test]
fn a_socket_directory_swapped_after_its_check_is_not_used() {
    let d = dir();
    let run = d.path().join("run");
    fs::create_dir(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
    let flag = d.path().join("paused");
    let log = d.path().join("service.log");
    // Killed when the test fails (Other's drop).
    let mut service = Other(
        Command::new(program())
            .args(["--serve", "--backend", "host", "--socket"])
            .arg(run.join("service.sock"))
            .env(
                "AISCP_TEST_PAUSE",
                format!("socket-dir-checked:{}", flag.display()),
            )
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_flag(&flag);
    let checked = d.path().join("checked");
    fs::rename(&run, &checked).unwrap();
    let wide = d.path().join("wide");
    fs::create_dir(&wide).unwrap();
    fs::set_permissions(&wide, fs::Permissions::from_mode(0o777)).unwrap();
    std::os::unix::fs::symlink(&wide, &run).unwrap();
    fs::remove_file(&flag).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while dial(&checked.join("service.sock")).is_err() {
        if let Some(st) = service.0.try_wait().unwrap() {
            panic!(
                "service ended ({st}): {}",
                fs::read_to_string(&log).unwrap()
            );
        }
        let seen: Vec<_> = fs::read_dir(&wide)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert!(
            seen.is_empty(),
            "made in the swapped-in directory: {seen:?}"
        );
        assert!(
            Instant::now() < deadline,
            "never bound in the checked directory"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(checked.join("service.sock.lock").exists());
    signal(service.0.id() as i32, nix::sys::signal::Signal::SIGTERM);
    assert!(wait_for(&mut service.0, Duration::from_secs(20)).success());
    assert!(!checked.join("service.sock").exists());
    assert_eq!(fs::read_dir(&wide).unwrap().count(), 0);
}

/// On a shared service neither a user it does not serve nor one it does can keep others out
/// by holding connections open without a word: the first is refused as it connects, the
/// second holds at most a quarter of the places.
#[test]
fn one_user_holding_connections_does_not_keep_others_out() {
    let d = dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let socket = d.path().join("shared").join("service.sock");
    let log = d.path().join("service.log");
    let _svc = Other::start(
        Command::new(program())
            .args(serve_shared("nobody"))
            .arg("--socket")
            .arg(&socket),
        &socket,
        &log,
    );
    let src = d.path().join("a");
    write_random(&src, 1000, 52);
    const HOLD: &str = "import socket, sys, time\n\
        held = []\n\
        for _ in range(70):\n\
        \x20   s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n\
        \x20   s.connect(sys.argv[1])\n\
        \x20   held.append(s)\n\
        print('holding', flush=True)\n\
        time.sleep(60)\n";
    for user in ["daemon:daemon", "nobody:nogroup"] {
        let mut holder = as_user(user)
            // The system's interpreter: a root-only shim (pyenv) would not run as `user`.
            .args(["/usr/bin/python3", "-c", HOLD])
            .arg(&socket)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "holding\n", "{user}");
        let out = Command::new(program())
            .env("AISCP_BACKEND", "host")
            .env("AISCP_SERVICE", &socket)
            .arg("--debug")
            .arg(&src)
            .arg(d.path().join(format!("copy-{}", &user[..6])))
            .output()
            .unwrap();
        let _ = holder.kill();
        let _ = holder.wait();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            stderr.contains("through the staging service"),
            "{user}: {stderr}"
        );
        assert!(!stderr.contains("in-process"), "{user}: {stderr}");
    }
}

/// As under the system unit (CapabilityBoundingSet=): a bounding set already narrowed to the
/// two capabilities the service keeps, and CAP_SETPCAP gone, does not stop it.
#[test]
fn a_shared_service_starts_under_a_narrowed_bounding_set() {
    let d = dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let socket = d.path().join("shared").join("service.sock");
    let svc = Other::start(
        Command::new("setpriv")
            .arg("--bounding-set=-all,+dac_override,+dac_read_search")
            .arg(program())
            .args(serve_shared("all"))
            .arg("--socket")
            .arg(&socket),
        &socket,
        &d.path().join("service.log"),
    );
    let status = fs::read_to_string(format!("/proc/{}/status", svc.0.id())).unwrap();
    let eff = status.lines().find(|l| l.starts_with("CapEff")).unwrap();
    assert!(eff.ends_with("0000000000000006"), "{eff}");
}

#[test]
fn a_shared_service_must_run_as_root() {
    let d = dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let out = as_user("nobody:nogroup")
        .arg(program())
        .args(serve_shared("all"))
        .arg("--socket")
        .arg(d.path().join("run").join("service.sock"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--allow-users needs a service run as root"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_user_to_allow_is_refused() {
    let out = Command::new(program())
        .args(serve_shared("root,no-such-user-here"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "invalid argument 'root,no-such-user-here' for '--allow-users': no such user: \
             'no-such-user-here'"
        ),
        "{stderr}"
    );
}

/// A client hands its descriptors only to a service of its own user or root's: root does not
/// give its files to a service of nobody's (refused by the client, before any hello).
#[test]
fn a_client_keeps_its_files_from_another_users_service() {
    let d = dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let home = d.path().join("nobody");
    fs::create_dir(&home).unwrap();
    nix::unistd::chown(
        &home,
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    let socket = home.join("run").join("service.sock");
    let log = d.path().join("service.log");
    let svc = Other::start(
        as_user("nobody:nogroup")
            .arg(program())
            .args(["--serve", "--backend", "host", "--debug"])
            .arg("--socket")
            .arg(&socket),
        &socket,
        &log,
    );
    let src = d.path().join("secret");
    write_random(&src, 50_000, 13);
    fs::set_permissions(&src, fs::Permissions::from_mode(0o600)).unwrap();
    let out = Command::new(program())
        .env("AISCP_BACKEND", "host")
        .env("AISCP_SERVICE", &socket)
        .arg(&src)
        .arg(d.path().join("copy"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("it runs as uid 65534, not 0; copying in-process"),
        "{stderr}"
    );
    assert!(stderr.contains("copying in-process"), "{stderr}");
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(d.path().join("copy")).unwrap()
    );
    drop(svc);
    let log = fs::read_to_string(&log).unwrap();
    assert!(!log.contains(" connected"), "{log}");
}

/// One message from the service, as text (empty once it has closed).
fn read_message(sock: &OwnedFd) -> String {
    let tv = nix::sys::time::TimeVal::new(10, 0);
    socket::setsockopt(sock, socket::sockopt::ReceiveTimeout, &tv).unwrap();
    let mut buf = vec![0u8; 70_000];
    let n = socket::recv(sock.as_raw_fd(), &mut buf, MsgFlags::empty()).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
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
    let out = Command::new(program())
        .env("AISCP_BACKEND", "host")
        .env("AISCP_SERVICE", &socket)
        .arg(&src)
        .arg(d.path().join("b"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot connect: Connection refused; copying in-process"),
        "{stderr}"
    );
    assert_eq!(
        fs::read(&src).unwrap(),
        fs::read(d.path().join("b")).unwrap()
    );
    // The default per-user socket is not looked for when missing: silence.
    let out = Command::new(program())
        .env("AISCP_BACKEND", "host")
        .env("XDG_RUNTIME_DIR", d.path().join("nothing-here"))
        .env_remove("AISCP_SERVICE")
        .arg(&src)
        .arg(d.path().join("b2"))
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
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
    let doctor = Command::new(program())
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
    let second = Command::new(program())
        .args(["--serve", "--backend", "host", "--socket"])
        .arg(&socket)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("another staging service"));
    assert!(svc.stop().success());
}

#[test]
fn garbage_on_the_socket_never_stops_the_service() {
    use rand::{Rng, SeedableRng};
    for backend in BACKENDS {
        let d = dir();
        let mut svc = Service::start(backend, d.path(), &[], &[]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(25);
        let hello = hello();
        let good = fs::File::open(program()).unwrap();
        let sink = fs::File::create(d.path().join("sink")).unwrap();
        let pipe = nix::unistd::pipe().unwrap();
        let dirfd = fs::File::open(d.path()).unwrap();
        let copy = |fds: &str| {
            format!(
                r#"{{"type":"copy","files":[{{"id":1,"src_name":[97],"dst_name":"b","sparse":"auto","handover":{{"in_turn":{{"len":5}}}}{fds}}}]}}"#
            )
            .into_bytes()
        };
        let files = |n: usize| {
            let one = r#"{"id":1,"src_name":"a","dst_name":"b","sparse":"auto","handover":{"in_turn":{"len":5}}}"#;
            format!(r#"{{"type":"copy","files":[{}]}}"#, vec![one; n].join(",")).into_bytes()
        };
        let mut cases: Vec<(Vec<u8>, Vec<i32>)> = vec![
            (Vec::new(), vec![]),
            (b"{".to_vec(), vec![]),
            (vec![0xff; 70_000], vec![]),
            (
                br#"{"type":"hello","protocol":99,"version":"9"}"#.to_vec(),
                vec![],
            ),
            (copy(""), vec![good.as_raw_fd(), good.as_raw_fd()]),
        ];
        // After a proper hello: requests with wrong descriptors, or none, or junk.
        let after_hello: Vec<(Vec<u8>, Vec<i32>)> = vec![
            (copy(""), vec![]),
            (copy(""), vec![good.as_raw_fd()]),
            (copy(""), vec![pipe.0.as_raw_fd(), pipe.1.as_raw_fd()]),
            (copy(""), vec![dirfd.as_raw_fd(), dirfd.as_raw_fd()]),
            // DEST open read-only.
            (copy(""), vec![good.as_raw_fd(), good.as_raw_fd()]),
            (copy(r#","extra":1"#), vec![]),
            (hello.clone(), vec![]),
            (br#"{"type":"cancel"}"#.to_vec(), vec![]),
            // Batches that do not add up: no file, two files with one pair, more files
            // than a request may carry.
            (br#"{"type":"copy","files":[]}"#.to_vec(), vec![]),
            (files(2), vec![good.as_raw_fd(), good.as_raw_fd()]),
            (files(17), vec![good.as_raw_fd(); 34]),
            // A length no file has (it would overflow the service's sums).
            (
                br#"{"type":"copy","files":[{"id":1,"src_name":"a","dst_name":"b","sparse":"auto","handover":{"in_turn":{"len":18446744073709551615}}}]}"#.to_vec(),
                vec![good.as_raw_fd(), sink.as_raw_fd()],
            ),
        ];
        for _ in 0..150 {
            let len = rng.gen_range(0..300);
            let mut junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if rng.gen_bool(0.3) {
                // Near misses: valid JSON of the wrong shape.
                junk = format!(
                    r#"{{"type":"{}","id":{},"x":{}}}"#,
                    ["copy", "hello", "cancel", "done"][rng.gen_range(0..4)],
                    rng.gen::<i64>(),
                    rng.gen::<u32>()
                )
                .into_bytes();
            }
            cases.push((junk, vec![]));
        }
        for (i, (msg, fds)) in cases.iter().enumerate() {
            let sock = dial(&svc.socket).unwrap();
            send_raw(&sock, msg, fds);
            let _ = read_message(&sock);
            if let Some((m, f)) = after_hello.get(i) {
                let sock = dial(&svc.socket).unwrap();
                send_raw(&sock, &hello, &[]);
                assert!(read_message(&sock).contains("welcome"));
                send_raw(&sock, m, f);
                // Cancel is valid: no answer expected, so only wait on the others.
                if !m.starts_with(br#"{"type":"cancel"#) {
                    let answer = read_message(&sock);
                    assert!(answer.is_empty() || answer.contains("refused"), "{answer}");
                }
            }
            assert!(svc.alive(), "case {i}: {}", svc.log());
        }
        // A connection that says nothing is dropped after its hello time, not kept.
        let _silent = dial(&svc.socket).unwrap();
        // ... and a real client is served all along.
        let src = d.path().join("a");
        write_random(&src, 123_456, 5);
        let out = svc
            .client()
            .arg(&src)
            .arg(d.path().join("b"))
            .output()
            .unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        assert_eq!(
            fs::read(&src).unwrap(),
            fs::read(d.path().join("b")).unwrap()
        );
        assert!(svc.stop().success());
    }
}

/// `--serve` on host memory for other users too (`--allow-users USERS`).
fn serve_shared(users: &str) -> [&str; 5] {
    ["--serve", "--backend", "host", "--allow-users", users]
}

/// The wire protocol this build speaks (the service's `wire::PROTOCOL`).
const PROTOCOL: u32 = 2;

/// A hello of this build.
fn hello() -> Vec<u8> {
    format!(
        r#"{{"type":"hello","protocol":{PROTOCOL},"version":"{}"}}"#,
        env!("CARGO_PKG_VERSION")
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

/// A client that sends files and never reads the answers must not hold the service: its
/// answers would fill its socket and block the thread that serves every client. It is let
/// go, and another client's copy goes through.
#[test]
fn a_client_that_never_reads_does_not_hold_the_others() {
    let d = dir();
    let svc = Service::start(Backend::Host, d.path(), &[], &[]);
    write_random(&d.path().join("a"), 100, 51);
    let src = fs::File::open(d.path().join("a")).unwrap();
    let dst = fs::File::create(d.path().join("sink")).unwrap();
    let sock = dial(&svc.socket).unwrap();
    send_raw(&sock, &hello(), &[]);
    assert!(read_message(&sock).contains("welcome"));
    let fds = [src.as_raw_fd(), dst.as_raw_fd()];
    let nonblocking = std::thread::spawn(move || {
        for id in 0..2000 {
            let msg = format!(
                r#"{{"type":"copy","files":[{{"id":{id},"src_name":"a","dst_name":"b","sparse":"auto","handover":{{"in_flight":{{"len":100,"truncate":false}}}}}}]}}"#
            );
            let sent = socket::sendmsg::<()>(
                sock.as_raw_fd(),
                &[std::io::IoSlice::new(msg.as_bytes())],
                &[socket::ControlMessage::ScmRights(&fds)],
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                None,
            );
            if sent.is_err() {
                break; // let go (or full): enough either way
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        sock // kept open and never read
    });
    let hostile = nonblocking.join().unwrap();
    let mut normal = svc
        .client()
        .arg(d.path().join("a"))
        .arg(d.path().join("b"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_for(&mut normal, Duration::from_secs(20));
    assert!(st.success(), "{}", svc.log());
    assert_eq!(
        fs::read(d.path().join("a")).unwrap(),
        fs::read(d.path().join("b")).unwrap()
    );
    drop(hostile);
    assert!(svc.stop().success());
}

#[test]
fn idle_exit_releases_the_gpu() {
    let d = dir();
    let mut svc = Service::start(Backend::FakeGpu, d.path(), &["--idle-exit", "1"], &[]);
    let src = d.path().join("a");
    write_random(&src, 300_000, 6);
    let out = svc
        .client()
        .arg(&src)
        .arg(d.path().join("b"))
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
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

#[test]
fn auto_starts_a_service_that_later_clients_share() {
    let d = dir();
    let runtime = d.path().join("xdg");
    fs::create_dir(&runtime).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    let src = d.path().join("a");
    write_random(&src, 50_000, 7);
    let run = |to: &str| {
        let out = Command::new(program())
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
        let out = Command::new(program())
            .env("AISCP_BACKEND", "host")
            .env("AISCP_SERVICE", sock)
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

/// Makes (or, with `make` false, opens) `levels` nested directories named `name` under
/// `root`, through descriptors (the path may be far longer than PATH_MAX).
fn deep_dir(root: &Path, levels: usize, name: &str, make: bool) -> OwnedFd {
    use nix::fcntl::{open, openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut cur = open(root, flags, Mode::empty()).unwrap();
    for _ in 0..levels {
        if make {
            mkdirat(Some(cur), name, Mode::from_bits_truncate(0o755)).unwrap();
        }
        let next = openat(Some(cur), name, flags, Mode::empty()).unwrap();
        nix::unistd::close(cur).unwrap();
        cur = next;
    }
    // SAFETY: `cur` is an open descriptor that nothing else owns.
    unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(cur) }
}

/// Files of a tree walked by a client are sent to the service together, several to a
/// message. Names make a message long: files whose names do not fit one message together
/// go one by one, and a file whose names do not fit a message even alone is copied by the
/// client, in its turn. Names cross as text: one of about 20 KiB each way (which would not
/// fit as arrays of numbers) goes through the service. Every byte arrives either way.
#[test]
fn long_names_split_a_batch_and_a_file_too_long_for_a_message_is_copied_here() {
    for backend in BACKENDS {
        let d = dir();
        let svc = Service::start(backend, d.path(), &[], &[]);
        let src = d.path().join("src");
        fs::create_dir(&src).unwrap();
        let (mid, long, far) = ("m".repeat(250), "l".repeat(250), "n".repeat(251));
        let mut want = Vec::new();
        for i in 0..20 {
            write_random(&src.join(format!("a{i}")), 1000 + i * 4099, 70 + i as u64);
            want.push((0, "", format!("a{i}")));
        }
        // 16 files whose names (about 5 KiB each way) fill more than a message together.
        let at = deep_dir(&src, 20, &mid, true);
        for i in 0..16 {
            let path = format!("/proc/self/fd/{}/m{i}", at.as_raw_fd());
            write_random(Path::new(&path), 3000 + i * 7, 90 + i as u64);
            want.push((20, &mid, format!("m{i}")));
        }
        // Names of about 20 KiB each way: 40 KiB as text, four times that as numbers.
        let at = deep_dir(&src, 80, &long, true);
        write_random(
            Path::new(&format!("/proc/self/fd/{}/long", at.as_raw_fd())),
            4321,
            98,
        );
        want.push((80, &long, "long".to_owned()));
        // One file whose two names (about 35 KiB each) do not fit a message alone.
        let at = deep_dir(&src, 140, &far, true);
        write_random(
            Path::new(&format!("/proc/self/fd/{}/far", at.as_raw_fd())),
            12_345,
            99,
        );
        want.push((140, &far, "far".to_owned()));
        let out = svc
            .client()
            .current_dir(d.path())
            .args(["--debug", "-r", "src", "dst"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {stderr}");
        for (levels, name, file) in &want {
            let read = |root: &str| {
                let at = deep_dir(&d.path().join(root), *levels, name, false);
                fs::read(format!("/proc/self/fd/{}/{file}", at.as_raw_fd())).unwrap()
            };
            assert_eq!(read("src"), read("dst"), "{backend:?}: {file}");
        }
        let served = stderr
            .lines()
            .filter(|l| l.ends_with("bytes through the staging service"))
            .collect::<Vec<_>>();
        assert_eq!(served.len(), 37, "{backend:?}: {stderr}");
        assert!(served.iter().any(|l| l.contains("/long'")), "{backend:?}");
        assert!(!served.iter().any(|l| l.contains("/far'")), "{backend:?}");
        assert!(svc.stop().success());
    }
}

/// A failure whose answer would not fit a message (cp's message quotes two long names full
/// of quote characters, each of which takes several bytes once quoted and escaped) lets the
/// client go rather than leave it waiting: it sees the connection end, says so once, and
/// copies the file itself.
#[test]
fn an_answer_too_long_for_a_message_lets_the_client_copy_in_process() {
    let d = dir();
    let faults = [("AISCP_FAKE_GPU_FAULTS", "write#1=EIO")];
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--route", "library"], &faults);
    let src = d.path().join("s");
    fs::create_dir(&src).unwrap();
    let name = "'\"".repeat(127);
    let at = deep_dir(&src, 80, &name, true);
    write_random(
        Path::new(&format!("/proc/self/fd/{}/f", at.as_raw_fd())),
        3 << 20,
        61,
    );
    let mut client = svc
        .client()
        .current_dir(d.path())
        .args(["-r", "s", "d"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let st = wait_for(&mut client, Duration::from_secs(20));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(st.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("lost"), "{stderr}");
    let read = |root: &str| {
        let at = deep_dir(&d.path().join(root), 80, &name, false);
        fs::read(format!("/proc/self/fd/{}/f", at.as_raw_fd())).unwrap()
    };
    assert!(read("s") == read("d"));
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
