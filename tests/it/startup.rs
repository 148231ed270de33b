//! The GPU is brought up on a thread of its own from the start of the run, so its start-up
//! overlaps the walk and the opening of the first files; what it says, and a failure to
//! start, still come where the first file's data needs it, and a run with no file data
//! says nothing of it.

use crate::support::{program, random_bytes, Backend};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// What the fake library's first call sleeps, standing for cuInit and the context.
const INIT_DELAY_MS: u64 = 800;

fn aiscp(dir: &Path) -> Command {
    let mut cmd = Command::new(program());
    cmd.current_dir(dir);
    Backend::FakeGpu.apply(&mut cmd, &dir.join("report"));
    cmd
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The main thread is held before it opens the first SOURCE for longer than the library's
/// initialisation takes: the GPU comes up meanwhile, so once let go the copy does not wait
/// for it (a start made at the first file would begin only then, and take the whole delay
/// after the release).
#[test]
fn the_gpu_comes_up_while_the_first_source_is_being_reached() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = random_bytes(3 << 20, 7);
    fs::write(d.join("src"), &data).unwrap();
    let flag = d.join("paused");
    let mut child = aiscp(d)
        .args(["--debug", "src", "dst"])
        .env("AISCP_FAKE_GPU_INIT_DELAY_MS", INIT_DELAY_MS.to_string())
        .env(
            "AISCP_TEST_PAUSE",
            format!("source-open:{}", flag.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before the pause"
        );
        assert!(Instant::now() < deadline, "never reached the pause");
        thread::sleep(Duration::from_millis(5));
    }
    // Twice the delay: ample for a thread that only sleeps through it.
    thread::sleep(Duration::from_millis(2 * INIT_DELAY_MS));
    let released = Instant::now();
    fs::remove_file(&flag).unwrap();
    let out = child.wait_with_output().unwrap();
    let after_release = released.elapsed();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(fs::read(d.join("dst")).unwrap(), data);
    Backend::FakeGpu.assert_report_clean(&d.join("report"));
    // The engine's own account: it was up before the first file asked for it.
    let waited: f64 = err
        .lines()
        .find_map(|l| l.split("waited ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no bring-up line in:\n{err}"))
        .parse()
        .unwrap();
    assert!(waited < 0.1, "waited {waited} s for the GPU:\n{err}");
    // And from outside: less than the delay a start at the first file would take after it.
    assert!(
        after_release < Duration::from_millis(INIT_DELAY_MS),
        "{after_release:?} after the release:\n{err}"
    );
    // The end of the run is accounted for too.
    assert!(
        err.contains("debug: +") && err.contains(" shut down in "),
        "{err}"
    );
    // The bring-up's lines come before the file's, as from a start made there.
    let backend_at = err.find("backend hipFile").expect("backend line");
    let file_at = err.find("'src' -> 'dst': ").expect("file line");
    assert!(backend_at < file_at, "{err}");
}

/// A run that moves no file data (only directories here) never takes the engine: an
/// impossible --gpu, or no GPU with --backend auto, goes unmentioned, as when the engine was
/// started at the first file; the engine begun in the background is still shut down cleanly.
#[test]
fn a_run_without_file_data_says_nothing_of_the_gpu() {
    for (env, args) in [
        (None, &["--gpu", "5"][..]),
        (
            Some(("AISCP_FAKE_GPU_DEVICES", "0")),
            &["--backend", "auto"][..],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("src/a/b")).unwrap();
        let mut cmd = aiscp(d);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd
            .arg("-r")
            .args(args)
            .args(["src", "dst"])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(err, "", "{args:?}");
        assert!(d.join("dst/a/b").is_dir());
        // Whatever the engine begun in the background took, it gave back.
        if d.join("report").exists() {
            Backend::FakeGpu.assert_report_clean(&d.join("report"));
        }
    }
}

/// The same runs with a file: the bring-up's failure or fallback is said once, where the
/// file needs the engine, with today's words and exit status.
#[test]
fn a_failed_bring_up_is_reported_at_the_first_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::create_dir_all(d.join("src/a")).unwrap();
    fs::write(d.join("src/a/f"), b"data\n").unwrap();
    let out = aiscp(d)
        .args(["-r", "--gpu", "5", "src", "dst"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.ends_with(": GPU 5 does not exist: 1 device(s) found\n") && err.lines().count() == 1,
        "{err}"
    );
    assert!(d.join("dst/a").is_dir() && !d.join("dst/a/f").exists());
    let out = aiscp(d)
        .env("AISCP_FAKE_GPU_DEVICES", "0")
        .args(["-r", "--backend", "auto", "src", "dst2"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        err.matches("copying through host memory").count(),
        1,
        "{err}"
    );
    assert_eq!(fs::read(d.join("dst2/a/f")).unwrap(), b"data\n");
}

/// While the GPU comes up, the first file's first round of slices is read into memory, and
/// its copy takes those slices from there (on the bounce route: the library reads a
/// registered file itself). Shown by changing SRC after that read, before its copy: the
/// first round keeps the bytes read ahead, the rest has the new ones.
#[test]
fn the_first_file_is_read_while_the_gpu_comes_up() {
    const MIB: usize = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let old = random_bytes(6 * MIB + 1000, 11);
    fs::write(d.join("src"), &old).unwrap();
    let flag = d.join("paused");
    // Slices of 1 MiB, two at a time: the first two are read ahead.
    let mut child = aiscp(d)
        .args([
            "--debug",
            "--chunk-size",
            "1M",
            "--streams",
            "2",
            "--route",
            "bounce",
        ])
        .args(["src", "dst"])
        .env("AISCP_FAKE_GPU_INIT_DELAY_MS", "500")
        .env("AISCP_TEST_PAUSE", format!("dest-open:{}", flag.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !flag.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "ended before the pause"
        );
        assert!(Instant::now() < deadline, "never reached the pause");
        thread::sleep(Duration::from_millis(5));
    }
    // In place, as a writer would: one block in the first slice, one in the fifth.
    let mut new = old.clone();
    for at in [4096, 4 * MIB + 4096] {
        new[at..at + 4096].fill(0x5a);
    }
    {
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new()
            .write(true)
            .open(d.join("src"))
            .unwrap();
        f.write_all_at(&new[4096..8192], 4096).unwrap();
        f.write_all_at(
            &new[4 * MIB + 4096..4 * MIB + 8192],
            (4 * MIB + 4096) as u64,
        )
        .unwrap();
    }
    fs::remove_file(&flag).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("'src': first 2097152 bytes read while the GPU came up"),
        "{err}"
    );
    let got = fs::read(d.join("dst")).unwrap();
    assert_eq!(got.len(), old.len());
    assert!(
        got[..2 * MIB] == old[..2 * MIB],
        "the first round was read again"
    );
    assert!(
        got[2 * MIB..] == new[2 * MIB..],
        "the rest was not read at its turn"
    );
    Backend::FakeGpu.assert_report_clean(&d.join("report"));
}

/// On the library route nothing is read ahead: the library reads every byte of a
/// registered file itself (the fake counts them).
#[test]
fn nothing_is_read_ahead_for_the_library_route() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let data = random_bytes(6 << 20, 12);
    fs::write(d.join("src"), &data).unwrap();
    let out = aiscp(d)
        .args([
            "--debug",
            "--chunk-size",
            "1M",
            "--streams",
            "2",
            "--route",
            "library",
        ])
        .args(["src", "dst"])
        .env("AISCP_FAKE_GPU_INIT_DELAY_MS", "300")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("read while the GPU came up"), "{err}");
    assert_eq!(fs::read(d.join("dst")).unwrap(), data);
    let report = crate::support::Report::read(&d.join("report"));
    report.assert_clean();
    assert_eq!(report.stats.read_bytes, data.len() as u64);
}
