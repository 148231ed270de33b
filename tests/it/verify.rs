//! --verify end to end: a good copy verifies (and says so under --debug) on every backend;
//! a copy that cannot be verified fails with one message instead of claiming success.
//! A DEST changed at the pause before the read-back must fail it, on every route; the
//! mismatch kinds (a short or padded DST) are unit-tested in crates/engine/src/verify.rs.

use crate::support::{
    aiscp_command, assert_same_bytes, hermetic, program, write_random, Backend, Report, BACKENDS,
};
use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn aiscp(dir: &Path, backend: Backend, args: &[&str], faults: &str) -> Output {
    let mut cmd = aiscp_command();
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
        // Each with its length as --debug writes it: binary units, exact where they round.
        for (i, (len, shown)) in [
            (0usize, "0 bytes"),
            (1, "1 byte"),
            (4095, "4.00 KiB (4095 bytes)"),
            (4096, "4.00 KiB (4096 bytes)"),
            (4097, "4.00 KiB (4097 bytes)"),
            (65535, "64.00 KiB (65535 bytes)"),
            (65537, "64.00 KiB (65537 bytes)"),
            (300_000, "292.97 KiB (300000 bytes)"),
        ]
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
                stderr.contains(&format!("verified 'b': {shown},")),
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

/// A /proc file (size 0, yet reading it gives data, made up at each read) is copied as
/// cp copies it and then refused as a FIFO is: one "cannot verify" line, exit 1. It used to
/// be read a second time and compared: /proc/self/status "differs ... at offset N" (its
/// counters move), /proc/sys/kernel/ostype passed by luck.
#[test]
fn a_proc_file_is_not_claimed_verified() {
    for backend in BACKENDS {
        for src in ["/proc/self/status", "/proc/sys/kernel/ostype"] {
            let dir = tempfile::tempdir().unwrap();
            let out = aiscp(dir.path(), backend, &["--verify", src, "b"], "");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{backend:?} {src}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{backend:?} {src}: {stderr}");
            let refused = format!(
                "cannot verify '{src}': its size is 0 but reading it gives data \
                 (it cannot be read twice)"
            );
            assert!(stderr.contains(&refused), "{backend:?} {src}: {stderr}");
            // Copied all the same, as cp copies it (and as a FIFO is under --verify).
            let copied = fs::read_to_string(dir.path().join("b")).unwrap();
            assert!(
                copied.starts_with(if src.ends_with("status") {
                    "Name:"
                } else {
                    "Linux"
                }),
                "{copied}"
            );
            backend.assert_report_clean(&dir.path().join("report"));
        }
    }
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
    assert!(
        stderr.contains("verified 'out/a': 68.36 KiB (70000 bytes),"),
        "{stderr}"
    );
    assert!(stderr.contains("verified 'out/c': 5 bytes,"), "{stderr}");
    assert_eq!(fs::read(dir.path().join("out/a")).unwrap(), a);
    assert_eq!(fs::read(dir.path().join("out/c")).unwrap(), c);
    Report::read(&dir.path().join("report")).assert_clean();
}

/// A DEST changed between the copy and --verify's read-back: the copy fails, naming the
/// first differing offset, on every route (one at a time, in flight, library, --async).
#[test]
fn a_dest_changed_before_the_read_back_fails_verification() {
    let ways: [(Backend, &[&str]); 6] = [
        (Backend::Host, &[]),
        (Backend::Host, &["--chunk-size", "64K"]),
        (Backend::FakeGpu, &["--route", "bounce"]),
        (
            Backend::FakeGpu,
            &["--route", "bounce", "--chunk-size", "64K"],
        ),
        (
            Backend::FakeGpu,
            &["--route", "library", "--chunk-size", "64K"],
        ),
        (
            Backend::FakeGpu,
            &["--route", "library", "--async", "--chunk-size", "64K"],
        ),
    ];
    for (backend, args) in ways {
        for at in [0u64, 4095, 150_001, 299_999] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            write_random(&d.join("a"), 300_000, at);
            let mut cmd = aiscp_command();
            cmd.current_dir(d).args(args).args(["--verify", "a", "b"]);
            backend.apply(&mut cmd, &d.join("report"));
            let out = crate::support::paused_at(cmd, "verify", d, || {
                let b = fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("b"))
                    .unwrap();
                let old = fs::read(d.join("a")).unwrap()[at as usize];
                std::os::unix::fs::FileExt::write_all_at(&b, &[!old], at).unwrap();
                b.sync_all().unwrap();
            });
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{backend:?} {args:?}: {stderr}");
            assert!(
                stderr.contains(&format!(
                    "verification failed: 'b' differs from 'a' at offset {at}"
                )),
                "{backend:?} {args:?}: {stderr}"
            );
            backend.assert_report_clean(&d.join("report"));
        }
    }
}

/// --verify reads DEST back with O_DIRECT (the disk's bytes, not the page cache the copy
/// just filled): strace shows DEST reopened with it.
#[test]
fn verify_reads_dest_back_with_o_direct() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_random(&d.join("a"), 300_000, 1);
    let log = d.join("strace.log");
    let out = hermetic(&mut Command::new("strace"))
        .current_dir(d)
        .args(["-f", "-e", "trace=openat", "-o"])
        .arg(&log)
        .arg(program())
        .args(["--verify", "a", "b"])
        .env("AISCP_BACKEND", "host")
        .output();
    let Ok(out) = out else {
        test_support::skip::skip("no strace", "strace is not installed");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log = fs::read_to_string(&log).unwrap();
    let reopen = log
        .lines()
        .find(|l| l.contains("/proc/self/fd/"))
        .unwrap_or_else(|| panic!("DEST is not reopened:\n{log}"));
    assert!(reopen.contains("O_DIRECT"), "{reopen}");
}

/// A signal while a file is read back ends the read-back at its next chunk: the run dies of
/// the signal as a stopped copy does, having read at most a chunk more of either file (it
/// used to read the whole file back first, however large): strace counts the reads after
/// the signal, sent while the read-back is paused and let go once strace saw its handler
/// return.
#[test]
fn a_signal_during_the_read_back_stops_it() {
    if Command::new("strace").arg("-V").output().is_err() {
        test_support::skip::skip("no strace", "strace is not installed");
        return;
    }
    // A file larger than a chunk is copied (and read back) in turn.
    for (backend, args) in [
        (Backend::Host, &["--chunk-size", "1M"][..]),
        (
            Backend::FakeGpu,
            &["--route", "bounce", "--chunk-size", "1M"][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        write_random(&d.join("a"), 48 << 20, 7);
        let flag = d.join("paused");
        let log = d.join("strace.log");
        let mut cmd = Command::new("strace");
        hermetic(&mut cmd)
            .current_dir(d)
            .args(["-f", "-qq", "-e", "trace=pread64,rt_sigreturn", "-o"])
            .arg(&log)
            .arg(program())
            .args(args)
            .args(["--verify", "a", "b"])
            .env("AISCP_TEST_PAUSE", format!("verify:{}", flag.display()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        backend.apply(&mut cmd, &d.join("report"));
        let child = cmd.spawn().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !flag.exists() {
            assert!(std::time::Instant::now() < deadline, "never paused");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        // aiscp is strace's child.
        let children = format!("/proc/{}/task/{}/children", child.id(), child.id());
        let pid: i32 = fs::read_to_string(children)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(pid);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
        // Handled: its handler returned (rt_sigreturn after the signal, in strace's log).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !fs::read_to_string(&log)
            .unwrap_or_default()
            .split("--- SIGINT")
            .nth(1)
            .is_some_and(|after| after.contains("rt_sigreturn("))
        {
            assert!(std::time::Instant::now() < deadline, "SIGINT never handled");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        fs::remove_file(&flag).unwrap();
        let out = child.wait_with_output().unwrap();
        let trace = fs::read_to_string(&log).unwrap();
        let after = trace.split("--- SIGINT").nth(1).expect(&trace);
        let reads = after.lines().filter(|l| l.contains("pread64(")).count();
        // 48 MiB in 4 MiB chunks is 26 reads of the two files; at most the read ahead now.
        assert!(
            reads <= 2,
            "{backend:?}: {reads} reads after the signal:\n{after}"
        );
        assert!(!out.status.success(), "{backend:?}");
        backend.assert_report_clean(&d.join("report"));
    }
}

/// A file whose read-back fails (the fake's first device-to-host copy flips a byte) counts
/// none of its bytes: --stats' "Data copied", the JSON `bytes` and the progress view's last
/// line count the other file only, copied in turn or in flight, though the failed file's
/// data phase moved its bytes (they used to be counted).
#[test]
fn a_file_failing_its_check_counts_no_bytes() {
    let (a_len, c_len) = (300_000usize, 100_000usize);
    // AISCP_IN_FLIGHT=0: one file at a time, `a` first; unset: both in flight, either first.
    for in_flight in ["0", "64"] {
        for stats in ["--stats", "--stats=json"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            write_random(&d.join("a"), a_len, 1);
            write_random(&d.join("c"), c_len, 2);
            fs::create_dir(d.join("out")).unwrap();
            let mut cmd = aiscp_command();
            cmd.current_dir(d)
                .args(["--verify", "--progress", "--route", "bounce", stats])
                .args(["a", "c", "out"])
                .env("AISCP_FAKE_GPU_FAULTS", "dtoh#1=corrupt")
                .env("AISCP_IN_FLIGHT", in_flight);
            Backend::FakeGpu.apply(&mut cmd, &d.join("report"));
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let case = format!("in flight {in_flight}, {stats}: {stderr}");
            assert_eq!(out.status.code(), Some(1), "{case}");
            let failed = ["a", "c"]
                .into_iter()
                .find(|f| stderr.contains(&format!("'out/{f}' differs from '{f}'")))
                .unwrap_or_else(|| panic!("no file failed its check: {case}"));
            if in_flight == "0" {
                assert_eq!(failed, "a", "{case}");
            }
            let copied = if failed == "a" { c_len } else { a_len };
            let stdout = String::from_utf8_lossy(&out.stdout);
            match stats {
                "--stats" => {
                    let data = crate::support::stats_value(&stdout, "Data copied");
                    let bytes = format!("({copied} bytes)");
                    assert!(data.is_some_and(|v| v.ends_with(&bytes)), "{case}{stdout}");
                    assert_eq!(
                        crate::support::stats_value(&stdout, "Files failed").as_deref(),
                        Some("1"),
                        "{case}{stdout}"
                    );
                }
                _ => {
                    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                    assert_eq!(
                        (&v["bytes"], &v["files"]),
                        (&copied.into(), &1.into()),
                        "{v}"
                    );
                }
            }
            // The last line shows what was copied, of the run's total, with no ETA.
            let last = stderr
                .lines()
                .rfind(|l| l.contains(": progress: "))
                .unwrap();
            let done = format!(": progress: {:.2}/390.62 KiB,", copied as f64 / 1024.0);
            assert!(last.contains(&done), "{case}");
            assert!(!last.contains("ETA"), "{case}");
            Backend::FakeGpu.assert_report_clean(&d.join("report"));
        }
    }
}

/// --verify=sums: DEST read back alone, its digest equal to the one taken while copying, on
/// every backend and scheduler; SOURCE is not read again (a FIFO, which cannot be, verifies).
#[test]
fn verification_by_digest_passes_good_copies_without_reading_source_again() {
    for backend in BACKENDS {
        for (len, args) in [
            (0usize, &[][..]),
            (300_000, &[]),
            (300_001, &["--chunk-size", "64K"]),
        ] {
            for sums in [None, Some("--sums=crc32c")] {
                let dir = tempfile::tempdir().unwrap();
                let data = write_random(&dir.path().join("a"), len, len as u64);
                let mut all = vec!["--verify=sums", "--debug", "a", "b"];
                all.extend(args);
                all.extend(sums);
                let out = aiscp(dir.path(), backend, &all, "");
                let stderr = String::from_utf8_lossy(&out.stderr);
                let what = format!("{backend:?} {len} {args:?} {sums:?}");
                assert!(out.status.success(), "{what}: {stderr}");
                assert_same_bytes(&fs::read(dir.path().join("b")).unwrap(), &data, "b");
                let algorithm = if sums.is_some() { "crc32c" } else { "blake3" };
                let line = stderr.lines().find(|l| l.contains("verified 'b': "));
                assert!(
                    line.is_some_and(
                        |l| l.contains(&format!(", {algorithm} ")) && l.contains(" as copied, ")
                    ),
                    "{what}: {stderr}"
                );
                // A manifest only where --sums asked for one.
                assert_eq!(out.stdout.is_empty(), sums.is_none(), "{what}");
                backend.assert_report_clean(&dir.path().join("report"));
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let writer = std::thread::spawn(move || fs::write(&fifo, b"streamed bytes\n").unwrap());
    let out = aiscp(
        dir.path(),
        Backend::Host,
        &["--verify=sums", "fifo", "b"],
        "",
    );
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(dir.path().join("b")).unwrap(), b"streamed bytes\n");
}

/// Bytes damaged after they were staged (the fake flips the first byte of the first copy
/// back to the host, or of a library write as it lands in the file, queued on a stream
/// too): DEST is no longer what the digest was taken of, and --verify=sums fails the file,
/// naming both digests, exit 1, for files in flight and copied in turn.
#[test]
fn verification_by_digest_catches_bytes_damaged_on_the_way_out() {
    for (fault, route) in [
        ("dtoh#1=corrupt", &["--route", "bounce"][..]),
        ("write@0=corrupt", &["--route", "library"]),
        ("write@0=corrupt", &["--route", "library", "--async"]),
    ] {
        for in_flight in ["0", "64"] {
            let dir = tempfile::tempdir().unwrap();
            write_random(&dir.path().join("a"), 300_000, 3);
            let mut cmd = aiscp_command();
            cmd.current_dir(dir.path())
                .arg("--verify=sums")
                .args(route)
                .args(["--chunk-size", "64K", "a", "b"])
                .env("AISCP_FAKE_GPU_FAULTS", fault)
                .env("AISCP_IN_FLIGHT", in_flight)
                .env("LC_ALL", "C");
            Backend::FakeGpu.apply(&mut cmd, &dir.path().join("report"));
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("{fault} {route:?} in flight {in_flight}: {stderr}");
            assert_eq!(out.status.code(), Some(1), "{what}");
            let b = fs::read(dir.path().join("b")).unwrap();
            // The damaged copy is either DEST's bytes (a write) or the staged bytes' way
            // to the hash (a download): either way the two digests differ, and DEST's is
            // the one read back.
            let now = blake3::hash(&b).to_hex().to_string();
            let want = format!("verification failed: 'b' has blake3 {now}, not ");
            assert!(
                stderr.contains(&want) && stderr.contains(" as copied"),
                "{what}"
            );
        }
    }
}
