//! A SOURCE that changes while aiscp copies it, on every route the fake library reaches:
//! DEST ends where reading SOURCE ended, never at the size fstat gave when it was opened,
//! and holds no byte that was not read from SOURCE (docs/GUARANTEES.md).
//!
//! The changes are made at pause points (`AISCP_TEST_PAUSE`): when DEST is opened, before
//! a worker's first slice, between slices, in flight, before the finishing reads, between
//! the finish's two looks at a hole. One test has no pause at all: another process
//! rewrites a tree while `-r` copies it. Every paused copy takes --sums, whose digest must be
//! DEST's as it ends.

use crate::support::{
    aiscp_command, not_here, paused_at, random_bytes, through_a_service, Backend,
};
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// One way a file's bytes can go: the backend and the flags that pick the scheduler and
/// the route.
struct Way {
    name: &'static str,
    backend: Backend,
    args: &'static [&'static str],
}

/// Files up to the chunk go in flight (a whole file on one slot); larger ones are cut
/// into slices on the workers. `--chunk-size 64K` puts the 200,000-byte files here on the
/// slices; `--streams 1` keeps one worker, so a pause between slices is between this file's.
const WAYS: &[Way] = &[
    Way {
        name: "host, in flight",
        backend: Backend::Host,
        args: &[],
    },
    Way {
        name: "host, slices",
        backend: Backend::Host,
        args: &["--chunk-size", "64K"],
    },
    Way {
        name: "host, slices on one worker",
        backend: Backend::Host,
        args: &["--chunk-size", "64K", "--streams", "1"],
    },
    Way {
        name: "bounce, in flight",
        backend: Backend::FakeGpu,
        args: &["--route", "bounce"],
    },
    Way {
        name: "auto on hipFile: the library's route, files under 1 MiB in flight",
        backend: Backend::FakeGpu,
        args: &["--route", "auto"],
    },
    Way {
        name: "bounce, slices on one worker",
        backend: Backend::FakeGpu,
        args: &["--route", "bounce", "--chunk-size", "64K", "--streams", "1"],
    },
    Way {
        name: "library, slices",
        backend: Backend::FakeGpu,
        args: &["--route", "library", "--chunk-size", "64K"],
    },
    Way {
        name: "library, slices on one worker",
        backend: Backend::FakeGpu,
        args: &[
            "--route",
            "library",
            "--chunk-size",
            "64K",
            "--streams",
            "1",
        ],
    },
    Way {
        name: "async",
        backend: Backend::FakeGpu,
        args: &["--route", "library", "--async", "--chunk-size", "64K"],
    },
];

const SPARSE: [&str; 3] = ["--sparse=auto", "--sparse=always", "--sparse=never"];

/// Copies `a` to `b` in `dir` the `way` given, paused at `point` while `change` runs. With
/// --sums: a copy that succeeds must give the digest of DEST as it ends, whatever SOURCE did
/// (pieces taken before the change that DEST no longer holds must not count).
fn copy_paused(dir: &Path, way: &Way, sparse: &str, point: &str, change: impl FnOnce()) -> Output {
    let mut cmd = aiscp_command();
    cmd.current_dir(dir)
        .args(way.args)
        .args(["--sums", sparse, "a", "b"]);
    way.backend.apply(&mut cmd, &dir.join("report"));
    let out = paused_at(cmd, point, dir, change);
    way.backend.assert_report_clean(&dir.join("report"));
    if out.status.success() {
        let dest = fs::read(dir.join("b")).unwrap();
        let want = format!("{}  b\n", blake3::hash(&dest).to_hex());
        let what = format!("{} {sparse}, paused at {point}", way.name);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            want,
            "{what}: the digest"
        );
    }
    out
}

/// What a change leaves SOURCE holding.
enum Change {
    /// Cut (or grown with zeros) to this size: the bytes before it stay.
    Truncate(u64),
    /// Rewritten whole (truncated, then written) with these bytes.
    Rewrite(Vec<u8>),
    /// These bytes added at the end.
    Append(Vec<u8>),
}

impl Change {
    fn apply(&self, path: &Path) {
        match self {
            Change::Truncate(len) => OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(*len)
                .unwrap(),
            Change::Rewrite(data) => fs::write(path, data).unwrap(),
            Change::Append(data) => {
                use std::io::Write;
                let mut f = OpenOptions::new().append(true).open(path).unwrap();
                f.write_all(data).unwrap();
            }
        }
    }
}

/// For every way and --sparse mode: SOURCE of `len` random bytes, changed at `point`;
/// DEST must hold exactly what SOURCE holds after the change, exit 0, nothing on stderr.
/// `ways` picks the ways a point is reached on.
fn assert_copies_the_changed_source(
    len: usize,
    point: &str,
    ways: impl Fn(&Way) -> bool,
    change: impl Fn() -> Change,
) {
    let mut tried = 0;
    for (w, way) in WAYS.iter().filter(|w| ways(w)).enumerate() {
        for (s, sparse) in SPARSE.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let old = random_bytes(len, (w * 10 + s) as u64);
            fs::write(d.join("a"), &old).unwrap();
            let change = change();
            let out = copy_paused(d, way, sparse, point, || change.apply(&d.join("a")));
            let what = format!("{} {sparse}, paused at {point}", way.name);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
            assert_eq!(stderr, "", "{what}");
            let want = fs::read(d.join("a")).unwrap();
            let got = fs::read(d.join("b")).unwrap();
            assert_eq!(got.len(), want.len(), "{what}: DEST's size");
            assert!(got == want, "{what}: DEST differs from SOURCE as changed");
            tried += 1;
        }
    }
    assert!(tried > 0, "no way reaches {point}");
}

fn every(_: &Way) -> bool {
    true
}

/// The ways whose one worker takes a file's slices in order (a pause there is between this
/// file's slices).
fn one_worker(way: &Way) -> bool {
    way.args.contains(&"--streams")
}

#[test]
fn a_source_emptied_after_it_was_opened_gives_an_empty_copy() {
    assert_copies_the_changed_source(200_000, "dest-open", every, || Change::Truncate(0));
}

#[test]
fn a_source_cut_inside_its_direct_part_ends_at_the_cut() {
    // 70,001: unaligned, inside the O_DIRECT part of a 200,000-byte file.
    assert_copies_the_changed_source(200_000, "dest-open", every, || Change::Truncate(70_001));
}

#[test]
fn a_source_cut_inside_its_first_block_ends_at_the_cut() {
    assert_copies_the_changed_source(200_000, "dest-open", every, || {
        Change::Rewrite(b"hello".to_vec())
    });
    assert_copies_the_changed_source(30_000, "dest-open", every, || {
        Change::Rewrite(b"hello".to_vec())
    });
}

#[test]
fn a_source_that_grows_is_copied_to_its_new_end() {
    assert_copies_the_changed_source(200_000, "dest-open", every, || {
        Change::Append(random_bytes(100_001, 99))
    });
}

#[test]
fn a_source_rewritten_before_its_first_slice_gives_the_new_bytes() {
    assert_copies_the_changed_source(200_000, "slice", one_worker, || {
        Change::Rewrite(random_bytes(123_457, 98))
    });
    assert_copies_the_changed_source(200_000, "slice", one_worker, || Change::Truncate(4095));
}

#[test]
fn a_source_cut_between_slices_ends_at_the_cut() {
    // The first slice (64 KiB) is copied before the cut; the rest stops at it.
    assert_copies_the_changed_source(200_000, "between-slices", one_worker, || {
        Change::Truncate(100_001)
    });
    assert_copies_the_changed_source(200_000, "between-slices", one_worker, || {
        Change::Truncate(65_536)
    });
}

#[test]
fn a_source_that_grows_before_the_finish_is_copied_to_its_new_end() {
    assert_copies_the_changed_source(200_000, "finish", every, || {
        Change::Append(random_bytes(5_000_001, 97))
    });
}

#[test]
fn a_source_changed_in_flight_gives_what_was_read() {
    // Queued files are opened long before their worker copies them: the change comes
    // when the file's worker is about to read it.
    let in_flight = |w: &Way| !w.args.contains(&"--chunk-size");
    assert_copies_the_changed_source(30_000, "slice", in_flight, || {
        Change::Rewrite(b"hello".to_vec())
    });
    assert_copies_the_changed_source(200_000, "slice", in_flight, || Change::Truncate(70_001));
    assert_copies_the_changed_source(200_000, "slice", in_flight, || Change::Truncate(0));
}

/// A sparse SOURCE cut inside its trailing hole: DEST ends at the new size, the data
/// before the hole copied and the rest a hole.
#[test]
fn a_sparse_source_cut_inside_its_trailing_hole_ends_at_the_cut() {
    for way in WAYS {
        for sparse in SPARSE {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let head = random_bytes(8192, 5);
            let f = fs::File::create(d.join("a")).unwrap();
            std::os::unix::fs::FileExt::write_all_at(&f, &head, 0).unwrap();
            f.set_len(4 << 20).unwrap();
            let out = copy_paused(d, way, sparse, "dest-open", || {
                Change::Truncate(1 << 20).apply(&d.join("a"))
            });
            let what = format!("{} {sparse}", way.name);
            assert_eq!(out.status.code(), Some(0), "{what}");
            let got = fs::read(d.join("b")).unwrap();
            assert_eq!(got.len(), 1 << 20, "{what}");
            assert!(got[..8192] == head[..], "{what}: the data");
            assert!(got[8192..].iter().all(|&b| b == 0), "{what}: the hole");
        }
    }
}

/// A sparse SOURCE cut inside a hole between its extents after the slices were read: the
/// plan's hole is no hole once SOURCE ends inside it, so DEST ends at the cut instead of
/// keeping the hole and the extent read past it (had SOURCE grown back meanwhile, that
/// hole would have been zeros SOURCE never held).
#[test]
fn a_sparse_source_cut_inside_a_hole_before_the_finish_ends_at_the_cut() {
    use std::os::unix::fs::FileExt;
    for way in WAYS {
        for sparse in ["--sparse=auto", "--sparse=always"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let a = d.join("a");
            let f = fs::File::create(&a).unwrap();
            f.write_all_at(&random_bytes(65536, 3), 0).unwrap();
            f.write_all_at(&random_bytes(65536, 4), 1 << 20).unwrap();
            drop(f);
            let out = copy_paused(d, way, sparse, "finish", || {
                Change::Truncate(500_001).apply(&a)
            });
            let what = format!("{} {sparse}", way.name);
            assert_eq!(out.status.code(), Some(0), "{what}");
            let got = fs::read(d.join("b")).unwrap();
            assert_eq!(got.len(), 500_001, "{what}: DEST's size");
            assert!(
                got == fs::read(&a).unwrap(),
                "{what}: DEST differs from SOURCE"
            );
        }
    }
}

/// A sparse SOURCE cut inside its trailing hole between the two looks that let the finish
/// trust a hole (size and change time, with SEEK_DATA between them): the second look sees
/// the change, so DEST ends at the cut, equal to SOURCE. Trusted on the first look alone,
/// the hole would end DEST at the old size: zeros past SOURCE's end, which SOURCE as it now
/// is never had.
#[test]
fn a_sparse_source_cut_between_the_looks_at_its_hole_ends_at_the_cut() {
    use std::os::unix::fs::FileExt;
    for way in WAYS {
        for sparse in ["--sparse=auto", "--sparse=always"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let a = d.join("a");
            let f = fs::File::create(&a).unwrap();
            f.write_all_at(&random_bytes(65536, 6), 0).unwrap();
            f.set_len(4 << 20).unwrap();
            drop(f);
            let out = copy_paused(d, way, sparse, "hole-looked", || {
                Change::Truncate(1 << 20).apply(&a)
            });
            let what = format!("{} {sparse}", way.name);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
            assert_eq!(stderr, "", "{what}");
            let got = fs::read(d.join("b")).unwrap();
            assert_eq!(got.len(), 1 << 20, "{what}: DEST's size");
            assert!(
                got == fs::read(&a).unwrap(),
                "{what}: DEST differs from SOURCE"
            );
        }
    }
}

/// The preload shim that tears one read of SOURCE (`tests/it/shims/torn_read.c`), built once
/// per test process and put in place with a rename, so that one name serves every run.
fn torn_read_shim() -> &'static Path {
    static SHIM: OnceLock<PathBuf> = OnceLock::new();
    SHIM.get_or_init(|| {
        let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/shims/torn_read.c");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let so = dir.join("torn_read.so");
        let building = dir.join(format!("torn_read.so.{}", std::process::id()));
        let status = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wall", "-o"])
            .arg(&building)
            .arg(&c)
            .arg("-ldl")
            .status()
            .expect("run cc");
        assert!(status.success(), "cc {} failed", c.display());
        fs::rename(&building, &so).unwrap();
        so
    })
}

/// A read torn by a truncate, as the page cache can tear one: the read answers with the bytes
/// up to the cut, zeros to the end of the cut's page, then the old bytes, and SOURCE now ends
/// at the cut. DEST must end at the cut, with the digest of what it holds. The cut in the
/// unaligned tail is read with buffered I/O on every way; the one in the aligned part is read
/// through the engine's own reads (O_DIRECT where the filesystem has it) on the ways that do
/// not hand the aligned part to the GPU library.
#[test]
fn a_read_torn_by_a_truncate_ends_at_the_cut() {
    if through_a_service() {
        return not_here("the service reads SOURCE without the test's preload shim");
    }
    // The aligned part goes through the GPU library on the library ways, not through aiscp's
    // reads; the tail goes through aiscp's reads on every way.
    for (cut, library_too) in [(198_000u64, true), (100_000, false)] {
        let ways = WAYS.iter().enumerate();
        for (w, way) in ways.filter(|(_, w)| library_too || !w.args.contains(&"library")) {
            for (s, sparse) in SPARSE.iter().enumerate() {
                let seed = (w * 10 + s) as u64;
                let (out, got) = copy_torn(way, sparse, cut, None, seed);
                let what = format!("{} {sparse}, cut at {cut}", way.name);
                assert_eq!(got.len() as u64, cut, "{what}: DEST's size");
                assert_torn_copy(&what, &out, &got, seed);
            }
        }
    }
}

/// The same tear, then SOURCE emptied before the read returns: a file that now ends before
/// the read began says nothing about where the zeros are, so none of the read is kept and
/// DEST ends where reading ended, a prefix of what SOURCE held.
#[test]
fn a_read_torn_then_emptied_keeps_none_of_its_zeros() {
    if through_a_service() {
        return not_here("the service reads SOURCE without the test's preload shim");
    }
    for (w, way) in WAYS.iter().enumerate() {
        let (out, got) = copy_torn(way, "--sparse=auto", 198_000, Some(0), w as u64);
        let what = format!("{}, cut at 198000 then emptied", way.name);
        assert!(got.len() <= 198_000, "{what}: DEST's size {}", got.len());
        assert_torn_copy(&what, &out, &got, w as u64);
    }
}

/// DEST must be a prefix of SOURCE's bytes as written (200,000 random bytes from `seed`), the
/// copy exit 0 and --sums give DEST's digest.
fn assert_torn_copy(what: &str, out: &Output, got: &[u8], seed: u64) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
    let old = random_bytes(200_000, seed);
    assert!(
        got == &old[..got.len()],
        "{what}: DEST is not a prefix of SOURCE"
    );
    let want = format!("{}  b\n", blake3::hash(got).to_hex());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        want,
        "{what}: the digest"
    );
}

/// Copies 200,000 random bytes from `seed` the `way` given while the shim tears the read
/// that crosses `cut` (and cuts SOURCE to `then` after it); returns the run and DEST's bytes.
fn copy_torn(way: &Way, sparse: &str, cut: u64, then: Option<u64>, seed: u64) -> (Output, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let (a, fired) = (d.join("a"), d.join("fired"));
    fs::write(&a, random_bytes(200_000, seed)).unwrap();
    let mut cmd = aiscp_command();
    cmd.current_dir(&d)
        .args(way.args)
        .args(["--sums", sparse, "a", "b"])
        .env("LD_PRELOAD", torn_read_shim())
        .env("AISCP_TEST_TORN_FILE", &a)
        .env("AISCP_TEST_TORN_AT", cut.to_string())
        .env("AISCP_TEST_TORN_FIRED", &fired);
    if let Some(then) = then {
        cmd.env("AISCP_TEST_TORN_THEN", then.to_string());
    }
    way.backend.apply(&mut cmd, &d.join("report"));
    let out = cmd.output().unwrap();
    way.backend.assert_report_clean(&d.join("report"));
    assert!(fired.exists(), "{}: no read of SOURCE was torn", way.name);
    let got = fs::read(d.join("b")).unwrap();
    (out, got)
}

/// A /proc file reports size 0 (and /proc/sys answers SEEK_DATA with ENXIO), yet holds
/// bytes: DEST ends where reading ended, not where SEEK_DATA and fstat say the file does (cp
/// reads it). This process's cmdline holds NUL bytes past that size of 0, which are not a
/// read torn by a truncate.
#[test]
fn a_proc_file_of_size_zero_is_copied_as_read() {
    let cmdline = format!("/proc/{}/cmdline", std::process::id());
    for src in ["/proc/sys/kernel/ostype", &cmdline] {
        let want = fs::read(src).unwrap();
        assert!(!want.is_empty());
        for backend in [Backend::Host, Backend::FakeGpu] {
            for sparse in SPARSE {
                let dir = tempfile::tempdir().unwrap();
                let mut cmd = aiscp_command();
                cmd.args([sparse, src, "b"]).current_dir(dir.path());
                backend.apply(&mut cmd, &dir.path().join("report"));
                let out = cmd.output().unwrap();
                assert_eq!(out.status.code(), Some(0), "{backend:?} {sparse}");
                let got = fs::read(dir.path().join("b")).unwrap();
                assert_eq!(got, want, "{backend:?} {sparse}: DEST of {src}");
            }
        }
    }
}

/// A sparse SOURCE whose holes are filled with data after the plan was made and before any
/// slice was read: every byte read comes after the change, so DEST holds no zero where the
/// plan saw a hole (cp looks for data again after each extent; so does the finish).
#[test]
fn a_sparse_source_filled_before_its_slices_are_read_gains_no_zeros() {
    use std::os::unix::fs::FileExt;
    for way in WAYS.iter().filter(|w| one_worker(w) || w.args.is_empty()) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let a = d.join("a");
        let f = fs::File::create(&a).unwrap();
        f.write_all_at(&random_bytes(65536, 1), 0).unwrap();
        f.write_all_at(&random_bytes(65536, 2), 1 << 20).unwrap();
        f.set_len(2 << 20).unwrap();
        drop(f);
        let out = copy_paused(d, way, "--sparse=auto", "slice", || {
            // Written in place (no truncation): SOURCE has no hole from now on.
            let f = OpenOptions::new().write(true).open(&a).unwrap();
            f.write_all_at(&vec![0x5a; 2 << 20], 0).unwrap();
        });
        assert_eq!(out.status.code(), Some(0), "{}", way.name);
        let got = fs::read(d.join("b")).unwrap();
        assert_eq!(got.len(), 2 << 20, "{}", way.name);
        let zero = got.iter().position(|&b| b == 0);
        assert_eq!(
            zero, None,
            "{}: a zero SOURCE did not hold when read",
            way.name
        );
    }
}

/// No pause: another process (`scripts/change-tree.py`) rewrites, shrinks and grows every
/// file of a tree, in a loop, while `-r` copies it, on every way (files in flight, slices,
/// one worker, every route). Every byte that process ever writes is a nonzero value and no
/// file is ever extended with a hole, so whatever mix of states the reads saw, a NUL byte in
/// DEST is a byte SOURCE never held.
#[test]
fn a_tree_changed_by_another_process_during_the_copy_never_gains_nul_bytes() {
    race_with_a_changer(WAYS, &[], 3, None);
}

/// The same under --verify (files in flight read back beside the copies, SOURCE read through
/// the page cache): a file that changed after it was read fails its check ("verification
/// failed", exit 1), and no DEST, checked or not, holds a byte SOURCE never held.
#[test]
fn a_tree_changed_during_a_verified_copy_never_gains_nul_bytes() {
    race_with_a_changer(WAYS, &["--verify"], 1, None);
}

/// The race above with every copy going through the staging service at `socket` (the
/// clients on host memory: the service's own backend and route do the copying), `rounds`
/// times, plain and under --verify.
pub(crate) fn race_through_a_service(socket: &Path, rounds: usize) {
    let way = [Way {
        name: "through the service",
        backend: Backend::Host,
        args: &[],
    }];
    race_with_a_changer(&way, &[], rounds, Some(socket));
    race_with_a_changer(&way, &["--verify"], 1, Some(socket));
}

/// Copies a tree with `-r` (and `extra`) on each of `ways`, `rounds` times, while another
/// process changes it (see above), and checks every DEST; with --verify a file that changed
/// may fail its check, and nothing else may fail. `service`: the socket of a staging
/// service every copy goes through.
fn race_with_a_changer(ways: &[Way], extra: &[&str], rounds: usize, service: Option<&Path>) {
    const FILES: usize = 300;
    const LEN: usize = 40_000;
    for way in ways {
        for round in 0..rounds {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let src = d.join("src");
            fs::create_dir(&src).unwrap();
            for i in 0..FILES {
                fs::write(src.join(format!("f{i:03}")), vec![1 + (i % 255) as u8; LEN]).unwrap();
            }
            let mut changer = Command::new("python3")
                .arg(concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/scripts/change-tree.py"
                ))
                .arg(&src)
                .args([FILES.to_string(), LEN.to_string()])
                .spawn()
                .expect("python3 runs the changing process");
            let mut cmd = aiscp_command();
            cmd.current_dir(d)
                .args(way.args)
                .args(extra)
                .args(["-r", "src", "dst"]);
            way.backend.apply(&mut cmd, &d.join("report"));
            if let Some(socket) = service {
                cmd.env("AISCP_SERVICE", socket);
            }
            let out = cmd.output().unwrap();
            fs::write(d.join("stop"), "").unwrap();
            changer.wait().unwrap();
            let what = format!("{} {extra:?}, round {round}", way.name);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let verified = extra.contains(&"--verify");
            // The read-back reports SOURCE changing after it was read, in either of its
            // words: bytes or sizes that differ, or a SOURCE cut to 0 that has data again.
            let failures_allowed = verified
                && stderr.lines().all(|l| {
                    l.contains(": verification failed: ")
                        || l.contains("its size is 0 but reading it gives data")
                });
            let status = out.status.code();
            assert!(
                status == Some(0) || (status == Some(1) && failures_allowed),
                "{what}: {status:?}: {stderr}"
            );
            for i in 0..FILES {
                let got = fs::read(d.join(format!("dst/f{i:03}"))).unwrap();
                assert!(
                    got.len() <= 2 * LEN,
                    "{what}: f{i:03} is {} bytes",
                    got.len()
                );
                if let Some(at) = got.iter().position(|&b| b == 0) {
                    panic!("{what}: f{i:03} has a NUL byte at {at} of {}", got.len());
                }
            }
            way.backend.assert_report_clean(&d.join("report"));
        }
    }
}

/// Pinned host memory that cannot be had fails the file before DEST is touched: an
/// existing DEST keeps its bytes, and the message says what ran out.
#[test]
fn pinned_memory_running_out_leaves_an_existing_dest_intact() {
    // A window that cannot be pinned fails both its calls: the registration of aiscp's own
    // pages and the runtime's allocation after it.
    for fault in [
        "hostmalloc#1=oom;hostmalloc#2=oom",
        "hostmalloc#3=oom;hostmalloc#4=oom",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("src")).unwrap();
        fs::create_dir_all(d.join("dst")).unwrap();
        let a = random_bytes(300_000, 1);
        let b = random_bytes(200_000, 2);
        fs::write(d.join("src/a"), &a).unwrap();
        fs::write(d.join("src/b"), &b).unwrap();
        let old = random_bytes(50_000, 3);
        fs::write(d.join("dst/b"), &old).unwrap();
        let mut cmd = aiscp_command();
        cmd.current_dir(d)
            .env("AISCP_FAKE_GPU_FAULTS", fault)
            .args(["--route", "bounce", "-r", "src/.", "dst"]);
        Backend::FakeGpu.apply(&mut cmd, &d.join("report"));
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // The first pinned allocation is every copy's first window: it always fails the run's
        // first file. The third is a second worker's, which a run whose files both went to
        // the first worker never makes: then nothing fails.
        let failed = fault.contains("#1") || stderr.contains("pinned host memory");
        assert_eq!(
            out.status.code(),
            Some(i32::from(failed)),
            "{fault}: {stderr}"
        );
        assert!(
            !failed || stderr.contains("pinned host memory"),
            "{fault}: {stderr}"
        );
        assert!(!stderr.contains("error reading"), "{fault}: {stderr}");
        if !failed {
            assert!(fs::read(d.join("dst/a")).unwrap() == a, "{fault}: dst/a");
        }
        let got = fs::read(d.join("dst/b")).unwrap();
        assert!(
            got == old || got == b,
            "{fault}: dst/b is neither its old bytes nor a copy ({} bytes)",
            got.len()
        );
        if stderr.contains("'src/./b'") {
            assert!(got == old, "{fault}: dst/b failed yet lost its old bytes");
        }
        Backend::FakeGpu.assert_report_clean(&d.join("report"));
    }
}

/// A slice past SOURCE's new end may fail instead of answering short (the AMD fastpath can
/// answer EIO past EOF): the copy is not failed by it, since a serial copy would have met
/// the end first. SOURCE is cut to 70,001 bytes after the plan (before the first slice, one
/// worker taking them in order); the library read at 131,072 fails.
#[test]
fn a_failure_past_a_new_end_is_not_the_copys() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::write(d.join("a"), random_bytes(300_000, 7)).unwrap();
    let mut cmd = aiscp_command();
    cmd.current_dir(d)
        .env("AISCP_FAKE_GPU_FAULTS", "read@131072*=EIO")
        .args([
            "--route",
            "library",
            "--chunk-size",
            "64K",
            "--streams",
            "1",
        ])
        .args(["a", "b"]);
    Backend::FakeGpu.apply(&mut cmd, &d.join("report"));
    let out = paused_at(cmd, "slice", d, || {
        Change::Truncate(70_001).apply(&d.join("a"))
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(fs::read(d.join("b")).unwrap() == fs::read(d.join("a")).unwrap());
    Backend::FakeGpu.assert_report_clean(&d.join("report"));
}

/// The same when the slice that fails is the one SOURCE now ends inside: a library may
/// answer EIO to a read that crosses the new end as well as to one past it (the AMD
/// fastpath asks the whole aligned range), and no slice has yet found SOURCE shorter. The
/// failure is SOURCE's end, as a serial copy would have met it: the finish reads on from
/// the slice's start. SOURCE is cut to 70,001 bytes once DEST is open, before any slice;
/// every library read at 65,536 (the slice holding the cut) fails.
#[test]
fn a_failure_across_a_new_end_is_not_the_copys() {
    let library = |w: &Way| w.args.contains(&"library");
    for way in WAYS.iter().filter(|w| library(w)) {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("a"), random_bytes(300_000, 8)).unwrap();
        let mut cmd = aiscp_command();
        cmd.current_dir(d)
            .env("AISCP_FAKE_GPU_FAULTS", "read@65536*=EIO")
            .args(way.args)
            .args(["a", "b"]);
        way.backend.apply(&mut cmd, &d.join("report"));
        let out = paused_at(cmd, "dest-open", d, || {
            Change::Truncate(70_001).apply(&d.join("a"))
        });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{}: {stderr}", way.name);
        let got = fs::read(d.join("b")).unwrap();
        assert!(got == fs::read(d.join("a")).unwrap(), "{}", way.name);
        way.backend.assert_report_clean(&d.join("report"));
    }
}
