//! --verify end to end: a good copy verifies (and says so under --debug) on every backend;
//! a copy that cannot be verified fails with one message instead of claiming success.
//! Nothing here can make the copy itself wrong, so the mismatch path (the first differing
//! offset, a short or padded DST) is unit-tested in crates/engine/src/verify.rs.

use crate::support::{assert_same_bytes, program, write_random, Backend, Report, BACKENDS};
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn aiscp(dir: &Path, backend: Backend, args: &[&str], faults: &str) -> Output {
    let mut cmd = Command::new(program());
    cmd.current_dir(dir)
        .args(args)
        .env("AISCP_FAKE_GPU_FAULTS", faults)
        .stdin(std::process::Stdio::null());
    backend.apply(&mut cmd, &dir.join("report"));
    cmd.output().unwrap()
}

#[test]
fn a_good_copy_verifies_on_every_backend() {
    for backend in BACKENDS {
        // Sizes across the alignment and slice boundaries (64 KiB slices).
        for (i, len) in [0usize, 1, 4095, 4096, 4097, 65535, 65537, 300_000]
            .into_iter()
            .enumerate()
        {
            let dir = tempfile::tempdir().unwrap();
            let data = write_random(&dir.path().join("a"), len, i as u64);
            let out = aiscp(
                dir.path(),
                backend,
                &["--verify", "--debug", "--chunk-size", "64K", "a", "b"],
                "",
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{backend:?} {len}: {stderr}");
            assert_same_bytes(&fs::read(dir.path().join("b")).unwrap(), &data, "b");
            assert!(
                stderr.contains(&format!("verified 'b': {len} bytes")),
                "{backend:?} {len}: no verification line in {stderr}"
            );
            backend.assert_report_clean(&dir.path().join("report"));
        }
    }
}

#[test]
fn verify_is_quiet_without_debug() {
    let dir = tempfile::tempdir().unwrap();
    write_random(&dir.path().join("a"), 10_000, 1);
    let out = aiscp(dir.path(), Backend::Host, &["--verify", "a", "b"], "");
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_source_that_cannot_be_read_twice_is_not_claimed_verified() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let writer = std::thread::spawn(move || fs::write(&fifo, b"streamed bytes\n").unwrap());
    let out = aiscp(dir.path(), Backend::Host, &["--verify", "fifo", "b"], "");
    writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("cannot verify 'fifo'"), "{stderr}");
}

#[test]
fn verify_checks_every_operand_and_the_atomic_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let a = write_random(&dir.path().join("a"), 70_000, 2);
    let c = write_random(&dir.path().join("c"), 5, 3);
    fs::create_dir(dir.path().join("out")).unwrap();
    let out = aiscp(
        dir.path(),
        Backend::FakeGpu,
        &["--verify", "--atomic", "--debug", "a", "c", "out"],
        "",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("verified 'out/a': 70000 bytes"), "{stderr}");
    assert!(stderr.contains("verified 'out/c': 5 bytes"), "{stderr}");
    assert_eq!(fs::read(dir.path().join("out/a")).unwrap(), a);
    assert_eq!(fs::read(dir.path().join("out/c")).unwrap(), c);
    Report::read(&dir.path().join("report")).assert_clean();
}
