//! The genuine libcufile.so.0 (PyPI nvidia-cufile, fetched by scripts/vendor-artefacts.sh) on
//! a machine without the CUDA driver: a copy and `--doctor` must say that libcuda is missing,
//! at once. cuFileDriverOpen without libcuda never returns (it spins after failing to read
//! /proc/modules; 60 s seen), so this pins that aiscp looks for libcuda before it asks cuFile
//! for anything.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::aiscp_command;

/// Set by scripts/vendor-artefacts.sh (via .ci/run) to the genuine libcufile.so.0.
const VENDOR_CUFILE: &str = "AISCP_VENDOR_CUFILE_LIB";
/// The answer must come within this; the genuine library would hang instead.
const AT_ONCE: Duration = Duration::from_secs(1);
/// How long a hung run is given before it is killed, so the suite itself never hangs.
const KILL_AFTER: Duration = Duration::from_secs(10);

fn genuine_cufile() -> Option<String> {
    let lib = std::env::var(VENDOR_CUFILE).ok();
    if lib.is_none() {
        test_support::skip::skip(
            "no vendor artefact",
            &format!("{VENDOR_CUFILE} unset (scripts/vendor-artefacts.sh fetches it)"),
        );
    }
    lib
}

/// Runs aiscp with `args` on the genuine cuFile and no CUDA driver; returns its exit code,
/// stdout and stderr, and how long it took (killed after [`KILL_AFTER`]).
fn run(lib: &str, dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let mut child = aiscp_command()
        .current_dir(dir)
        .args(args)
        .env("AISCP_CUFILE_LIB", lib)
        .env_remove("AISCP_CUDA_LIB")
        .env_remove("AISCP_BACKEND")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = test_support::child::wait_within(&mut child, KILL_AFTER);
    let elapsed = start.elapsed();
    let mut text = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    (status.and_then(|s| s.code()), text, elapsed)
}

#[test]
fn genuine_cufile_without_libcuda_answers_at_once() {
    let Some(lib) = genuine_cufile() else { return };
    assert!(
        std::path::Path::new(&lib).is_file(),
        "{VENDOR_CUFILE}={lib}"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("src"), b"through the GPU, or not at all\n").unwrap();

    for args in [
        &["--backend", "cufile", "src", "dst"][..],
        &["--backend", "cufile", "--doctor", "."][..],
    ] {
        let (code, text, elapsed) = run(&lib, dir.path(), args);
        assert!(
            elapsed < AT_ONCE,
            "aiscp {args:?} took {elapsed:?} (exit {code:?}): {text}"
        );
        assert_eq!(code, Some(1), "aiscp {args:?}: {text}");
        assert!(text.contains("libcuda not found"), "aiscp {args:?}: {text}");
    }
    assert!(
        !dir.path().join("dst").exists(),
        "--backend cufile must not fall back to host memory"
    );
}
