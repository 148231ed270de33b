//! Flags that cannot be honoured are errors or warnings, never silent; DEST names with a
//! trailing slash get cp's messages.

use crate::support::{aiscp_command, program, write_random, Backend};
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

/// aiscp with every GPU library override pointing at a file that does not exist: no GPU
/// library loads, on any machine.
fn without_gpu(dir: &Path, args: &[&str]) -> Output {
    without_gpu_command(dir).args(args).output().unwrap()
}

/// [`without_gpu`]'s command, run in `dir`, before its arguments.
fn without_gpu_command(dir: &Path) -> Command {
    let missing = dir.join("none.so");
    let mut cmd = aiscp_command();
    cmd.env_remove("AISCP_BACKEND");
    for var in [
        "AISCP_HIPFILE_LIB",
        "AISCP_HIP_LIB",
        "AISCP_CUFILE_LIB",
        "AISCP_CUDA_LIB",
    ] {
        cmd.env(var, &missing);
    }
    cmd.current_dir(dir);
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn gpu_index_without_a_gpu_warns_or_fails() {
    let dir = tempfile::tempdir().unwrap();
    let data = write_random(&dir.path().join("s"), 70_000, 3);

    // auto: copies through host memory, and says --gpu was not honoured.
    let out = without_gpu(dir.path(), &["--gpu", "7", "s", "a"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: no usable GPU I/O library (")
            && err.ends_with(
                "; --gpu 7 ignored, copying through host memory (--backend auto; -q or \
                 AISCP_BACKEND=host silences this)\n"
            ),
        "{err}"
    );
    assert_eq!(fs::read(dir.path().join("a")).unwrap(), data);

    // gpu: an error, nothing created.
    let out = without_gpu(dir.path(), &["--backend", "gpu", "--gpu", "7", "s", "b"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no usable GPU I/O library: "),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("b").exists());

    // The default index is not named: it was not asked for.
    let out = without_gpu(dir.path(), &["s", "c"]);
    assert!(!stderr(&out).contains("--gpu"), "{}", stderr(&out));
}

/// The backend starts at the first file with data, deep in a tree: its failure ends the run
/// there (no later file or operand is tried, the failure said once), and the directories
/// already made are finished (their mode set after their contents, as every directory), not
/// left at the owner-only mode they are made with.
#[test]
fn a_backend_that_cannot_start_ends_the_run_with_its_directories_finished() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("s/a/b")).unwrap();
    fs::create_dir_all(d.join("s/c")).unwrap();
    for sub in ["s", "s/a", "s/a/b", "s/c"] {
        fs::set_permissions(d.join(sub), fs::Permissions::from_mode(0o755)).unwrap();
    }
    write_random(&d.join("s/a/b/f"), 5000, 5);
    write_random(&d.join("s/c/g"), 5000, 7);
    write_random(&d.join("t"), 100, 6);
    fs::create_dir(d.join("out")).unwrap();
    let mut cmd = without_gpu_command(d);
    // SAFETY: umask is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        });
    }
    let out = cmd
        .args(["--backend", "gpu", "-rv", "s", "t", "out"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.matches("no usable GPU I/O library: ").count(),
        1,
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let made: Vec<_> = ["out/s", "out/s/a", "out/s/a/b", "out/s/c"]
        .into_iter()
        .filter(|sub| d.join(sub).exists())
        .collect();
    // s/a or s/c, whichever cp's order takes first (inode order), and not the other.
    let entered = ["out/s/a", "out/s/c"].map(|sub| d.join(sub).exists());
    assert_eq!(entered.iter().filter(|e| **e).count(), 1, "{made:?}");
    for sub in made {
        let mode = fs::metadata(d.join(sub)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{sub}");
    }
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        !said.contains("'t' -> "),
        "the next operand is not begun: {said}"
    );
    for file in ["out/s/a/b/f", "out/s/c/g", "out/t"] {
        assert!(
            !d.join(file).exists(),
            "{file}: the run ended at the failure"
        );
    }
}

#[test]
fn gpu_index_past_the_device_count_is_an_error_even_with_auto() {
    let dir = tempfile::tempdir().unwrap();
    write_random(&dir.path().join("s"), 5000, 4);
    let report = dir.path().join("report");
    let mut cmd = aiscp_command();
    Backend::FakeGpu.apply(&mut cmd, &report);
    let out = cmd
        .env("AISCP_BACKEND", "auto")
        .args(["--gpu", "9", "s", "d"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("GPU 9 does not exist"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.path().join("d").exists());
}

#[test]
fn gpu_flags_with_the_host_backend_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    write_random(&dir.path().join("s"), 5000, 5);
    let run = |env_backend: bool, args: &[&str]| {
        let mut cmd = aiscp_command();
        if env_backend {
            cmd.env("AISCP_BACKEND", "host");
        } else {
            cmd.env_remove("AISCP_BACKEND").args(["--backend", "host"]);
        }
        let out = cmd.args(args).current_dir(dir.path()).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stderr(&out)
    };
    let gpu_warning = "warning: --gpu 2 has no effect with --backend host: data is staged \
                       through host memory\n";
    assert!(run(false, &["--gpu", "2", "s", "a"]).ends_with(gpu_warning));
    assert!(run(true, &["--gpu", "2", "s", "b"]).ends_with(gpu_warning));
    assert!(run(false, &["--route", "bounce", "s", "c"]).contains("--route has no effect"));
    assert_eq!(run(false, &["-q", "--gpu", "2", "s", "d"]), "");
    assert_eq!(run(false, &["s", "e"]), "");
}

#[test]
fn trailing_slash_dest_messages_match_cp() {
    let dir = tempfile::tempdir().unwrap();
    write_random(&dir.path().join("f"), 100, 6);
    fs::create_dir(dir.path().join("d")).unwrap();
    for dst in [
        "nosuch/dir/",
        "nosuch/",
        "d/nosuch/",
        "d//x//",
        "f/x/",
        "nosuch/a/b/",
    ] {
        let gnu = Command::new("/usr/bin/cp")
            .args(["f", dst])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let ours = aiscp_command()
            .args(["--backend", "host", "f", dst])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert_eq!(ours.status.code(), gnu.status.code(), "{dst}");
        let gnu_err = stderr(&gnu).replacen("/usr/bin/cp:", "aiscp:", 1);
        let ours_err = stderr(&ours).replacen(&format!("{}:", program().display()), "aiscp:", 1);
        assert_eq!(ours_err, gnu_err, "{dst}");
    }
}
