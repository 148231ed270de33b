//! The route `auto` chooses on hipFile, through the service: the service's engine flies the
//! small files of a client's tree as an in-process copy does, and gives the library the
//! large ones, other clients' work or not.

use super::{wait_for, Service};
use crate::engine_route::{assert_small_ones_flew, library_from_tree, AROUND_LIBRARY_FROM};
use crate::support::{assert_same_bytes, write_random, Backend};
use std::fs;
use std::time::{Duration, Instant};

#[test]
fn a_service_on_hipfile_flies_files_under_a_mebibyte() {
    let d = tempfile::tempdir().unwrap();
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--chunk-size", "4M"], &[]);
    let src = d.path().join("src");
    library_from_tree(&src);
    let out = svc
        .client()
        .arg("-r")
        .arg(&src)
        .arg(d.path().join("dst"))
        .output()
        .unwrap();
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    for size in AROUND_LIBRARY_FROM {
        let name = format!("f{size}");
        let want = fs::read(src.join(&name)).unwrap();
        let got = fs::read(d.path().join("dst").join(&name)).unwrap();
        assert_same_bytes(&got, &want, &name);
    }
    let log = svc.log();
    assert!(
        log.contains("files in flight (under 1.00 MiB) bounce"),
        "{log}"
    );
    assert_small_ones_flew(&log);
    assert!(svc.stop().success());
}

/// While another client has files in flight, a file of 1 MiB or more is still the library's
/// on the route `auto` chose: copied in turn, never flown on one slot on the bounce route.
#[test]
fn a_large_file_stays_on_the_library_while_another_client_is_busy() {
    let d = tempfile::tempdir().unwrap();
    // Each small file's download takes 20 ms: the first client stays busy for seconds.
    let slow = ("AISCP_FAKE_GPU_FAULTS", "dtoh=stall:20");
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--chunk-size", "4M"], &[slow]);
    let busy = d.path().join("busy");
    fs::create_dir(&busy).unwrap();
    for i in 0..200 {
        write_random(&busy.join(format!("s{i}")), 5000, 0x5e + i);
    }
    let copies = d.path().join("busy.copy");
    let mut first = svc
        .client()
        .arg("-r")
        .arg(&busy)
        .arg(&copies)
        .spawn()
        .unwrap();
    let started = Instant::now();
    while fs::read_dir(&copies).map_or(0, |d| d.count()) == 0 {
        assert!(started.elapsed() < Duration::from_secs(20), "{}", svc.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    let bigs = d.path().join("bigs");
    fs::create_dir(&bigs).unwrap();
    let mut want = Vec::new();
    for i in 0..2 {
        let src = d.path().join(format!("big{i}"));
        want.push(write_random(&src, (3 << 20) + 123, 0xb1 + i));
    }
    let out = svc
        .client()
        .arg(d.path().join("big0"))
        .arg(d.path().join("big1"))
        .arg(&bigs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(wait_for(&mut first, Duration::from_secs(60)).success());
    for (i, want) in want.iter().enumerate() {
        let got = fs::read(bigs.join(format!("big{i}"))).unwrap();
        assert_same_bytes(&got, want, &format!("big{i}"));
    }
    let log = svc.log();
    // The first client had files still to come once the large ones were begun.
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(" slice(s) ")).collect();
    let first_big = lines.iter().position(|l| l.contains("/big0': "));
    let last_small = lines.iter().rposition(|l| l.contains("busy.copy/s"));
    assert!(first_big.is_some() && first_big < last_small, "{log}");
    for i in 0..2 {
        let name = format!("/big{i}': ");
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(&name) && l.contains(" slice(s) "))
            .collect();
        assert!(!lines.is_empty(), "{log}");
        for line in lines {
            assert!(line.ends_with("read direct, write direct"), "{line}");
        }
    }
    assert!(svc.stop().success());
}
