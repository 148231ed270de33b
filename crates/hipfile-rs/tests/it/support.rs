//! Running a test body against the fake GPU library (crates/fake-gpu) in a child process.
//!
//! The fake reads its environment (faults, device count) once and writes its leak report at
//! process exit, so each scenario runs in a fresh process: the parent test re-runs this same
//! test binary filtered to itself, with the overrides and fault rules set, then reads the
//! report.

use std::path::{Path, PathBuf};

/// Set in the child to the name of the test it should run for real.
pub const CHILD_VAR: &str = "HIPFILE_RS_TEST_CHILD";

/// The workspace's target directory.
pub fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
    }
}

/// crates/fake-gpu, built once per test process: this process's copy of libfake_gpu.so.
pub use test_support::fake_gpu::library as fake_library;
/// The fake's exit report.
pub use test_support::fake_gpu::Report;

/// Set in the child to the fake library's path (the crate reads no variables itself).
pub const FAKE_LIB_VAR: &str = "HIPFILE_RS_TEST_FAKE_LIB";

/// In the child: the fake library as both the I/O library and the runtime.
pub fn fake_paths() -> hipfile::LibraryPaths {
    let lib = std::env::var_os(FAKE_LIB_VAR).map(PathBuf::from);
    assert!(lib.is_some(), "{FAKE_LIB_VAR} is set by the parent test");
    hipfile::LibraryPaths {
        io: lib.clone(),
        runtime: lib,
    }
}

/// The environment for a child running against the fake library: where it is (see
/// [`fake_paths`]), and the fake's own settings.
pub fn fake_env(faults: &str, devices: Option<u32>, report: &Path) -> Vec<(String, String)> {
    let lib = fake_library().display().to_string();
    let mut env = vec![
        (FAKE_LIB_VAR.to_owned(), lib),
        ("AISCP_FAKE_GPU_FAULTS".to_owned(), faults.to_owned()),
        (
            "AISCP_FAKE_GPU_REPORT".to_owned(),
            report.display().to_string(),
        ),
    ];
    if let Some(n) = devices {
        env.push(("AISCP_FAKE_GPU_DEVICES".to_owned(), n.to_string()));
    }
    env
}

/// True in the child process that should run `name`'s body.
pub fn is_child(name: &str) -> bool {
    std::env::var(CHILD_VAR).as_deref() == Ok(name)
}

/// Runs test `name` of this binary in a child with the fake library and `faults`, asserts it
/// passed, and returns the fake's report.
pub fn run_child(name: &str, faults: &str, devices: Option<u32>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.txt");
    let mut cmd = test_support::child::test_command(name);
    cmd.envs(fake_env(faults, devices, &report))
        .env(CHILD_VAR, name);
    test_support::child::run(&mut cmd).assert_passed(name);
    Report::read(&report)
}

/// A test against the fake GPU library: in the child process (selected by [`CHILD_VAR`])
/// runs `body`; in the parent spawns that child with `faults` and `devices`, then hands the
/// fake's exit report to `check`.
pub fn fake(
    name: &str,
    faults: &str,
    devices: Option<u32>,
    body: impl FnOnce(),
    check: impl FnOnce(Report),
) {
    if is_child(name) {
        body();
    } else {
        check(run_child(name, faults, devices));
    }
}

/// Random bytes.
pub fn random_bytes(len: usize) -> Vec<u8> {
    use rand::RngCore;
    let mut v = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut v);
    v
}
