//! Slices larger than the 64 MiB grain a worker moves at a time, copied to the end: a
//! 200 MB file of random bytes at `--chunk-size 100M` (two slices, each two grains, the
//! second clipped to its slice) and at the largest chunk, 0x7ffff000 (one slice of the whole
//! file, its last grain clipped to the end), on every route, compared byte for byte.

use crate::routes::{Route, ROUTES};
use crate::support::{random_bytes, Report};
use std::fs::{self, File};
use std::io::Read;
use std::path::Path;

/// Not a multiple of the grain, the chunk or the 4096 alignment: every clip is exercised.
const SIZE: usize = 200_000_000 + 12_345;

#[test]
fn two_hundred_megabytes_copy_whole_at_100m_and_the_largest_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let data = random_bytes(SIZE, 0xb16);
    fs::write(&src, &data).unwrap();
    for chunk in ["100M", "0x7ffff000"] {
        for route in ROUTES {
            let what = format!("{route:?} at --chunk-size {chunk}");
            let report = dir.path().join("report");
            let dst = dir.path().join("dst");
            let out = route
                .aiscp(dir.path(), &report)
                .args(["--chunk-size", chunk, "--streams", "2", "src", "dst"])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_same_file(&dst, &data, &what);
            // One set of 200 MB at a time on this disk.
            fs::remove_file(&dst).unwrap();
            if route != Route::Host {
                let report = Report::read(&report);
                report.assert_clean();
                if matches!(route, Route::Library | Route::Async | Route::Auto) {
                    // Through the library, not a fallback: all but the unaligned tail.
                    let aligned = SIZE as u64 & !4095;
                    assert!(report.stats.read_bytes >= aligned, "{what}: {report}");
                    assert!(report.stats.write_bytes >= aligned, "{what}: {report}");
                }
            }
        }
    }
}

/// Compares `path` with `want` a piece at a time (slice equality is a memcmp even in a debug
/// build), naming the first differing offset.
fn assert_same_file(path: &Path, want: &[u8], what: &str) {
    let mut file = File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    assert_eq!(len, want.len() as u64, "{what}: DEST's length");
    let mut piece = vec![0u8; 4 << 20];
    let mut at = 0;
    while at < want.len() {
        let n = piece.len().min(want.len() - at);
        file.read_exact(&mut piece[..n]).unwrap();
        if piece[..n] != want[at..at + n] {
            let i = (0..n).find(|&i| piece[i] != want[at + i]).unwrap();
            panic!("{what}: first difference at byte {}", at + i);
        }
        at += n;
    }
}
