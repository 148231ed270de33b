//! One test per protection docs/GUARANTEES.md promises, each written to fail if that
//! protection were removed: a name swapped between check and use (paused at the moment with
//! `AISCP_TEST_PAUSE`, or while aiscp waits for a FIFO's writer), fsync calls seen with
//! strace, a final ftruncate refused by the file-size limit. GNU cp is the oracle where the
//! situation can be made for it too.

use crate::support::{
    aiscp_command, hermetic, paused_at, program, random_bytes, skip, Backend, BACKENDS,
};
use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

fn aiscp(backend: Backend, dir: &Path) -> Command {
    let mut cmd = aiscp_command();
    cmd.current_dir(dir).arg("-q");
    backend.apply(&mut cmd, &dir.join("report"));
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).replace(&program().display().to_string(), "PROG")
}

/// A new DEST is created O_EXCL: a symlink planted at its name while aiscp waits for a FIFO
/// source's writer is not followed, and its target keeps its content. Same for cp.
#[test]
fn a_symlink_planted_at_a_new_dest_is_not_written_through() {
    for prog in [Some(Backend::Host), Some(Backend::FakeGpu), None] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        nix::unistd::mkfifo(&d.join("src"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        fs::write(d.join("victim"), b"precious\n").unwrap();
        let mut cmd = match prog {
            Some(backend) => aiscp(backend, d),
            None => {
                let mut c = Command::new("cp");
                c.current_dir(d);
                c
            }
        };
        let child: Child = cmd
            .args(["src", "dst"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // DEST has been checked absent once the FIFO is being opened (cp blocks in open())
        // or is open (aiscp polls it).
        let deadline = Instant::now() + Duration::from_secs(20);
        while !waiting_on_fifo(child.id(), &d.join("src")) {
            assert!(
                Instant::now() < deadline,
                "{prog:?} never waited for the FIFO"
            );
            thread::sleep(Duration::from_millis(5));
        }
        symlink("victim", d.join("dst")).unwrap();
        // Opened for reading too, so the FIFO keeps a reader: a program that rightly gives up
        // at DEST may close its end before this write, which then must not fail with EPIPE.
        let mut w = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(d.join("src"))
            .unwrap();
        w.write_all(b"attacker data\n").unwrap();
        drop(w);
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            fs::read(d.join("victim")).unwrap(),
            b"precious\n",
            "{prog:?} wrote through the planted symlink"
        );
        assert_eq!(out.status.code(), Some(1), "{prog:?}");
    }
}

/// Whether process `pid` is blocked opening a FIFO or holds `fifo` open.
fn waiting_on_fifo(pid: u32, fifo: &Path) -> bool {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    if fs::read_to_string(proc.join("wchan"))
        .is_ok_and(|w| w.contains("wait_for_partner") || w.contains("fifo_open"))
    {
        return true;
    }
    let fifo = fs::canonicalize(fifo).unwrap();
    fs::read_dir(proc.join("fd")).is_ok_and(|fds| {
        fds.filter_map(|e| e.ok())
            .any(|e| fs::read_link(e.path()).is_ok_and(|t| t == fifo))
    })
}

/// SOURCE is opened O_NOFOLLOW where cp does not dereference: a symlink swapped in after
/// its stat is not followed, even to the very file that was stat'ed (which the identity
/// check alone would let through).
#[test]
fn a_source_swapped_for_a_symlink_is_not_followed() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        fs::write(d.join("src"), b"data\n").unwrap();
        let mut cmd = aiscp(backend, &d);
        cmd.args(["-P", "src", "dst"]);
        let out = paused_at(cmd, "source-open", &d, || {
            fs::rename(d.join("src"), d.join("moved")).unwrap();
            symlink("moved", d.join("src")).unwrap();
        });
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "PROG: cannot open 'src' for reading: Too many levels of symbolic links\n"
        );
        assert!(!d.join("dst").exists());
    }
}

/// The opened SOURCE is checked (fstat) to be the file that was stat'ed: one replaced
/// meanwhile is skipped with cp's message, and DEST is not made.
#[test]
fn a_source_replaced_after_its_stat_is_skipped() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        fs::write(d.join("src"), b"data\n").unwrap();
        let mut cmd = aiscp(backend, &d);
        cmd.args(["src", "dst"]);
        let out = paused_at(cmd, "source-open", &d, || {
            fs::write(d.join("other"), b"other data\n").unwrap();
            fs::rename(d.join("other"), d.join("src")).unwrap();
        });
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "PROG: skipping file 'src', as it was replaced while being copied\n"
        );
        assert!(!d.join("dst").exists());
    }
}

/// Inside a directory the run made, a file's DEST is not looked for (nothing but the run puts
/// files there) and is created O_EXCL, as cp does: a file another process makes at that name
/// meanwhile is left as it is and reported ("File exists", exit 1), never overwritten.
#[test]
fn a_file_made_meanwhile_in_a_directory_the_run_made_is_left_alone() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        fs::create_dir(d.join("src")).unwrap();
        fs::write(d.join("src/f"), random_bytes(5000, 4)).unwrap();
        let mut cmd = aiscp(backend, &d);
        cmd.args(["-r", "src", "dst"]);
        let out = paused_at(cmd, "child", &d, || {
            fs::write(d.join("dst/f"), b"theirs\n").unwrap();
        });
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            "PROG: cannot create regular file 'dst/f': File exists\n"
        );
        assert_eq!(fs::read(d.join("dst/f")).unwrap(), b"theirs\n");
    }
}

/// The opened DEST is checked to be another file than SOURCE: a DEST name made a hard link
/// to SOURCE after the checks is refused as the same file, and SOURCE keeps its content
/// (DEST is truncated only after that check).
#[test]
fn a_dest_swapped_for_the_source_is_refused_and_the_source_kept() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        let data = random_bytes(100_000, 3);
        fs::write(d.join("src"), &data).unwrap();
        fs::write(d.join("dst"), b"old\n").unwrap();
        let mut cmd = aiscp(backend, &d);
        cmd.args(["src", "dst"]);
        let out = paused_at(cmd, "dest-open", &d, || {
            fs::remove_file(d.join("dst")).unwrap();
            fs::hard_link(d.join("src"), d.join("dst")).unwrap();
        });
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "PROG: 'src' and 'dst' are the same file\n");
        assert!(fs::read(d.join("src")).unwrap() == data, "SOURCE changed");
    }
}

/// The syscalls of one run as strace records them (None where strace is missing).
fn strace(backend: Backend, dir: &Path, args: &[&str]) -> Option<Vec<String>> {
    let log = dir.join("strace.log");
    let mut cmd = Command::new("strace");
    hermetic(&mut cmd)
        .current_dir(dir)
        .args(["-f", "-qq", "-o"])
        .arg(&log)
        .args([
            "-e",
            "trace=openat,fsync,fdatasync,rename,renameat,renameat2,close",
        ])
        .arg(program())
        .args(args);
    backend.apply(&mut cmd, &dir.join("report"));
    match cmd.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("{}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => {
            skip("no strace", "");
            return None;
        }
    }
    let text = fs::read_to_string(&log).unwrap();
    Some(join_interrupted(&text))
}

/// strace's lines without their thread ids, a call that another thread interrupted
/// (`... <unfinished ...>`, later `<... NAME resumed>REST`) joined back into one line.
fn join_interrupted(text: &str) -> Vec<String> {
    let mut pending: std::collections::HashMap<&str, String> = Default::default();
    let mut calls = Vec::new();
    for line in text.lines() {
        let (tid, call) = line.split_once(' ').unwrap_or(("", line));
        let call = call.trim_start();
        if let Some(head) = call.strip_suffix(" <unfinished ...>") {
            pending.insert(tid, head.to_owned());
        } else if let Some(rest) = call.strip_prefix("<... ") {
            let tail = rest.split_once(" resumed>").map_or(rest, |(_, t)| t);
            let head = pending.remove(tid).unwrap_or_default();
            calls.push(format!("{head}{tail}"));
        } else {
            calls.push(call.to_owned());
        }
    }
    calls.extend(pending.into_values());
    calls
}

#[test]
fn interrupted_calls_are_joined() {
    let text = "11 openat(AT_FDCWD, \"dst\", O_WRONLY|O_CREAT <unfinished ...>\n\
                12 close(3) = 0\n\
                11 <... openat resumed>) = 5\n";
    assert_eq!(
        join_interrupted(text),
        [
            "close(3) = 0",
            "openat(AT_FDCWD, \"dst\", O_WRONLY|O_CREAT) = 5"
        ]
    );
}

/// The index of the `openat(..., "NAME...", O_WRONLY...) = FD` line and FD.
fn opened_fd(calls: &[String], name_starts: &str) -> Option<(usize, String)> {
    calls.iter().enumerate().find_map(|(i, c)| {
        let rest = c.strip_prefix("openat(")?;
        let quoted = rest.split('"').nth(1)?;
        if !quoted.starts_with(name_starts) || !c.contains("O_WRONLY") {
            return None;
        }
        let fd = c.rsplit("= ").next()?.trim();
        fd.parse::<i32>().ok().map(|_| (i, fd.to_owned()))
    })
}

/// --fsync syncs DEST through its own descriptor after the data is in, before closing it.
#[test]
fn fsync_is_honoured() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("src"), random_bytes(300_000, 4)).unwrap();
        let Some(calls) = strace(backend, dir.path(), &["-q", "--fsync", "src", "dst"]) else {
            return;
        };
        let (at, fd) = opened_fd(&calls, "dst").expect("dst opened for writing");
        let synced = calls[at..]
            .iter()
            .position(|c| c.starts_with(&format!("fsync({fd})")));
        let closed = calls[at..]
            .iter()
            .position(|c| c.starts_with(&format!("close({fd})")));
        assert!(
            synced.is_some_and(|s| closed.is_none_or(|c| s < c)),
            "{backend:?}: no fsync of dst before its close: {calls:#?}"
        );
    }
}

/// --atomic syncs the temporary before renaming it over DEST (else a crash could leave the
/// new name on an empty file).
#[test]
fn atomic_syncs_the_temporary_before_the_rename() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("src"), random_bytes(300_000, 5)).unwrap();
        fs::write(dir.path().join("dst"), b"old\n").unwrap();
        let Some(calls) = strace(backend, dir.path(), &["-q", "--atomic", "src", "dst"]) else {
            return;
        };
        let (at, fd) = opened_fd(&calls, ".dst.").expect("temporary opened");
        let synced = calls[at..]
            .iter()
            .position(|c| c.starts_with(&format!("fsync({fd})")));
        let renamed = calls[at..]
            .iter()
            .position(|c| c.starts_with("rename") && c.contains("\"dst\""));
        assert!(renamed.is_some(), "{backend:?}: no rename: {calls:#?}");
        assert!(
            synced.is_some_and(|s| s < renamed.unwrap()),
            "{backend:?}: the temporary was not synced before the rename: {calls:#?}"
        );
    }
}

/// The last step of a copy, ftruncate to SOURCE's size (here extending past the data over a
/// trailing hole), fails under a file-size limit: exit 1 with cp's message, for both.
#[test]
fn a_failing_final_ftruncate_is_reported_like_cp() {
    let run = |prog: &Path, backend: Backend| -> (Option<i32>, String, u64) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // 64 KiB of data, then a hole to 8 MiB.
        let f = fs::File::create(d.join("src")).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(&random_bytes(64 * 1024, 6), 0).unwrap();
        f.set_len(8 << 20).unwrap();
        let mut cmd = Command::new(prog);
        hermetic(&mut cmd)
            .current_dir(d)
            .args(["--sparse=always", "src", "dst"]);
        if prog == program() {
            cmd.arg("-q");
        }
        backend.apply(&mut cmd, &d.join("report"));
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit and signal are async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: 1 << 20,
                    rlim_max: 1 << 20,
                };
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).replace(&prog.display().to_string(), "PROG");
        let len = fs::metadata(d.join("dst")).map_or(0, |m| m.len());
        (out.status.code(), err, len)
    };
    let cp = run(&PathBuf::from("cp"), Backend::Host);
    assert_eq!(cp.0, Some(1), "{cp:?}");
    for backend in BACKENDS {
        let ours = run(&program(), backend);
        assert_eq!(ours, cp, "{backend:?}");
    }
}

/// Runs that move no file data (--attributes-only, -l, -s) never bring up the GPU library:
/// the fake, loaded only when the engine starts, writes no report.
#[test]
fn runs_without_data_never_start_the_gpu() {
    for args in [&["--attributes-only"][..], &["-l"], &["-s"]] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("src"), b"data\n").unwrap();
        fs::write(d.join("old"), b"old\n").unwrap();
        let out = aiscp(Backend::FakeGpu, d)
            .args(args)
            .arg(d.join("src"))
            .arg(if args[0] == "--attributes-only" {
                "old"
            } else {
                "dst"
            })
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(
            !d.join("report").exists(),
            "{args:?} loaded the GPU library: {}",
            fs::read_to_string(d.join("report")).unwrap_or_default()
        );
    }
}

/// Going back up a deep tree to a level whose descriptor was given back, through the ".." of
/// the level below: when that level was moved elsewhere meanwhile, its ".." is another
/// directory, which must not be taken for the level (it is found again by its names), or
/// the level's remaining entries would be read from wherever the move put it.
#[test]
fn a_level_reopened_after_its_child_moved_is_the_same_directory() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        // src/d/d/... 12 levels; each level's `z` comes after its `d` in inode order.
        let mut level = d.join("src");
        fs::create_dir(&level).unwrap();
        for i in 0..12 {
            fs::create_dir(level.join("d")).unwrap();
            fs::write(level.join("z"), format!("level {i}\n")).unwrap();
            level = level.join("d");
        }
        fs::create_dir(d.join("outside")).unwrap();
        fs::write(d.join("outside/z"), b"OUTSIDE\n").unwrap();
        let mut cmd = aiscp(backend, &d);
        cmd.args(["-r", "src", "dst"]);
        let out = paused_at(cmd, "walk-reopen", &d, || {
            // The first level given back is reopened from its child, src/d/d/d/d/d: move
            // that child under outside/, so its ".." is outside/.
            fs::rename(d.join("src/d/d/d/d/d"), d.join("outside/d")).unwrap();
        });
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {}", stderr(&out));
        for i in 0..5 {
            let z = format!("dst/{}z", "d/".repeat(i));
            assert_eq!(
                fs::read_to_string(d.join(&z)).unwrap(),
                format!("level {i}\n"),
                "{backend:?}: {z}"
            );
        }
    }
}

/// A SOURCE that grows after it was looked at (here between its stat and the copy) is copied
/// on to its new EOF, as cp reads until EOF: 200 MiB (several slices, an aligned end, no
/// tail) plus 1 MiB appended, and a file small enough to go in flight.
#[test]
fn a_source_that_grows_is_copied_to_its_new_eof() {
    for backend in BACKENDS {
        for size in [200 << 20, 300_000] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().to_path_buf();
            let mut want = random_bytes(size, 7);
            fs::write(d.join("src"), &want).unwrap();
            let more = random_bytes(1 << 20, 8);
            want.extend_from_slice(&more);
            let mut cmd = aiscp(backend, &d);
            cmd.args(["src", "dst"]);
            let out = paused_at(cmd, "dest-open", &d, || {
                use std::io::Write;
                let mut f = fs::OpenOptions::new()
                    .append(true)
                    .open(d.join("src"))
                    .unwrap();
                f.write_all(&more).unwrap();
            });
            assert!(out.status.success(), "{backend:?} {size}: {}", stderr(&out));
            let got = fs::read(d.join("dst")).unwrap();
            assert!(
                got == want,
                "{backend:?} {size}: {} bytes, want {}",
                got.len(),
                want.len()
            );
        }
    }
}

/// Under --preserve=ownership a new DEST is made with no access for group and others until
/// its owner is set (GNU does the same): between its creation and the copy, DEST's mode has
/// no group or other bits although SOURCE's has.
#[test]
fn a_new_dest_keeps_others_out_until_its_owner_is_set() {
    use std::os::unix::fs::PermissionsExt;
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_path_buf();
        fs::write(d.join("src"), b"data\n").unwrap();
        fs::set_permissions(d.join("src"), fs::Permissions::from_mode(0o644)).unwrap();
        let mut cmd = aiscp(backend, &d);
        cmd.args(["--preserve=ownership", "src", "dst"]);
        let mut seen = 0;
        let out = paused_at(cmd, "dest-created", &d, || {
            seen = fs::metadata(d.join("dst")).unwrap().permissions().mode() & 0o777;
        });
        assert!(out.status.success(), "{backend:?}: {}", stderr(&out));
        assert_eq!(seen & 0o077, 0, "{backend:?}: DEST made {seen:o}");
        assert_eq!(fs::read(d.join("dst")).unwrap(), b"data\n");
    }
}
