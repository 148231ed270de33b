//! Failed writes to stdout and stderr end the run as they end GNU cp (the oracle, run beside
//! aiscp on the same inputs): a closed pipe kills by SIGPIPE, a full or closed stdout gives
//! "write error: STRERROR" and exit 1 after the copy, a failed stderr exit 1; never a panic.

use crate::support::{hermetic, program, Backend};
use std::fs;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

/// A tree whose -v listing (about 200 KiB) overflows a pipe's buffer, so a reader that
/// leaves early is noticed by whichever program writes it.
fn tree(dir: &Path) -> PathBuf {
    let src = dir.join("srcd");
    fs::create_dir(&src).unwrap();
    for i in 0..1500 {
        fs::write(
            src.join(format!("file-with-a-rather-long-name-{i:05}")),
            [i as u8],
        )
        .unwrap();
    }
    src
}

/// What one program did: exit status, stderr with the program name replaced by "PROG", and
/// how many files landed in `d1`.
#[derive(Debug, PartialEq)]
struct Outcome {
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    copied: usize,
}

fn outcome(prog: &Path, dir: &Path, status: ExitStatus, stderr: &str) -> Outcome {
    let copied = fs::read_dir(dir.join("d1")).map_or(0, |d| d.count());
    Outcome {
        code: status.code(),
        signal: status.signal(),
        stderr: stderr.replace(&prog.display().to_string(), "PROG"),
        copied,
    }
}

/// Runs `sh -c SCRIPT` with $P set to each program in a fresh tree and returns both outcomes
/// (aiscp's, cp's).
fn both(script: &str) -> (Outcome, Outcome) {
    let run = |prog: PathBuf| {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path());
        let mut cmd = Command::new("sh");
        hermetic(&mut cmd)
            .current_dir(dir.path())
            .args(["-c", script])
            .env("P", &prog)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        Backend::Host.apply(&mut cmd, &dir.path().join("report"));
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{prog:?}: {stderr}");
        outcome(&prog, dir.path(), out.status, &stderr)
    };
    (run(program()), run(PathBuf::from("cp")))
}

#[test]
fn a_full_stdout_is_a_write_error_after_the_copy() {
    let (ours, cp) = both(r#""$P" -rv srcd d1 >/dev/full"#);
    assert_eq!(ours, cp);
    assert_eq!(ours.code, Some(1));
    assert_eq!(ours.stderr, "PROG: write error: No space left on device\n");
    assert_eq!(ours.copied, 1500);
}

#[test]
fn a_closed_stdout_is_a_write_error_only_when_written() {
    let (ours, cp) = both(r#""$P" -rv srcd d1 >&-"#);
    assert_eq!(ours, cp);
    assert_eq!(ours.stderr, "PROG: write error: Bad file descriptor\n");
    let (ours, cp) = both(r#""$P" -r srcd d1 >&-"#);
    assert_eq!(ours, cp);
    assert_eq!(ours.code, Some(0));
}

#[test]
fn a_failed_stderr_gives_exit_1_silently() {
    let (ours, cp) = both(r#""$P" -r srcd nosuch/d1 2>/dev/full"#);
    assert_eq!(ours, cp);
    assert_eq!(ours.code, Some(1));
}

#[test]
fn help_into_a_full_stdout_is_a_write_error() {
    let (ours, cp) = both(r#""$P" --help >/dev/full"#);
    assert_eq!((ours.code, ours.signal), (cp.code, cp.signal));
    assert_eq!(ours.stderr, cp.stderr);
}

/// `aiscp -rv ... | head -c1`: the reader leaves, the next write raises SIGPIPE, which ends
/// both programs (aiscp after stopping its copy cleanly).
#[test]
fn a_closed_pipe_on_stdout_kills_by_sigpipe() {
    for prog in [program(), PathBuf::from("cp")] {
        let (status, stderr) = pipe_closed_early(&prog, &[], true);
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{prog:?}: {stderr}");
        assert_eq!(stderr, "", "{prog:?}");
    }
}

/// With SIGPIPE inherited as ignored, the write fails with EPIPE instead: "write error:
/// Broken pipe", exit 1.
#[test]
fn a_closed_pipe_with_sigpipe_ignored_is_a_write_error() {
    for prog in [program(), PathBuf::from("cp")] {
        let (status, stderr) = pipe_closed_early(&prog, &["trap '' PIPE;"], true);
        assert_eq!(status.code(), Some(1), "{prog:?}: {stderr}");
        assert_eq!(
            stderr.replace(&prog.display().to_string(), "PROG"),
            "PROG: write error: Broken pipe\n"
        );
    }
}

/// 2,000 missing sources with stderr into a pipe whose reader leaves: SIGPIPE, as cp.
#[test]
fn a_closed_pipe_on_stderr_kills_by_sigpipe() {
    for prog in [program(), PathBuf::from("cp")] {
        let (status, _) = pipe_closed_early(&prog, &[], false);
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{prog:?}");
    }
}

/// Runs PROG through `sh -c "PREFIX exec PROG ..."` with stdout (`on_stdout`: `-rv` of the
/// tree) or stderr (2,000 missing sources) into a pipe that is closed after one byte.
/// Returns PROG's status and its other stream.
fn pipe_closed_early(prog: &Path, prefix: &[&str], on_stdout: bool) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    tree(dir.path());
    let args = if on_stdout {
        r#"-rv srcd d1"#.to_owned()
    } else {
        fs::create_dir(dir.path().join("d1")).unwrap();
        let missing: Vec<String> = (0..2000).map(|i| format!("missing-{i}")).collect();
        format!("{} d1", missing.join(" "))
    };
    let redirect = if on_stdout { "" } else { "2>&1 1>&3" };
    let script = format!("{} exec \"$P\" {args} 3>&2 {redirect}", prefix.join(" "));
    let mut cmd = Command::new("sh");
    hermetic(&mut cmd)
        .current_dir(dir.path())
        .args(["-c", &script])
        .env("P", prog)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Backend::Host.apply(&mut cmd, &dir.path().join("report"));
    let mut child = cmd.spawn().unwrap();
    let mut pipe = child.stdout.take().unwrap();
    let mut one = [0u8];
    pipe.read_exact(&mut one).unwrap();
    drop(pipe);
    let mut other = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut other)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!other.contains("panicked"), "{other}");
    (status, other)
}

/// `--help` into a pipe whose reader has already left: both die of SIGPIPE (aiscp before its
/// signal handlers are installed, where the write fails with EPIPE and the exit path must
/// end the process by SIGPIPE itself); with SIGPIPE ignored, "write error: Broken pipe".
#[test]
fn help_into_a_closed_pipe_dies_of_sigpipe() {
    for prog in [program(), PathBuf::from("cp")] {
        for (prefix, killed) in [("", true), ("trap '' PIPE;", false)] {
            let (read, write) = nix::unistd::pipe().unwrap();
            drop(read);
            let out = hermetic(&mut Command::new("sh"))
                .args(["-c", &format!("{prefix} exec \"$P\" --help")])
                .env("P", &prog)
                .stdout(Stdio::from(write))
                .stderr(Stdio::piped())
                .output()
                .unwrap();
            let stderr =
                String::from_utf8_lossy(&out.stderr).replace(&prog.display().to_string(), "PROG");
            if killed {
                assert_eq!(
                    out.status.signal(),
                    Some(libc::SIGPIPE),
                    "{prog:?}: {stderr}"
                );
                assert_eq!(stderr, "");
            } else {
                assert_eq!(out.status.code(), Some(1), "{prog:?}: {stderr}");
                assert_eq!(stderr, "PROG: write error: Broken pipe\n");
            }
        }
    }
}
