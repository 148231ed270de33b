//! --sums end to end: every regular file copied gets the digest of what DEST holds, on every
//! backend, scheduler and algorithm, checked against independent implementations (the blake3
//! crate's one-shot hash, the crc crate's catalogue, and `b3sum --check` itself), in cp's
//! order, whole or not at all in a --sums-file.

use crate::support::{aiscp_command, random_bytes, skip, write_sparse, Backend, BACKENDS};
use base64::Engine as _;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Output};

const ALGORITHMS: [&str; 3] = ["blake3", "crc64nvme", "crc32c"];

fn aiscp(dir: &Path, backend: Backend, args: &[&str]) -> Output {
    let mut cmd = aiscp_command();
    cmd.current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::null());
    backend.apply(&mut cmd, &dir.join("report"));
    cmd.output().unwrap()
}

/// The digest of `bytes` as the manifest prints it, by implementations other than aiscp's.
fn reference(algorithm: &str, bytes: &[u8]) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    match algorithm {
        "blake3" => blake3::hash(bytes).to_hex().to_string(),
        "crc64nvme" => b64(&crc::Crc::<u64>::new(&crc::CRC_64_NVME)
            .checksum(bytes)
            .to_be_bytes()),
        "crc32c" => b64(&crc::Crc::<u32>::new(&crc::CRC_32_ISCSI)
            .checksum(bytes)
            .to_be_bytes()),
        other => panic!("no algorithm {other}"),
    }
}

/// The manifest's lines as (digest, name), names unescaped as b3sum unescapes them.
fn parse(manifest: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(manifest).expect("a UTF-8 manifest");
    text.lines()
        .map(|line| {
            let (escaped, line) = match line.strip_prefix('\\') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let (digest, name) = line.split_once("  ").expect("DIGEST  NAME");
            let name = match escaped {
                true => unescape(name),
                false => name.to_owned(),
            };
            (digest.to_owned(), name)
        })
        .collect()
}

fn unescape(name: &str) -> String {
    let mut out = String::new();
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some('r') => out.push('\r'),
                Some('\\') => out.push('\\'),
                other => panic!("bad escape {other:?} in {name:?}"),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// Every regular file under `root` (relative to `dir`), with its bytes.
fn regular_files(dir: &Path, root: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.join(root)];
    while let Some(p) = stack.pop() {
        let meta = fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            stack.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else if meta.is_file() {
            let name = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            out.push((name, fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

/// A tree whose sizes cross BLAKE3's chunk and tree boundaries, the alignment and a 64 KiB
/// chunk, with a sparse file, a symlink, and names b3sum must escape.
fn make_tree(src: &Path) {
    fs::create_dir_all(src.join("sub/deeper")).unwrap();
    let sizes = [
        0,
        1,
        1023,
        1024,
        1025,
        2047,
        2048,
        2049,
        4095,
        4096,
        4097,
        65535,
        65536,
        65537,
        131_071,
        131_073,
        300_000,
        1 << 20,
        (1 << 20) + 1,
    ];
    for (i, len) in sizes.into_iter().enumerate() {
        let dir = ["", "sub", "sub/deeper"][i % 3];
        fs::write(
            src.join(dir).join(format!("f{len}")),
            random_bytes(len, i as u64),
        )
        .unwrap();
    }
    let data = random_bytes(5000, 99);
    write_sparse(
        &src.join("sparse"),
        3 << 20,
        &[(70_000, &data), (2 << 20, &data)],
    );
    fs::write(src.join("back\\slash"), b"b").unwrap();
    fs::write(src.join("new\nline"), b"n").unwrap();
    std::os::unix::fs::symlink("f1", src.join("link")).unwrap();
}

/// The manifest of `-r src dst` (every file once, symlinks not) against the references.
fn assert_manifest(dir: &Path, manifest: &[u8], algorithm: &str, what: &str) {
    let lines = parse(manifest);
    let mut names: Vec<&str> = lines.iter().map(|(_, n)| n.as_str()).collect();
    names.sort();
    let files = regular_files(dir, "dst");
    let want: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, want, "{what}: the files listed");
    for (digest, name) in &lines {
        let bytes = &files.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(digest, &reference(algorithm, bytes), "{what}: {name:?}");
    }
}

#[test]
fn every_backend_scheduler_and_algorithm_gives_dest_s_digests() {
    // In flight (whole files on one slot), slices on several workers, and slices of one
    // worker, through both routes of the fake library.
    let ways: [(&str, &[&str]); 4] = [
        ("in flight", &[]),
        ("slices", &["--chunk-size", "64K"]),
        ("one worker", &["--chunk-size", "64K", "--streams", "1"]),
        ("library", &["--chunk-size", "64K", "--route", "library"]),
    ];
    for backend in BACKENDS {
        for (way, args) in ways {
            if way == "library" && backend == Backend::Host {
                continue;
            }
            for algorithm in ALGORITHMS {
                let dir = tempfile::tempdir().unwrap();
                make_tree(&dir.path().join("src"));
                let sums = format!("--sums={algorithm}");
                let mut all = vec!["-r", &sums, "src", "dst"];
                all.extend(args);
                let out = aiscp(dir.path(), backend, &all);
                let what = format!("{backend:?} {way} {algorithm}");
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{what}: {stderr}");
                assert_eq!(stderr, "", "{what}");
                assert_manifest(dir.path(), &out.stdout, algorithm, &what);
                backend.assert_report_clean(&dir.path().join("report"));
            }
        }
    }
}

#[test]
fn b3sum_checks_the_manifest_of_a_tree_copy() {
    if Command::new("b3sum").arg("--version").output().is_err() {
        return skip("no b3sum", "b3sum --check of a tree's manifest");
    }
    let dir = tempfile::tempdir().unwrap();
    make_tree(&dir.path().join("src"));
    let out = aiscp(
        dir.path(),
        Backend::Host,
        &["-r", "--sums", "--sums-file=sums.b3", "src", "dst"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "the manifest went to its file");
    let check = Command::new("b3sum")
        .current_dir(dir.path())
        .args(["--check", "sums.b3"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(
        said.lines().count(),
        regular_files(dir.path(), "dst").len(),
        "{said}"
    );
    // And it fails on a DEST changed since.
    fs::write(dir.path().join("dst/sub/f1025"), b"changed").unwrap();
    let check = Command::new("b3sum")
        .current_dir(dir.path())
        .args(["--check", "sums.b3"])
        .output()
        .unwrap();
    assert!(!check.status.success());
}

#[test]
fn lines_follow_cp_s_order_after_the_v_lines() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    for i in 0..40 {
        fs::write(
            src.join(format!("{i:02}")),
            random_bytes(i * 3000, i as u64),
        )
        .unwrap();
    }
    for backend in BACKENDS {
        let _ = fs::remove_dir_all(dir.path().join("dst"));
        let out = aiscp(dir.path(), backend, &["-rv", "--sums", "src", "dst"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let (verbose, manifest): (Vec<&str>, Vec<&str>) =
            text.lines().partition(|l| l.starts_with('\''));
        // -v names each file, then the manifest lists the regular ones in that order.
        let copied: Vec<&str> = verbose
            .iter()
            .filter_map(|l| l.split(" -> ").nth(1))
            .map(|d| d.trim_matches('\''))
            .filter(|d| dir.path().join(d).is_file())
            .collect();
        let listed: Vec<&str> = manifest.iter().map(|l| &l[66..]).collect();
        assert_eq!(listed, copied, "{backend:?}");
        let at = text.find(manifest[0]).unwrap();
        assert!(
            text[at..].lines().all(|l| !l.starts_with('\'')),
            "{backend:?}: interleaved"
        );
    }
}

#[test]
fn digests_are_of_dest_when_it_held_longer_old_bytes() {
    // A sparse SOURCE over a longer DEST full of old bytes: the holes must read as zeros in
    // DEST and in its digest, the old tail must be gone from both.
    for backend in BACKENDS {
        for sparse in ["--sparse=auto", "--sparse=always", "--sparse=never"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let data = random_bytes(9000, 5);
            write_sparse(&d.join("a"), 1 << 20, &[(4096, &data), (600_000, &data)]);
            fs::write(d.join("b"), random_bytes(3 << 20, 6)).unwrap();
            let out = aiscp(
                d,
                backend,
                &["--sums", sparse, "--chunk-size", "64K", "a", "b"],
            );
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let dest = fs::read(d.join("b")).unwrap();
            assert_eq!(dest, fs::read(d.join("a")).unwrap());
            let lines = parse(&out.stdout);
            assert_eq!(
                lines,
                [(reference("blake3", &dest), "b".to_owned())],
                "{backend:?} {sparse}"
            );
        }
    }
}

#[test]
fn a_streamed_source_is_listed_and_links_and_specials_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fifo = d.join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let bytes = random_bytes(300_000, 8);
    let sent = bytes.clone();
    let writer = std::thread::spawn(move || fs::write(&fifo, sent).unwrap());
    fs::write(d.join("file"), b"x").unwrap();
    std::os::unix::fs::symlink("file", d.join("link")).unwrap();
    fs::create_dir(d.join("out")).unwrap();
    let out = aiscp(d, Backend::Host, &["--sums", "-P", "fifo", "link", "out/"]);
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        parse(&out.stdout),
        [(reference("blake3", &bytes), "out/fifo".to_owned())]
    );
}

#[test]
fn a_sums_file_is_whole_or_absent_and_its_failure_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a"), b"abc").unwrap();
    fs::write(d.join("sums"), b"old manifest\n").unwrap();
    let out = aiscp(d, Backend::Host, &["--sums-file=sums", "a", "b"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fs::read(d.join("sums")).unwrap(),
        format!("{}  b\n", reference("blake3", b"abc")).as_bytes()
    );
    // No temporary left beside it.
    let left: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
    // A directory that does not exist: the copy is made, the manifest is not, exit 1.
    let out = aiscp(d, Backend::Host, &["--sums-file=missing/sums", "a", "c"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(fs::read(d.join("c")).unwrap(), b"abc");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.ends_with("cannot create regular file 'missing/sums': No such file or directory\n"),
        "{stderr}"
    );
}

#[test]
fn an_unknown_algorithm_is_refused_as_cp_refuses_an_argument() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), b"abc").unwrap();
    let out = aiscp_command()
        .current_dir(dir.path())
        .env("LC_ALL", "C")
        .args(["--sums=md5", "a", "b"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid argument 'md5' for '--sums'"),
        "{stderr}"
    );
    assert!(!dir.path().join("b").exists());
}

#[test]
fn a_name_that_is_not_utf8_is_written_as_b3sum_writes_it() {
    let dir = tempfile::tempdir().unwrap();
    let name = OsStr::from_bytes(b"bad\xffname");
    fs::write(dir.path().join(name), b"z").unwrap();
    fs::create_dir(dir.path().join("out")).unwrap();
    let mut cmd = aiscp_command();
    cmd.current_dir(dir.path())
        .arg("--sums")
        .arg(name)
        .arg("out");
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fs::read(dir.path().join("out").join(name)).unwrap(), b"z");
    let want = [(reference("blake3", b"z"), "out/bad\u{fffd}name".to_owned())];
    assert_eq!(parse(&out.stdout), want);
}
