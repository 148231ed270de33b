//! --atomic where no GNU cp run can be the oracle: what DEST looks like while the copy is
//! under way (a backup or a removal waits for the rename), a FIFO DEST written in place with
//! a reader on the other end, what --debug says, and the one refusal plain cp does not have
//! (an owner the new file could not keep). The end states cp also reaches are compared with
//! GNU cp in tests/it/parity (the atomic_* scenarios).

use crate::support::{aiscp_command, hermetic, program, random_bytes, skip, Backend, BACKENDS};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const SIZE: usize = 4 << 20;

/// aiscp on the fake GPU, its second write stalled for `stall_ms`, copying `src` to `dst`
/// with `extra` options.
fn start_stalled(dir: &Path, extra: &[&str], stall_ms: u64) -> Child {
    let mut cmd = aiscp_command();
    cmd.current_dir(dir)
        .args(["--atomic", "--chunk-size", "1M", "--streams", "1"])
        .args(extra)
        .args(["src", "dst"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("AISCP_FAKE_GPU_FAULTS", format!("write#2=stall:{stall_ms}"));
    Backend::FakeGpu.apply(&mut cmd, &dir.join("report"));
    cmd.spawn().unwrap()
}

/// Waits until the temporary beside `dst` holds the first MiB: the copy is under way.
fn wait_for_first_write(dir: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let started = fs::read_dir(dir).unwrap().filter_map(|e| e.ok()).any(|e| {
            e.file_name().to_string_lossy().starts_with(".dst.")
                && e.metadata().is_ok_and(|m| m.len() >= 1 << 20)
        });
        if started {
            return;
        }
        test_support::child::assert_running(child, "aiscp, before its first write");
        assert!(Instant::now() < deadline, "the first write never landed");
        thread::sleep(Duration::from_millis(10));
    }
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "report")
        .collect();
    v.sort();
    v
}

/// -b and --remove-destination happen at the rename: while the new file is being written,
/// DEST is still there with its old data and no backup has been made; at the end DEST is
/// new and (with -b) the backup holds the old data.
#[test]
fn backup_and_removal_wait_for_the_rename() {
    // Last, --preserve=links with a SOURCE of two links: still a data copy, not a link.
    for extra in [
        &["-b"][..],
        &["--remove-destination"],
        &["--backup=numbered"],
        &["-b", "--preserve=links"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let data = random_bytes(SIZE, 21);
        fs::write(dir.path().join("src"), &data).unwrap();
        fs::write(dir.path().join("dst"), b"old\n").unwrap();
        let linked = extra.contains(&"--preserve=links");
        if linked {
            fs::hard_link(dir.path().join("src"), dir.path().join("src.hl")).unwrap();
        }
        let mut child = start_stalled(dir.path(), extra, 1500);
        wait_for_first_write(dir.path(), &mut child);
        assert_eq!(
            fs::read(dir.path().join("dst")).unwrap(),
            b"old\n",
            "{extra:?}"
        );
        let during = names(dir.path());
        // src (and its link), dst, the temporary: no backup yet.
        assert_eq!(
            during.len(),
            3 + usize::from(linked),
            "{extra:?}: {during:?}"
        );
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{extra:?}: {out:?}");
        assert!(
            fs::read(dir.path().join("dst")).unwrap() == data,
            "{extra:?}"
        );
        let backup = match extra[0] {
            "-b" => Some("dst~"),
            "--backup=numbered" => Some("dst.~1~"),
            _ => None,
        };
        let mut want = vec!["dst".to_owned(), "src".to_owned()];
        if linked {
            want.push("src.hl".to_owned());
        }
        if let Some(b) = backup {
            assert_eq!(fs::read(dir.path().join(b)).unwrap(), b"old\n");
            want.insert(1, b.to_owned());
        }
        assert_eq!(names(dir.path()), want, "{extra:?}");
        Backend::FakeGpu.assert_report_clean(&dir.path().join("report"));
    }
}

/// A signal in the middle of an --atomic -b or --remove-destination copy leaves DEST as it
/// was, with no backup and no temporary.
#[test]
fn an_interrupted_backup_or_removal_leaves_dst_alone() {
    for extra in [&["-b"][..], &["--remove-destination"]] {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("src"), random_bytes(SIZE, 22)).unwrap();
        fs::write(dir.path().join("dst"), b"old\n").unwrap();
        let mut child = start_stalled(dir.path(), extra, 1000);
        wait_for_first_write(dir.path(), &mut child);
        kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let out = child.wait_with_output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGINT),
            "{extra:?}: {out:?}"
        );
        assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"old\n");
        assert_eq!(names(dir.path()), ["dst", "src"], "{extra:?}");
    }
}

/// A FIFO DEST is written in place, as cp writes it (replacing it would leave the reader
/// waiting forever and put a regular file where the FIFO was); --debug says so.
#[test]
fn a_fifo_dst_is_written_in_place() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let data = random_bytes(300_000, 23);
        fs::write(dir.path().join("src"), &data).unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let reader = {
            let fifo = fifo.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                fs::File::open(fifo).unwrap().read_to_end(&mut got).unwrap();
                got
            })
        };
        let mut cmd = aiscp_command();
        cmd.current_dir(dir.path())
            .args(["--atomic", "--debug", "src", "fifo"])
            .stdin(Stdio::null());
        backend.apply(&mut cmd, &dir.path().join("report"));
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend:?}: {stderr}");
        assert!(
            stderr.contains("'fifo' is not a regular file: written in place, not replaced"),
            "{stderr}"
        );
        assert!(
            reader.join().unwrap() == data,
            "{backend:?}: the reader got other bytes"
        );
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(names(dir.path()), ["fifo", "src"]);
        backend.assert_report_clean(&dir.path().join("report"));
    }
}

/// Where the new file could not keep DEST's owner and group (a file of the user's own in a
/// group the user is not in), --atomic refuses before any data moves and DEST keeps its
/// data; plain cp would write it in place. Needs root to set the scene (and setpriv).
#[test]
fn an_owner_that_cannot_be_kept_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        skip("not root", "needs root to give a file away");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(dir.path().join("src"), b"new\n").unwrap();
    let dst = dir.path().join("dst");
    fs::write(&dst, b"old\n").unwrap();
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    // Owned by nobody, group root: nobody may write it but not make a file of group root.
    nix::unistd::chown(&dst, Some(nobody.uid), Some(nix::unistd::Gid::from_raw(0))).unwrap();
    fs::set_permissions(&dst, fs::Permissions::from_mode(0o664)).unwrap();
    let run = |atomic: bool| {
        let mut cmd = Command::new("setpriv");
        hermetic(&mut cmd)
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(program())
            .args(atomic.then_some("--atomic"))
            .args(["src", "dst"])
            .current_dir(dir.path())
            .env("AISCP_BACKEND", "host")
            .env("LC_ALL", "C.UTF-8");
        cmd.output().unwrap()
    };
    let out = run(true);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{}: cannot replace 'dst' atomically keeping its owner and group: Operation not \
             permitted\n",
            program().display()
        )
    );
    assert_eq!(fs::read(&dst).unwrap(), b"old\n");
    assert_eq!(names(dir.path()), ["dst", "src"]);
    // Without --atomic it is cp's in-place write.
    let out = run(false);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read(&dst).unwrap(), b"new\n");
}

/// A new DEST is put in place without replacing anything, as cp creates it O_EXCL: a file
/// that appears at DEST while the copy runs is left alone and the copy fails with cp's
/// message for an O_EXCL open that finds something there.
#[test]
fn a_new_dst_never_replaces_what_appeared_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("src"), random_bytes(SIZE, 24)).unwrap();
    let mut child = start_stalled(dir.path(), &[], 1000);
    wait_for_first_write(dir.path(), &mut child);
    fs::write(dir.path().join("dst"), b"planted\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{}: cannot create regular file 'dst': File exists\n",
            program().display()
        )
    );
    assert_eq!(fs::read(dir.path().join("dst")).unwrap(), b"planted\n");
    assert_eq!(names(dir.path()), ["dst", "src"]);
    Backend::FakeGpu.assert_report_clean(&dir.path().join("report"));
}

/// The temporary goes beside the file a DEST symlink names; where that directory takes no
/// new file, --atomic refuses (naming that directory) and the file keeps its data. Needs
/// root to set the scene.
#[test]
fn no_room_beside_a_symlinks_target_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        skip("not root", "needs root to run as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    fs::write(dir.path().join("src"), b"new\n").unwrap();
    let ro = dir.path().join("ro");
    fs::create_dir(&ro).unwrap();
    fs::write(ro.join("t"), b"old\n").unwrap();
    fs::set_permissions(ro.join("t"), fs::Permissions::from_mode(0o666)).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    std::os::unix::fs::symlink("ro/t", dir.path().join("dst")).unwrap();
    let out = hermetic(&mut Command::new("setpriv"))
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .arg(program())
        .args(["--atomic", "src", "dst"])
        .current_dir(dir.path())
        .env("AISCP_BACKEND", "host")
        .env("LC_ALL", "C.UTF-8")
        .arg("-q")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "{}: cannot replace 'dst' atomically: cannot create temporary file in 'ro': \
             Permission denied\n",
            program().display()
        )
    );
    assert_eq!(fs::read(ro.join("t")).unwrap(), b"old\n");
    assert_eq!(fs::read_dir(&ro).unwrap().count(), 1);
}

/// A DEST symlink with an absolute target (and one through a relative chain into another
/// directory) is resolved: the file it names is replaced and the symlinks stay as they were.
#[test]
fn symlink_dsts_are_resolved_absolute_or_relative() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let data = random_bytes(10_000, 25);
        fs::write(dir.path().join("src"), &data).unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        let target = dir.path().join("sub/t");
        fs::write(&target, b"old\n").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("abs")).unwrap();
        std::os::unix::fs::symlink("t", dir.path().join("sub/rel")).unwrap();
        std::os::unix::fs::symlink("sub/rel", dir.path().join("chain")).unwrap();
        for dst in ["abs", "chain"] {
            fs::write(&target, b"old\n").unwrap();
            let mut cmd = aiscp_command();
            cmd.current_dir(dir.path())
                .args(["-q", "--atomic", "src", dst])
                .stdin(Stdio::null());
            backend.apply(&mut cmd, &dir.path().join("report"));
            let out = cmd.output().unwrap();
            assert!(out.status.success(), "{backend:?} {dst}: {out:?}");
            assert!(fs::read(&target).unwrap() == data, "{backend:?} {dst}");
            assert_eq!(fs::read_link(dir.path().join("abs")).unwrap(), target);
            assert_eq!(
                fs::read_link(dir.path().join("chain")).unwrap(),
                Path::new("sub/rel")
            );
            assert_eq!(fs::read_dir(dir.path().join("sub")).unwrap().count(), 2);
            backend.assert_report_clean(&dir.path().join("report"));
        }
    }
}

/// A writable DEST in a directory the user may not write (0555): cp writes DEST in place;
/// --atomic cannot make its temporary there, and refuses rather than give up its promise,
/// saying both what it could not do and why, with DEST untouched (a deliberate difference,
/// README "Where aiscp differs").
#[test]
fn a_dest_in_an_unwritable_directory_is_refused_clearly() {
    for (prog, extra) in [("cp", None), ("aiscp", Some("--atomic"))] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d");
        fs::create_dir(&d).unwrap();
        fs::write(dir.path().join("src"), b"new\n").unwrap();
        fs::write(d.join("dst"), b"old\n").unwrap();
        let chown = |p: &Path| {
            nix::unistd::chown(p, Some(65534.into()), Some(65534.into())).unwrap();
        };
        chown(&d.join("dst"));
        chown(&d);
        fs::set_permissions(&d, fs::Permissions::from_mode(0o555)).unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = Command::new("setpriv");
        hermetic(&mut cmd)
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .current_dir(dir.path());
        if prog == "cp" {
            cmd.arg("cp");
        } else {
            cmd.arg(program()).env("AISCP_BACKEND", "host");
        }
        cmd.args(extra).args(["src", "d/dst"]);
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if prog == "cp" {
            assert_eq!(out.status.code(), Some(0), "cp: {stderr}");
            assert_eq!(fs::read(d.join("dst")).unwrap(), b"new\n");
        } else {
            assert_eq!(out.status.code(), Some(1), "{stderr}");
            assert_eq!(
                stderr,
                format!(
                    "{}: cannot replace 'd/dst' atomically: cannot create temporary file in \
                     'd': Permission denied\n",
                    program().display()
                )
            );
            assert_eq!(fs::read(d.join("dst")).unwrap(), b"old\n");
            assert_eq!(names(&d), ["dst"]);
        }
    }
}
