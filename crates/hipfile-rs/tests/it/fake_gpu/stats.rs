//! The library's statistics (hipFileGetStatsL1/L3) read through `Driver::io_stats`: the
//! fake's counts of what it did come back through hipfile-rs's `sys` layouts, per GPU and
//! by path (an O_DIRECT descriptor takes the fake's fast path, any other its fallback).

use super::*;

#[test]
fn io_stats_count_each_call_by_gpu_and_path() {
    support::fake(
        "fake_gpu::stats::io_stats_count_each_call_by_gpu_and_path",
        "",
        Some(2),
        || {
            let lib = Library::load_from(Flavor::HipFile, &support::fake_paths()).unwrap();
            let driver = lib.open_driver().unwrap();
            driver.start_stats().expect("hipFile needs nothing started");
            let dir = tempfile::tempdir().unwrap();
            let data = support::random_bytes(3 * 4096 + 100);
            let path = file_with(dir.path(), "src", &data);
            // Device 1, O_DIRECT: two aligned reads, the second short at the end of the file.
            let one = driver.device(1).unwrap();
            let mut buf = registered(&one, 16384);
            let f = open_direct(&path, false);
            let h = one.register_file(f.as_fd()).unwrap();
            assert_eq!(h.read(&mut buf, 8192, 0, 0).unwrap(), 8192);
            assert_eq!(h.read(&mut buf, 8192, 8192, 0).unwrap(), 4096 + 100);
            drop(h);
            // Device 0, buffered: one write (the fallback) and one refused read past the
            // buffer's end, which the crate refuses before calling the library.
            let zero = driver.device(0).unwrap();
            let buf0 = registered(&zero, 4096);
            let out = File::create(dir.path().join("out")).unwrap();
            let w = zero.register_file(out.as_fd()).unwrap();
            assert_eq!(w.write(&buf0, 1000, 0, 0).unwrap(), 1000);
            drop(w);

            let s = driver.io_stats().expect("the fake has statistics");
            assert_eq!((s.reads.ok, s.reads.failed), (2, 0));
            assert_eq!((s.writes.ok, s.writes.failed), (1, 0));
            assert_eq!(s.read_bytes, data.len() as u64);
            assert_eq!(s.write_bytes, 1000);
            assert_eq!(s.file_registrations.ok, 2);
            assert_eq!(s.buffer_registrations.ok, 2);
            let gpus = s.per_gpu.expect("Level 3 adds up");
            assert_eq!(gpus.len(), 2, "{gpus:?}");
            let (g0, g1) = (&gpus[0], &gpus[1]);
            assert_eq!((g0.slot, g1.slot), (0, 1));
            assert_eq!(
                (g1.read_bytes, g1.fast_reads, g1.fallback_reads),
                (data.len() as u64, 2, 0)
            );
            assert_eq!(
                (g0.write_bytes, g0.fast_writes, g0.fallback_writes),
                (1000, 0, 1)
            );
            assert_eq!(g0.uuid, None, "the fake fills no UUID");
        },
        |r| {
            r.assert_clean();
        },
    );
}
