//! Paths through the engine that a copy can take without any test noticing they broke:
//! device memory running out at a later slot, a runtime call failing on a worker, a SOURCE
//! that refuses O_DIRECT, slots lent to files in flight and taken back, zero runs inside
//! data under --sparse=always, an old DEST's bytes under SOURCE's holes, and the route names
//! --debug and --stats give. Each test
//! goes through the built binary, so it keeps its meaning whatever the engine's insides.

use crate::routes::{Route, GPU_ROUTES, ROUTES};
use crate::support::{assert_same_bytes, random_bytes, skip, write_sparse, Report};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::process::Output;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_success(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", stderr(out));
}

/// Device memory for the second slot runs out: the chunk is halved and every slice is
/// planned at the new size, so a many-slice file still copies whole.
#[test]
fn device_memory_running_out_at_the_second_slot_still_copies_every_slice() {
    let dir = tempfile::tempdir().unwrap();
    let data = random_bytes(20 * 1_000_000 + 123, 0x5107);
    fs::write(dir.path().join("src"), &data).unwrap();
    for route in GPU_ROUTES {
        let report = dir.path().join("report");
        let out = route
            .aiscp(dir.path(), &report)
            .env("AISCP_FAKE_GPU_FAULTS", "malloc#2=oom")
            .args(["--chunk-size", "4M", "src", "dst"])
            .output()
            .unwrap();
        let what = format!("{route:?}");
        assert_success(&out, &what);
        assert_same_bytes(&fs::read(dir.path().join("dst")).unwrap(), &data, &what);
        let report = Report::read(&report);
        report.assert_clean();
        assert_eq!(
            report.stats.max_alloc,
            4 << 20,
            "{what}: the first slot kept"
        );
        fs::remove_file(dir.path().join("dst")).unwrap();
    }
}

/// A HIP runtime call a worker makes fails: the file fails with one message naming it and
/// the call, exit 1, and DEST holds only a true prefix of SOURCE (never holes or stale
/// bytes reported as copied); nothing leaks.
#[test]
fn a_runtime_call_failing_on_a_worker_fails_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let big = random_bytes(1_000_000, 0x5e7);
    fs::write(dir.path().join("big"), &big).unwrap();
    let small = random_bytes(300_000, 0x5e8);
    fs::write(dir.path().join("small"), &small).unwrap();
    // (route, fault, call named, arguments): many slices on two workers, and (bounce) one
    // small file in flight on one worker.
    let many = ["--chunk-size", "64K", "--streams", "2", "big", "dst"];
    let one = ["--streams", "1", "small", "dst"];
    let mut cases: Vec<(Route, &str, &str, &[&str])> = Vec::new();
    for route in GPU_ROUTES {
        cases.push((route, "setdevice#2=101", "hipSetDevice", &many));
        cases.push((route, "setdevice#3=101", "hipSetDevice", &many));
    }
    cases.extend([
        (Route::Bounce, "setdevice#2=101", "hipSetDevice", &one[..]),
        (
            Route::Library,
            "streamsync#1=719",
            "hipStreamSynchronize",
            &many,
        ),
        (
            Route::Bounce,
            "streamsync#3=719",
            "hipStreamSynchronize",
            &many,
        ),
        (
            Route::Bounce,
            "streamsync#1=719",
            "hipStreamSynchronize",
            &one,
        ),
        (
            Route::Async,
            "streamsync#3=719",
            "hipStreamSynchronize",
            &many,
        ),
        (Route::Bounce, "htod#2=719", "hipMemcpy", &many),
        (Route::Bounce, "dtoh#5=719", "hipMemcpy", &many),
        (Route::Bounce, "dtoh#1=719", "hipMemcpy", &one),
    ]);
    for (route, fault, call, args) in cases {
        let what = format!("{route:?} {fault} {args:?}");
        let report = dir.path().join("report");
        let out = route
            .aiscp(dir.path(), &report)
            .env("AISCP_FAKE_GPU_FAULTS", fault)
            .args(args)
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: one message: {err}");
        let src = args[args.len() - 2];
        assert!(
            lines[0].contains(call)
                && (lines[0].contains(&format!("'{src}'")) || lines[0].contains("'dst'")),
            "{what}: names the file and {call}: {err}"
        );
        let want = if src == "big" { &big } else { &small };
        if let Ok(got) = fs::read(dir.path().join("dst")) {
            assert!(got.len() < want.len(), "{what}: DEST whole after a failure");
            assert_same_bytes(&got, &want[..got.len()], &format!("{what}: DEST's prefix"));
            fs::remove_file(dir.path().join("dst")).unwrap();
        }
        Report::read(&report).assert_clean();
    }
}

/// A sysfs file that refuses O_DIRECT on every kernel, as SOURCE: read through the
/// fallback (plain reads into pinned or host memory) and copied whole, on every route,
/// in flight and one at a time.
#[test]
fn a_source_that_refuses_o_direct_is_copied_through_the_fallback() {
    let src = Path::new("/sys/devices/system/cpu/online");
    let refused = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(src)
        .is_err();
    assert!(refused, "{} took O_DIRECT", src.display());
    let want = fs::read(src).unwrap();
    assert!(!want.is_empty());
    let dir = tempfile::tempdir().unwrap();
    for route in ROUTES {
        for in_flight in [None, Some("0")] {
            let what = format!("{route:?}, AISCP_IN_FLIGHT={in_flight:?}");
            let report = dir.path().join("report");
            let mut cmd = route.aiscp(dir.path(), &report);
            if let Some(v) = in_flight {
                cmd.env("AISCP_IN_FLIGHT", v);
            }
            let out = cmd.arg("--debug").arg(src).arg("dst").output().unwrap();
            assert_success(&out, &what);
            assert_eq!(fs::read(dir.path().join("dst")).unwrap(), want, "{what}");
            if in_flight.is_some() {
                assert!(
                    stderr(&out).contains("read bounce (O_DIRECT refused)"),
                    "{what}: the fallback taken: {}",
                    stderr(&out)
                );
            }
            if route != Route::Host {
                Report::read(&report).assert_clean();
            }
            fs::remove_file(dir.path().join("dst")).unwrap();
        }
    }
}

/// Files in flight borrow the copy's slots and give them back: a large file copied after
/// them (and files in flight after it) allocates no second set of device memory.
#[test]
fn a_copy_after_files_in_flight_reuses_their_slots() {
    let dir = tempfile::tempdir().unwrap();
    let names = ["f1", "f2", "f3", "big", "f4", "f5"];
    let files: Vec<Vec<u8>> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let len = if *name == "big" { 5_000_000 } else { 100_000 };
            let data = random_bytes(len, 0xf11 + i as u64);
            fs::write(dir.path().join(name), &data).unwrap();
            data
        })
        .collect();
    fs::create_dir(dir.path().join("out")).unwrap();
    let report = dir.path().join("report");
    let out = Route::Bounce
        .aiscp(dir.path(), &report)
        .args(["--debug", "--chunk-size", "1M", "--streams", "2"])
        .args(names)
        .arg("out/")
        .output()
        .unwrap();
    assert_success(&out, "bounce");
    let err = stderr(&out);
    assert!(err.contains("in flight"), "files went in flight: {err}");
    assert!(
        err.contains("'big' -> 'out/big': 4.77 MiB (5000000 bytes), 5 slice(s)"),
        "{err}"
    );
    for (name, data) in names.iter().zip(&files) {
        let got = fs::read(dir.path().join("out").join(name)).unwrap();
        assert_same_bytes(&got, data, name);
    }
    let report = Report::read(&report);
    report.assert_clean();
    assert_eq!(
        report.stats.mallocs, 2,
        "one slot per stream, once: {report}"
    );
}

/// `--sparse=always` makes a hole of a run of zeros inside a data extent (SOURCE has no
/// holes at all), on every route, in flight and one at a time.
#[test]
fn sparse_always_leaves_holes_for_zero_runs_inside_data() {
    const MIB: usize = 1 << 20;
    let dir = tempfile::tempdir().unwrap();
    if !makes_holes(dir.path()) {
        skip("TMPDIR makes no holes", &dir.path().display().to_string());
        return;
    }
    let mut data = random_bytes(MIB, 0x2e0);
    data.extend(vec![0u8; MIB / 2]);
    data.extend(random_bytes(MIB + 123, 0x2e1));
    let src = dir.path().join("src");
    fs::write(&src, &data).unwrap();
    assert!(
        fs::metadata(&src).unwrap().blocks() * 512 >= data.len() as u64,
        "SOURCE is fully allocated"
    );
    for route in ROUTES {
        for in_flight in [None, Some("0")] {
            let what = format!("{route:?}, AISCP_IN_FLIGHT={in_flight:?}");
            let report = dir.path().join("report");
            let mut cmd = route.aiscp(dir.path(), &report);
            if let Some(v) = in_flight {
                cmd.env("AISCP_IN_FLIGHT", v);
            }
            let out = cmd
                .args(["--sparse=always", "src", "dst"])
                .output()
                .unwrap();
            assert_success(&out, &what);
            let dst = dir.path().join("dst");
            assert_same_bytes(&fs::read(&dst).unwrap(), &data, &what);
            let file = fs::File::open(&dst).unwrap();
            let fd = file.as_raw_fd();
            // SAFETY: lseek on a descriptor we hold open.
            let (hole, next_data) = unsafe {
                (
                    libc::lseek(fd, 0, libc::SEEK_HOLE),
                    libc::lseek(fd, MIB as i64, libc::SEEK_DATA),
                )
            };
            assert_eq!(hole, MIB as i64, "{what}: the zero run is a hole");
            assert_eq!(next_data, (MIB + MIB / 2) as i64, "{what}: data after it");
            if route != Route::Host {
                Report::read(&report).assert_clean();
            }
            fs::remove_file(&dst).unwrap();
        }
    }
}

/// A DEST holding other, longer bytes is cut before SOURCE's data goes in: nothing of it
/// shows through where nothing is written, SOURCE's holes (in the middle and at the end)
/// and, under --sparse=always, its runs of zeros. On every route, one file at a time and a
/// tree whose small files go in flight, each DEST is GNU cp's byte for byte.
#[test]
fn old_dest_bytes_never_show_through_holes() {
    const K: usize = 1024;
    let probe = tempfile::tempdir().unwrap();
    if !makes_holes(probe.path()) {
        skip("TMPDIR makes no holes", &probe.path().display().to_string());
        return;
    }
    // SOURCE: `sparse` (data, a hole, data, a hole to its unaligned end), `zeros` (no holes;
    // a run of zeros inside and one at the end), small files. DEST: each name holding
    // nonzero random bytes, 300 KiB longer.
    let setup = |root: &Path| {
        let (src, dst) = (root.join("src"), root.join("dst"));
        fs::create_dir(&src).unwrap();
        fs::create_dir(&dst).unwrap();
        let sparse = src.join("sparse");
        write_sparse(
            &sparse,
            (1024 * K + 5000) as u64,
            &[
                (0, &random_bytes(64 * K + 100, 0xc1)),
                ((256 * K) as u64, &random_bytes(64 * K, 0xc2)),
            ],
        );
        assert!(
            fs::metadata(&sparse).unwrap().blocks() * 512 < 512 * K as u64,
            "SOURCE has holes"
        );
        let mut zeros = random_bytes(100 * K, 0xc3);
        zeros.extend(vec![0u8; 200 * K]);
        zeros.extend(random_bytes(50 * K + 7, 0xc4));
        zeros.extend(vec![0u8; 150 * K]);
        fs::write(src.join("zeros"), &zeros).unwrap();
        for i in 0..4 {
            fs::write(
                src.join(format!("s{i}")),
                random_bytes(1000 + 7000 * i, 0xc5 + i as u64),
            )
            .unwrap();
        }
        for (i, entry) in fs::read_dir(&src).unwrap().enumerate() {
            let entry = entry.unwrap();
            let len = entry.metadata().unwrap().len() as usize + 300 * K;
            let old: Vec<u8> = random_bytes(len, 0xd0 + i as u64)
                .into_iter()
                .map(|b| b.max(1))
                .collect();
            fs::write(dst.join(entry.file_name()), old).unwrap();
        }
    };
    let dests = |root: &Path| -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<_> = fs::read_dir(root.join("dst"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, fs::read(e.path()).unwrap())
            })
            .collect();
        all.sort();
        all
    };
    let one_at_a_time = |name: &str| vec![format!("src/{name}"), format!("dst/{name}")];
    let mut wrong = Vec::new();
    for sparse in ["--sparse=auto", "--sparse=always"] {
        // (what, the runs' operands, whether files may go in flight)
        let modes = [
            (
                "one at a time",
                vec![one_at_a_time("sparse"), one_at_a_time("zeros")],
                false,
            ),
            (
                "tree",
                vec![vec!["-r".into(), "src/.".into(), "dst".into()]],
                true,
            ),
        ];
        for (mode, runs, flies) in modes {
            let theirs = tempfile::tempdir().unwrap();
            setup(theirs.path());
            for operands in &runs {
                let out = std::process::Command::new("cp")
                    .current_dir(theirs.path())
                    .arg(sparse)
                    .args(operands)
                    .output()
                    .unwrap();
                assert_success(&out, "GNU cp");
            }
            let want = dests(theirs.path());
            for route in ROUTES {
                let what = format!("{route:?} {sparse} {mode}");
                let ours = tempfile::tempdir().unwrap();
                setup(ours.path());
                let report = ours.path().join("report");
                let mut in_flight = false;
                for operands in &runs {
                    let mut cmd = route.aiscp(ours.path(), &report);
                    if !flies {
                        cmd.env("AISCP_IN_FLIGHT", "0");
                    }
                    let out = cmd
                        .args(["--debug", sparse])
                        .args(operands)
                        .output()
                        .unwrap();
                    assert_success(&out, &what);
                    in_flight |= stderr(&out).contains(", in flight)");
                    if route != Route::Host {
                        Report::read(&report).assert_clean();
                    }
                }
                // Files fly on the host and bounce routes, and (all of these being under
                // 1 MiB) on the route auto chooses; the library's own route asked for and
                // --async copy them in turn.
                let should_fly =
                    flies && matches!(route, Route::Host | Route::Bounce | Route::Auto);
                assert_eq!(in_flight, should_fly, "{what}: files in flight");
                for ((name, got), (_, cp)) in dests(ours.path()).iter().zip(&want) {
                    if got != cp {
                        let at = got.iter().zip(cp).position(|(a, b)| a != b);
                        wrong.push(format!(
                            "{what}: dst/{name} is not cp's: first difference at {at:?}, \
                             {} bytes, cp's {}",
                            got.len(),
                            cp.len()
                        ));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Whether a file written with a gap in `dir` gets a hole there.
fn makes_holes(dir: &Path) -> bool {
    let probe = dir.join("hole-probe");
    let f = fs::File::create(&probe).unwrap();
    f.set_len(4 << 20).unwrap();
    let holes = fs::metadata(&probe).unwrap().blocks() == 0;
    fs::remove_file(&probe).unwrap();
    holes
}

/// The route names of a file copied one at a time, pinned exactly in --debug's line for it
/// and in --stats (text and json), on every route and for each fallback.
#[test]
fn route_names_of_a_file_copied_on_its_own_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("src"), random_bytes(300_000, 0x2a3)).unwrap();
    let sysfs = "/sys/devices/system/cpu/online";
    let size = fs::metadata(sysfs).unwrap().len();
    // (route, fault, SOURCE, --debug's description after the size, read, write)
    let cases = [
        (
            Route::Host,
            "",
            "src",
            "1 slice(s) aligned to 4.00 KiB, read O_DIRECT, write O_DIRECT",
            "O_DIRECT",
            "O_DIRECT",
        ),
        (
            Route::Library,
            "",
            "src",
            "1 slice(s) aligned to 4.00 KiB, read direct, write direct",
            "direct",
            "direct",
        ),
        (
            Route::Bounce,
            "",
            "src",
            "1 slice(s) aligned to 4.00 KiB, read O_DIRECT, write O_DIRECT",
            "O_DIRECT",
            "O_DIRECT",
        ),
        (
            Route::Async,
            "",
            "src",
            "1 slice(s) aligned to 4.00 KiB, read direct, write direct, async streams",
            "direct",
            "direct",
        ),
        (
            Route::Library,
            "register#1=5027",
            "src",
            "1 slice(s) aligned to 4.00 KiB, read bounce (registration refused), write direct",
            "bounce",
            "direct",
        ),
        (
            Route::Library,
            "",
            sysfs,
            "1 slice(s) aligned to 4.00 KiB, read bounce (O_DIRECT refused), write direct",
            "bounce",
            "direct",
        ),
    ];
    for (route, fault, src, described, read, write) in cases {
        let what = format!("{route:?} {fault} {src}");
        let len = if src == "src" { 300_000 } else { size };
        let report = dir.path().join("report");
        let run = |stats: &str| {
            let out = route
                .aiscp(dir.path(), &report)
                .env("AISCP_IN_FLIGHT", "0")
                .env("AISCP_FAKE_GPU_FAULTS", fault)
                .args(["--debug", stats, src, "dst"])
                .output()
                .unwrap();
            assert_success(&out, &what);
            fs::remove_file(dir.path().join("dst")).unwrap();
            out
        };
        let out = run("--stats");
        // The size in binary units, then exactly: "292.97 KiB (300000 bytes)".
        let (head, tail) = (
            format!("'{src}' -> 'dst': "),
            format!(" ({len} bytes), {described}"),
        );
        let err = stderr(&out);
        assert!(
            err.lines().any(|l| l
                .split_once("s ")
                .is_some_and(|(_, rest)| rest.starts_with(&head) && rest.ends_with(&tail))),
            "{what}: no line `{head}SIZE{tail}` in\n{err}"
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let routes = format!("1 {read}/{write}");
        assert_eq!(
            crate::support::stats_value(&text, "Read/write routes"),
            Some(routes),
            "{what}: {text}"
        );
        let json = run("--stats=json");
        let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(
            v["routes"],
            serde_json::json!([{"read": read, "write": write, "files": 1}]),
            "{what}"
        );
    }
}

/// A side read or written through the page cache by choice, not for its size, gives that
/// reason in --debug's line for the file: SOURCE under --verify (except where the GPU
/// library reads it), DEST under --sparse=always on the library route (zeros are found on
/// the host). Both used to say "small or unaligned", which stays the reason for a small file.
#[test]
fn a_side_buffered_by_choice_gives_its_own_reason() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("src"), random_bytes(300_000, 0x2a4)).unwrap();
    fs::write(dir.path().join("small"), random_bytes(3000, 0x2a5)).unwrap();
    let verify = "read bounce (through the page cache for --verify), write O_DIRECT";
    let small = "read bounce (small or unaligned), write bounce (small or unaligned)";
    let sparse = "read direct, write bounce (--sparse=always finds zeros on the host)";
    // (route, option, SOURCE, --debug's description after the slices)
    let cases = [
        (Route::Host, "--verify", "src", verify),
        (Route::Bounce, "--verify", "src", verify),
        (
            Route::Library,
            "--verify",
            "src",
            "read direct, write direct",
        ),
        (Route::Host, "--verify", "small", small),
        (Route::Library, "--sparse=always", "src", sparse),
    ];
    for (route, option, src, described) in cases {
        let what = format!("{route:?} {option} {src}");
        let report = dir.path().join("report");
        let out = route
            .aiscp(dir.path(), &report)
            .env("AISCP_IN_FLIGHT", "0")
            .args(["--debug", option, src, "dst"])
            .output()
            .unwrap();
        assert_success(&out, &what);
        fs::remove_file(dir.path().join("dst")).unwrap();
        let err = stderr(&out);
        let line = err
            .lines()
            .find(|l| l.contains(&format!("'{src}' -> 'dst': ")))
            .unwrap_or_else(|| panic!("{what}: no route line in\n{err}"));
        assert!(line.ends_with(&format!(", {described}")), "{what}: {line}");
    }
}
