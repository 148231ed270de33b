//! The parity harness: builds the same scenario in two temp directories, runs GNU cp in one
//! and aiscp in the other (both as `cp`, same cwd-relative operands, same umask), and
//! compares exit status, stdout, stderr and the resulting trees.
//!
//! The scenario trees and their setup language are in `tree`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::tree::{build, snapshot, Entry};
pub use crate::support::Backend;
use crate::support::{hermetic, program, skip, walked_alike, Report};

#[derive(Default, Clone)]
pub struct Scenario {
    pub setup: &'static str,
    pub args: Vec<String>,
    pub stdin: Option<&'static str>,
    pub umask: Option<u32>,
    /// Run both programs as user nobody (root bypasses permission checks).
    pub as_nobody: bool,
    pub env: Vec<(&'static str, &'static str)>,
    /// A shell command run in the tree once it has been compared (to unmount what the setup
    /// mounted), panicking or not.
    pub cleanup: Option<&'static str>,
    /// Options given to aiscp only (first), where aiscp with them must end as plain cp ends.
    pub ours: Vec<&'static str>,
    /// stderr goes where stdout goes (compared as stdout), so the order of -v lines, errors
    /// and prompts between the two streams is compared too.
    pub merged: bool,
    /// The open-file limit both programs run under (`ulimit -n`).
    pub descriptors: Option<u64>,
}

pub fn sc(setup: &'static str, args: &str) -> Scenario {
    Scenario {
        setup,
        args: args.split_whitespace().map(str::to_owned).collect(),
        ..Default::default()
    }
}

impl Scenario {
    pub fn stdin(mut self, s: &'static str) -> Self {
        self.stdin = Some(s);
        self
    }
    pub fn umask(mut self, m: u32) -> Self {
        self.umask = Some(m);
        self
    }
    pub fn merged(mut self) -> Self {
        self.merged = true;
        self
    }
    pub fn nobody(mut self) -> Self {
        self.as_nobody = true;
        self
    }
    pub fn env(mut self, k: &'static str, v: &'static str) -> Self {
        self.env.push((k, v));
        self
    }
    pub fn cleanup(mut self, command: &'static str) -> Self {
        self.cleanup = Some(command);
        self
    }
    /// Options only aiscp gets (--atomic): the outcome must still be plain cp's.
    pub fn ours(mut self, args: &[&'static str]) -> Self {
        self.ours = args.to_vec();
        self
    }
    /// Both programs under `ulimit -n n`.
    pub fn descriptors(mut self, n: u64) -> Self {
        self.descriptors = Some(n);
        self
    }
    /// Arguments that need spaces or odd bytes.
    pub fn raw_args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|s| (*s).to_owned()).collect();
        self
    }
}

pub struct Outcome {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    pub tree: BTreeMap<PathBuf, Entry>,
}

pub(crate) fn bin_dir() -> PathBuf {
    // A directory holding `cp -> aiscp`, so aiscp can be run by name (setpriv) as `cp`.
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("aiscp-parity-bin-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let link = d.join("cp");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(program(), &link).unwrap();
        d
    })
    .clone()
}

/// A tree of the scenario in a directory of its own. Its cleanup command (an unmount) runs
/// before the directory is removed, however the test ends.
pub struct Tree {
    cleanup: Option<&'static str>,
    dir: tempfile::TempDir,
}

impl Tree {
    fn build(s: &Scenario) -> Tree {
        let tree = Tree {
            cleanup: s.cleanup,
            dir: tempfile::tempdir().unwrap(),
        };
        build(tree.path(), s.setup);
        tree
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl AsRef<Path> for Tree {
    fn as_ref(&self) -> &Path {
        self.path()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        if let Some(command) = self.cleanup {
            let _ = Command::new("sh")
                .arg("-c")
                .arg(command)
                .current_dir(self.path())
                .status();
        }
    }
}

/// Whether this test process may mount a tmpfs (root in a permissive container); the
/// reason why not otherwise.
pub fn can_mount_tmpfs() -> Result<(), String> {
    let probe = tempfile::tempdir().map_err(|e| e.to_string())?;
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"])
        .arg(probe.path())
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mount -t tmpfs failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let _ = Command::new("umount").arg(probe.path()).status();
    Ok(())
}

/// setpriv's arguments that run a program as nobody (root bypasses permission checks).
pub(crate) const AS_NOBODY: [&str; 4] =
    ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"];

/// Whether this process can run a program as nobody through setpriv (root only); the reason
/// why not otherwise. Probed once: `id -un` run that way must say nobody.
pub(crate) fn nobody_runs() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            let out = Command::new("setpriv")
                .args(AS_NOBODY)
                .args(["id", "-un"])
                .output()
                .map_err(|e| format!("cannot run setpriv: {e}"))?;
            let who = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && who.trim() == "nobody" {
                Ok(())
            } else {
                Err(format!(
                    "setpriv {AS_NOBODY:?} id -un: {:?}, {who:?}, {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        })
        .clone()
}

/// Runs cp (or aiscp on `aiscp`) in `dir`, a tree of the scenario.
pub fn run(s: &Scenario, aiscp: Option<Backend>, dir: &Path) -> Outcome {
    let mut cmd = if s.as_nobody {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut c = Command::new("setpriv");
        c.args(AS_NOBODY).arg("cp");
        if aiscp.is_some() {
            let path = format!(
                "{}:{}",
                bin_dir().display(),
                std::env::var("PATH").unwrap_or_default()
            );
            c.env("PATH", path);
        }
        c
    } else {
        let mut c = Command::new(match aiscp {
            Some(_) => program(),
            None => PathBuf::from("/usr/bin/cp"),
        });
        c.arg0("cp");
        c
    };
    hermetic(&mut cmd);
    if aiscp.is_some() {
        cmd.args(&s.ours);
    }
    cmd.args(&s.args)
        .current_dir(dir)
        .env("LC_ALL", "C.UTF-8")
        .env_remove("VERSION_CONTROL")
        .env_remove("SIMPLE_BACKUP_SUFFIX")
        .env_remove("POSIXLY_CORRECT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &s.env {
        cmd.env(k, v);
    }
    // One file behind both streams: each program flushes every line as it prints it.
    let merged = s.merged.then(|| tempfile::tempfile().unwrap());
    if let Some(f) = &merged {
        cmd.stdout(Stdio::from(f.try_clone().unwrap()))
            .stderr(Stdio::from(f.try_clone().unwrap()));
    }
    // The fake GPU library's leak report goes outside the compared tree.
    let report_dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(report_dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let report = report_dir.path().join("report");
    if let Some(b) = aiscp {
        b.apply(&mut cmd, &report);
    }
    let umask = s.umask.unwrap_or(0o022);
    // SAFETY: umask is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(move || {
            libc::umask(umask as libc::mode_t);
            Ok(())
        });
    }
    if let Some(n) = s.descriptors {
        crate::trees::limit_descriptors(&mut cmd, n);
    }
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(s.stdin.unwrap_or("").as_bytes());
    }
    let mut out = child.wait_with_output().unwrap();
    if let Some(mut f) = merged {
        use std::io::{Read, Seek};
        f.rewind().unwrap();
        f.read_to_end(&mut out.stdout).unwrap();
    }
    if s.as_nobody {
        // setpriv failing (127 when it cannot drop privileges or run the program) would
        // make both legs fail alike and compare equal, testing nothing.
        let said = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
        assert!(
            !matches!(out.status.code(), Some(126 | 127)) && !said.starts_with("setpriv:"),
            "setpriv did not run {} as nobody: {:?} {said}",
            if aiscp.is_some() { "aiscp" } else { "cp" },
            out.status
        );
    }
    // Written only when the run loaded the library (some file had data to copy).
    if report.exists() {
        Report::read(&report).assert_clean();
    }
    Outcome {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        tree: snapshot(dir),
    }
}

/// Runs GNU cp and aiscp and asserts they agree.
pub fn check(s: &Scenario, backend: Backend) {
    if s.as_nobody {
        if let Err(why) = nobody_runs() {
            skip("cannot run as nobody (not root)", &why);
            return;
        }
    }
    let [gnu_tree, our_tree] = walked_alike(&s.setup, || Tree::build(s), |_| {});
    let gnu = run(s, None, gnu_tree.path());
    let ours = run(s, Some(backend), our_tree.path());
    assert_eq!(
        (ours.status, &ours.stdout, &ours.stderr),
        (gnu.status, &gnu.stdout, &gnu.stderr),
        "status/stdout/stderr differ for cp {:?} (left: aiscp, right: GNU cp)",
        s.args
    );
    for (path, g) in &gnu.tree {
        match ours.tree.get(path) {
            Some(o) => assert_eq!(
                o,
                g,
                "{} differs (left: aiscp, right: GNU cp)",
                path.display()
            ),
            None => panic!("{} missing in aiscp's tree", path.display()),
        }
    }
    for path in ours.tree.keys() {
        assert!(
            gnu.tree.contains_key(path),
            "{} only in aiscp's tree",
            path.display()
        );
    }
}
