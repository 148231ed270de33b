//! The `roundtrip` example against the fake GPU library: files of boundary sizes come out
//! identical, every byte passes through "device" memory, and the fake's exit report is clean
//! after normal copies, after the bounce fallback and after injected errors.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const CHUNK: usize = 65536;

fn example() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "-p",
                "hipfile-rs",
                "--example",
                "roundtrip",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build --example roundtrip");
        assert!(status.success());
        support::target_dir().join("debug/examples/roundtrip")
    })
}

struct Run {
    out: Output,
    report: support::Report,
    src: Vec<u8>,
    dst: Option<Vec<u8>>,
}

fn roundtrip(size: usize, faults: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let (src_path, dst_path) = (dir.path().join("src"), dir.path().join("dst"));
    let src = support::random_bytes(size);
    std::fs::write(&src_path, &src).unwrap();
    let report = dir.path().join("report.txt");
    let out = Command::new(example())
        .args(["--flavor", "hipfile", "--chunk", &CHUNK.to_string()])
        .arg("--io-library")
        .arg(support::fake_library())
        .arg("--runtime-library")
        .arg(support::fake_library())
        .arg(&src_path)
        .arg(&dst_path)
        .envs(support::fake_env(faults, None, &report))
        .output()
        .unwrap();
    Run {
        out,
        report: support::Report::read(&report),
        src,
        dst: std::fs::read(&dst_path).ok(),
    }
}

fn stdout(run: &Run) -> String {
    String::from_utf8_lossy(&run.out.stdout).into_owned()
}

fn assert_copied(run: &Run) {
    assert!(
        run.out.status.success(),
        "{}\n{}",
        stdout(run),
        String::from_utf8_lossy(&run.out.stderr)
    );
    assert!(run.dst.as_ref() == Some(&run.src), "copy differs");
    assert!(stdout(run).contains(&format!("moved {} bytes", run.src.len())));
    run.report.assert_clean();
}

#[test]
fn boundary_sizes_copy_exactly_through_registered_buffers() {
    for size in [
        0,
        1,
        4095,
        4096,
        4097,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        3 * CHUNK + 5,
    ] {
        let run = roundtrip(size, "");
        assert_copied(&run);
        assert!(
            stdout(&run).contains("path: registered"),
            "{}",
            stdout(&run)
        );
        assert_eq!(run.report.stats.read_bytes, size as u64, "size {size}");
        // Writes are whole 4 KiB blocks; the final truncate trims them.
        assert_eq!(
            run.report.stats.write_bytes,
            (size as u64).div_ceil(4096) * 4096,
            "size {size}"
        );
    }
}

#[test]
fn short_counts_inside_a_chunk_are_resumed() {
    // Like the 0x7ffff000 per-call cap: a call moves less and the loop goes on.
    let run = roundtrip(3 * CHUNK + 5, "read#2=short:4096;write#1=short:8192");
    assert_copied(&run);
    // Four chunks, plus one call each to finish the shortened read and write.
    assert_eq!(run.report.stats.reads, 5);
    assert_eq!(run.report.stats.writes, 5);
}

#[test]
fn refused_registration_falls_back_to_the_pinned_bounce() {
    for faults in ["bufregister=5036", "register=5027", "register#2=5027"] {
        let size = 2 * CHUNK + 7;
        let run = roundtrip(size, faults);
        assert_copied(&run);
        assert!(
            stdout(&run).contains("path: pinned bounce"),
            "{faults}: {}",
            stdout(&run)
        );
        let moved_through_device = (size as u64).div_ceil(4096) * 4096;
        assert_eq!(
            run.report.stats.htod_bytes, moved_through_device,
            "{faults}"
        );
        assert_eq!(
            run.report.stats.dtoh_bytes, moved_through_device,
            "{faults}"
        );
    }
}

#[test]
fn errors_are_reported_and_leave_nothing_behind() {
    for (faults, expect) in [
        ("write#2=ENOSPC", "No space left on device"),
        ("read@65536=EIO", "Input/output error"),
        ("write@131072=EDQUOT", "Disk quota exceeded"),
        ("read#1=hipfile:5030", "5030"),
        ("read#1=hiperr:2", "error 2"),
        ("malloc#1=oom", "cannot allocate"),
        ("driver=5026", "5026"),
    ] {
        let run = roundtrip(3 * CHUNK, faults);
        let stderr = String::from_utf8_lossy(&run.out.stderr);
        assert!(!run.out.status.success(), "{faults}: succeeded");
        assert!(stderr.contains(expect), "{faults}: {stderr}");
        if faults.starts_with("read") || faults.starts_with("write") {
            assert!(stderr.contains("src") || stderr.contains("dst"), "{stderr}");
        }
        run.report.assert_clean();
    }
}
