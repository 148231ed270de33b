//! The engine as a library on the fake GPU library (hipFile flavor). The fake is configured
//! by environment variables when it loads and writes its leak report at exit, so each case
//! runs in a child process: this test binary re-run on `child_process_entry` with the
//! [`Case`] in AISCP_ENGINE_CASE. The parent checks the child's exit status and the report;
//! the child, in the case's own function, checks the bytes.

use crate::support::*;
use aiscp_engine::{BackendChoice, Config, CopyError, DataJob, Engine, SourceKind, SparseMode};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

const CHUNK: u64 = 64 * 1024;
const CASE: &str = "AISCP_ENGINE_CASE";
/// Set to 1 in the child to run its engine with `--async` streams.
const ASYNC: &str = "AISCP_ENGINE_ASYNC";
const DIR: &str = "AISCP_ENGINE_DIR";

/// What a child runs: each case is a function of its own, named by its variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Sizes,
    Bounce,
    ReadEio,
    WriteEnospc,
    ShortIo,
    Sparse,
    NoSuchGpu,
    CancelMidCopy,
    Digests,
    DigestsCompileFails,
}

impl Case {
    const ALL: [Case; 10] = [
        Case::Digests,
        Case::DigestsCompileFails,
        Case::Sizes,
        Case::Bounce,
        Case::ReadEio,
        Case::WriteEnospc,
        Case::ShortIo,
        Case::Sparse,
        Case::NoSuchGpu,
        Case::CancelMidCopy,
    ];

    /// Its name in AISCP_ENGINE_CASE.
    fn name(self) -> String {
        format!("{self:?}")
    }

    fn run(self, dir: &Path) {
        match self {
            Case::Sizes => {
                copy_all_sizes(dir, 4);
                copy_all_sizes(dir, 1);
            }
            Case::Bounce => {
                copy_all_sizes(dir, 3);
            }
            Case::ReadEio => read_error_keeps_a_prefix(dir),
            Case::WriteEnospc => write_error_leaves_the_engine_working(dir),
            Case::ShortIo => {
                copy_all_sizes(dir, 2);
            }
            Case::Sparse => sparse_modes_keep_holes(dir),
            Case::NoSuchGpu => missing_gpu_is_refused(),
            Case::CancelMidCopy => cancel_stops_after_one_slice(dir),
            Case::Digests => digests_of_staged_slices(true),
            Case::DigestsCompileFails => digests_of_staged_slices(false),
        }
    }
}

/// Runs `case` in a child with the fake library and `faults`; returns its report.
fn run_child(case: Case, faults: &str, extra_env: &[(&str, &str)]) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let mut cmd = test_support::child::test_command("fake_gpu::child_process_entry");
    cmd.env(CASE, case.name())
        .env(DIR, dir.path())
        .env("AISCP_FAKE_GPU_FAULTS", faults);
    use_fake_gpu(&mut cmd, &report);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    test_support::child::run(&mut cmd).assert_passed(&format!("case {case:?}"));
    Report::read(&report)
}

/// Runs `case` in a child per engine (threaded, then `--async`); returns both reports.
fn run_child_each_engine(case: Case, faults: &str) -> [Report; 2] {
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
    let Ok(name) = std::env::var(CASE) else {
        return;
    };
    let case = Case::ALL
        .into_iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no case {name}"));
    case.run(&PathBuf::from(std::env::var(DIR).unwrap()));
}

/// A read error fails the copy with its message; DEST keeps at most the slices before it.
fn read_error_keeps_a_prefix(dir: &Path) {
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

/// A full disk fails the copy with its message, and the engine copies the next file.
fn write_error_leaves_the_engine_working(dir: &Path) {
    let mut engine = gpu_engine(CHUNK, 2);
    let src = dir.join("src");
    write_random(&src, 10 * CHUNK as usize, 2);
    let dst = dir.join("dst");
    let err = copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("error writing '{}': No space left on device", dst.display())
    );
    let src2 = dir.join("src2");
    let data = write_random(&src2, 3 * CHUNK as usize + 1, 3);
    copy_file(&mut engine, &src2, &dst, SparseMode::Auto).unwrap();
    assert_same_bytes(&fs::read(&dst).unwrap(), &data, "after error");
}

/// Every --sparse mode copies the bytes; auto and always keep the holes.
fn sparse_modes_keep_holes(dir: &Path) {
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

/// A GPU index past the device count is refused, naming the count.
fn missing_gpu_is_refused() {
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

/// Cancelled after the first slice, one worker stops there; the engine then copies the file
/// whole.
fn cancel_stops_after_one_slice(dir: &Path) {
    let config = Config {
        backend: BackendChoice::HipFile,
        chunk_size: Some(chunk_size(CHUNK)),
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
        digest: None,
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

#[test]
fn all_sizes_through_device_memory_leave_nothing_behind() {
    for report in run_child_each_engine(Case::Sizes, "") {
        report.assert_clean();
        assert!(report.stats.reads > 0 && report.stats.writes > 0);
    }
}

#[test]
fn refused_registration_takes_the_bounce_route_through_device_memory() {
    for report in run_child_each_engine(Case::Bounce, "register=5027") {
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
    for report in run_child_each_engine(Case::ReadEio, &format!("read@{}=EIO", 5 * CHUNK)) {
        report.assert_clean();
    }
}

#[test]
fn write_error_is_reported_and_nothing_leaks() {
    for report in run_child_each_engine(Case::WriteEnospc, "write#3=ENOSPC") {
        report.assert_clean();
    }
}

#[test]
fn short_reads_and_writes_are_retried() {
    for report in run_child_each_engine(
        Case::ShortIo,
        "read#2=short:4096;write#3=short:8192;write#5=short:4096;read#7=short:1;write#9=short:1",
    ) {
        report.assert_clean();
    }
}

#[test]
fn cancel_mid_copy_stops_after_the_slice_in_flight() {
    // The streams are synchronized and given back: the report stays clean.
    for report in run_child_each_engine(Case::CancelMidCopy, "") {
        report.assert_clean();
    }
}

#[test]
fn sparse_modes_on_the_gpu() {
    for report in run_child_each_engine(Case::Sparse, "") {
        report.assert_clean();
    }
}

#[test]
fn missing_gpu_index_names_the_count() {
    let report = run_child(Case::NoSuchGpu, "", &[]);
    report.assert_clean();
}

/// Hashes slices staged in a slot with the digest kernels (the fake runs them by name on
/// its device memory) or, when compiling fails, on the CPU from a download: either way each
/// piece equals the CPU's of the same bytes, and --debug's line says where they were
/// computed.
fn digests_of_staged_slices(on_gpu: bool) {
    use aiscp_engine::digest::{Algorithm, Piece};
    use aiscp_engine::staging_for_tests::{GpuStaging, Request, Staging};
    use aiscp_engine::RouteChoice;
    let request = Request {
        backend: BackendChoice::HipFile,
        route: RouteChoice::Bounce,
        ..Request::default()
    };
    let staging = GpuStaging::open(hipfile::Flavor::HipFile, &request, &mut |_| {}).unwrap();
    let mut slot = staging.alloc_slot(4 << 20, 0).unwrap();
    staging.enter_worker(&slot).unwrap();
    staging.prepare_digests();
    let data = random_bytes(4 << 20, 7);
    // Until compiled, slices hash on the CPU: wait for the build to settle either way.
    let settled = |line: &str| line.contains("on the GPU") || line.contains("failed");
    for _ in 0..200 {
        staging
            .hash_now(&mut slot, 1, 0, Algorithm::Crc32c)
            .unwrap();
        if staging.digests_computed().is_some_and(|l| settled(&l)) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let cases: [(u64, usize); 11] = [
        (0, 0),
        (0, 1),
        (0, 1023),
        (0, 1024),
        (0, 1025),
        (0, (3 << 20) + 5),
        (4096, 65537),
        (1 << 20, 1 << 20),
        (5 << 10, 2047),
        ((1 << 32) + (7 << 10), (1 << 20) + 1),
        (64 << 20, 4 << 20),
    ];
    for (start, len) in cases {
        let window = staging.window(&mut slot, 0, 0).unwrap();
        window[..len].copy_from_slice(&data[..len]);
        staging.upload(&mut slot, 0, len, 0).unwrap();
        for algorithm in Algorithm::ALL {
            let got = staging.hash_now(&mut slot, len, start, algorithm).unwrap();
            let want = Piece::of_bytes(algorithm, start, &data[..len]);
            assert_eq!(got, Some(want), "{algorithm:?} at {start} of {len}");
        }
    }
    let said = staging.digests_computed().unwrap();
    if on_gpu {
        assert!(
            said.starts_with("digests computed on the GPU (hiprtc 6.4, compiled in "),
            "{said}"
        );
    } else {
        assert!(
            said.starts_with(
                "digests computed on the CPU: hiprtc: hiprtcCompileProgram: \
                 HIPRTC_ERROR_COMPILATION (error 6): fake-gpu: compilation failed"
            ),
            "{said}"
        );
    }
}

#[test]
fn digests_on_the_gpu_match_the_cpu() {
    run_child(Case::Digests, "", &[]).assert_clean();
}

#[test]
fn digests_fall_back_to_the_cpu_when_compiling_fails() {
    run_child(Case::DigestsCompileFails, "compile=fail", &[]).assert_clean();
}
