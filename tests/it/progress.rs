//! The run's progress view on a terminal (through a pty of known width), the plain lines
//! `--progress` writes off a terminal (to a file), and `--stats` in both formats.
//!
//! Copies are made to last by a FIFO source fed slowly (`--copy-contents` makes -r read it),
//! so the views have time to draw whatever the machine's speed.

use crate::support::{
    aiscp_command, program, random_bytes, stats_value, write_random, Backend, BACKENDS,
};
use nix::pty::{openpty, Winsize};
use std::fs;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::thread::{self, JoinHandle};
use std::time::Duration;
use unicode_width::UnicodeWidthStr;

/// Makes `fifo` and feeds it `pieces` pieces of 64 KiB, one every `pause`, from a thread.
fn slow_fifo(fifo: &Path, pieces: usize, pause: Duration) -> JoinHandle<()> {
    nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let fifo = fifo.to_path_buf();
    thread::spawn(move || {
        let mut f = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        for i in 0..pieces {
            let piece = random_bytes(64 << 10, i as u64);
            if f.write_all(&piece).is_err() {
                return;
            }
            thread::sleep(pause);
        }
    })
}

/// A tree of `n` random files (a few KiB each) and one of `big` bytes; returns its bytes.
fn tree(root: &Path, n: usize, big: usize) -> u64 {
    fs::create_dir_all(root.join("sub")).unwrap();
    let mut total = 0;
    for i in 0..n {
        let len = 1000 + i * 37;
        write_random(&root.join("sub").join(format!("f{i}")), len, i as u64);
        total += len as u64;
    }
    write_random(&root.join("big"), big, 99);
    total + big as u64
}

/// The frames indicatif drew: the text between carriage returns, escape sequences removed.
fn frames(raw: &str) -> Vec<String> {
    raw.split(['\r', '\n'])
        .map(|f| {
            let mut out = String::new();
            let mut chars = f.chars();
            while let Some(c) = chars.next() {
                if c == '\x1b' {
                    // CSI: ESC [ params final-byte
                    for d in chars.by_ref() {
                        if d.is_ascii_alphabetic() {
                            break;
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            out
        })
        .collect()
}

/// Runs aiscp with stdin, stdout and stderr on a pty of `cols` columns; returns what the
/// terminal received and the exit status.
fn run_on_pty(args: &[&std::ffi::OsStr], cols: u16, env: &[(&str, String)]) -> (String, i32) {
    let ws = Winsize {
        ws_row: 24,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = openpty(Some(&ws), None).unwrap();
    let slave = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let mut cmd = aiscp_command();
    cmd.args(args)
        .stdin(slave(&pty.slave))
        .stdout(slave(&pty.slave))
        .stderr(slave(&pty.slave));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    // Every slave fd here must close, or the master never sees the child's end.
    drop(cmd);
    drop(pty.slave);
    let mut master = fs::File::from(pty.master);
    let reader = thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // EIO once the last slave fd is closed: the child is gone.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let status = child.wait().unwrap();
    let out = reader.join().unwrap();
    (
        String::from_utf8_lossy(&out).into_owned(),
        status.code().unwrap_or(-1),
    )
}

#[test]
fn one_view_for_the_run_on_a_terminal() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let bytes = tree(&src, 30, 3 << 20);
        let long = "a-rather-long-file-name-that-cannot-fit-in-72-columns-with-the-counters.fifo";
        let fifo = dir.path().join(long);
        let feeder = slow_fifo(&fifo, 25, Duration::from_millis(100));
        let out = dir.path().join("out");
        fs::create_dir(&out).unwrap();
        let report = dir.path().join("report");
        // Named after the FIFO, so its message comes while the view is drawn.
        let missing = dir.path().join("nosuch");
        let (raw, code) = run_on_pty(
            &[
                "-r".as_ref(),
                "--copy-contents".as_ref(),
                "-q".as_ref(),
                src.as_os_str(),
                fifo.as_os_str(),
                missing.as_os_str(),
                out.as_os_str(),
            ],
            72,
            &backend.env(&report),
        );
        feeder.join().unwrap();
        assert_eq!(code, 1, "{backend:?}: {raw}");
        backend.assert_report_clean(&report);
        let frames = frames(&raw);
        let prog = program().display().to_string();
        let drawn: Vec<&String> = frames
            .iter()
            .filter(|f| !f.trim().is_empty() && !f.starts_with(&prog))
            .collect();
        assert!(!drawn.is_empty(), "{backend:?}: nothing drawn: {raw:?}");
        for f in &drawn {
            // indicatif pads the line with spaces to the width; the text stays within it.
            assert!(
                f.trim_end().width() < 72,
                "{backend:?}: wider than 71: {f:?}"
            );
        }
        // The tree's 31 files and the FIFO: the total is known once the walk ends, and the
        // bytes of the tree are done before the FIFO starts.
        let total = format!("/{} files", 32);
        let tail = &long[long.len() - 9..];
        let during_fifo: Vec<&&String> = drawn
            .iter()
            .filter(|f| f.trim_end().ends_with(tail))
            .collect();
        assert!(
            !during_fifo.is_empty(),
            "{backend:?}: no frame names the FIFO: {drawn:?}"
        );
        for f in &during_fifo {
            assert!(
                f.contains("31/32 files") || f.contains("32/32 files"),
                "{backend:?}: {f:?}"
            );
            assert!(f.contains(&total), "{backend:?}: {f:?}");
            assert!(f.contains('…'), "{backend:?}: name not shortened: {f:?}");
        }
        assert!(during_fifo.iter().any(|f| f.contains("31/32 files")));
        // Progress moves within the FIFO's copy, from the tree's bytes on. A stream has no
        // size: bytes done without a made-up total, no percentage, no bar, no ETA.
        let fields: std::collections::BTreeSet<&str> = during_fifo
            .iter()
            .map(|f| f.trim_start().split("  ").next().unwrap())
            .collect();
        assert!(
            fields.len() >= 2,
            "{backend:?}: bytes stand still: {during_fifo:?}"
        );
        let tree_mib = bytes as f64 / (1 << 20) as f64;
        for f in &fields {
            assert!(f.ends_with(" MiB"), "{backend:?}: {f}");
            let done: f64 = f.trim_end_matches(" MiB").parse().unwrap();
            assert!(done >= tree_mib - 0.01, "{backend:?}: {f} < {tree_mib} MiB");
        }
        // Nor does it move back: each frame shows at least what the one before it did.
        let shown: Vec<f64> = during_fifo
            .iter()
            .map(|f| printed_bytes(f.trim_start().split("  ").next().unwrap()))
            .collect();
        assert!(
            shown.windows(2).all(|w| w[1] >= w[0]),
            "{backend:?}: a frame shows less done than the one before: {during_fifo:?}"
        );
        for f in &during_fifo {
            assert!(
                !f.contains("ETA") && !f.contains('%') && !f.contains('['),
                "{backend:?}: {f:?}"
            );
        }
        // 2.5 s of FIFO: the rate is measured by then.
        assert!(
            during_fifo.iter().any(|f| f.contains("/s")),
            "{backend:?}: no rate: {during_fifo:?}"
        );
        // The message is on a line of its own: the view is wiped while it prints.
        let message = format!(
            "{}: cannot stat '{}': No such file or directory",
            program().display(),
            missing.display()
        );
        assert!(
            frames.iter().any(|f| f.trim_end() == message),
            "{backend:?}: {message:?} not on its own line: {frames:?}"
        );
        // The view is wiped at the end: the last thing on the terminal is an empty line.
        assert!(frames.last().unwrap().trim().is_empty(), "{raw:?}");
        assert_eq!(fs::read(out.join(long)).unwrap().len(), 25 << 16);
    }
}

/// A byte count as the views print it.
fn progress_size(n: u64) -> String {
    aiscp_engine::units::size(n)
}

/// The bytes a count as the views print it stands for ("512 B", "1.25 MiB"), to the
/// precision printed.
fn printed_bytes(text: &str) -> f64 {
    let (number, unit) = text
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("{text:?}"));
    let power = ["B", "KiB", "MiB", "GiB", "TiB"]
        .iter()
        .position(|u| *u == unit)
        .unwrap_or_else(|| panic!("unit of {text:?}"));
    number.parse::<f64>().unwrap() * 1024f64.powi(power as i32)
}

#[test]
fn progress_off_a_terminal_writes_plain_lines() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let bytes = tree(&src, 5, 1 << 20);
    let fifo = dir.path().join("slow");
    // 5 s of data: two lines at least, at one every 2 s.
    let feeder = slow_fifo(&fifo, 50, Duration::from_millis(100));
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    let log = dir.path().join("log");
    let status = aiscp_command()
        .args([
            "-r",
            "--copy-contents",
            "--progress",
            "--backend",
            "host",
            "-q",
        ])
        .arg(&src)
        .arg(&fifo)
        .arg(&out)
        .stderr(fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    feeder.join().unwrap();
    assert!(status.success());
    let text = fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\x1b') && !text.contains('\r'), "{text:?}");
    let mut lines: Vec<&str> = text.lines().collect();
    // --progress leaves a last line for the whole run: every file, no name.
    let last = lines.pop().unwrap();
    assert!(
        last.contains(": progress: ") && last.contains(", 7/7 files, ") && last.ends_with("/s"),
        "{last}"
    );
    assert!(lines.len() >= 2, "{text}");
    let done = progress_size(bytes);
    for l in &lines {
        assert!(l.contains(": progress: "), "{l}");
        assert!(l.contains("6/7 files"), "{l}");
        assert!(l.contains("/s"), "no rate: {l}");
        assert!(l.ends_with(&fifo.display().to_string()), "{l}");
    }
    // Each line shows more done than the last, never less than the tree.
    let fields: Vec<&str> = lines
        .iter()
        .map(|l| {
            l.split(": progress: ")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
        })
        .collect();
    // A stream is in the run: bytes done, no total.
    assert!(fields.iter().all(|f| !f.contains('/')), "{fields:?}");
    let shown: Vec<f64> = fields.iter().map(|f| printed_bytes(f)).collect();
    assert!(
        shown.windows(2).all(|w| w[1] > w[0]),
        "a line shows no more done than the one before: {fields:?}"
    );
    assert!(shown[0] >= printed_bytes(&done), "{fields:?} vs {done}");

    // Without --progress, nothing off a terminal.
    let status = aiscp_command()
        .args(["-r", "--backend", "host"])
        .arg(&src)
        .arg(dir.path().join("again"))
        .stderr(fs::File::create(&log).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(fs::read_to_string(&log).unwrap(), "");
}

#[test]
fn stats_line_and_json_add_up() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let bytes = tree(&src, 12, (5 << 20) + 123);
        let report = dir.path().join("report");
        let run = |format: &[&str], dst: PathBuf| {
            let mut cmd = aiscp_command();
            backend.apply(&mut cmd, &report);
            let out = cmd
                .args(["-r", "--chunk-size", "1M"])
                .args(format)
                .arg(&src)
                .arg(&dst)
                .output()
                .unwrap();
            assert!(out.status.success(), "{backend:?}: {out:?}");
            backend.assert_report_clean(&report);
            String::from_utf8(out.stdout).unwrap()
        };
        let json = run(&["--stats=json"], dir.path().join("a"));
        let v: serde_json::Value = serde_json::from_str(json.trim_end()).unwrap();
        assert_eq!(json.lines().count(), 1, "{json}");
        assert_eq!(v["files"], 13, "{json}");
        assert_eq!(v["bytes"], bytes, "{json}");
        assert_eq!(v["failed"], false, "{json}");
        assert!(v["seconds"].as_f64().unwrap() > 0.0, "{json}");
        assert!(v["bytes_per_second"].as_f64().unwrap() > 0.0, "{json}");
        let routed: u64 = v["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["files"].as_u64().unwrap())
            .sum();
        assert_eq!(routed, 13, "{json}");
        match backend {
            Backend::Host => {
                assert_eq!(v["backend"], "host memory", "{json}");
                assert_eq!(v["gpus"], serde_json::json!([]), "{json}");
            }
            Backend::FakeGpu => {
                assert_eq!(v["backend"], "hipFile", "{json}");
                assert_eq!(v["gpus"], serde_json::json!([0]), "{json}");
                assert!(
                    v["library"].as_str().unwrap().starts_with("hipFile "),
                    "{json}"
                );
            }
        }
        let stages = &v["stages"];
        let seconds = v["seconds"].as_f64().unwrap();
        // Every stage is timed (a number, never null with data copied) and the six add up
        // to no more thread time than the run's 4 slice workers and 4 file workers can
        // have spent in it.
        let thread_time: f64 = ["open", "read", "copy_queue", "copy_wait", "write", "digest"]
            .iter()
            .map(|stage| {
                let t = stages[*stage].as_f64();
                assert!(t.is_some_and(f64::is_finite), "{stage}: {json}");
                t.unwrap()
            })
            .sum();
        assert!(thread_time <= 8.0 * seconds, "{json}");
        assert!(stages["read"].as_f64().unwrap() > 0.0, "{json}");
        assert!(stages["write"].as_f64().unwrap() > 0.0, "{json}");
        // The engine came up and went down (each takes measurable time), both inside the
        // run's own time.
        let fixed: f64 = ["startup_seconds", "shutdown_seconds"]
            .iter()
            .map(|k| v[*k].as_f64().unwrap())
            .inspect(|secs| assert!(*secs > 0.0, "{json}"))
            .sum();
        assert!(fixed <= seconds, "{json}");

        // The text: labelled lines in words; stage times and routes only under --debug.
        let text = run(&["--stats"], dir.path().join("b"));
        let value = |label| stats_value(&text, label).unwrap_or_else(|| panic!("{label}: {text}"));
        assert_eq!(value("Files copied"), "13", "{text}");
        assert_eq!(value("Files skipped"), "0", "{text}");
        assert_eq!(value("Files failed"), "0", "{text}");
        assert!(
            value("Data copied").ends_with(&format!(" ({bytes} bytes)")),
            "{text}"
        );
        assert!(value("Time").ends_with(" s"), "{text}");
        assert!(value("Rate").ends_with("/s"), "{text}");
        let through = match backend {
            Backend::Host => "host memory".to_owned(),
            Backend::FakeGpu => format!("{} on GPU 0", v["library"].as_str().unwrap()),
        };
        assert_eq!(value("Staged through"), through, "{text}");
        for internal in ["routes", "Thread time", "copy queue", "Start-up", "bounce"] {
            assert!(!text.contains(internal), "{internal}: {text}");
        }
        let debug = run(&["--stats", "--debug"], dir.path().join("c"));
        let debug = debug.rsplit_once("Files copied:").map(|(_, s)| s).unwrap();
        let value = |label| stats_value(debug, label).unwrap_or_else(|| panic!("{label}: {debug}"));
        let routed: u64 = value("Read/write routes")
            .split(", ")
            .map(|r| r.split(' ').next().unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(routed, 13, "{debug}");
        assert!(value("Thread time").starts_with("open "), "{debug}");
        assert!(value("Thread time").contains(", copy wait "), "{debug}");
        assert!(value("Start-up, shutdown").contains(" s, "), "{debug}");
        assert!(!value("Library counters").is_empty(), "{debug}");
    }
}

#[test]
fn stats_report_failures_and_bad_formats() {
    let dir = tempfile::tempdir().unwrap();
    write_random(&dir.path().join("a"), 5000, 1);
    let out = aiscp_command()
        .args(["--backend", "host", "--stats=json"])
        .arg(dir.path().join("a"))
        .arg(dir.path().join("missing"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["failed"], true);
    assert_eq!(v["files"], 0, "a onto itself is refused before its data");
    assert_eq!(
        v["files_failed"], 2,
        "a onto itself, and the missing operand: {v}"
    );
    // No data moved, so no engine came up: nothing to time.
    for unused in ["backend", "stages", "startup_seconds", "shutdown_seconds"] {
        assert!(v[unused].is_null(), "{unused}: {v}");
    }

    let out = aiscp_command()
        .args(["--stats=yaml", "a", "b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    // The quotes follow the locale, as GNU's argmatch does.
    assert!(
        err.contains("invalid argument ") && err.contains("yaml"),
        "{err}"
    );
    assert!(err.contains("for ") && err.contains("--stats"), "{err}");
    assert!(err.contains("json"), "{err}");
}

/// `--progress` on a terminal of 100 and of 40 columns, over a run held before its first
/// --verify read-back (the files' data in flight is done by then): indicatif's bar with the percentage once the total is known, the name only where
/// it fits, and a last line that stays. Off a terminal, a copy shorter than the log interval
/// still leaves its line.
#[test]
fn asked_for_progress_draws_a_bar_and_leaves_its_last_line() {
    let long = "a-file-name-long-enough-to-be-dropped-on-a-narrow-terminal.bin";
    for cols in [100u16, 40] {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        fs::create_dir(&src).unwrap();
        write_random(&src.join(long), 3 << 20, 1);
        write_random(&src.join("b"), 1 << 20, 2);
        write_random(&src.join("c"), 5000, 3);
        let flag = dir.path().join("paused");
        let out = dir.path().join("out");
        let args: Vec<std::ffi::OsString> = vec![
            "-r".into(),
            "--progress".into(),
            "--verify".into(),
            "--backend".into(),
            "host".into(),
            src.clone().into(),
            out.clone().into(),
        ];
        let env = vec![("AISCP_TEST_PAUSE", format!("verify:{}", flag.display()))];
        let run = thread::spawn(move || {
            let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
            run_on_pty(&args, cols, &env)
        });
        while !flag.exists() {
            thread::sleep(Duration::from_millis(10));
        }
        // Held mid-copy long enough for a measured rate.
        thread::sleep(Duration::from_millis(1600));
        fs::remove_file(&flag).unwrap();
        let (raw, code) = run.join().unwrap();
        assert_eq!(code, 0, "{cols}: {raw}");
        let frames: Vec<String> = frames(&raw)
            .into_iter()
            .filter(|f| !f.trim().is_empty())
            .collect();
        for f in &frames {
            assert!(f.trim_end().width() < cols as usize, "{cols}: {f:?}");
        }
        // A rate ends in "B/s"; the file name shown ("/tmp/.../src/c") has a "/s" too.
        let mid: Vec<&String> = frames[..frames.len() - 1]
            .iter()
            .filter(|f| f.contains("B/s"))
            .collect();
        assert!(
            !mid.is_empty(),
            "{cols}: no frame with a rate mid-run: {frames:?}"
        );
        for f in &mid {
            assert!(f.contains('%') && f.contains(" MiB"), "{cols}: {f:?}");
        }
        let last = frames.last().unwrap();
        assert!(
            last.contains("100%") && last.contains("4.00/4.00 MiB") && last.contains("/s"),
            "{cols}: the last line does not stay: {last:?} in {frames:?}"
        );
        if cols == 100 {
            assert!(
                mid.iter().all(|f| f.contains("% [") && f.contains("] ")),
                "{mid:?}"
            );
            assert!(mid.iter().any(|f| f.contains("/3 files")), "{mid:?}");
            assert!(
                last.contains("[====") && last.contains("3/3 files"),
                "{last:?}"
            );
            assert!(!last.contains("ETA"), "nothing left: {last:?}");
        } else {
            assert!(
                mid.iter().all(|f| !f.contains("src/")),
                "no room for the name: {mid:?}"
            );
        }
    }

    // Off a terminal, shorter than the 2 s between lines: one line, for the whole run.
    let dir = tempfile::tempdir().unwrap();
    write_random(&dir.path().join("a"), 5000, 1);
    let out = aiscp_command()
        .args(["--progress", "--backend", "host", "a", "b"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(": progress: 4.88/4.88 KiB, 1/1 files, ") && err.contains("(100%)"),
        "{err}"
    );
}

/// A size that lands on a whole unit keeps its two decimals ("1.00 MiB", not "1 MiB"), in the
/// plain progress lines and in --stats. The FIFO's writer sends nothing for 2.5 s, so the
/// progress line shows exactly the 1 MiB file done (bytes only: a run with a stream has no
/// total).
#[test]
fn whole_sizes_keep_two_decimals() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), vec![7u8; 1 << 20]).unwrap();
    let fifo = dir.path().join("f");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let writer = {
        let fifo = fifo.clone();
        thread::spawn(move || {
            let _w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
            thread::sleep(Duration::from_millis(2500));
        })
    };
    let out = dir.path().join("out");
    fs::create_dir(&out).unwrap();
    let output = aiscp_command()
        .current_dir(dir.path())
        .args(["--progress", "--stats", "--backend", "host", "-q", "a", "f"])
        .arg(&out)
        .output()
        .unwrap();
    writer.join().unwrap();
    assert!(output.status.success(), "{output:?}");
    let err = String::from_utf8(output.stderr).unwrap();
    assert!(err.contains(": progress: 1.00 MiB, 1/2 files, "), "{err}");
    let stats = String::from_utf8(output.stdout).unwrap();
    assert!(stats.starts_with("Files copied:   2\n"), "{stats}");
    assert_eq!(
        stats_value(&stats, "Data copied").as_deref(),
        Some("1.00 MiB (1048576 bytes)"),
        "{stats}"
    );
}
