//! The engine as a library on the fake GPU library (hipFile flavor). The fake is configured
//! by environment variables when it loads and writes its leak report at exit, so each case
//! runs in a child process: this test binary re-executed on `child_process_entry` with the
//! case's name in AISCP_ENGINE_CASE. The parent checks the child's exit status and the
//! report; the child checks the bytes.

use crate::support::*;
use aiscp_engine::{BackendChoice, Config, CopyError, DataJob, Engine, SourceKind, SparseMode};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;

const CHUNK: u64 = 64 * 1024;
const CASE: &str = "AISCP_ENGINE_CASE";
/// Set to 1 in the child to run its engine with `--async` streams.
const ASYNC: &str = "AISCP_ENGINE_ASYNC";
const DIR: &str = "AISCP_ENGINE_DIR";

/// Runs `case` in a child with the fake library and `faults`; returns its report.
fn run_child(case: &str, faults: &str, extra_env: &[(&str, &str)]) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "fake_gpu::child_process_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CASE, case)
    .env(DIR, dir.path())
    .env("AISCP_FAKE_GPU_FAULTS", faults);
    use_fake_gpu(&mut cmd, &report);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "child case {case} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 passed"), "child ran no case:\n{text}");
    Report::read(&report)
}

/// Runs `case` in a child per engine (threaded, then `--async`); returns both reports.
fn run_child_each_engine(case: &str, faults: &str) -> [Report; 2] {
    [
        run_child(case, faults, &[]),
        run_child(case, faults, &[(ASYNC, "1")]),
    ]
}

fn gpu_engine(chunk: u64, streams: usize) -> Engine {
    let async_io = std::env::var(ASYNC).is_ok_and(|v| v == "1");
    start_engine(BackendChoice::HipFile, chunk, streams, async_io)
}

fn sizes() -> Vec<usize> {
    let c = CHUNK as usize;
    vec![
        0,
        1,
        4095,
        4096,
        4097,
        c - 1,
        c,
        c + 1,
        9 * c + 4097,
        16 * c,
    ]
}

/// Copies every boundary size and compares; returns the total bytes.
fn copy_all_sizes(dir: &Path, streams: usize) -> u64 {
    let mut engine = gpu_engine(CHUNK, streams);
    let mut total = 0;
    for (i, size) in sizes().into_iter().enumerate() {
        let src = dir.join(format!("src{i}"));
        let dst = dir.join(format!("dst{i}"));
        let data = write_random(&src, size, i as u64 + 100);
        assert_eq!(
            copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap(),
            size as u64
        );
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, &format!("size {size}"));
        total += size as u64;
    }
    total
}

/// The child side: runs the case named in the environment. Does nothing in a normal run.
#[test]
fn child_process_entry() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    match case.as_str() {
        "sizes" => {
            copy_all_sizes(&dir, 4);
            copy_all_sizes(&dir, 1);
        }
        "bounce" => {
            copy_all_sizes(&dir, 3);
        }
        "read_eio" => {
            let mut engine = gpu_engine(CHUNK, 4);
            let src = dir.join("src");
            let data = write_random(&src, 10 * CHUNK as usize, 1);
            let dst = dir.join("dst");
            let err = copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("error reading '{}': Input/output error", src.display())
            );
            let got = fs::read(&dst).unwrap();
            assert!(
                got.len() <= 5 * CHUNK as usize,
                "DST kept {} bytes past the error",
                got.len()
            );
            assert_same_bytes(&got, &data[..got.len()], "prefix");
        }
        "write_enospc" => {
            let mut engine = gpu_engine(CHUNK, 2);
            let src = dir.join("src");
            write_random(&src, 10 * CHUNK as usize, 2);
            let dst = dir.join("dst");
            let err = copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("error writing '{}': No space left on device", dst.display())
            );
            // The engine keeps working for the next file.
            let src2 = dir.join("src2");
            let data = write_random(&src2, 3 * CHUNK as usize + 1, 3);
            copy_file(&mut engine, &src2, &dst, SparseMode::Auto).unwrap();
            assert_same_bytes(&fs::read(&dst).unwrap(), &data, "after error");
        }
        "short_io" => {
            copy_all_sizes(&dir, 2);
        }
        "sparse" => {
            let mut engine = gpu_engine(CHUNK, 4);
            let src = dir.join("sparse");
            let a = random_bytes(8192, 1);
            let len = 40 * CHUNK + 100;
            write_sparse(&src, len, &[(12 * CHUNK, &a)]);
            let mut want = vec![0u8; len as usize];
            want[12 * CHUNK as usize..][..a.len()].copy_from_slice(&a);
            for mode in [SparseMode::Auto, SparseMode::Always, SparseMode::Never] {
                let dst = dir.join(format!("{mode:?}"));
                copy_file(&mut engine, &src, &dst, mode).unwrap();
                assert_same_bytes(&fs::read(&dst).unwrap(), &want, &format!("{mode:?}"));
                if mode != SparseMode::Never && blocks(&src) * 512 < len {
                    assert!(blocks(&dst) <= blocks(&src) + 8, "{mode:?}: holes filled");
                }
            }
        }
        "no_such_gpu" => {
            let config = Config {
                backend: BackendChoice::HipFile,
                gpu: aiscp_engine::GpuChoice::List(vec![1]),
                ..Config::default()
            };
            let err = Engine::start(config, Box::new(Silent))
                .err()
                .expect("refused");
            assert_eq!(err.to_string(), "GPU 1 does not exist: 1 device(s) found");
        }
        "cancel_mid_copy" => {
            let config = Config {
                backend: BackendChoice::HipFile,
                chunk_size: chunk_size(CHUNK),
                slots_per_gpu: Some(1),
                async_io: std::env::var(ASYNC).is_ok_and(|v| v == "1"),
                ..Config::default()
            };
            let cancel = config.cancel.clone();
            let mut engine = Engine::start(config, Box::new(NoWarnings)).unwrap();
            let src = dir.join("src");
            let len = 50 * CHUNK as usize + 7;
            let data = write_random(&src, len, 8);
            let dst = dir.join("dst");
            let s = File::open(&src).unwrap();
            let d = File::create(&dst).unwrap();
            let sink = CancelAfter::new(&cancel, CHUNK);
            let job = DataJob {
                src: &s,
                src_name: &src,
                src_kind: SourceKind::Regular { len: len as u64 },
                dst: &d,
                dst_name: &dst,
                sparse: SparseMode::Auto,
            };
            let err = engine.copy(&job, &sink).unwrap_err();
            assert!(matches!(err, CopyError::Interrupted), "{err}");
            // The one worker runs on this thread and sees the flag before its next slice.
            let got = fs::read(&dst).unwrap();
            assert_eq!(got.len() as u64, CHUNK, "exactly the first slice");
            assert_same_bytes(&got, &data[..got.len()], "prefix");
            cancel.store(false, Ordering::SeqCst);
            copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap();
            assert_same_bytes(&fs::read(&dst).unwrap(), &data, "after cancel");
        }
        other => panic!("unknown case {other}"),
    }
}

#[test]
fn all_sizes_through_device_memory_leave_nothing_behind() {
    for report in run_child_each_engine("sizes", "") {
        report.assert_clean();
        assert!(report.stats.reads > 0 && report.stats.writes > 0);
    }
}

#[test]
fn refused_registration_takes_the_bounce_route_through_device_memory() {
    for report in run_child_each_engine("bounce", "register=5027") {
        check_bounced(&report);
    }
}

fn check_bounced(report: &Report) {
    report.assert_clean();
    let total: u64 = sizes().iter().map(|&s| s as u64).sum();
    assert!(
        report.stats.htod_bytes >= total,
        "htod {} < {total}",
        report.stats.htod_bytes
    );
    assert!(
        report.stats.dtoh_bytes >= total,
        "dtoh {} < {total}",
        report.stats.dtoh_bytes
    );
    assert_eq!(report.stats.reads, 0, "no library I/O on refused files");
}

#[test]
fn read_error_is_reported_and_nothing_leaks() {
    for report in run_child_each_engine("read_eio", &format!("read@{}=EIO", 5 * CHUNK)) {
        report.assert_clean();
    }
}

#[test]
fn write_error_is_reported_and_nothing_leaks() {
    for report in run_child_each_engine("write_enospc", "write#3=ENOSPC") {
        report.assert_clean();
    }
}

#[test]
fn short_reads_and_writes_are_retried() {
    for report in run_child_each_engine(
        "short_io",
        "read#2=short:4096;write#3=short:8192;write#5=short:4096;read#7=short:1;write#9=short:1",
    ) {
        report.assert_clean();
    }
}

#[test]
fn cancel_mid_copy_stops_after_the_slice_in_flight() {
    // The streams are synchronized and given back: the report stays clean.
    for report in run_child_each_engine("cancel_mid_copy", "") {
        report.assert_clean();
    }
}

#[test]
fn sparse_modes_on_the_gpu() {
    for report in run_child_each_engine("sparse", "") {
        report.assert_clean();
    }
}

#[test]
fn missing_gpu_index_names_the_count() {
    let report = run_child("no_such_gpu", "", &[]);
    report.assert_clean();
}
