//! --verify on trees, where files in flight are read back beside the next files' copies:
//! a damaged file is still caught and named alone, in cp's order; each file's writeback is
//! started before its read-back; the descriptor limits hold.

use crate::support::{aiscp_command, hermetic, listing, program, random_bytes, Backend, BACKENDS};
use crate::trees::limit_descriptors;
use std::fs;
use std::path::Path;
use std::process::Command;

/// `n` files of 1-64 KiB of random bytes under `root`, 25 to a directory.
fn small_tree(root: &Path, n: usize, seed: u64) {
    for i in 0..n {
        let dir = root.join(format!("d{}", i / 25));
        fs::create_dir_all(&dir).unwrap();
        let len = 1024 + (random_bytes(2, seed + i as u64)[0] as usize) * 250;
        fs::write(
            dir.join(format!("f{i:03}")),
            random_bytes(len, seed + i as u64),
        )
        .unwrap();
    }
}

/// One file of a tree damaged on its way through the GPU (the fake's 40th device-to-host
/// copy flips a byte): that file alone is named, with exit 1; every other file is copied
/// whole; the -v lines are cp's, in cp's order, and the failure follows its file's line.
#[test]
fn one_damaged_file_among_many_is_the_one_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_tree(&d.join("src"), 120, 1);
    let cp = Command::new("cp")
        .current_dir(d)
        .args(["-rv", "src", "ref"])
        .output();
    let cp_lines = String::from_utf8(cp.unwrap().stdout)
        .unwrap()
        .replace("'ref", "'dst");
    let log = fs::File::create(d.join("log")).unwrap();
    let mut cmd = aiscp_command();
    cmd.current_dir(d)
        .args(["-rv", "--verify", "--route", "bounce", "src", "dst"])
        .env("AISCP_FAKE_GPU_FAULTS", "dtoh#40=corrupt")
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    Backend::FakeGpu.apply(&mut cmd, &d.join("report"));
    let status = cmd.status().unwrap();
    let log = fs::read_to_string(d.join("log")).unwrap();
    assert_eq!(status.code(), Some(1), "{log}");
    let (errors, lines): (Vec<&str>, Vec<&str>) = log.lines().partition(|l| !l.starts_with('\''));
    assert_eq!(
        lines.join("\n") + "\n",
        cp_lines,
        "-v lines differ from cp's"
    );
    let [error] = errors[..] else {
        panic!("not one message: {log}");
    };
    // "PROG: verification failed: 'dst/dN/fNNN' differs from 'src/dN/fNNN' at offset 0"
    let named = error
        .split_once(": verification failed: '")
        .and_then(|(_, rest)| rest.split_once('\''))
        .unwrap_or_else(|| panic!("{error}"))
        .0;
    let rel = named.strip_prefix("dst/").unwrap();
    assert!(
        error.ends_with(&format!("differs from 'src/{rel}' at offset 0")),
        "{error}"
    );
    let all: Vec<&str> = log.lines().collect();
    let at = all.iter().position(|l| *l == error).unwrap();
    assert_eq!(all[at - 1], format!("'src/{rel}' -> 'dst/{rel}'"), "{log}");
    // Every other file is whole; the one named holds the damaged byte.
    let mut differ = Vec::new();
    for entry in walkdir(&d.join("src")) {
        let rel = entry.strip_prefix(d.join("src")).unwrap();
        if fs::read(&entry).unwrap() != fs::read(d.join("dst").join(rel)).unwrap() {
            differ.push(rel.to_string_lossy().into_owned());
        }
    }
    assert_eq!(differ, [rel], "{log}");
    Backend::FakeGpu.assert_report_clean(&d.join("report"));
}

/// The regular files under `root`, sorted.
fn walkdir(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(root).unwrap() {
        let path = e.unwrap().path();
        match path.is_dir() {
            true => out.extend(walkdir(&path)),
            false => out.push(path),
        }
    }
    out.sort();
    out
}

/// Each file's writeback is started (sync_file_range, SYNC_FILE_RANGE_WRITE) once its data
/// is written and before DEST is reopened to be read back, so the read-back seldom waits for
/// a disk write it started itself.
#[test]
fn each_files_writeback_starts_before_its_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    small_tree(&d.join("src"), 30, 2);
    let log = d.join("strace.log");
    let out = hermetic(&mut Command::new("strace"))
        .current_dir(d)
        .args(["-f", "-e", "trace=sync_file_range,openat", "-o"])
        .arg(&log)
        .arg(program())
        .args(["--verify", "-r", "src", "dst"])
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
    let started: Vec<usize> = log
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("sync_file_range(") && l.contains("SYNC_FILE_RANGE_WRITE"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(started.len(), 30, "{log}");
    for (i, line) in log.lines().enumerate() {
        let Some(fd) = line.split("\"/proc/self/fd/").nth(1) else {
            continue;
        };
        let fd = fd.split('"').next().unwrap();
        let before = log.lines().take(i).any(|l| {
            l.contains(&format!(
                "sync_file_range({fd}, 0, 0, SYNC_FILE_RANGE_WRITE"
            ))
        });
        assert!(
            before,
            "DEST fd {fd} read back before its writeback began:\n{log}"
        );
    }
    assert_eq!(listing(&d.join("src")), listing(&d.join("dst")));
}

/// --verify reopens DEST to read it back: one descriptor more than the copy's floor when
/// files are copied in turn, and within the limit with files in flight and the read-back
/// threads (a quarter of 64 at most for the files, one per thread for the reopened DEST).
#[test]
fn verify_stays_within_the_descriptor_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("src");
    small_tree(&src, 200, 3);
    fs::create_dir_all(src.join("1/2/3/4/5/6/7/8")).unwrap();
    fs::write(src.join("1/2/3/4/5/6/7/8/z"), b"z\n").unwrap();
    for backend in BACKENDS {
        // The copy's floor (trees::a_tree_copies_two_descriptors_above_cps_floor), plus one.
        let floor = 8 + u64::from(backend == Backend::FakeGpu);
        for limit in [floor, 64, 80] {
            let dst = d.join("dst");
            let _ = fs::remove_dir_all(&dst);
            let mut cmd = aiscp_command();
            cmd.current_dir(d).args(["--verify", "-r", "src", "dst"]);
            backend.apply(&mut cmd, &d.join("report"));
            limit_descriptors(&mut cmd, limit);
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{backend:?} under {limit}: {stderr}");
            assert_eq!(listing(&src), listing(&dst), "{backend:?} under {limit}");
            backend.assert_report_clean(&d.join("report"));
        }
    }
}
