//! `--stats`' counts of files copied, skipped (-n, -u) and failed (an unreadable file, a
//! missing operand, a directory without -r, a write that fails while files are in flight),
//! in words and in the JSON, and the I/O library's own counters: reconciled with aiscp's
//! byte count on the fake GPU, stated as absent (with the reason) where there are none.

use crate::support::{
    aiscp_command, hermetic, program, stats_value, write_random, Backend, BACKENDS,
};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// Sizes of the tree's files: small ones that fly, partial last blocks, and one of 3 MiB
/// copied in turn with 1 MiB slices.
const SIZES: [usize; 8] = [1000, 4096, 5000, 12_288, 20_000, 65_537, 300_000, 3 << 20];

/// The tree `src` with one file per [`SIZES`] entry, in `src` and `src/sub`.
fn tree(src: &Path) {
    fs::create_dir_all(src.join("sub")).unwrap();
    for (i, &len) in SIZES.iter().enumerate() {
        let dir = if i % 2 == 0 {
            src.to_owned()
        } else {
            src.join("sub")
        };
        write_random(&dir.join(format!("f{i}")), len, i as u64 + 1);
    }
}

/// aiscp on `backend` with `args`, its fake report at `report`.
fn run(backend: Backend, report: &Path, args: &[&str], cwd: &Path) -> Output {
    let mut cmd = aiscp_command();
    backend.apply(&mut cmd, report);
    cmd.current_dir(cwd).args(["--chunk-size", "1M"]).args(args);
    cmd.output().unwrap()
}

/// (copied, skipped, failed) as the text says them.
fn counts(out: &Output) -> (String, String, String) {
    let text = String::from_utf8_lossy(&out.stdout);
    let value = |label| stats_value(&text, label).unwrap_or_else(|| panic!("{label}: {text}"));
    (
        value("Files copied"),
        value("Files skipped"),
        value("Files failed"),
    )
}

fn words(copied: u64, skipped: u64, failed: u64) -> (String, String, String) {
    (copied.to_string(), skipped.to_string(), failed.to_string())
}

#[test]
fn stats_count_files_copied_skipped_and_failed() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let report = d.join("report");
        tree(&d.join("src"));
        let n = SIZES.len() as u64;

        let out = run(backend, &report, &["-r", "--stats", "src/.", "dst"], d);
        assert!(out.status.success(), "{backend:?}: {out:?}");
        assert_eq!(counts(&out), words(n, 0, 0), "{backend:?}");
        backend.assert_report_clean(&report);

        // -n: every DEST exists, nothing is copied.
        let out = run(backend, &report, &["-rn", "--stats", "src/.", "dst"], d);
        assert!(out.status.success(), "{backend:?}: {out:?}");
        assert_eq!(counts(&out), words(0, n, 0), "{backend:?}");

        // -u: only the file whose SOURCE is newer than its DEST.
        let newer = d.join("src/sub/f3");
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        fs::File::options()
            .write(true)
            .open(&newer)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let out = run(
            backend,
            &report,
            &["-ru", "--stats=json", "src/.", "dst"],
            d,
        );
        assert!(out.status.success(), "{backend:?}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            (&v["files"], &v["files_skipped"], &v["files_failed"]),
            (&1.into(), &(n - 1).into(), &0.into()),
            "{backend:?}: {v}"
        );
        assert_eq!(v["bytes"], SIZES[3], "{v}");

        // Several operands, two of them failing: a missing one and a directory without -r.
        fs::create_dir(d.join("into")).unwrap();
        let args = ["--stats", "src/f0", "missing", "src", "src/sub/f1", "into"];
        let out = run(backend, &report, &args, d);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {out:?}");
        assert_eq!(counts(&out), words(2, 0, 2), "{backend:?}");
        backend.assert_report_clean(&report);
    }
}

/// A file aiscp may not read (mode 000, copied by an unprivileged user; as root, through
/// setpriv as nobody) fails alone: the others are copied.
#[test]
fn an_unreadable_file_counts_as_failed() {
    let root = nix::unistd::geteuid().is_root();
    if root && Command::new("setpriv").arg("--version").output().is_err() {
        crate::support::skip("no setpriv", "needs setpriv to copy as nobody");
        return;
    }
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::set_permissions(d, fs::Permissions::from_mode(0o777)).unwrap();
        let src = d.join("src");
        tree(&src);
        for sub in [&src, &src.join("sub")] {
            fs::set_permissions(sub, fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::set_permissions(src.join("f2"), fs::Permissions::from_mode(0o000)).unwrap();
        // And a directory that cannot be read: one failure, as cp reports one.
        let locked = src.join("locked");
        fs::create_dir(&locked).unwrap();
        fs::write(locked.join("inside"), b"x").unwrap();
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
        let mut cmd = match root {
            true => {
                let mut c = Command::new("setpriv");
                hermetic(&mut c)
                    .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
                    .arg(program());
                c
            }
            false => aiscp_command(),
        };
        backend.apply(&mut cmd, &d.join("report"));
        let out = cmd
            .current_dir(d)
            .env("LC_ALL", "C.UTF-8")
            .args(["-r", "--stats", "src", "dst"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("cannot open 'src/f2' for reading: Permission denied"),
            "{err}"
        );
        assert!(err.contains("cannot access 'src/locked'"), "{err}");
        let n = SIZES.len() as u64;
        assert_eq!(counts(&out), words(n - 1, 0, 2), "{backend:?}");
    }
}

/// A file whose copy fails while it is in flight (the fake's fifth copy to the GPU, on the
/// bounce route, where files fly) counts as failed once its turn comes; the files around it
/// count as copied, each once.
#[test]
fn a_file_failing_in_flight_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("src");
    fs::create_dir(&src).unwrap();
    for i in 0..12u64 {
        write_random(&src.join(format!("f{i:02}")), 70_000, i + 1);
    }
    let report = d.join("report");
    let mut cmd = aiscp_command();
    Backend::FakeGpu.apply(&mut cmd, &report);
    let out = cmd
        .current_dir(d)
        .env("AISCP_FAKE_GPU_FAULTS", "htod#5=1")
        .args(["-r", "--route", "bounce", "--stats=json", "src", "dst"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&v["files"], &v["files_failed"]),
        (&11.into(), &1.into()),
        "{v}"
    );
    // Each of the twelve is listed once by its route.
    assert_eq!(v["routes"][0]["files"], 12, "{v}");
}

/// The library's own counters on the fake GPU reconcile with aiscp's: the bytes the library
/// read and wrote are aiscp's bytes less each file's partial last block (which O_DIRECT
/// cannot move, so aiscp reads and writes it itself), every call took the fast path (each
/// descriptor is O_DIRECT), and the fake's own exit report agrees.
#[test]
fn library_counters_reconcile_with_aiscp_bytes_on_the_fake() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    tree(&d.join("src"));
    let report = d.join("report");
    let out = run(
        Backend::FakeGpu,
        &report,
        &["-r", "--route=library", "--stats=json", "src", "dst"],
        d,
    );
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes: u64 = SIZES.iter().map(|&s| s as u64).sum();
    assert_eq!(v["bytes"], bytes, "{v}");
    // The file smaller than a block never reaches the library: aiscp says so.
    assert_eq!(
        v["routes"],
        serde_json::json!([
            {"read": "bounce", "write": "bounce", "files": 1},
            {"read": "direct", "write": "direct", "files": SIZES.len() - 1},
        ]),
        "{v}"
    );
    let tails: u64 = SIZES.iter().map(|&s| s as u64 % 4096).sum();
    let lib = &v["library_stats"];
    assert!(v["library_stats_absent"].is_null(), "{v}");
    assert_eq!(lib["read_bytes"], bytes - tails, "{v}");
    assert_eq!(lib["write_bytes"], bytes - tails, "{v}");
    assert_eq!(lib["reads"]["failed"], 0, "{v}");
    assert_eq!(lib["writes"]["failed"], 0, "{v}");
    let gpus = lib["per_gpu"].as_array().expect("per-GPU counts");
    assert_eq!(gpus.len(), 1, "{v}");
    let g = &gpus[0];
    assert_eq!(g["slot"], 0, "{v}");
    assert_eq!(g["read_bytes"], lib["read_bytes"], "{v}");
    assert_eq!(g["fast_path_reads"], lib["reads"]["ok"], "{v}");
    assert_eq!(g["fast_path_writes"], lib["writes"]["ok"], "{v}");
    assert_eq!(
        (&g["fallback_reads"], &g["fallback_writes"]),
        (&0.into(), &0.into())
    );
    // The fake's own exit report counted the same bytes, independently of hipfile-rs.
    let fake = crate::support::Report::read(&report);
    fake.assert_clean();
    assert_eq!(fake.stats.read_bytes, bytes - tails);
    assert_eq!(fake.stats.write_bytes, bytes - tails);
}

/// Where there are no library counters, the JSON says so with the reason, and never makes
/// them up: host memory, the bounce route, no data copied.
#[test]
fn absent_library_counters_are_stated_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_random(&d.join("a"), 100_000, 7);
    let cases: [(Backend, &[&str], &str); 4] = [
        (Backend::Host, &["a", "b1"], "host memory"),
        (
            Backend::FakeGpu,
            &["--route", "bounce", "a", "b2"],
            "bounce route",
        ),
        (Backend::Host, &["-s", "a", "b3"], "no file had data"),
        (Backend::FakeGpu, &["-n", "a", "b1"], "no file had data"),
    ];
    for (backend, args, why) in cases {
        let out = run(
            backend,
            &d.join("report"),
            &[&["--stats=json"], args].concat(),
            d,
        );
        assert!(out.status.success(), "{args:?}: {out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(v["library_stats"].is_null(), "{args:?}: {v}");
        let absent = v["library_stats_absent"].as_str().unwrap_or_default();
        assert!(absent.contains(why), "{args:?}: {v}");
    }
}
