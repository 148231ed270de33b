//! A real full disk, no injected faults: a small tmpfs mounted in the test's directory.
//! Copying a file larger than it fails with cp's "No space left on device" message and
//! exit 1, leaves the source alone, and with --atomic leaves nothing behind.
//!
//! Mounting needs root (CI and the dev machines run as root); where the mount is refused
//! the tests print why and pass without checking anything.

use crate::support::{
    aiscp_command, assert_same_bytes, program, random_bytes, skip, Backend, BACKENDS,
};
use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output};

/// Size of the small filesystem, and of the file that does not fit in it.
const FS_SIZE: &str = "4m";
const TOO_BIG: usize = 6 << 20;

/// A tmpfs mounted on `dir/mnt`, unmounted on drop.
struct SmallFs {
    dir: tempfile::TempDir,
    mnt: PathBuf,
}

impl SmallFs {
    /// None (with the reason printed) where this process may not mount.
    fn mount() -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let mnt = dir.path().join("mnt");
        fs::create_dir(&mnt).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={FS_SIZE},mode=0755"),
                "tmpfs",
            ])
            .arg(&mnt)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(SmallFs { dir, mnt }),
            Ok(o) => {
                skip(
                    "no mount rights",
                    &format!(
                        "cannot mount a {FS_SIZE} tmpfs: {}",
                        String::from_utf8_lossy(&o.stderr).trim()
                    ),
                );
                None
            }
            Err(e) => {
                skip("no mount", &format!("cannot run mount: {e}"));
                None
            }
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs aiscp in the test directory (outside the small filesystem).
    fn aiscp(&self, backend: Backend, args: &[&str]) -> Output {
        let mut cmd = aiscp_command();
        cmd.current_dir(self.dir.path())
            .args(args)
            .stdin(std::process::Stdio::null());
        backend.apply(&mut cmd, &self.path("report"));
        cmd.output().unwrap()
    }

    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(&self.mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

fn assert_enospc(out: &Output, dst: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.lines().collect::<Vec<_>>(),
        [format!(
            "{}: error writing '{dst}': No space left on device",
            program().display()
        )],
    );
}

fn check_report(fs_: &SmallFs, backend: Backend) {
    backend.assert_report_clean(&fs_.path("report"));
}

#[test]
fn copying_onto_a_full_filesystem_fails_with_enospc() {
    for backend in BACKENDS {
        let Some(small) = SmallFs::mount() else {
            return;
        };
        let data = random_bytes(TOO_BIG, 1);
        fs::write(small.path("big"), &data).unwrap();
        let out = small.aiscp(backend, &["--chunk-size", "256K", "big", "mnt/big"]);
        assert_enospc(&out, "mnt/big");
        assert_same_bytes(&fs::read(small.path("big")).unwrap(), &data, "source");
        // What is left is what fitted, as cp leaves it: a true prefix, never padded.
        let got = fs::read(small.mnt.join("big")).unwrap();
        assert!(got.len() < TOO_BIG);
        assert_same_bytes(&got, &data[..got.len()], "partial DST");
        check_report(&small, backend);
    }
}

#[test]
fn the_other_operands_are_still_attempted_after_enospc() {
    let Some(small) = SmallFs::mount() else {
        return;
    };
    let big = random_bytes(TOO_BIG, 2);
    let small_data = random_bytes(1000, 3);
    fs::write(small.path("big"), &big).unwrap();
    fs::write(small.path("small"), &small_data).unwrap();
    // small comes after big, which filled the filesystem: it must still be attempted, and
    // either fit (big's partial copy was cut back to a page boundary, freeing a little) or
    // fail with its own message.
    let out = small.aiscp(Backend::Host, &["big", "small", "mnt/"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let prog = program().display().to_string();
    assert_eq!(
        lines[0],
        format!("{prog}: error writing 'mnt/big': No space left on device")
    );
    match fs::read(small.mnt.join("small")) {
        Ok(got) if got == small_data => assert_eq!(lines.len(), 1, "{stderr}"),
        _ => assert_eq!(
            lines[1..],
            [format!(
                "{prog}: error writing 'mnt/small': No space left on device"
            )],
            "small was not attempted"
        ),
    }
}

#[test]
fn an_atomic_copy_onto_a_full_filesystem_leaves_nothing_behind() {
    for backend in BACKENDS {
        let Some(small) = SmallFs::mount() else {
            return;
        };
        let data = random_bytes(TOO_BIG, 4);
        fs::write(small.path("big"), &data).unwrap();
        let out = small.aiscp(
            backend,
            &["--atomic", "--chunk-size", "256K", "big", "mnt/big"],
        );
        assert_enospc(&out, "mnt/big");
        assert!(
            small.entries().is_empty(),
            "left behind: {:?}",
            small.entries()
        );
        check_report(&small, backend);
    }
}

#[test]
fn an_atomic_copy_onto_a_full_filesystem_keeps_the_old_dst() {
    let Some(small) = SmallFs::mount() else {
        return;
    };
    fs::write(small.path("big"), random_bytes(TOO_BIG, 5)).unwrap();
    fs::write(small.mnt.join("big"), b"old\n").unwrap();
    let out = small.aiscp(Backend::Host, &["--atomic", "big", "mnt/big"]);
    assert_enospc(&out, "mnt/big");
    assert_eq!(small.entries(), ["big"]);
    assert_eq!(fs::read(small.mnt.join("big")).unwrap(), b"old\n");
}

/// --atomic with --remove-destination or -b: the old DST is removed (or becomes the backup)
/// only at the rename, so a copy that runs out of space leaves it in place, and no backup.
#[test]
fn an_atomic_removal_or_backup_onto_a_full_filesystem_keeps_the_old_dst() {
    for backend in BACKENDS {
        for extra in ["--remove-destination", "-b"] {
            let Some(small) = SmallFs::mount() else {
                return;
            };
            fs::write(small.path("big"), random_bytes(TOO_BIG, 6)).unwrap();
            let old = random_bytes(1 << 20, 7);
            fs::write(small.mnt.join("big"), &old).unwrap();
            let out = small.aiscp(
                backend,
                &["--atomic", extra, "--chunk-size", "256K", "big", "mnt/big"],
            );
            assert_enospc(&out, "mnt/big");
            assert_eq!(small.entries(), ["big"], "{extra}");
            assert_same_bytes(&fs::read(small.mnt.join("big")).unwrap(), &old, extra);
            check_report(&small, backend);
        }
    }
}

/// A write that does not fit is retried in order through the page cache, so DEST keeps
/// exactly the longest prefix the filesystem takes: GNU cp's size, on every route (a whole
/// O_DIRECT slice that cannot fit fails whole, which alone would leave less).
#[test]
fn a_full_disk_keeps_exactly_what_cp_keeps() {
    let ways: [(Backend, &[&str]); 5] = [
        (Backend::Host, &[]),
        (Backend::Host, &["--chunk-size", "1M"]),
        (Backend::FakeGpu, &["--route", "bounce"]),
        (
            Backend::FakeGpu,
            &["--route", "library", "--chunk-size", "1M"],
        ),
        (Backend::FakeGpu, &["--route", "library", "--async"]),
    ];
    for (backend, args) in ways {
        let Some(small) = SmallFs::mount() else {
            return;
        };
        let data = random_bytes(TOO_BIG, 8);
        fs::write(small.path("big"), &data).unwrap();
        let cp = Command::new("cp")
            .current_dir(small.path(""))
            .args(["big", "mnt/big"])
            .output()
            .unwrap();
        assert_eq!(cp.status.code(), Some(1), "cp fills the filesystem");
        let cp_len = fs::metadata(small.mnt.join("big")).unwrap().len();
        fs::remove_file(small.mnt.join("big")).unwrap();
        let mut all = args.to_vec();
        all.extend(["big", "mnt/big"]);
        let out = small.aiscp(backend, &all);
        assert_enospc(&out, "mnt/big");
        let got = fs::read(small.mnt.join("big")).unwrap();
        assert_eq!(
            got.len() as u64,
            cp_len,
            "{backend:?} {args:?}: cp kept {cp_len}"
        );
        assert_same_bytes(&got, &data[..got.len()], "partial DST");
        check_report(&small, backend);
    }
}

/// A full disk met at the first write after a hole: cp's lseek over the hole does not
/// lengthen DEST, so DEST ends at the data that fitted; so does aiscp's, on every route and
/// with holes kept (`auto`) or made (`always`).
#[test]
fn a_full_disk_after_a_hole_keeps_exactly_what_cp_keeps() {
    use std::os::unix::fs::FileExt;
    let ways: [(Backend, &[&str]); 3] = [
        (Backend::Host, &[]),
        (Backend::Host, &["--chunk-size", "1M"]),
        (Backend::FakeGpu, &["--route", "bounce"]),
    ];
    for (backend, args) in ways {
        for sparse in ["--sparse=auto", "--sparse=always"] {
            let Some(small) = SmallFs::mount() else {
                return;
            };
            // 4 MiB of data (all the filesystem takes), a 1 MiB hole, 1 MiB of data.
            let f = fs::File::create(small.path("a")).unwrap();
            f.write_all_at(&random_bytes(4 << 20, 1), 0).unwrap();
            f.write_all_at(&random_bytes(1 << 20, 2), 5 << 20).unwrap();
            drop(f);
            let cp = Command::new("cp")
                .current_dir(small.path(""))
                .args([sparse, "a", "mnt/b"])
                .output()
                .unwrap();
            assert_eq!(cp.status.code(), Some(1), "cp fills the filesystem");
            let cp_len = fs::metadata(small.mnt.join("b")).unwrap().len();
            fs::remove_file(small.mnt.join("b")).unwrap();
            let mut all = args.to_vec();
            all.extend([sparse, "a", "mnt/b"]);
            let out = small.aiscp(backend, &all);
            assert_enospc(&out, "mnt/b");
            let len = fs::metadata(small.mnt.join("b")).unwrap().len();
            assert_eq!(
                len, cp_len,
                "{backend:?} {args:?} {sparse}: cp kept {cp_len}"
            );
            check_report(&small, backend);
        }
    }
}

/// A sparse SOURCE of the largest length a file may have, copied with `--sparse=never` onto
/// a small filesystem: the plan is made a window at a time, so the copy fails with ENOSPC in
/// bounded memory (under a 4 GiB address-space limit) instead of planning 2^63 bytes at once.
#[test]
fn the_largest_sparse_file_fails_with_enospc_in_bounded_memory() {
    let (Some(small), Some(holder)) = (SmallFs::mount(), SmallFs::mount()) else {
        return;
    };
    let huge = holder.mnt.join("huge");
    fs::File::create(&huge)
        .unwrap()
        .set_len(i64::MAX as u64)
        .unwrap();
    let mut cmd = Command::new("prlimit");
    crate::support::hermetic(&mut cmd)
        .current_dir(small.dir.path())
        .arg(format!("--as={}", 4u64 << 30))
        .arg("--")
        .arg(program())
        .args(["--sparse=never"])
        .arg(&huge)
        .arg("mnt/d")
        .stdin(std::process::Stdio::null());
    Backend::Host.apply(&mut cmd, &small.path("report"));
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // cp words it "failed to extend" (it writes zeros for a hole); aiscp reads them.
    assert!(
        stderr.contains("'mnt/d': No space left on device"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// A tmpfs of `size` mounted on `at` (created), unmounted on drop; None where mounting is
/// refused (said through `skip`).
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: PathBuf, size: &str) -> Option<Mounted> {
        fs::create_dir_all(&at).unwrap();
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(&at)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Mounted(at)),
            _ => {
                skip("no mount rights", "cannot mount a tmpfs");
                None
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// What a copy left on a filesystem: each file's name, size and whether it is a prefix of
/// its SOURCE, in name order; and the run's exit status and messages (the program's name
/// taken off).
fn outcome(dst: &std::path::Path, src: &std::path::Path, out: &Output, name: &str) -> String {
    let mut files: Vec<String> = fs::read_dir(dst)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let got = fs::read(e.path()).unwrap();
            let want = fs::read(src.join(e.file_name())).unwrap();
            let prefix = want.starts_with(&got);
            format!("{:?} {} {prefix}", e.file_name(), got.len())
        })
        .collect();
    files.sort();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(name, "cp");
    format!("{:?}\n{stderr}{}", out.status.code(), files.join("\n"))
}

/// A tree that does not fit on an 8 MiB filesystem, copied with -r: the files in flight
/// share the space as cp's one file at a time does not, yet what is left (which file fails
/// and how much of it is kept, the empty files after it, the messages, the exit status) is
/// cp's, in-process on both backends and through a staging service, run after run.
#[test]
fn a_tree_onto_a_full_disk_leaves_what_cp_leaves() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    fs::create_dir(&src).unwrap();
    for i in 0..12 {
        crate::support::write_random(
            &src.join(format!("f{i:02}")),
            900_000 + i * 1000,
            40 + i as u64,
        );
    }
    let socket = d.path().join("run").join("service.sock");
    let service = aiscp_command()
        .args(["--serve", "--backend", "host", "--socket"])
        .arg(&socket)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut service = Killed(service);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !socket.exists() {
        test_support::child::assert_running(&mut service.0, "the service, before its socket");
        assert!(
            std::time::Instant::now() < deadline,
            "the service never made its socket"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let ways: [(&str, Backend, bool); 3] = [
        ("host", Backend::Host, false),
        ("fake GPU", Backend::FakeGpu, false),
        ("a service", Backend::Host, true),
    ];
    for round in 0..10 {
        let Some(cp_fs) = Mounted::tmpfs(d.path().join("cp"), "8m") else {
            break;
        };
        // DEST named from inside the filesystem, so that messages name it alike.
        let cp = Command::new("cp")
            .current_dir(&cp_fs.0)
            .arg("-r")
            .arg(&src)
            .arg("t")
            .output()
            .unwrap();
        let want = outcome(&cp_fs.0.join("t"), &src, &cp, "cp");
        drop(cp_fs);
        for (way, backend, through) in ways {
            let ours_fs = Mounted::tmpfs(d.path().join("ours"), "8m").unwrap();
            let mut cmd = aiscp_command();
            cmd.current_dir(&ours_fs.0).arg("-r").arg(&src).arg("t");
            backend.apply(&mut cmd, &d.path().join("report"));
            if through {
                cmd.env("AISCP_SERVICE", &socket);
            }
            let out = cmd.output().unwrap();
            let got = outcome(
                &ours_fs.0.join("t"),
                &src,
                &out,
                &program().display().to_string(),
            );
            assert_eq!(got, want, "round {round}, {way}");
        }
    }
}

/// A child killed when dropped, a failing assertion included.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
