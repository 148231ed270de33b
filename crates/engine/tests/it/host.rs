//! The engine as a library on the host backend: sizes across every boundary, existing DST,
//! sparse files, sequential sources, cancellation, errors.

use crate::support::*;
use aiscp_engine::{
    BackendChoice, ChunkSize, Config, CopyError, DataJob, Engine, NoProgress, ProgressSink,
    SourceKind, SparseMode, StageTimes,
};
use std::cell::Cell;
use std::fs::{self, File, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const CHUNK: u64 = 64 * 1024;

fn engine(chunk: u64, streams: usize) -> Engine {
    start_engine(BackendChoice::Host, chunk, streams, false)
}

#[test]
fn sizes_across_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let c = CHUNK as usize;
    let sizes = [
        0,
        1,
        4095,
        4096,
        4097,
        c - 1,
        c,
        c + 1,
        10 * c + 4097,
        37 * c,
    ];
    for streams in [1, 4] {
        let mut engine = engine(CHUNK, streams);
        for (i, &size) in sizes.iter().enumerate() {
            let src = dir.path().join(format!("src{i}"));
            let dst = dir.path().join(format!("dst{i}-{streams}"));
            let data = write_random(&src, size, i as u64);
            let n = copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap();
            assert_eq!(n, size as u64);
            assert_same_bytes(
                &fs::read(&dst).unwrap(),
                &data,
                &format!("size {size}, {streams} streams"),
            );
        }
    }
}

#[test]
fn existing_destination_larger_and_smaller() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 4);
    let src = dir.path().join("src");
    let data = write_random(&src, 3 * CHUNK as usize + 100, 7);
    for (name, old_len) in [("larger", 10 * CHUNK as usize), ("smaller", 5)] {
        let dst = dir.path().join(name);
        write_random(&dst, old_len, 8);
        copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap();
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, name);
    }
}

#[test]
fn empty_source_empties_destination() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 4);
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    fs::write(&src, b"").unwrap();
    write_random(&dst, 5000, 1);
    // Without O_TRUNC from the caller, the engine still leaves DST exactly SRC's size.
    let s = File::open(&src).unwrap();
    let d = OpenOptions::new().write(true).open(&dst).unwrap();
    let job = DataJob {
        src: &s,
        src_name: &src,
        src_kind: SourceKind::Regular { len: 0 },
        dst: &d,
        dst_name: &dst,
        sparse: SparseMode::Auto,
        digest: None,
    };
    assert_eq!(engine.copy(&job, &NoProgress).unwrap().size, 0);
    assert_eq!(fs::metadata(&dst).unwrap().len(), 0);
}

#[test]
fn sparse_auto_keeps_holes_never_fills_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 4);
    let src = dir.path().join("sparse");
    let a = random_bytes(8192, 1);
    let b = random_bytes(5000, 2);
    let len = 64 * CHUNK + 1234;
    write_sparse(&src, len, &[(4096, &a), (20 * CHUNK, &b)]);
    if blocks(&src) * 512 >= len {
        test_support::skip::skip("TMPDIR makes no holes", "");
        return;
    }
    let mut want = vec![0u8; len as usize];
    want[4096..4096 + a.len()].copy_from_slice(&a);
    let off = 20 * CHUNK as usize;
    want[off..off + b.len()].copy_from_slice(&b);

    let dst = dir.path().join("auto");
    copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap();
    assert_same_bytes(&fs::read(&dst).unwrap(), &want, "sparse auto");
    assert!(
        blocks(&dst) <= blocks(&src),
        "auto: {} > {} blocks",
        blocks(&dst),
        blocks(&src)
    );

    let dst = dir.path().join("never");
    copy_file(&mut engine, &src, &dst, SparseMode::Never).unwrap();
    assert_same_bytes(&fs::read(&dst).unwrap(), &want, "sparse never");
    assert!(blocks(&dst) * 512 >= len, "never: holes left");
}

#[test]
fn sparse_always_punches_zero_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 2);
    let src = dir.path().join("zeros");
    let mut data = vec![0u8; 8 * CHUNK as usize + 300];
    data[..100].copy_from_slice(&random_bytes(100, 3));
    let tail = data.len() - 10;
    data[tail..].copy_from_slice(&random_bytes(10, 4));
    fs::write(&src, &data).unwrap();
    let dst = dir.path().join("dst");
    copy_file(&mut engine, &src, &dst, SparseMode::Always).unwrap();
    assert_same_bytes(&fs::read(&dst).unwrap(), &data, "sparse always");
    if blocks(&src) * 512 >= data.len() as u64 {
        assert!(blocks(&dst) < blocks(&src), "always: no holes made");
    }
}

/// Offsets past 2 GiB: only the data extents are copied, each a few KiB, so no call comes
/// near the 0x7ffff000 per-call cap (tests/it/big_slices.rs copies slices of 200 MB).
#[test]
fn data_either_side_of_the_cap_offset_in_a_sparse_file_is_copied() {
    // 2.5 GiB, sparse so it is cheap: data just below and above 0x7ffff000 and at the end.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("big");
    let len: u64 = 5 << 29;
    let around = random_bytes(3 * 4096 + 17, 9);
    let end = random_bytes(777, 10);
    let cap = 0x7fff_f000u64;
    write_sparse(
        &src,
        len,
        &[(cap - 4096, &around), (len - end.len() as u64, &end)],
    );
    let mut engine = engine(cap, 4);
    let dst = dir.path().join("dst");
    copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap();
    let d = File::open(&dst).unwrap();
    assert_eq!(d.metadata().unwrap().len(), len);
    use std::os::unix::fs::FileExt;
    let mut got = vec![0u8; around.len()];
    d.read_exact_at(&mut got, cap - 4096).unwrap();
    assert_same_bytes(&got, &around, "around the cap");
    let mut got = vec![0u8; end.len()];
    d.read_exact_at(&mut got, len - end.len() as u64).unwrap();
    assert_same_bytes(&got, &end, "end");
}

#[test]
fn sequential_sources_copy_until_eof() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 4);
    let data = random_bytes(3 * CHUNK as usize + 5, 11);
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let writer = {
        let (fifo, data) = (fifo.clone(), data.clone());
        std::thread::spawn(move || fs::write(fifo, data).unwrap())
    };
    let s = File::open(&fifo).unwrap();
    let dst = dir.path().join("dst");
    let d = open_dst(&dst);
    let job = DataJob {
        src: &s,
        src_name: &fifo,
        src_kind: SourceKind::Sequential,
        dst: &d,
        dst_name: &dst,
        sparse: SparseMode::Auto,
        digest: None,
    };
    assert_eq!(
        engine.copy(&job, &NoProgress).unwrap().size,
        data.len() as u64
    );
    writer.join().unwrap();
    assert_same_bytes(&fs::read(&dst).unwrap(), &data, "fifo");
}

#[test]
fn progress_adds_up_to_the_size() {
    struct Count(Cell<u64>, Cell<u32>);
    impl ProgressSink for Count {
        fn file_started(&self, _: &Path, len: Option<u64>) {
            assert!(len.is_some());
        }
        fn advanced(&self, n: u64) {
            self.0.set(self.0.get() + n);
        }
        fn file_finished(&self) {
            self.1.set(self.1.get() + 1);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 4);
    let src = dir.path().join("src");
    let len = 9 * CHUNK + 5;
    write_sparse(
        &src,
        len,
        &[
            (0, &random_bytes(100, 1)),
            (5 * CHUNK, &random_bytes(4096, 2)),
        ],
    );
    let s = File::open(&src).unwrap();
    let dst = dir.path().join("dst");
    let d = open_dst(&dst);
    let count = Count(Cell::new(0), Cell::new(0));
    let job = DataJob {
        src: &s,
        src_name: &src,
        src_kind: SourceKind::Regular { len },
        dst: &d,
        dst_name: &dst,
        sparse: SparseMode::Auto,
        digest: None,
    };
    engine.copy(&job, &count).unwrap();
    assert_eq!(count.0.get(), len);
    assert_eq!(count.1.get(), 1);
}

#[test]
fn cancelled_copy_stops_and_keeps_only_copied_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        backend: BackendChoice::Host,
        chunk_size: Some(chunk_size(CHUNK)),
        slots_per_gpu: Some(2),
        ..Config::default()
    };
    let cancel = config.cancel.clone();
    let mut engine = Engine::start(config, Box::new(Silent)).unwrap();
    let src = dir.path().join("src");
    let data = write_random(&src, 20 * CHUNK as usize, 5);
    cancel.store(true, Ordering::SeqCst);
    let dst = dir.path().join("dst");
    let err = copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap_err();
    assert!(matches!(err, CopyError::Interrupted), "{err}");
    let got = fs::read(&dst).unwrap();
    assert!(got.len() < data.len());
    assert_same_bytes(&got, &data[..got.len()], "prefix");
}

#[test]
fn write_error_names_the_destination() {
    // /dev/full: every write fails with ENOSPC.
    let dir = tempfile::tempdir().unwrap();
    let mut engine = engine(CHUNK, 4);
    let src = dir.path().join("src");
    write_random(&src, 10000, 1);
    let s = File::open(&src).unwrap();
    let d = OpenOptions::new().write(true).open("/dev/full").unwrap();
    let job = DataJob {
        src: &s,
        src_name: &src,
        src_kind: SourceKind::Regular { len: 10000 },
        dst: &d,
        dst_name: Path::new("/dev/full"),
        sparse: SparseMode::Auto,
        digest: None,
    };
    let err = engine.copy(&job, &NoProgress).unwrap_err();
    assert_eq!(
        err.to_string(),
        "error writing '/dev/full': No space left on device"
    );
}

#[test]
fn bad_configuration_is_refused() {
    for chunk in [0, 0x7fff_f001] {
        let err = ChunkSize::new(chunk).expect_err("refused");
        assert!(err.to_string().contains("must be between 1 and"), "{err}");
    }
    assert_eq!(
        ChunkSize::new(1).unwrap().bytes(),
        4096,
        "rounded up to 4096"
    );
    assert_eq!(ChunkSize::new(0x7fff_f000).unwrap().bytes(), 0x7fff_f000);
    let config = Config {
        backend: BackendChoice::Host,
        slots_per_gpu: Some(0),
        ..Config::default()
    };
    let err = Engine::start(config, Box::new(Silent))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("streams"), "{err}");
}

#[test]
fn cancel_set_mid_copy_stops_after_the_slices_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let len = 200 * CHUNK as usize + 123;
    let data = write_random(&src, len, 6);
    for streams in [1, 4] {
        let config = Config {
            backend: BackendChoice::Host,
            chunk_size: Some(chunk_size(CHUNK)),
            slots_per_gpu: Some(streams),
            ..Config::default()
        };
        let cancel = config.cancel.clone();
        let mut engine = Engine::start(config, Box::new(Silent)).unwrap();
        let sink = CancelAfter::new(&cancel, CHUNK);
        let dst = dir.path().join(format!("dst{streams}"));
        let s = File::open(&src).unwrap();
        let d = open_dst(&dst);
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
        let got = fs::read(&dst).unwrap();
        assert_same_bytes(&got, &data[..got.len()], "prefix");
        if streams == 1 {
            // One worker on this thread sees the flag before its next slice.
            assert_eq!(got.len() as u64, CHUNK, "exactly the first slice");
        } else {
            // Workers stop after the slices they hold; how many that is depends on timing.
            assert!(got.len() < len, "DST holds all {len} bytes");
        }
        // Cleared, the same engine copies the next file whole.
        cancel.store(false, Ordering::SeqCst);
        copy_file(&mut engine, &src, &dst, SparseMode::Auto).unwrap();
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, "after cancel");
    }
}

#[test]
fn stage_times_cover_each_file_and_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = start_engine(BackendChoice::Host, CHUNK, 2, false);
    assert_eq!(
        engine.run_stages(),
        StageTimes::default(),
        "nothing copied yet"
    );
    let mut sum = StageTimes::default();
    for (i, len) in [3 * CHUNK as usize + 17, 5].into_iter().enumerate() {
        let src = dir.path().join(format!("src{i}"));
        let data = write_random(&src, len, 40 + i as u64);
        let dst = dir.path().join(format!("dst{i}"));
        let (s, d) = (File::open(&src).unwrap(), open_dst(&dst));
        let job = DataJob {
            src: &s,
            src_name: &src,
            src_kind: SourceKind::Regular { len: len as u64 },
            dst: &d,
            dst_name: &dst,
            sparse: SparseMode::Auto,
            digest: None,
        };
        // The file's own stage times come back with its result.
        let copied = engine.copy_cancellable(&job, &NoProgress, &AtomicBool::new(false));
        copied.result.unwrap();
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, "copy");
        let last = copied.stages;
        assert!(
            last.read > Duration::ZERO && last.write > Duration::ZERO,
            "{last:?}"
        );
        // Host memory is the staging: the copies are no-ops, timed at nanoseconds.
        assert!(
            last.copy_queue + last.copy_wait < Duration::from_millis(5),
            "{last:?}"
        );
        sum.add(&last);
    }
    assert_eq!(
        engine.run_stages(),
        sum,
        "the run's times are the files' sums"
    );
}
