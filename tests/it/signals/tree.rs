//! A tree stopped with many files in flight.

use super::*;

/// A tree copied with many files in flight and stopped: the `-v` lines name only files whose
/// copy began and that are left (cp, dying at the signal, names at most the one it was
/// copying), DESTs it never reached keep their old bytes, and new DESTs it never reached are
/// not left behind empty.
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
        let mut child = aiscp_command()
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
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGTERM),
            "not stopped by the signal"
        );
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
        // Named but never begun (old bytes, or a new DEST removed again): none.
        let untouched_but_named: Vec<&String> = named
            .iter()
            .filter(|n| n.starts_with('f')) // not the line for the directory itself
            .filter(|n| fs::read(dst.join(n)).map_or(true, |b| b == b"old\n"))
            .collect();
        assert!(
            untouched_but_named.is_empty(),
            "named by -v but never copied: {untouched_but_named:?}"
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

/// The files a run's `-v` lines name as DEST: the part after " -> ".
fn named_dests(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| {
            l.split_once(" -> ")
                .map(|(_, d)| d.trim_matches('\'').to_owned())
        })
        .collect()
}

/// SIGTERM after the first file's DEST is made and before its data is queued, with no file in
/// flight yet (a file whose copy never began, so a new DEST is removed again and an existing
/// one keeps its old bytes): no `-v` line names it. Its line was printed before the first
/// file in flight began holding the output, so it named a file that was then removed.
#[test]
fn v_names_no_file_the_stop_left_untouched() {
    let mut wrong = Vec::new();
    // The fake GPU library's own route copies files in turn; its bounce route flies them.
    let routes = [
        (Backend::Host, "auto"),
        (Backend::FakeGpu, "auto"),
        (Backend::FakeGpu, "bounce"),
    ];
    for (backend, route) in routes {
        for existing in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            fs::create_dir_all(d.join("src")).unwrap();
            fs::create_dir_all(d.join("dst")).unwrap();
            for name in ["a", "b", "c"] {
                fs::write(d.join("src").join(name), random_bytes(10_000, 7)).unwrap();
                if existing {
                    fs::write(d.join("dst").join(name), b"old\n").unwrap();
                }
            }
            let mut cmd = aiscp_command();
            cmd.current_dir(d).args(["-rv", "src/.", "dst"]);
            backend.apply(&mut cmd, &d.join("report"));
            cmd.env("AISCP_ROUTE", route);
            let out = crate::support::paused_at_pid(cmd, "dest-created", d, |pid| {
                kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
            });
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(libc::SIGTERM),
                "{backend:?} {route}"
            );
            let stdout = String::from_utf8_lossy(&out.stdout);
            for named in named_dests(&stdout) {
                match fs::read(d.join(&named)) {
                    Ok(b) if b != b"old\n" => {}
                    data => wrong.push(format!(
                        "{backend:?} {route}, DEST existing: {existing}: -v named {named:?}, \
                         then it was {}",
                        if data.is_ok() {
                            "left untouched"
                        } else {
                            "removed"
                        }
                    )),
                }
            }
            backend.assert_report_clean(&d.join("report"));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A stop that comes just after a file worker took a file (the flag read, DEST not yet cut):
/// the file counts as begun, its `-v` line goes out, so DEST must be begun too (cut, then
/// written as far as the stop lets it), never left with its old bytes under a name cp's -v
/// gave. Before, the worker's slot looked at the flag again and ended the file there.
#[test]
fn a_file_named_at_a_stop_is_never_left_with_its_old_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (src, old) = (dir.path().join("src"), dir.path().join("old"));
    for d in [&src, &old] {
        fs::create_dir(d).unwrap();
    }
    for i in 0..4 {
        fs::write(src.join(format!("f{i}")), random_bytes(64 * 1024, i)).unwrap();
        fs::write(old.join(format!("f{i}")), b"old\n").unwrap();
    }
    let mut cmd = aiscp_command();
    cmd.env("AISCP_BACKEND", "host")
        .args(["-v", "-r"])
        .arg(src.join("."))
        .arg(&old);
    let out = crate::support::paused_at_pid(cmd, "file-started", dir.path(), |pid| {
        kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    for line in stdout.lines() {
        let name = line.rsplit('/').next().unwrap().trim_end_matches('\'');
        if name.starts_with('f') {
            assert_ne!(
                fs::read(old.join(name)).unwrap(),
                b"old\n",
                "{name} named by -v but left with its old bytes:\n{stdout}"
            );
        }
    }
}

/// A stop in a tree whose SOURCE directory is read-only, copied by a user who is not root:
/// DEST's directory takes SOURCE's mode (no write for its owner) when the walk finishes it
/// on the way out, and the files in flight that never began must be removed first. They
/// were left behind, unnamed by `-v`, when the mode came first (root, to whom permissions
/// do not apply, never saw it).
#[test]
fn a_stop_in_a_read_only_directory_leaves_no_file_unnamed() {
    use crate::parity::harness::{bin_dir, nobody_runs, AS_NOBODY};
    use std::os::unix::fs::PermissionsExt;
    if let Err(why) = nobody_runs() {
        crate::support::skip("cannot run as nobody (not root)", &why);
        return;
    }
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::set_permissions(d, fs::Permissions::from_mode(0o777)).unwrap();
        fs::create_dir(d.join("src")).unwrap();
        for i in 0..100 {
            fs::write(d.join(format!("src/f{i}")), random_bytes(3000, i)).unwrap();
        }
        fs::set_permissions(d.join("src"), fs::Permissions::from_mode(0o555)).unwrap();
        let mut cmd = Command::new("setpriv");
        cmd.args(AS_NOBODY).args(["cp", "-rv", "src", "dst"]);
        let path = std::env::var("PATH").unwrap_or_default();
        cmd.env("PATH", format!("{}:{path}", bin_dir().display()))
            .current_dir(d);
        hermetic(&mut cmd);
        backend.apply(&mut cmd, &d.join("report"));
        // The fake library's own route copies files in turn; its bounce route flies them.
        cmd.env("AISCP_ROUTE", "bounce");
        // Held at the first file queued (never begun), then stopped.
        let out = crate::support::paused_at_pid(cmd, "queued", d, |pid| {
            kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
        });
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{backend:?}");
        let mut named = named_dests(&String::from_utf8_lossy(&out.stdout));
        named.retain(|n| n != "dst");
        let left: Vec<String> = fs::read_dir(d.join("dst"))
            .unwrap()
            .map(|e| format!("dst/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        assert_eq!(left, named, "{backend:?}: left in DEST against named by -v");
    }
}

/// A stop while the first file in flight is held (one file worker: it took the file and the
/// files behind it wait; the walk went on, making the next directories and queuing their
/// files): the files that never began are
/// removed, and so are the directories made behind them, which cp, dying at the signal,
/// never reached. What is left is what `-v` named. Before, those directories were left,
/// empty and unnamed.
#[test]
fn a_stop_removes_the_directories_made_after_its_point() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for i in 0..5 {
        fs::create_dir_all(d.join(format!("src/d{i}"))).unwrap();
        for j in 0..3 {
            let name = format!("src/d{i}/f{j}");
            fs::write(d.join(name), random_bytes(5000, (i * 3 + j) as u64)).unwrap();
        }
    }
    let mut cmd = aiscp_command();
    cmd.current_dir(d)
        .env("AISCP_BACKEND", "host")
        .args(["-rv", "--streams", "1", "src", "dst"]);
    let out = crate::support::paused_at_pid(cmd, "file-started", d, |pid| {
        kill(Pid::from_raw(pid as i32), Signal::SIGTERM).unwrap();
        // The worker goes on once the pause ends: it must find the stop already set, which
        // on a loaded machine the handler could otherwise set only after it ran on.
        signal_taken(pid, Signal::SIGTERM);
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{out:?}");
    let mut named = named_dests(&String::from_utf8_lossy(&out.stdout));
    named.sort();
    let mut left = vec!["dst".to_owned()];
    for entry in fs::read_dir(d.join("dst")).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(d).unwrap().display().to_string();
        if path.is_dir() {
            for inner in fs::read_dir(&path).unwrap() {
                left.push(format!(
                    "{rel}/{}",
                    inner.unwrap().file_name().to_string_lossy()
                ));
            }
        }
        left.push(rel);
    }
    left.sort();
    assert!(named.len() < 21, "not stopped: {named:?}");
    assert_eq!(left, named, "left in DEST against named by -v");
}

/// Waits until `pid` has taken `sig` (no longer pending for the process: its handler ran),
/// then a moment more for the handler's store to be seen.
fn signal_taken(pid: u32, sig: Signal) {
    let bit = 1u64 << (sig as u32 - 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let pending = status
            .lines()
            .find_map(|l| l.strip_prefix("ShdPnd:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        if pending & bit == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{sig:?} never taken");
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
}
