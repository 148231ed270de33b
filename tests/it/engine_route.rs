//! --route: the library's own I/O on registered files, or aiscp's bounce route (O_DIRECT into
//! pinned memory, copied through the GPU buffer). Both must stage every byte through device
//! memory and leave the output identical; the fake GPU library's counters tell them apart.

use crate::support::*;
use std::fs;

fn copy_with_route(route: &str, size: usize, seed: u64) -> Report {
    copy_with(route, "64K", size, seed).0
}

/// Copies `size` random bytes on the fake GPU with `--route ROUTE --chunk-size CHUNK
/// --streams 3 --debug`; checks the bytes and the fake's report. Returns the report and
/// stderr.
fn copy_with(route: &str, chunk: &str, size: usize, seed: u64) -> (Report, String) {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    let data = write_random(&src, size, seed);
    let mut cmd = aiscp_assert();
    cmd.env_remove("AISCP_FAKE_GPU_FAULTS")
        .env_remove("AISCP_ROUTE");
    for (k, v) in Backend::FakeGpu.env(&report) {
        cmd.env(k, v);
    }
    let out = cmd
        .args([
            "--route",
            route,
            "--chunk-size",
            chunk,
            "--streams",
            "3",
            "--debug",
        ])
        .arg(&src)
        .arg(&dst)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("route: "),
        "--debug names the route: {stderr}"
    );
    assert_same_bytes(&fs::read(&dst).unwrap(), &data, &format!("{route} {size}"));
    let report = Report::read(&report);
    report.assert_clean();
    (report, stderr)
}

#[test]
fn library_route_reads_and_writes_through_the_library() {
    let size = 10 * 65536 + 4097;
    let r = copy_with_route("library", size, 1);
    let aligned = (size as u64) & !4095;
    assert!(
        r.stats.read_bytes >= aligned,
        "library reads: {}",
        r.stats.read_bytes
    );
    assert!(
        r.stats.write_bytes >= aligned,
        "library writes: {}",
        r.stats.write_bytes
    );
}

#[test]
fn bounce_route_stages_every_byte_through_device_memory() {
    for (i, size) in [1usize, 4095, 4096, 65536, 10 * 65536 + 4097]
        .into_iter()
        .enumerate()
    {
        let r = copy_with_route("bounce", size, 10 + i as u64);
        assert_eq!(
            r.stats.read_bytes, 0,
            "no library reads on the bounce route"
        );
        assert_eq!(
            r.stats.write_bytes, 0,
            "no library writes on the bounce route"
        );
        assert!(
            r.stats.htod_bytes >= size as u64,
            "htod {} < {size}",
            r.stats.htod_bytes
        );
        assert!(
            r.stats.dtoh_bytes >= size as u64,
            "dtoh {} < {size}",
            r.stats.dtoh_bytes
        );
    }
}

#[test]
fn auto_takes_the_library_route_on_hipfile() {
    // hipFile decides DMA or fallback per request itself, so auto leaves it the files.
    let r = copy_with_route("auto", 4 * 65536, 20);
    assert!(r.stats.read_bytes >= 4 * 65536);
}

#[test]
fn bounce_route_alternates_windows_within_a_slice() {
    // 36 MiB slices move in 8 MiB windows: five pieces, each window reused. The fake runs
    // queued copies only when their stream is synchronized, so a window refilled or written
    // out before its copy finished would show as wrong bytes.
    let size = (40 << 20) + 4097;
    let (r, stderr) = copy_with("bounce", "36M", size, 30);
    assert!(r.stats.htod_bytes >= size as u64);
    assert!(r.stats.dtoh_bytes >= size as u64);
    assert!(
        stderr.contains("thread time: open") && stderr.contains("copy wait"),
        "--debug gives each file's stage times: {stderr}"
    );
}

/// Sizes across the bound below which `auto`'s library route sends files in flight (1 MiB)
/// and the alignments on either side of it.
pub const AROUND_LIBRARY_FROM: [usize; 10] = [
    0,
    1,
    4095,
    4097,
    65535,
    65537,
    (1 << 20) - 1,
    1 << 20,
    (1 << 20) + 1,
    (3 << 20) + 123,
];

/// A tree of one random file of each size in [`AROUND_LIBRARY_FROM`], `f<SIZE>`.
pub fn library_from_tree(src: &std::path::Path) {
    fs::create_dir(src).unwrap();
    for (i, size) in AROUND_LIBRARY_FROM.into_iter().enumerate() {
        write_random(&src.join(format!("f{size}")), size, 0x11b + i as u64);
    }
}

/// Checks `debug` (--debug's lines of copying [`library_from_tree`]): each file under 1 MiB
/// went in flight on the bounce route, each larger one through the library in turn.
pub fn assert_small_ones_flew(debug: &str) {
    for size in AROUND_LIBRARY_FROM {
        let name = format!("/f{size}': ");
        let line = debug
            .lines()
            .find(|l| l.contains(&name) && l.contains(" slice(s) "))
            .unwrap_or_else(|| panic!("no line for f{size}: {debug}"));
        if size < 1 << 20 {
            assert!(line.ends_with(", in flight"), "{line}");
        } else {
            assert!(line.ends_with("read direct, write direct"), "{line}");
        }
    }
}

/// `auto` on hipFile takes the library's route for files of 1 MiB and more, and sends
/// smaller ones in flight through the bounce windows, so that a tree of small files runs on
/// the file workers instead of one file at a time. Only the large files are registered;
/// every byte still crosses device memory. `--route library` asked for keeps every file on
/// the library, in turn.
#[test]
fn auto_on_hipfile_flies_files_under_a_mebibyte_and_gives_the_library_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    library_from_tree(&src);
    let large: Vec<u64> = AROUND_LIBRARY_FROM
        .into_iter()
        .filter(|&s| s >= 1 << 20)
        .map(|s| s as u64)
        .collect();
    let small: u64 = AROUND_LIBRARY_FROM
        .into_iter()
        .filter(|&s| s < 1 << 20)
        .map(|s| s as u64)
        .sum();
    for route in [None, Some("library")] {
        let report = dir.path().join("report");
        let dst = dir.path().join(format!("dst-{route:?}"));
        let mut cmd = aiscp_assert();
        cmd.env_remove("AISCP_FAKE_GPU_FAULTS")
            .env_remove("AISCP_ROUTE")
            .env_remove("AISCP_IN_FLIGHT");
        for (k, v) in Backend::FakeGpu.env(&report) {
            cmd.env(k, v);
        }
        if let Some(r) = route {
            cmd.args(["--route", r]);
        }
        let out = cmd
            .args(["--chunk-size", "4M", "--debug", "-r"])
            .arg(&src)
            .arg(&dst)
            .assert()
            .success();
        let debug = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        for size in AROUND_LIBRARY_FROM {
            let name = format!("f{size}");
            let want = fs::read(src.join(&name)).unwrap();
            assert_same_bytes(&fs::read(dst.join(&name)).unwrap(), &want, &name);
        }
        let r = Report::read(&report);
        r.assert_clean();
        let aligned: u64 = large.iter().map(|s| s & !4095).sum();
        let tails: u64 = large.iter().map(|s| s % 4096).sum();
        match route {
            None => {
                assert!(
                    debug.contains("files in flight (under 1.00 MiB) bounce"),
                    "{debug}"
                );
                assert_small_ones_flew(&debug);
                assert_eq!(r.stats.handles, 2 * large.len() as u64, "{r}");
                assert_eq!(r.stats.read_bytes, aligned, "{r}");
                assert_eq!(r.stats.htod_bytes, small + tails, "{r}");
                assert_eq!(r.stats.dtoh_bytes, small + tails, "{r}");
            }
            Some(_) => {
                assert!(!debug.contains(", in flight"), "{debug}");
                assert!(!debug.contains("files in flight (under"), "{debug}");
                assert!(r.stats.read_bytes > aligned, "{r}");
            }
        }
    }
}
