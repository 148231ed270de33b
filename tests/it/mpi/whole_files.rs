//! Whole files handed out to the ranks: a tree of many small and mid-sized files is copied
//! by ranks 1-3 while rank 0 walks, with one process's output, bytes and attributes.

use super::*;
use std::collections::BTreeMap;

/// Sizes around the edges that matter: empty, one byte, a page, the chunk (64 KiB here),
/// one part (which still goes whole) and just over it (cut into parts).
const EDGES: [usize; 14] = [
    0,
    1,
    2,
    4095,
    4096,
    4097,
    CHUNK - 1,
    CHUNK,
    CHUNK + 1,
    PART - 1,
    PART,
    PART + 1,
    2 * PART + 7,
    100_000,
];

/// A tree of 150 files of random data: every size in [`EDGES`], then random sizes up to
/// 200 KB, over nested directories with their own modes and old times; a few files
/// read-only, one executable, a symlink and an empty directory.
fn many_files(root: &Path) -> Vec<(String, usize)> {
    let dirs = ["", "d0", "d0/e", "d1", "d2/f/g"];
    for d in dirs {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::create_dir_all(root.join("empty")).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut files = Vec::new();
    for i in 0..150 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let len = match EDGES.get(i) {
            Some(&len) => len,
            None => (seed >> 33) as usize % 200_000,
        };
        let name = format!("{}/f{i:03}", dirs[i % dirs.len()]);
        let name = name.trim_start_matches('/').to_owned();
        write_random(&root.join(&name), len, 1000 + i as u64);
        let mode = match i % 7 {
            3 => 0o444,
            5 => 0o600,
            6 => 0o755,
            _ => 0o644,
        };
        fs::set_permissions(root.join(&name), fs::Permissions::from_mode(mode)).unwrap();
        files.push((name, len));
    }
    symlink("../d1/f003", root.join("d0/link")).unwrap();
    fs::set_permissions(root.join("d1"), fs::Permissions::from_mode(0o750)).unwrap();
    fs::set_permissions(root.join("d2/f"), fs::Permissions::from_mode(0o705)).unwrap();
    let out = Command::new("touch")
        .args(["-h", "-d", "2001-02-03 04:05:06.789"])
        .args([
            "d0", "d0/e", "d1", "d2", "d2/f", "d2/f/g", "empty", "d0/link", "d0/f006",
        ])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(out.success());
    files
}

/// From rank 0's --debug lines: which rank each whole file was handed to.
fn handed_out(stderr: &str) -> BTreeMap<String, usize> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("aiscp: debug: 'src/")?;
            let (name, tail) = rest.split_once("': ")?;
            let rank = tail.split_once(", whole, to rank ")?.1;
            Some((name.to_owned(), rank.parse().ok()?))
        })
        .collect()
}

/// Asserts that every whole file was handed out, and that the rank it was handed to says
/// (in its own --debug lines) that it copied it into `dst`.
fn assert_copied_by_other_ranks(stderr: &str, files: &[(String, usize)], dst: &str) {
    let handed = handed_out(stderr);
    for (name, len) in files {
        if *len > PART {
            assert!(!handed.contains_key(name), "{name} is cut into parts");
            continue;
        }
        let rank = handed
            .get(name)
            .unwrap_or_else(|| panic!("{name} ({len} bytes) was not handed out:\n{stderr}"));
        assert!((1..4).contains(rank), "{name}: rank {rank}");
        let copied = stderr.lines().any(|l| {
            l.starts_with(&format!("aiscp: debug: rank {rank}: "))
                && l.contains(&format!(" '{dst}/{name}': {len} bytes in "))
        });
        assert!(
            copied,
            "rank {rank} does not say it copied {name}:\n{stderr}"
        );
    }
    for r in 1..4 {
        assert!(handed.values().any(|&h| h == r), "rank {r} got no file");
    }
}

#[test]
fn a_tree_of_many_files_is_copied_whole_by_the_other_ranks() {
    for backend in ["host", "fake-gpu"] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let files = many_files(&dir.join("src"));
        let env = if backend == "host" {
            host()
        } else {
            fake_gpu(dir)
        };
        let mut args = vec!["-a", "--debug"];
        args.extend(SMALL_PARTS);
        let ranks = mpirun(
            4,
            dir,
            &env,
            |r| vec![("AISCP_FAKE_GPU_REPORT".into(), format!("report{r}"))],
            &[&args[..], &["src", "ranks"]].concat(),
        );
        let err = text(&ranks.stderr);
        assert!(ranks.status.success(), "{backend}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        let one = alone(dir, &env, &[&args[..], &["src", "one"]].concat());
        assert!(one.status.success(), "{}", text(&one.stderr));
        let gnu = Command::new("cp")
            .args(["-a", "src", "gnu"])
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(gnu.success());
        let want = listing_with_times(&dir.join("gnu"));
        assert_eq!(want.len(), 150 + 9, "the listing sees the tree");
        assert_eq!(
            listing_with_times(&dir.join("ranks")),
            want,
            "{backend}: ranks vs GNU cp"
        );
        assert_eq!(
            listing_with_times(&dir.join("one")),
            want,
            "{backend}: one process vs GNU cp"
        );
        assert_copied_by_other_ranks(&err, &files, "ranks");
        if backend == "fake-gpu" {
            assert_rank_reports_clean(dir);
        }
    }
}

/// -v lines come out in cp's order, from rank 0, while other ranks copy the files: the
/// same stdout as one process and as GNU cp.
#[test]
fn verbose_lines_keep_cps_order_while_ranks_copy() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let files = many_files(&dir.join("src"));
    let mut args = vec!["-rv", "--debug"];
    args.extend(SMALL_PARTS);
    let ranks = mpirun(
        4,
        dir,
        &host(),
        |_| vec![],
        &[&args[..], &["src", "out"]].concat(),
    );
    let err = text(&ranks.stderr);
    assert!(ranks.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_copied_by_other_ranks(&err, &files, "out");
    let got = listing(&dir.join("out"));
    fs::rename(dir.join("out"), dir.join("by-ranks")).unwrap();
    let one = alone(dir, &host(), &[&args[..], &["src", "out"]].concat());
    assert!(one.status.success(), "{}", text(&one.stderr));
    fs::rename(dir.join("out"), dir.join("by-one")).unwrap();
    let gnu = Command::new("cp")
        .args(["-rv", "src", "out"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(gnu.status.success());
    let lines = text(&ranks.stdout);
    assert_eq!(lines.lines().count(), 150 + 9, "{lines}");
    assert_eq!(lines, text(&one.stdout), "ranks vs one process");
    assert_eq!(lines, text(&gnu.stdout), "ranks vs GNU cp");
    assert_eq!(got, listing(&dir.join("out")));
}

/// Ranks 1-3 run without the capabilities that let root read any file, so a file of mode
/// 000 can be opened by rank 0 (which walks and creates DEST) but not by the rank it is
/// handed to: cp's message for it comes out once, through rank 0, the exit status is 1,
/// and every other file is copied.
#[test]
fn a_rank_that_cannot_read_a_whole_file_fails_it_alone() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let src = dir.join("src");
    let files = many_files(&src);
    // DEST files are written by ranks 1-3 too, who may not write a read-only one here.
    for (name, _) in &files {
        fs::set_permissions(src.join(name), fs::Permissions::from_mode(0o644)).unwrap();
    }
    let locked = src.join("d0/e/locked");
    write_random(&locked, 3000, 77);
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let drop_caps: Vec<String> = [
        "setpriv",
        "--inh-caps=-dac_override,-dac_read_search",
        "--bounding-set=-dac_override,-dac_read_search",
    ]
    .map(String::from)
    .to_vec();
    let without_caps = Command::new(&drop_caps[0])
        .args(&drop_caps[1..])
        .arg("cat")
        .arg(&locked)
        .output();
    if fs::read(&locked).is_err() || without_caps.is_ok_and(|o| o.status.success()) {
        skip(
            "not root",
            "needs root, and setpriv able to drop CAP_DAC_OVERRIDE",
        );
        return;
    }
    let mut args = vec!["-r", "--debug"];
    args.extend(SMALL_PARTS);
    args.extend(["src", "dst"]);
    let out = mpirun_with(
        4,
        dir,
        &host(),
        |r| match r {
            0 => (vec![], vec![]),
            _ => (drop_caps.clone(), vec![]),
        },
        &args,
    );
    let err = ranks_stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let not_debug: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("aiscp: debug: "))
        .collect();
    assert_eq!(
        not_debug,
        [format!(
            "{}: cannot open 'src/d0/e/locked' for reading: Permission denied",
            program().display()
        )]
    );
    assert!(handed_out(&err).contains_key("d0/e/locked"), "{err}");
    assert_copied_by_other_ranks(&err, &files, "dst");
    fs::remove_file(&locked).unwrap();
    let _ = fs::remove_file(dir.join("dst/d0/e/locked"));
    let gnu = Command::new("cp")
        .args(["-r", "src", "gnu"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(gnu.success());
    assert_eq!(listing(&dir.join("dst")), listing(&dir.join("gnu")));
}

/// Paths of 3,000 bytes: each task is larger than MPI's eager limit (4 KiB within a node),
/// so it is delivered only as the rank takes it, while the rank may be answering. The fake
/// GPU's report of each process shows who moved the bytes (--debug lines this long would be
/// cut and interleaved by mpirun).
#[test]
fn whole_files_with_long_paths() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let mut deep = dir.join("src");
    for level in 0..12 {
        deep.push(format!("{level:02}{}", "x".repeat(248)));
    }
    fs::create_dir_all(&deep).unwrap();
    let mut total = 0;
    for i in 0..40 {
        write_random(&deep.join(format!("f{i}")), i * 997, 500 + i as u64);
        total += i * 997;
    }
    let mut args = vec!["-r"];
    args.extend(SMALL_PARTS);
    args.extend(["src", "dst"]);
    let out = mpirun(
        4,
        dir,
        &fake_gpu(dir),
        |r| vec![("AISCP_FAKE_GPU_REPORT".into(), format!("report{r}"))],
        &args,
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let gnu = Command::new("cp")
        .args(["-r", "src", "gnu"])
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(gnu.success());
    assert_eq!(listing(&dir.join("dst")), listing(&dir.join("gnu")));
    let moved = |r: usize| {
        let report = Report::read(&dir.join(format!("report{r}")));
        report.assert_clean();
        report.stats.htod_bytes + report.stats.read_bytes
    };
    assert_eq!(moved(0), 0, "rank 0 copied file data");
    let others: u64 = (1..4).map(moved).sum();
    assert!(others >= total as u64, "{others} of {total} bytes");
}

/// SOURCE is replaced by another file (renamed over it, as an editor saves or a log
/// rotates) after rank 0 opened it and handed it (whole, or its first part) to rank 1,
/// before rank 1 opens it by name (strace holds rank 1's open of that path for 3 s). One
/// process and GNU cp copy the file they opened; so must the ranks: the run succeeds with
/// the original bytes in DEST.
#[test]
fn a_source_replaced_before_the_rank_opens_it_is_still_copied() {
    if !Command::new("strace")
        .args(["-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|s| s.success())
    {
        skip("no strace", "");
        return;
    }
    for (len, args) in [(5000, &[][..]), (3 * PART + 5, &SMALL_PARTS[..])] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let src = dir.join("src");
        let original = write_random(&src, len, 1);
        write_random(&dir.join("new"), 7000, 2);
        let flag = dir.join("paused");
        let under: Vec<String> = [
            "strace",
            "-f",
            "-o",
            "/dev/null",
            "-P",
            &src.display().to_string(),
            "-e",
            "inject=openat:delay_enter=3000000",
        ]
        .map(String::from)
        .to_vec();
        let pause = format!("dest-created:{}", flag.display());
        let mut argv = args.to_vec();
        argv.extend(["src", "dst"]);
        let run = std::thread::scope(|s| {
            let run = s.spawn(|| {
                mpirun_with(
                    2,
                    dir,
                    &host(),
                    |r| match r {
                        0 => (vec![], vec![("AISCP_TEST_PAUSE".into(), pause.clone())]),
                        _ => (under.clone(), vec![]),
                    },
                    &argv,
                )
            });
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !flag.exists() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "never reached the pause"
                );
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // Let rank 0 go on, hand the file out and rank 1 reach its (held) open.
            fs::remove_file(&flag).unwrap();
            std::thread::sleep(std::time::Duration::from_secs(1));
            fs::rename(dir.join("new"), &src).unwrap();
            run.join().unwrap()
        });
        let err = ranks_stderr(&run);
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(run.status.code(), Some(0), "{len}: {err}");
        assert_eq!(err, "", "{len}");
        assert_same_bytes(&fs::read(dir.join("dst")).unwrap(), &original, "dst");
    }
}
