//! Helpers shared by the end-to-end suites: random data, the fake GPU library, and the
//! backend matrix every suite runs over.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
pub use test_support::data::{assert_same_bytes, random_bytes, write_random, write_sparse};
/// Every skip goes through these: loud, logged, and a failure in CI (see the module).
pub use test_support::skip::{not_here, skip};

/// The aiscp binary under test. A command that starts it, directly or through another
/// program (setpriv, strace, a shell, a symlink), gets [`hermetic`]; [`aiscp_command`] is
/// the direct one.
pub fn program() -> PathBuf {
    assert_cmd::cargo::cargo_bin("aiscp")
}

/// `aiscp` with no arguments yet, [`hermetic`].
pub fn aiscp_command() -> Command {
    let mut cmd = Command::new(program());
    hermetic(&mut cmd);
    cmd
}

/// [`aiscp_command`] as an assert_cmd command.
pub fn aiscp_assert() -> assert_cmd::Command {
    assert_cmd::Command::from_std(aiscp_command())
}

/// Keeps the aiscp that `cmd` starts (itself or through another program) out of this
/// machine's staging service: `AISCP_SERVICE=off`, and `XDG_RUNTIME_DIR` a fresh private
/// directory of the calling test's own. Without it a service running at the user's default
/// socket would take the test's copies (its --stats, its warnings, its GPU), and whatever
/// another user left at `/tmp/aiscp-UID` (looked at when XDG_RUNTIME_DIR is unset) would add
/// a warning to every run. `XDG_CACHE_HOME` is the test's too, so that compiled digest
/// kernels are neither read from nor left in the user's cache. A test of the service sets
/// its own socket after this. Under
/// `scripts/through-service.sh` both are left as inherited: going through its service is
/// that run's point.
pub fn hermetic(cmd: &mut Command) -> &mut Command {
    if through_a_service() {
        return cmd;
    }
    let runtime = RUNTIME_DIR.with(|d| d.path().to_owned());
    cmd.env("AISCP_SERVICE", "off")
        .env("XDG_CACHE_HOME", runtime.join("cache"))
        .env("XDG_RUNTIME_DIR", runtime)
}

thread_local! {
    /// The calling test's runtime directory (libtest runs each test on a thread of its
    /// own), mode 0700 as XDG wants, removed when the test ends.
    static RUNTIME_DIR: tempfile::TempDir = tempfile::Builder::new()
        .prefix("aiscp-test-runtime-")
        .tempdir()
        .expect("a test's runtime directory");
}

/// Starts `cmd` paused at `point` (`AISCP_TEST_PAUSE`, with its flag file in `dir`), waits
/// until it gets there, runs `change`, lets it go on, and returns its output.
pub fn paused_at(cmd: Command, point: &str, dir: &Path, change: impl FnOnce()) -> Output {
    paused_at_pid(cmd, point, dir, |_| change())
}

/// [`paused_at`], with `change` given the paused process's id (to signal it).
pub fn paused_at_pid(
    mut cmd: Command,
    point: &str,
    dir: &Path,
    change: impl FnOnce(u32),
) -> Output {
    let flag = dir.join("paused");
    cmd.env("AISCP_TEST_PAUSE", format!("{point}:{}", flag.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        test_support::child::assert_running(&mut child, &format!("aiscp, before {point}"));
        assert!(Instant::now() < deadline, "aiscp never reached {point}");
        std::thread::sleep(Duration::from_millis(5));
    }
    change(child.id());
    fs::remove_file(&flag).unwrap();
    child.wait_with_output().unwrap()
}

/// crates/fake-gpu, built once per test process: this process's copy of libfake_gpu.so.
pub use test_support::fake_gpu::library as fake_gpu_lib;
pub use test_support::fake_gpu::Report;

/// The backends every end-to-end suite runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Host memory staging (no GPU library).
    Host,
    /// The hipFile flavor loaded from the fake GPU library.
    FakeGpu,
}

pub const BACKENDS: [Backend; 2] = [Backend::Host, Backend::FakeGpu];

impl Backend {
    /// Environment for a child `aiscp` (or child test process) using this backend; the fake
    /// writes its leak report to `report`.
    pub fn env(self, report: &Path) -> Vec<(&'static str, String)> {
        match self {
            Backend::Host => vec![("AISCP_BACKEND", "host".into())],
            Backend::FakeGpu => {
                let lib = fake_gpu_lib().display().to_string();
                vec![
                    ("AISCP_BACKEND", "hipfile".into()),
                    ("AISCP_HIPFILE_LIB", lib.clone()),
                    ("AISCP_HIP_LIB", lib.clone()),
                    ("AISCP_HIPRTC_LIB", lib),
                    ("AISCP_FAKE_GPU_REPORT", report.display().to_string()),
                ]
            }
        }
    }

    /// Applies [`Backend::env`] to a command.
    pub fn apply(self, cmd: &mut Command, report: &Path) {
        for (k, v) in self.env(report) {
            cmd.env(k, v);
        }
    }

    /// On the fake GPU, asserts its report at `report` shows nothing leaked or misused. Under
    /// `scripts/through-service.sh` a client whose copy went through the service loads no
    /// library and writes none: the service's report is checked when it stops.
    pub fn assert_report_clean(self, report: &Path) {
        if self == Backend::FakeGpu && (report.exists() || !through_a_service()) {
            Report::read(report).assert_clean();
        }
    }
}

/// Whether this run is under `scripts/through-service.sh` (which says so in
/// `AISCP_TESTS_THROUGH_SERVICE`): copies made here may go through its service.
pub fn through_a_service() -> bool {
    std::env::var_os("AISCP_TESTS_THROUGH_SERVICE").is_some_and(|v| v == "1")
}

/// The order cp visits the directories under `root` in: each one's names sorted by inode
/// number, stably over readdir's order (GNU's savedir). Two trees built alike can still differ
/// here, as the filesystem numbers inodes wherever it finds them free. `root`'s own names are
/// taken by name: tests name operands in it, whose order is the command line's.
pub fn cp_order(root: &Path) -> Vec<PathBuf> {
    fn visit(dir: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        let mut names: Vec<_> = entries
            .map_while(Result::ok)
            .map(|e| (std::os::unix::fs::DirEntryExt::ino(&e), e.file_name()))
            .collect();
        if rel.as_os_str().is_empty() {
            names.sort_by(|a, b| a.1.cmp(&b.1));
        } else {
            names.sort_by_key(|&(ino, _)| ino);
        }
        for (_, name) in names {
            let (path, rel) = (dir.join(&name), rel.join(&name));
            out.push(rel.clone());
            if fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                visit(&path, &rel, out);
            }
        }
    }
    let mut out = Vec::new();
    visit(root, Path::new(""), &mut out);
    out
}

/// Two trees from `build` that cp walks in the same order ([`cp_order`]), both built afresh
/// until they do: cp's choices follow that order (the order of `-v` lines, which of two
/// names `-u` finds up to date), and the filesystem numbers inodes wherever it finds them
/// free, so two trees built alike beside other tests can differ. `discard` readies a pair
/// that differed for removal; `what` names the trees if 200 pairs never agree. A pair that
/// differed is kept until the end: removed at once, its inodes would be the next pair's,
/// placed as they were (on ext4 a /tmp whose free inodes fell so gave 200 such pairs in a
/// row).
pub fn walked_alike<T: AsRef<Path>>(
    what: &dyn std::fmt::Debug,
    mut build: impl FnMut() -> T,
    discard: impl Fn(&T),
) -> [T; 2] {
    const TRIES: usize = 200;
    let mut differed = Vec::new();
    for _ in 0..TRIES {
        let trees = [build(), build()];
        if cp_order(trees[0].as_ref()) == cp_order(trees[1].as_ref()) {
            differed.iter().for_each(&discard);
            return trees;
        }
        differed.extend(trees);
    }
    differed.iter().for_each(&discard);
    panic!("{TRIES} pairs of trees of {what:?}, none walked alike by cp");
}

/// Every entry under `root` (symlinks not followed): path, kind, mode, size and bytes or target, link count (links
/// kept or not); not times (cp and aiscp run at different moments).
pub fn listing(root: &Path) -> Vec<String> {
    entries(root, false)
}

/// [`listing`] with each entry's modification time to the nanosecond, for copies that keep
/// times (-a, -p).
#[cfg(feature = "mpi")] // only the mpi suite compares times this way
pub fn listing_with_times(root: &Path) -> Vec<String> {
    entries(root, true)
}

fn entries(root: &Path, times: bool) -> Vec<String> {
    fn walk(root: &Path, rel: &Path, times: bool, out: &mut Vec<String>) {
        let path = root.join(rel);
        let Ok(meta) = fs::symlink_metadata(&path) else {
            return;
        };
        let mode = meta.mode() & 0o7777;
        let ft = meta.file_type();
        let mut line = if ft.is_symlink() {
            format!(
                "{} -> {}",
                rel.display(),
                fs::read_link(&path).unwrap().display()
            )
        } else if ft.is_dir() {
            format!("{}/ {mode:o}", rel.display())
        } else {
            let data = fs::read(&path).unwrap_or_default();
            format!("{} {mode:o} links={} {data:?}", rel.display(), meta.nlink())
        };
        if times {
            line.push_str(&format!(" mtime={}.{:09}", meta.mtime(), meta.mtime_nsec()));
        }
        out.push(line);
        if ft.is_dir() {
            let mut names: Vec<_> = fs::read_dir(&path)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            for n in names {
                walk(root, &rel.join(n), times, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, Path::new(""), times, &mut out);
    out
}

/// The value after `label` in `--stats`' text ("Files copied:   4" gives "4"); None when no
/// line has that label.
pub fn stats_value(text: &str, label: &str) -> Option<String> {
    text.lines().find_map(|l| {
        l.split_once(':')
            .filter(|(k, _)| *k == label)
            .map(|(_, v)| v.trim().to_owned())
    })
}

/// The end-to-end suite's source files: each one's name under tests/it and its text, for
/// the checks that read how the suite is written.
pub fn suite_sources() -> Vec<(String, String)> {
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files
        .iter()
        .map(|f| {
            let name = f.strip_prefix(&root).unwrap().display().to_string();
            (name, fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// Every aiscp the suite starts is [`hermetic`]: no file but this one starts the binary
/// itself (`Command::new(program())`, assert_cmd's `cargo_bin`, `CARGO_BIN_EXE_aiscp`), and
/// a file that hands `program()` to another program or a link calls `hermetic`. (CI also
/// runs the suite beside another user's /tmp/aiscp-UID, where a run that is not hermetic
/// warns: .ci/run.)
#[test]
fn every_aiscp_the_suite_starts_is_hermetic() {
    let files = suite_sources();
    let mut wrong = Vec::new();
    for (name, text) in files.iter().filter(|(n, _)| n != "support.rs") {
        for direct in [
            "Command::new(program())",
            "cargo_bin(",
            "CARGO_BIN_EXE_aiscp",
        ] {
            if text.contains(direct) {
                wrong.push(format!(
                    "{name}: {direct} (use aiscp_command or aiscp_assert)"
                ));
            }
        }
        let handed_on = [".arg(program())", "symlink(program()"]
            .iter()
            .any(|p| text.contains(p));
        if handed_on && !text.contains("hermetic(") {
            wrong.push(format!(
                "{name}: runs program() through another command without hermetic"
            ));
        }
    }
    assert!(files.len() > 30, "{} files read", files.len());
    assert!(wrong.is_empty(), "{wrong:#?}");
}
