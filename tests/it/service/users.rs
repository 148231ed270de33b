//! Who a service serves: the owner only by default, a shared service for the users it
//! allows, its socket directory checked, no user holding the others out.

use super::*;

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
    // Killed when dropped, a failing assertion included.
    let child = Other::start(
        hermetic(&mut Command::new("setpriv"))
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(program())
            .args(["--serve", "--backend", "host", "--socket"])
            .arg(&socket),
        &socket,
        &d.path().join("service.log"),
    );
    let sock = dial(&socket).unwrap();
    // The drop happened: the service is nobody's.
    let status = fs::read_to_string(format!("/proc/{}/status", child.0.id())).unwrap();
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
    // Refused by its directory, before any connection: a socket there can be anyone's.
    let not_ours = "is not a directory of uid 0 or root that only its owner may write (it is a directory, uid 65534, mode 700)";
    assert_copies_in_process(&socket, &src, &d.path().join("b"), not_ours);
}

/// `setpriv` that runs a command as `user:group` (names), in that group only.
fn as_user(user_group: &str) -> Command {
    let (user, group) = user_group.split_once(':').unwrap();
    let mut cmd = Command::new("setpriv");
    hermetic(&mut cmd)
        .arg(format!("--reuid={user}"))
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
        hermetic(&mut Command::new("sh"))
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
    let out = refused_to_serve(
        aiscp_command()
            .args(serve_shared("all"))
            .arg("--socket")
            .arg(run.join("service.sock")),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("with mode 0755 or 0711 (it is a directory, uid 0, mode 1777)"),
        "{stderr}"
    );
    assert!(!run.join("service.sock").exists());
}

/// The socket's directory must be this user's alone (its own, 0700 or tighter): one of
/// another user's is refused though no one else may enter it (root could bind there), one
/// others may enter is refused, and so is a symlink to a good one (the check does not follow
/// it).
#[test]
fn a_socket_directory_not_this_users_alone_is_refused() {
    let d = dir();
    let good = d.path().join("good");
    fs::create_dir(&good).unwrap();
    fs::set_permissions(&good, fs::Permissions::from_mode(0o700)).unwrap();
    let theirs = d.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o700)).unwrap();
    let open = d.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&good, d.path().join("link")).unwrap();
    for (run, is) in [
        ("theirs", "it is a directory, uid 65534, mode 700"),
        ("open", "it is a directory, uid 0, mode 755"),
        ("link", "it is not a directory, uid 0, mode 777"),
    ] {
        let socket = d.path().join(run).join("service.sock");
        let out = refused_to_serve(
            aiscp_command()
                .args(["--serve", "--backend", "host", "--socket"])
                .arg(&socket),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let wanted = format!(
            "not serving: '{}' must be a directory of uid 0 with mode 0700 or tighter ({is})",
            d.path().join(run).display()
        );
        assert!(stderr.contains(&wanted), "{stderr}");
        assert!(!socket.exists(), "{run}");
        assert!(
            !d.path().join(run).join("service.sock.lock").exists(),
            "{run}"
        );
    }
    assert_eq!(fs::read_dir(&good).unwrap().count(), 0);
    assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);
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
        aiscp_command()
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
        aiscp_command()
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
        let out = host_client(&socket)
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
        hermetic(&mut Command::new("setpriv"))
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
    let out = refused_to_serve(
        as_user("nobody:nogroup")
            .arg(program())
            .args(serve_shared("all"))
            .arg("--socket")
            .arg(d.path().join("run").join("service.sock")),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--allow-users needs a service run as root"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_user_to_allow_is_refused() {
    let out = refused_to_serve(aiscp_command().args(serve_shared("root,no-such-user-here")));
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
    // Refused by its directory, before any connection: a socket there can be anyone's.
    let not_ours = "is not a directory of uid 0 or root that only its owner may write (it is a directory, uid 65534, mode 700)";
    assert_copies_in_process(&socket, &src, &d.path().join("copy"), not_ours);
    drop(svc);
    let log = fs::read_to_string(&log).unwrap();
    assert!(!log.contains(" connected"), "{log}");
}

/// `--serve` on host memory for other users too (`--allow-users USERS`).
fn serve_shared(users: &str) -> [&str; 5] {
    ["--serve", "--backend", "host", "--allow-users", users]
}

/// SO_PEERCRED is read as the peer's uid on both ends, never its gid: every identity here
/// has a uid other than its gid (nobody with group daemon, 65534 and 1).
#[test]
fn peer_credentials_are_uids_on_both_ends() {
    let d = dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let src = d.path().join("a");
    write_random(&src, 200_000, 14);
    fs::set_permissions(&src, fs::Permissions::from_mode(0o644)).unwrap();
    let out_dir = d.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    fs::set_permissions(&out_dir, fs::Permissions::from_mode(0o777)).unwrap();
    let copy_through = |user: &str, socket: &Path, name: &str| {
        let out = as_user(user)
            .arg(program())
            .args(["--backend", "host", "--debug"])
            .arg(&src)
            .arg(out_dir.join(name))
            .env("AISCP_SERVICE", socket)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{user}: {stderr}");
        assert!(
            stderr.contains("through the staging service"),
            "{user}: {stderr}"
        );
        assert!(!stderr.contains("in-process"), "{user}: {stderr}");
        assert_eq!(
            fs::read(&src).unwrap(),
            fs::read(out_dir.join(name)).unwrap()
        );
    };
    // The service's end: root's shared service admits uid 65534, whatever its group.
    let shared = d.path().join("shared").join("service.sock");
    let svc = Other::start(
        aiscp_command()
            .args(serve_shared("nobody"))
            .arg("--socket")
            .arg(&shared),
        &shared,
        &d.path().join("shared.log"),
    );
    copy_through("nobody:daemon", &shared, "to-root");
    drop(svc);
    // The client's end: nobody's client takes a service running as nobody with group
    // daemon for its own.
    let home = d.path().join("nobody");
    fs::create_dir(&home).unwrap();
    nix::unistd::chown(&home, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let own = home.join("run").join("service.sock");
    let _svc = Other::start(
        as_user("nobody:daemon")
            .arg(program())
            .args(["--serve", "--backend", "host", "--socket"])
            .arg(&own),
        &own,
        &d.path().join("own.log"),
    );
    copy_through("nobody:nogroup", &own, "to-nobody");
}
