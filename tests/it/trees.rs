//! Trees that end badly in a naive walk: cycles (a symlink to an ancestor under -L/-H, a bind
//! mount inside itself), trees deeper than the descriptor limit, and -L trees whose every
//! level is reached through a symlink. GNU cp is the oracle for messages, exit status and
//! the resulting tree, on both backends.

use crate::support::{
    aiscp_command, hermetic, listing, program, random_bytes, skip, Backend, BACKENDS,
};
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Status, stderr with the program name as "PROG", and the listing of `out` after running
/// PROG ARGS in a fresh directory prepared by `setup`.
fn run(
    prog: &Path,
    backend: Backend,
    setup: &dyn Fn(&Path) -> Unmount,
    args: &[&str],
) -> (Option<i32>, String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let _mounts = setup(dir.path());
    let mut cmd = Command::new(prog);
    hermetic(&mut cmd).current_dir(dir.path());
    if prog == program() {
        cmd.arg("-q");
    }
    cmd.args(args);
    backend.apply(&mut cmd, &dir.path().join("report"));
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).replace(&prog.display().to_string(), "PROG");
    let result = listing(&dir.path().join("out"));
    (out.status.code(), stderr, result)
}

/// Runs aiscp (on every backend) and cp with the same set-up and arguments and asserts the
/// same outcome; returns it.
fn like_cp(setup: &dyn Fn(&Path) -> Unmount, args: &[&str]) -> (Option<i32>, String, Vec<String>) {
    let cp = run(Path::new("cp"), Backend::Host, setup, args);
    for backend in BACKENDS {
        let ours = run(&program(), backend, setup, args);
        assert_eq!(ours, cp, "{backend:?} aiscp {args:?}");
    }
    cp
}

fn self_loop(dir: &Path) -> Unmount {
    fs::create_dir_all(dir.join("src/d")).unwrap();
    fs::write(dir.join("src/d/f"), b"data\n").unwrap();
    symlink(".", dir.join("src/d/self")).unwrap();
    fs::create_dir(dir.join("out")).unwrap();
    Unmount(Vec::new())
}

#[test]
fn a_symlink_to_an_ancestor_under_l_is_a_cyclic_link() {
    for args in [
        &["-rL", "src/d", "out/A"][..],
        &["-aL", "src/d", "out/A"],
        &["-rL", "src", "out/A"],
    ] {
        let (code, stderr, _) = like_cp(&self_loop, args);
        assert_eq!(code, Some(1));
        assert!(
            stderr.contains("cannot copy cyclic symbolic link"),
            "{stderr}"
        );
    }
    // -H follows only the operand: the link inside is copied as a link.
    let (code, _, tree) = like_cp(&self_loop, &["-rH", "src/d/self", "out/C"]);
    assert_eq!(code, Some(0));
    assert!(tree.contains(&"C/self -> .".to_owned()), "{tree:?}");
}

/// A directory bind-mounted inside itself has no symlink at all: cp refuses to make a hard
/// link to a directory (or, under -L, calls it a cyclic link). Needs mount rights; skipped
/// (with a note) without them.
#[test]
fn a_bind_mount_inside_itself_ends_with_cps_message() {
    fn bind(dir: &Path) -> Option<Unmount> {
        fs::create_dir_all(dir.join("src/a/b/loop")).unwrap();
        fs::write(dir.join("src/a/f"), b"x").unwrap();
        fs::create_dir_all(dir.join("out")).unwrap();
        let target = dir.join("src/a/b/loop");
        let ok = Command::new("mount")
            .arg("--bind")
            .arg(dir.join("src/a"))
            .arg(&target)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Unmount(vec![target]))
    }
    let probe = tempfile::tempdir().unwrap();
    if bind(probe.path()).is_none() {
        skip("no mount rights", "cannot bind-mount here");
        return;
    }
    let setup = |dir: &Path| bind(dir).expect("mount worked for the probe");
    let (code, stderr, _) = like_cp(&setup, &["-r", "src/a", "out/A"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("will not create hard link 'out/A/b/loop' to directory 'out/A'"),
        "{stderr}"
    );
    let (code, stderr, _) = like_cp(&setup, &["-rL", "src/a", "out/A"]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.contains("cannot copy cyclic symbolic link 'src/a/b/loop'"),
        "{stderr}"
    );
}

/// Bind mounts to undo before a test's directory is removed.
struct Unmount(Vec<PathBuf>);
impl Drop for Unmount {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = Command::new("umount").arg("-l").arg(p).status();
        }
    }
}

/// Builds `levels` nested directories `d/d/.../d` under `root` through descriptors (the path
/// is longer than PATH_MAX), the deepest with mode 0750 holding `leaf`.
fn deep_tree(root: &Path, levels: usize) {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::{fchmod, mkdirat, Mode};
    fs::create_dir(root).unwrap();
    let mut cur =
        nix::fcntl::open(root, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
    for _ in 0..levels {
        mkdirat(Some(cur), "d", Mode::from_bits_truncate(0o755)).unwrap();
        let next = openat(
            Some(cur),
            "d",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        nix::unistd::close(cur).unwrap();
        cur = next;
    }
    let leaf = openat(
        Some(cur),
        "leaf",
        OFlag::O_WRONLY | OFlag::O_CREAT,
        Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    nix::unistd::write(
        // SAFETY: `leaf` is the open fd returned above, closed only after this write.
        unsafe { std::os::fd::BorrowedFd::borrow_raw(leaf) },
        b"leaf data\n",
    )
    .unwrap();
    nix::unistd::close(leaf).unwrap();
    fchmod(cur, Mode::from_bits_truncate(0o750)).unwrap();
    nix::unistd::close(cur).unwrap();
}

/// Walks `d/d/...` under `root` by descriptor: the depth reached, the deepest directory's
/// mode and its leaf's bytes.
fn deep_shape(root: &Path) -> (usize, u32, Vec<u8>) {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::Mode;
    let mut cur =
        nix::fcntl::open(root, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
    let mut depth = 0;
    while let Ok(next) = openat(
        Some(cur),
        "d",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        Mode::empty(),
    ) {
        nix::unistd::close(cur).unwrap();
        cur = next;
        depth += 1;
    }
    let mode = nix::sys::stat::fstat(cur).unwrap().st_mode & 0o7777;
    let leaf = fs::read(format!("/proc/self/fd/{cur}/leaf")).unwrap_or_default();
    nix::unistd::close(cur).unwrap();
    (depth, mode, leaf)
}

/// 2,000 nested directories under a limit of 64 descriptors: the whole tree is copied, the
/// leaf too, and the deepest directory gets its final mode (not the 0700 it is made with).
#[test]
fn a_tree_of_2000_levels_copies_within_64_descriptors() {
    for backend in BACKENDS {
        for extra in [&["-r"][..], &["-a"], &["-rL"]] {
            assert_deep_copy(backend, 2000, extra, 64, 0);
        }
    }
}

/// 200 nested directories under a limit of 20 descriptors, nine of them inherited open (a
/// shell's redirections, a parent's pipes), where GNU cp copies the tree: the walk counts
/// what is open when it starts, where it assumed the three standard descriptors and ran out
/// ("Too many open files" three levels down).
#[test]
fn a_deep_tree_copies_beside_inherited_descriptors() {
    for backend in BACKENDS {
        assert_deep_copy(backend, 200, &["-r"], 20, 9);
    }
}

/// Copies a tree of `levels` nested directories with `args` under a limit of `limit`
/// descriptors, `inherited` of them open from the start, and checks DEST whole: every
/// level, the leaf's data, the deepest directory's final mode.
fn assert_deep_copy(backend: Backend, levels: usize, args: &[&str], limit: u64, inherited: u32) {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    deep_tree(&dir.path().join("src"), levels);
    let mut cmd = aiscp_command();
    cmd.current_dir(dir.path()).args(args).args(["src", "dst"]);
    backend.apply(&mut cmd, &dir.path().join("report"));
    limit_descriptors(&mut cmd, limit);
    // SAFETY: open is async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            for _ in 0..inherited {
                libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{backend:?} {args:?}: {stderr}");
    assert_eq!(
        deep_shape(&dir.path().join("dst")),
        (levels, 0o750, b"leaf data\n".to_vec()),
        "{backend:?} {args:?}"
    );
    backend.assert_report_clean(&dir.path().join("report"));
}

/// A wide tree (200 files of up to 100 KB beside a subdirectory) under a limit of 12
/// descriptors, where GNU cp still copies it: files in flight must not take the
/// descriptors the walk needs.
#[test]
fn a_wide_tree_copies_under_a_tight_descriptor_limit() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        for i in 0..200u64 {
            let len = 1 + (i * 7919) % 100_000;
            fs::write(src.join(format!("f{i}")), random_bytes(len as usize, i)).unwrap();
        }
        fs::write(src.join("sub/z"), b"y\n").unwrap();
        for round in 0..3 {
            let dst = dir.path().join(format!("dst{round}"));
            let mut cmd = aiscp_command();
            cmd.current_dir(dir.path()).arg("-r").arg("src").arg(&dst);
            backend.apply(&mut cmd, &dir.path().join("report"));
            limit_descriptors(&mut cmd, 12);
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{backend:?} round {round}: {stderr}");
            for i in 0..200 {
                let name = format!("f{i}");
                assert_eq!(
                    fs::read(src.join(&name)).unwrap(),
                    fs::read(dst.join(&name)).unwrap()
                );
            }
            assert_eq!(fs::read(dst.join("sub/z")).unwrap(), b"y\n");
        }
    }
}

/// Sets the soft and hard descriptor limits of the child (aiscp lifts the soft one to the
/// hard one).
pub(crate) fn limit_descriptors(cmd: &mut Command, n: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: fcntl, close and setrlimit are async-signal-safe, as pre_exec requires.
    unsafe {
        cmd.pre_exec(move || {
            // Descriptors another test's thread opened without close-on-exec (a pty) would
            // be inherited and count against the limit: closed here.
            for fd in 3..1024 {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                    libc::close(fd);
                }
            }
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// Under -L, every level reached through a symlink whose ".." is elsewhere: going back up
/// past the descriptors given back must find each level by its names, not by "..".
#[test]
fn a_deep_tree_of_symlinked_levels_copies_like_cp() {
    let setup = |dir: &Path| {
        let pool = dir.join("pool");
        fs::create_dir(&pool).unwrap();
        for i in 0..30 {
            let level = pool.join(format!("p{i}"));
            fs::create_dir(&level).unwrap();
            fs::write(level.join("f"), format!("level {i}\n")).unwrap();
            fs::set_permissions(&level, fs::Permissions::from_mode(0o750 + (i % 2) * 5)).unwrap();
            if i < 29 {
                symlink(format!("../p{}", i + 1), level.join("next")).unwrap();
            }
            // An entry after "next" in inode order is likely, so some levels have entries
            // left to copy when the walk comes back up to them.
            fs::write(level.join("z"), b"z").unwrap();
        }
        fs::create_dir(dir.join("src")).unwrap();
        symlink("../pool/p0", dir.join("src/start")).unwrap();
        fs::create_dir(dir.join("out")).unwrap();
        Unmount(Vec::new())
    };
    let (code, stderr, tree) = like_cp(&setup, &["-rL", "src", "out/A"]);
    assert_eq!((code, stderr.as_str()), (Some(0), ""));
    assert_eq!(
        tree.iter().filter(|l| l.ends_with("[122]")).count(),
        30,
        "{tree:?}"
    );
}

/// One descriptor below aiscp's floor (GNU cp, whose floor is 5, copies this tree): each
/// directory and file that runs out of descriptors is reported with cp's words for the call
/// that failed, and nothing else; the walk comes back up to the top level by its name (its
/// subdirectory's SOURCE never opened) and goes on with the level's other entries. On the
/// fake GPU library the library's load is what fails first, and says so.
#[test]
fn below_the_floor_every_message_is_a_real_error() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("sub/deeper")).unwrap();
    fs::write(src.join("sub/deeper/z"), b"z\n").unwrap();
    for name in ["a", "b", "c"] {
        fs::write(src.join(name), b"x\n").unwrap();
    }
    for backend in BACKENDS {
        let dst = dir.path().join("dst");
        let _ = fs::remove_dir_all(&dst);
        let mut cmd = aiscp_command();
        cmd.current_dir(dir.path()).args(["-r", "src", "dst"]);
        backend.apply(&mut cmd, &dir.path().join("report"));
        limit_descriptors(&mut cmd, 6);
        let out = cmd.output().unwrap();
        let stderr =
            String::from_utf8_lossy(&out.stderr).replace(&program().display().to_string(), "PROG");
        let mut lines: Vec<&str> = stderr.lines().collect();
        lines.sort_unstable();
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {stderr}");
        assert!(
            lines.iter().all(|l| l.contains(": Too many open files")),
            "{backend:?}: {stderr}"
        );
        if backend == Backend::Host {
            assert_eq!(
                lines,
                [
                    "PROG: cannot access 'src/sub': Too many open files",
                    "PROG: cannot create regular file 'dst/a': Too many open files",
                    "PROG: cannot create regular file 'dst/b': Too many open files",
                    "PROG: cannot create regular file 'dst/c': Too many open files",
                ]
            );
            assert_eq!(listing(&dst).len(), 2, "{:?}", listing(&dst));
        }
    }
}

/// The descriptor floor: GNU cp copies a tree (files, a level 12 deep) under `ulimit -n 5`;
/// aiscp needs two more (the level being copied is held open by descriptor: SOURCE's and
/// DEST's), and no more however deep the tree, with -a too. Loading a GPU library takes one
/// more for a moment (its file is read ahead while the loader opens it).
#[test]
fn a_tree_copies_two_descriptors_above_cps_floor() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let deep = src.join("1/2/3/4/5/6/7/8/9/10/11/12");
    fs::create_dir_all(&deep).unwrap();
    fs::write(deep.join("z"), b"z\n").unwrap();
    fs::write(src.join("1/2/y"), random_bytes(70_000, 3)).unwrap();
    fs::write(src.join("a"), b"a\n").unwrap();
    for (prog, floor) in [(PathBuf::from("cp"), 5), (program(), 7)] {
        for backend in BACKENDS {
            let limit = floor + u64::from(prog == program() && backend == Backend::FakeGpu);
            for flag in ["-r", "-a"] {
                let dst = dir.path().join("dst");
                let _ = fs::remove_dir_all(&dst);
                let mut cmd = Command::new(&prog);
                hermetic(&mut cmd)
                    .current_dir(dir.path())
                    .args([flag, "src", "dst"]);
                backend.apply(&mut cmd, &dir.path().join("report"));
                limit_descriptors(&mut cmd, limit);
                let out = cmd.output().unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success(),
                    "{prog:?} {flag} {backend:?} under {limit}: {stderr}"
                );
                assert_eq!(listing(&src), listing(&dst), "{prog:?} {flag} {backend:?}");
            }
        }
    }
}
