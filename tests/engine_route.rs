//! --route: the library's own I/O on registered files, or aiscp's bounce route (O_DIRECT into
//! pinned memory, copied through the GPU buffer). Both must stage every byte through device
//! memory and leave the output identical; the fake GPU library's counters tell them apart.

mod common;

use assert_cmd::Command;
use common::*;
use std::fs;

fn copy_with_route(route: &str, size: usize, seed: u64) -> FakeReport {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    let data = write_random(&src, size, seed);
    let mut cmd = Command::cargo_bin("aiscp").unwrap();
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
            "64K",
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
    let report = FakeReport::read(&report);
    report.assert_clean();
    report
}

#[test]
fn library_route_reads_and_writes_through_the_library() {
    let size = 10 * 65536 + 4097;
    let r = copy_with_route("library", size, 1);
    let aligned = (size as u64) & !4095;
    assert!(
        r.stat("read_bytes") >= aligned,
        "library reads: {}",
        r.stat("read_bytes")
    );
    assert!(
        r.stat("write_bytes") >= aligned,
        "library writes: {}",
        r.stat("write_bytes")
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
            r.stat("read_bytes"),
            0,
            "no library reads on the bounce route"
        );
        assert_eq!(
            r.stat("write_bytes"),
            0,
            "no library writes on the bounce route"
        );
        assert!(
            r.stat("htod_bytes") >= size as u64,
            "htod {} < {size}",
            r.stat("htod_bytes")
        );
        assert!(
            r.stat("dtoh_bytes") >= size as u64,
            "dtoh {} < {size}",
            r.stat("dtoh_bytes")
        );
    }
}

#[test]
fn auto_takes_the_library_route_on_hipfile() {
    // hipFile decides DMA or fallback per request itself, so auto leaves it the files.
    let r = copy_with_route("auto", 4 * 65536, 20);
    assert!(r.stat("read_bytes") >= 4 * 65536);
}
