//! The fault matrix: the built binary copies through the fake GPU library while it injects
//! I/O errors, short counts, refused registrations, allocation and driver failures. For
//! every failure: exit 1, exactly one message naming the file, the operation and the decoded
//! error; the sources untouched; DST a true prefix of SRC (never padded); no leaked or
//! misused GPU resource; the other operands of the run still copied. Faults the engine must
//! absorb (short counts, EINTR, refused file registration) must give an identical copy.

use crate::support::{aiscp_command, assert_same_bytes, program, random_bytes, Backend, Report};
use std::fs;
use std::path::PathBuf;
use std::process::Output;
use tempfile::TempDir;

mod setup;

/// Slice size for every run: small, so that the files below span many slices.
const CHUNK: usize = 64 * 1024;
const HALF_CHUNK: usize = CHUNK / 2;
/// The operands: only `big` reaches [`FAULT_AT`], so an `@` fault hits one file only.
const BIG: usize = 1_000_000;
const MID: usize = 300_000;
const SMALL: usize = 5_000;
/// An offset inside `big`'s eighth slice, past the end of the other two files.
const FAULT_AT: usize = 500_000;

/// The engines every fault applies to: the threaded workers and `--async` streams, both on
/// the library route (`auto` would send the files under 1 MiB in flight on the bounce route).
const ENGINES: [&[&str]; 2] = [&["--route=library"], &["--async"]];

/// One run's directory: the three sources, an empty `out/`, and the fake's report path.
struct Scene {
    dir: TempDir,
    sources: Vec<(&'static str, Vec<u8>)>,
    /// Extra arguments choosing the engine (one of [`ENGINES`]).
    engine: &'static [&'static str],
}

impl Scene {
    /// A scene run by the threaded engine.
    fn new(seed: u64) -> Scene {
        Scene::for_engine(seed, ENGINES[0])
    }

    fn for_engine(seed: u64, engine: &'static [&'static str]) -> Scene {
        // Printed with the output of a failing test.
        println!("engine: {engine:?}");
        let dir = tempfile::tempdir().unwrap();
        let sources = [("big", BIG), ("mid", MID), ("small", SMALL)]
            .into_iter()
            .enumerate()
            .map(|(i, (name, len))| {
                let data = random_bytes(len, seed * 10 + i as u64);
                fs::write(dir.path().join(name), &data).unwrap();
                (name, data)
            })
            .collect();
        fs::create_dir(dir.path().join("out")).unwrap();
        Scene {
            dir,
            sources,
            engine,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn report_path(&self) -> PathBuf {
        self.path("fake-gpu.report")
    }

    /// Runs `aiscp --chunk-size 64K ARGS...` in the scene's directory with `faults` injected.
    fn run(&self, faults: &str, args: &[&str]) -> Output {
        self.run_chunk(faults, CHUNK, args)
    }

    /// Runs `aiscp --chunk-size CHUNK ARGS...` in the scene's directory with `faults` injected.
    fn run_chunk(&self, faults: &str, chunk: usize, args: &[&str]) -> Output {
        let mut cmd = aiscp_command();
        cmd.current_dir(self.dir.path())
            .arg("--chunk-size")
            .arg(chunk.to_string())
            .args(self.engine)
            .args(args)
            .env_remove("AISCP_FAKE_GPU_FAULTS")
            .env("AISCP_FAKE_GPU_FAULTS", faults)
            .stdin(std::process::Stdio::null());
        Backend::FakeGpu.apply(&mut cmd, &self.report_path());
        cmd.output().unwrap()
    }

    /// Copies all three sources into out/.
    fn run_all(&self, faults: &str) -> Output {
        self.run(faults, &["big", "mid", "small", "out/"])
    }

    fn report(&self) -> Report {
        Report::read(&self.report_path())
    }

    fn source(&self, name: &str) -> &[u8] {
        &self.sources.iter().find(|(n, _)| *n == name).unwrap().1
    }

    /// Every source still holds exactly what it was created with.
    fn assert_sources_untouched(&self) {
        for (name, data) in &self.sources {
            let now = fs::read(self.path(name)).unwrap();
            assert_same_bytes(&now, data, &format!("source {name} after the run"));
        }
    }

    /// out/NAME is a complete copy of NAME.
    fn assert_copied(&self, name: &str) {
        let got = fs::read(self.path(&format!("out/{name}")))
            .unwrap_or_else(|e| panic!("out/{name}: {e}"));
        assert_same_bytes(&got, self.source(name), &format!("out/{name}"));
    }

    /// out/NAME, if it exists, is a prefix of NAME no longer than `at_most` bytes: no byte
    /// claimed that was not copied, no padding.
    fn assert_prefix(&self, name: &str, at_most: usize) {
        let Ok(got) = fs::read(self.path(&format!("out/{name}"))) else {
            return;
        };
        let src = self.source(name);
        assert!(
            got.len() <= at_most,
            "out/{name} is {} bytes, more than the {at_most} that can have been copied",
            got.len()
        );
        assert_same_bytes(&got, &src[..got.len()], &format!("out/{name} (partial)"));
    }
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Exit 1 with exactly one stderr line: `PROGRAM: ` followed by every piece of `parts`.
fn assert_one_error(out: &Output, parts: &[&str]) {
    let lines = stderr_lines(out);
    assert_eq!(out.status.code(), Some(1), "exit status; stderr: {lines:?}");
    assert_eq!(lines.len(), 1, "exactly one message expected: {lines:?}");
    let prefix = format!("{}: ", program().display());
    let line = &lines[0];
    assert!(line.starts_with(&prefix), "no program prefix: {line}");
    assert!(!line.contains("panicked"), "{line}");
    for part in parts {
        assert!(line.contains(part), "{line:?} does not contain {part:?}");
    }
}

/// Exit 0, nothing on stderr, every operand copied, nothing leaked.
fn assert_clean_success(scene: &Scene, out: &Output) -> Report {
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["big", "mid", "small"] {
        scene.assert_copied(name);
    }
    scene.assert_sources_untouched();
    let report = scene.report();
    report.assert_clean();
    report
}

/// A fault that hits `big` only: one message about it, the others copied, `big`'s DST a
/// prefix ending before the fault, the sources untouched, nothing leaked.
fn assert_fails_on_big_only(faults: &str, parts: &[&str]) {
    assert_fails_on_big_leaving(faults, parts, &|scene| scene.assert_prefix("big", FAULT_AT));
}

/// As [`assert_fails_on_big_only`], with `left` checking what `out/big` holds.
fn assert_fails_on_big_leaving(faults: &str, parts: &[&str], left: &dyn Fn(&Scene)) {
    for engine in ENGINES {
        let scene = Scene::for_engine(faults.len() as u64, engine);
        let out = scene.run_all(faults);
        assert_one_error(&out, parts);
        left(&scene);
        scene.assert_copied("mid");
        scene.assert_copied("small");
        scene.assert_sources_untouched();
        scene.report().assert_clean();
    }
}

#[test]
fn a_clean_run_goes_through_device_memory_and_leaks_nothing() {
    for engine in ENGINES {
        let scene = Scene::for_engine(1, engine);
        let report = assert_clean_success(&scene, &scene.run_all(""));
        // The aligned part of each file moved by hipFileRead/Write, the rest by hipMemcpy.
        let total = (BIG + MID + SMALL) as u64;
        assert_eq!(report.stats.read_bytes + report.stats.htod_bytes, total);
        assert_eq!(report.stats.write_bytes + report.stats.dtoh_bytes, total);
        assert_eq!(report.stats.handles, 6, "three SRC and three DST handles");
    }
}

#[test]
fn worker_threads_and_buffers_are_reused_across_files() {
    // big (16 slices) and mid (5) each take both workers; small runs inline. Threads made
    // per file would show as 1 + 2 + 2 threads making the device current, reused ones as at
    // most 1 + 2 (2 if one pool thread happened to run both workers of each file); the two
    // slots are allocated once for the run.
    for engine in ENGINES {
        let scene = Scene::for_engine(15, engine);
        let out = scene.run("", &["--streams", "2", "big", "mid", "small", "out/"]);
        let report = assert_clean_success(&scene, &out);
        let threads = report.stats.device_threads;
        assert!((2..=3).contains(&threads), "{engine:?}: {report:?}");
        assert_eq!(report.stats.mallocs, 2, "{engine:?}: {report:?}");
    }
}

#[test]
fn eio_on_read_names_the_source() {
    assert_fails_on_big_only(
        &format!("read@{FAULT_AT}=EIO"),
        &["error reading 'big'", "Input/output error"],
    );
}

/// After a full disk the rest of the file is written again in order, as far as the
/// filesystem takes it (a real full disk: tests/it/full_disk.rs); here the one injected
/// failure is gone by then, so DEST holds all of SOURCE, and the copy still fails.
#[test]
fn enospc_on_write_names_the_destination() {
    assert_fails_on_big_leaving(
        &format!("write@{FAULT_AT}=ENOSPC"),
        &["error writing 'out/big'", "No space left on device"],
        &|scene| scene.assert_copied("big"),
    );
}

#[test]
fn eio_on_write_names_the_destination() {
    assert_fails_on_big_only(
        &format!("write@{FAULT_AT}=EIO"),
        &["error writing 'out/big'", "Input/output error"],
    );
}

/// A library that keeps answering a write with 0 bytes, or with less than one block, would
/// otherwise be called forever: the copy fails instead, naming DEST.
#[test]
fn a_write_that_makes_no_progress_fails() {
    for fault in ["short:0", "short:1"] {
        assert_fails_on_big_only(
            &format!("write@{FAULT_AT}*={fault}"),
            &["error writing 'out/big'", "made no progress"],
        );
    }
}

/// As [`enospc_on_write_names_the_destination`], for a quota.
#[test]
fn edquot_on_write_names_the_destination() {
    assert_fails_on_big_leaving(
        &format!("write@{FAULT_AT}=EDQUOT"),
        &["error writing 'out/big'", "Disk quota exceeded"],
        &|scene| scene.assert_copied("big"),
    );
}

#[test]
fn a_negative_hip_error_is_decoded_not_taken_for_errno() {
    // -2 with errno 0: hipErrorOutOfMemory, not ENOENT.
    assert_fails_on_big_only(
        &format!("read@{FAULT_AT}=hiperr:2"),
        &["error reading 'big'", "out of memory"],
    );
    // -1 with errno 0: hipErrorInvalidValue, not EPERM.
    assert_fails_on_big_only(
        &format!("write@{FAULT_AT}=hiperr:1"),
        &["error writing 'out/big'", "invalid argument"],
    );
}

#[test]
fn a_hipfile_error_on_write_is_decoded() {
    assert_fails_on_big_only(
        &format!("write@{FAULT_AT}=hipfile:5030"),
        &["error writing 'out/big'", "5030"],
    );
}

#[test]
fn eintr_is_retried() {
    for faults in [
        format!("read@{FAULT_AT}=EINTR"),
        format!("write@{FAULT_AT}=EINTR"),
    ] {
        for engine in ENGINES {
            let scene = Scene::for_engine(3, engine);
            let out = scene.run_all(&faults);
            assert_clean_success(&scene, &out);
        }
    }
}

#[test]
fn short_reads_mid_file_still_copy_everything() {
    // short:0 in the middle of a file looks like EOF to that call; the file's size says
    // otherwise, and the copy must go on.
    for bytes in [0, 4096, HALF_CHUNK] {
        let faults = format!("read@{FAULT_AT}=short:{bytes}");
        for engine in ENGINES {
            let scene = Scene::for_engine(4, engine);
            let out = scene.run_all(&faults);
            assert_clean_success(&scene, &out);
        }
    }
}

#[test]
fn short_writes_are_continued() {
    for bytes in [4096, HALF_CHUNK] {
        let faults = format!("write@{FAULT_AT}=short:{bytes}");
        for engine in ENGINES {
            let scene = Scene::for_engine(5, engine);
            let out = scene.run_all(&faults);
            let report = assert_clean_success(&scene, &out);
            // The short call was followed by one more for the rest of its slice.
            assert!(report.stats.writes > report.stats.reads, "{report:?}");
        }
    }
}

/// A 1-byte short count: the continuation starts at an unaligned offset, which an O_DIRECT
/// fd refuses. The library really returns such counts where it falls back to buffered I/O.
#[test]
fn one_byte_short_counts_are_continued() {
    for faults in [
        format!("write@{FAULT_AT}=short:1"),
        format!("read@{FAULT_AT}=short:1"),
    ] {
        for engine in ENGINES {
            let scene = Scene::for_engine(6, engine);
            let out = scene.run_all(&faults);
            assert_clean_success(&scene, &out);
        }
    }
}
