//! The fake GPU library (crates/fake-gpu): [`library`] builds it for a test process and
//! returns a private copy of libfake_gpu.so; [`Report`] is its exit report.
//!
//! The copy is the point: cargo replaces `target/<profile>/libfake_gpu.so` whenever another
//! test process rebuilds it, and a child spawned in that instant would find no library; a
//! per-process copy cannot vanish.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

mod report;

pub use report::{Devices, Report, Stats};

/// Builds the fake (a no-op when fresh) once per test process and returns this process's copy.
pub fn library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(build)
}

/// Builds the fake for the calling test binary's profile and returns the path of this
/// process's copy.
fn build() -> PathBuf {
    let exe = std::env::current_exe().expect("current test binary");
    // target/<profile>/deps/suite-hash -> target/<profile>
    let profile_dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("profile dir")
        .to_path_buf();
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "--quiet", "-p", "fake-gpu"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    build.env(
        "CARGO_TARGET_DIR",
        profile_dir.parent().expect("target dir"),
    );
    let status = build.status().expect("run cargo build -p fake-gpu");
    assert!(status.success(), "cargo build -p fake-gpu failed");

    let built = profile_dir.join("libfake_gpu.so");
    let copies = profile_dir.join("fake-gpu-copies");
    remove_stale_copies(&copies);
    let private = copies.join(std::process::id().to_string());
    std::fs::create_dir_all(&private).expect("create the copy's directory");
    let copy = private.join("libfake_gpu.so");
    // Another process's build may be swapping the file in right now: retry briefly.
    for _ in 0..100 {
        match std::fs::copy(&built, &copy) {
            Ok(_) => return copy,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("cannot copy {} to {}: {e}", built.display(), copy.display()),
        }
    }
    panic!("{} missing after the build", built.display());
}

/// Removes the copies of test processes that have exited, so they do not pile up run after run.
fn remove_stale_copies(copies: &Path) {
    let Ok(entries) = std::fs::read_dir(copies) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let alive = name
            .to_str()
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            // Another process may be removing it too; either way it goes.
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
