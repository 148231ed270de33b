//! The engine's queue of whole files in flight (host backend): every queued file comes back
//! once with its ticket and exact bytes (buffered and O_DIRECT, sizes across the slot and the
//! alignment, holes kept), the limits hold, a synchronous copy in between waits for the queue
//! and keeps its results, a read error stays with its file, cancelling ends them all, and a
//! file's own cancel flag stops only that file.

use crate::support::*;
use aiscp_engine::{
    BackendChoice, Config, CopyError, DataJob, Engine, NoProgress, QueueLimits, QueuedJob,
    SourceKind, SparseMode, Ticket,
};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const CHUNK: u64 = 64 * 1024;

fn job(src: &Path, dst: &Path, sparse: SparseMode) -> QueuedJob {
    let src_file = File::open(src).unwrap();
    let len = src_file.metadata().unwrap().len();
    QueuedJob {
        src: src_file,
        src_name: src.to_path_buf(),
        len,
        dst: OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(dst)
            .unwrap(),
        dst_name: dst.to_path_buf(),
        sparse,
        may_have_holes: true,
        digest: None,
        truncate: false,
        progress: Arc::new(NoProgress),
    }
}

/// Takes every finished file; each ticket exactly once.
fn drain(engine: &mut Engine, into: &mut HashMap<Ticket, Result<u64, String>>) {
    while let Some(f) = engine.next_finished(true) {
        let res = f.result.map(|c| c.size).map_err(|e| e.to_string());
        assert!(
            into.insert(f.ticket, res).is_none(),
            "ticket {:?} twice",
            f.ticket
        );
    }
}

#[test]
fn every_file_once_with_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let c = CHUNK as usize;
    let sizes = [1, 4095, 4096, 4097, 30_000, c - 1, c, 0];
    // Batches of 4 hold every file below `direct_from` until 4 are held or one is waited for.
    for (direct_from, batch) in [(u64::MAX, 1), (0, 1), (u64::MAX, 4), (30_000, 4)] {
        let mut engine = start_engine(BackendChoice::Host, CHUNK, 3, false);
        engine.set_queue_limits(QueueLimits {
            files: 5,
            bytes: 100_000,
            direct_from,
            batch,
        });
        assert_eq!(engine.queue_max(), Some(CHUNK));
        let mut want: HashMap<Ticket, (PathBuf, Vec<u8>)> = HashMap::new();
        let mut got = HashMap::new();
        for round in 0..4 {
            for (i, &len) in sizes.iter().enumerate() {
                let src = dir.path().join(format!("s{round}-{i}"));
                let dst = dir
                    .path()
                    .join(format!("d{round}-{i}-{direct_from}-{batch}"));
                let data = write_random(&src, len, (round * 100 + i) as u64);
                while !engine.has_room(len as u64) {
                    let f = engine.next_finished(true).expect("a file in flight");
                    got.insert(
                        f.ticket,
                        f.result.map(|c| c.size).map_err(|e| e.to_string()),
                    );
                }
                assert!(engine.in_flight() <= 5);
                let ticket = engine
                    .submit(job(&src, &dst, SparseMode::Auto))
                    .ok()
                    .unwrap();
                want.insert(ticket, (dst, data));
            }
        }
        drain(&mut engine, &mut got);
        assert_eq!(engine.in_flight(), 0);
        assert_eq!(got.len(), want.len());
        for (ticket, (dst, data)) in &want {
            assert_eq!(got[ticket], Ok(data.len() as u64), "{}", dst.display());
            assert_same_bytes(&fs::read(dst).unwrap(), data, &dst.display().to_string());
        }
        // Tickets count up in the order files were queued.
        let mut tickets: Vec<_> = want.keys().copied().collect();
        tickets.sort();
        assert_eq!(
            tickets,
            (0..want.len() as u64).map(Ticket).collect::<Vec<_>>()
        );
    }
}

#[test]
fn holes_stay_holes_and_dst_is_cut_to_size() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("sparse");
    let len = CHUNK - 4096;
    write_sparse(&src, len, &[(0, b"head"), (len - 3, b"end")]);
    let dst = dir.path().join("d");
    // DST longer than SRC before: the queue sets its final size.
    fs::write(&dst, random_bytes(3 * CHUNK as usize, 7)).unwrap();
    let mut engine = start_engine(BackendChoice::Host, CHUNK, 2, false);
    let mut j = job(&src, &dst, SparseMode::Auto);
    j.dst = OpenOptions::new().write(true).open(&dst).unwrap();
    j.dst.set_len(0).unwrap();
    engine.submit(j).ok().unwrap();
    let f = engine.next_finished(true).unwrap();
    assert_eq!(f.result.unwrap().size, len);
    assert_eq!(fs::read(&dst).unwrap(), fs::read(&src).unwrap());
    assert!(blocks(&dst) < blocks(&src) + 16, "holes filled in");
}

#[test]
fn a_synchronous_copy_waits_for_the_queue_and_keeps_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = start_engine(BackendChoice::Host, CHUNK, 4, false);
    let mut want = HashMap::new();
    for i in 0..6 {
        let src = dir.path().join(format!("q{i}"));
        let dst = dir.path().join(format!("qd{i}"));
        let data = write_random(&src, 20_000 + i * 1000, i as u64);
        want.insert(
            engine
                .submit(job(&src, &dst, SparseMode::Never))
                .ok()
                .unwrap(),
            (dst, data),
        );
    }
    // A file larger than a slot takes every slot: the queued files finish first.
    let big = dir.path().join("big");
    let data = write_random(&big, 5 * CHUNK as usize + 17, 99);
    let (s, d) = (
        File::open(&big).unwrap(),
        File::create(dir.path().join("bigd")).unwrap(),
    );
    let sync = DataJob {
        src: &s,
        src_name: &big,
        src_kind: SourceKind::Regular {
            len: data.len() as u64,
        },
        dst: &d,
        dst_name: Path::new("bigd"),
        sparse: SparseMode::Auto,
        digest: None,
    };
    assert_eq!(
        engine.copy(&sync, &NoProgress).unwrap().size,
        data.len() as u64
    );
    assert_same_bytes(&fs::read(dir.path().join("bigd")).unwrap(), &data, "big");
    assert_eq!(engine.in_flight(), 6, "results kept for next_finished");
    let mut got = HashMap::new();
    drain(&mut engine, &mut got);
    for (ticket, (dst, data)) in &want {
        assert_eq!(got[ticket], Ok(data.len() as u64));
        assert_same_bytes(&fs::read(dst).unwrap(), data, "queued");
    }
}

#[test]
fn a_read_error_stays_with_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = start_engine(BackendChoice::Host, CHUNK, 2, false);
    let mut tickets = Vec::new();
    for i in 0..5 {
        let dst = dir.path().join(format!("d{i}"));
        let j = if i == 2 {
            // Reading a process's memory at offset 0 fails with EIO.
            let mut j = job(Path::new("/proc/self/mem"), &dst, SparseMode::Auto);
            j.len = 0;
            j
        } else {
            let src = dir.path().join(format!("s{i}"));
            write_random(&src, 9000, i);
            job(&src, &dst, SparseMode::Auto)
        };
        tickets.push(engine.submit(j).ok().unwrap());
    }
    let mut got = HashMap::new();
    drain(&mut engine, &mut got);
    for (i, t) in tickets.iter().enumerate() {
        match i {
            2 => assert_eq!(
                got[t].as_ref().unwrap_err(),
                "error reading '/proc/self/mem': Input/output error"
            ),
            _ => assert_eq!(got[t], Ok(9000)),
        }
    }
    assert_eq!(fs::metadata(dir.path().join("d2")).unwrap().len(), 0);
}

#[test]
fn cancelling_ends_every_file_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let config = Config {
        backend: BackendChoice::Host,
        chunk_size: Some(chunk_size(CHUNK)),
        slots_per_gpu: Some(2),
        cancel: Arc::clone(&cancel),
        ..Config::default()
    };
    let mut engine = Engine::start(config, Box::new(NoWarnings)).unwrap();
    let mut n = 0;
    for i in 0..8 {
        if i == 4 {
            // The files queued from here on are interrupted before they start.
            cancel.store(true, Ordering::SeqCst);
        }
        let src = dir.path().join(format!("s{i}"));
        write_random(&src, 60_000, i);
        let mut j = job(&src, &dir.path().join(format!("d{i}")), SparseMode::Auto);
        if i >= 4 {
            // An existing DST, to be cut only when its copy starts.
            j.dst.write_all_at(b"old bytes", 0).unwrap();
            j.truncate = true;
        }
        engine.submit(j).ok().unwrap();
        n += 1;
    }
    let mut ended = 0;
    let mut interrupted = 0;
    while let Some(f) = engine.next_finished(true) {
        ended += 1;
        match f.result {
            Err(CopyError::Interrupted) => interrupted += 1,
            Ok(copied) => assert_eq!(copied.size, 60_000),
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!(ended, n);
    assert!(interrupted >= 4, "only {interrupted} interrupted");
    for i in 4..8 {
        let old = fs::read(dir.path().join(format!("d{i}"))).unwrap();
        assert_eq!(
            old, b"old bytes",
            "DST {i} touched by a copy that never started"
        );
    }
}

/// Small files held for a batch are sent when the caller waits for one, and never begin
/// when the run was stopped before they were sent: DEST keeps its bytes.
#[test]
fn files_held_for_a_batch_come_back_when_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = Arc::new(AtomicBool::new(false));
    let config = Config {
        backend: BackendChoice::Host,
        chunk_size: Some(chunk_size(CHUNK)),
        slots_per_gpu: Some(2),
        cancel: Arc::clone(&cancel),
        ..Config::default()
    };
    let mut engine = Engine::start(config, Box::new(NoWarnings)).unwrap();
    engine.set_queue_limits(QueueLimits {
        batch: 8,
        ..QueueLimits::default()
    });
    let mut want = HashMap::new();
    for i in 0..3 {
        let src = dir.path().join(format!("s{i}"));
        let data = write_random(&src, 5000 + i, i as u64);
        let dst = dir.path().join(format!("d{i}"));
        let ticket = engine
            .submit(job(&src, &dst, SparseMode::Auto))
            .ok()
            .unwrap();
        want.insert(ticket, (dst, data));
    }
    // Fewer than a batch: held, so none has ended, however long the workers are given.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(
        engine.next_finished(false).is_none(),
        "a held file was copied"
    );
    let mut got = HashMap::new();
    drain(&mut engine, &mut got);
    assert_eq!(got.len(), 3);
    for (ticket, (dst, data)) in &want {
        assert_eq!(got[ticket], Ok(data.len() as u64));
        assert_same_bytes(&fs::read(dst).unwrap(), data, &dst.display().to_string());
    }
    // Held, then the run stopped: not begun, DEST untouched.
    for i in 3..6 {
        let src = dir.path().join(format!("s{i}"));
        write_random(&src, 5000, i);
        let mut j = job(&src, &dir.path().join(format!("d{i}")), SparseMode::Auto);
        j.dst.write_all_at(b"old bytes", 0).unwrap();
        j.truncate = true;
        engine.submit(j).ok().unwrap();
    }
    cancel.store(true, Ordering::SeqCst);
    let mut ended = 0;
    while let Some(f) = engine.next_finished(true) {
        ended += 1;
        assert!(matches!(f.result, Err(CopyError::Interrupted)) && !f.started);
    }
    assert_eq!(ended, 3);
    for i in 3..6 {
        let old = fs::read(dir.path().join(format!("d{i}"))).unwrap();
        assert_eq!(
            old, b"old bytes",
            "DST {i} touched by a copy that never began"
        );
    }
}

/// A file's own flag (a service's client that cancels or goes) stops that file and no other;
/// the run's flag stays clear.
#[test]
fn a_files_own_cancel_flag_stops_only_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut engine = start_engine(BackendChoice::Host, CHUNK, 2, false);
    let (theirs, mine) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(true)),
    );
    let mut expect = HashMap::new();
    for i in 0..6u64 {
        let src = dir.path().join(format!("s{i}"));
        write_random(&src, 50_000, i);
        let mut j = job(&src, &dir.path().join(format!("d{i}")), SparseMode::Auto);
        j.dst.write_all_at(b"old bytes", 0).unwrap();
        j.truncate = true;
        let flag = if i % 2 == 0 { &mine } else { &theirs };
        let ticket = engine.submit_cancellable(j, Arc::clone(flag)).ok().unwrap();
        expect.insert(ticket, i);
    }
    // A file in turn under a set flag stops too, and leaves the run's flag alone.
    let src = dir.path().join("turn");
    write_random(&src, 300_000, 9);
    let (s, d) = (
        File::open(&src).unwrap(),
        File::create(dir.path().join("dturn")).unwrap(),
    );
    let data = DataJob {
        src: &s,
        src_name: &src,
        src_kind: SourceKind::Regular { len: 300_000 },
        dst: &d,
        dst_name: Path::new("dturn"),
        sparse: SparseMode::Auto,
        digest: None,
    };
    let turn = engine.copy_cancellable(&data, &NoProgress, &mine).result;
    assert!(matches!(turn, Err(CopyError::Interrupted)), "{turn:?}");
    let mut seen = 0;
    while let Some(f) = engine.next_finished(true) {
        let i = expect[&f.ticket];
        seen += 1;
        match (i % 2 == 0, f.result) {
            (true, Err(CopyError::Interrupted)) => {
                assert!(!f.started);
                let old = fs::read(dir.path().join(format!("d{i}"))).unwrap();
                assert_eq!(old, b"old bytes", "DST {i} touched");
            }
            (false, Ok(copied)) => assert_eq!(copied.size, 50_000),
            (cancelled, r) => panic!("file {i} (cancelled: {cancelled}): {r:?}"),
        }
    }
    assert_eq!(seen, 6);
    // The engine goes on for files whose flag is clear.
    let src = dir.path().join("after");
    write_random(&src, 70_000, 10);
    let (s, d) = (
        File::open(&src).unwrap(),
        File::create(dir.path().join("dafter")).unwrap(),
    );
    let data = DataJob {
        src: &s,
        src_name: &src,
        src_kind: SourceKind::Regular { len: 70_000 },
        dst: &d,
        dst_name: Path::new("dafter"),
        sparse: SparseMode::Auto,
        digest: None,
    };
    assert_eq!(engine.copy(&data, &NoProgress).unwrap().size, 70_000);
}

/// Whether descriptor `fd` of this process is open on `path` (another test's file may
/// have taken the number since).
fn open_on(fd: i32, path: &Path) -> bool {
    fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|p| p == path)
}

/// A finished file's job handed back with `retire` has its files closed by the workers,
/// at the latest when the flight lands; before the flight starts, at once.
#[test]
fn retired_jobs_are_closed_by_the_time_the_flight_lands() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().canonicalize().unwrap();
    let mut engine = start_engine(BackendChoice::Host, CHUNK, 2, false);
    engine.set_queue_limits(QueueLimits {
        batch: 4,
        ..QueueLimits::default()
    });
    let src = dir.join("early-src");
    write_random(&src, 100, 9);
    let early = job(&src, &dir.join("early-dst"), SparseMode::Auto);
    let early_fds = [early.src.as_raw_fd(), early.dst.as_raw_fd()];
    engine.retire(early);
    assert!(
        !open_on(early_fds[0], &src),
        "closed at once without a flight"
    );
    let mut open = Vec::new();
    for i in 0..6 {
        let src = dir.join(format!("s{i}"));
        let data = write_random(&src, 3000 + i, i as u64);
        let dst = dir.join(format!("d{i}"));
        engine
            .submit(job(&src, &dst, SparseMode::Auto))
            .ok()
            .unwrap();
        let f = engine.next_finished(true).unwrap();
        assert_eq!(
            f.result.as_ref().map(|c| c.size).ok(),
            Some(data.len() as u64)
        );
        open.push((f.job.src.as_raw_fd(), src, f.job.dst.as_raw_fd(), dst));
        engine.retire(f.job);
    }
    drop(engine);
    for (src_fd, src, dst_fd, dst) in &open {
        assert!(!open_on(*src_fd, src), "{} still open", src.display());
        assert!(!open_on(*dst_fd, dst), "{} still open", dst.display());
    }
}
