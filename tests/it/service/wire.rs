//! The wire: garbage and hostile messages never stop the service, a client that never
//! reads holds no one, names too long for a message split a batch or stay in the client.

use super::*;

#[test]
fn garbage_on_the_socket_never_stops_the_service() {
    use rand::{Rng, SeedableRng};
    for backend in BACKENDS {
        let d = dir();
        let mut svc = Service::start(backend, d.path(), &[], &[]);
        // A connection that says nothing is dropped after its hello time (5 s), not kept: its
        // read, timed on a thread of its own while the cases below run, sees the end.
        let silent = {
            let sock = dial(&svc.socket).unwrap();
            let dialled = Instant::now();
            std::thread::spawn(move || {
                let tv = nix::sys::time::TimeVal::new(10, 0);
                socket::setsockopt(&sock, socket::sockopt::ReceiveTimeout, &tv).unwrap();
                let got = socket::recv(sock.as_raw_fd(), &mut [0u8; 64], MsgFlags::empty());
                (got, dialled.elapsed())
            })
        };
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
        // A real client is served all along.
        let src = d.path().join("a");
        write_random(&src, 123_456, 5);
        assert_copies(&svc, &src, &d.path().join("b"));
        let (got, after) = silent.join().unwrap();
        assert_eq!(
            got,
            Ok(0),
            "{backend:?}: the silent connection, after {after:?}"
        );
        assert!(
            after >= Duration::from_secs(4) && after < Duration::from_secs(7),
            "{backend:?}: the silent connection was dropped after {after:?}"
        );
        assert!(svc.stop().success());
    }
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

/// A failure crosses the wire without the names (a long name full of quote characters,
/// each of which takes several bytes once quoted and escaped, once made the answer too long
/// for a message): the service says what failed and on which side, and the client words it
/// about its own DEST, once, as cp would.
#[test]
fn a_failure_on_a_long_name_is_worded_by_the_client() {
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
    assert_eq!(st.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // DEST's whole name, quoted by the client as cp quotes it.
    let quoted_name = "'\\''\"".repeat(127);
    let line = stderr.trim_end();
    assert!(line.contains(": error writing 'd/"), "{stderr}");
    assert!(line.ends_with("/f': Input/output error"), "{stderr}");
    assert_eq!(line.matches(&quoted_name).count(), 80, "{stderr}");
    assert!(!stderr.contains("lost"), "{stderr}");
    assert!(svc.stop().success());
}
