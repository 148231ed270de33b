//! The system calls a small file in flight goes without keep DEST as cp leaves it: a SOURCE
//! whose blocks cover its size is read without looking for holes, and a DEST that the copy
//! wrote to its end is not sized again. Each case here needs the call that is skipped
//! elsewhere: a SOURCE with holes (a leading one, a trailing one) over a longer DEST, and
//! a dense SOURCE whose zero tail --sparse=always leaves unwritten. DEST must hold SOURCE's
//! bytes at SOURCE's size, with holes where cp's copy has them.

use crate::support::{aiscp_command, random_bytes, BACKENDS};
use std::fs::{self, File};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::process::Command;

/// A file of `len` bytes holding `data` at `at` and holes elsewhere.
fn sparse_file(path: &Path, len: u64, at: u64, data: &[u8]) {
    let f = File::create(path).unwrap();
    f.set_len(len).unwrap();
    f.write_all_at(data, at).unwrap();
}

/// SOURCE's files: a leading hole, a trailing hole, a dense file ending in zeros, and a
/// dense file.
fn make_source(t: &Path) {
    fs::create_dir(t).unwrap();
    sparse_file(
        &t.join("lead"),
        256 << 10,
        240 << 10,
        &random_bytes(16 << 10, 1),
    );
    sparse_file(&t.join("trail"), 256 << 10, 0, &random_bytes(16 << 10, 2));
    let mut zero_tail = random_bytes(12 << 10, 3);
    zero_tail.resize(40 << 10, 0);
    fs::write(t.join("zero-tail"), zero_tail).unwrap();
    fs::write(t.join("dense"), random_bytes(5000, 4)).unwrap();
}

/// DEST's files before the copy: each longer than SOURCE's, of other bytes.
fn make_longer_dest(d: &Path) {
    fs::create_dir_all(d.join("t")).unwrap();
    for (i, name) in ["lead", "trail", "zero-tail", "dense"].iter().enumerate() {
        fs::write(
            d.join("t").join(name),
            random_bytes(300 << 10, 10 + i as u64),
        )
        .unwrap();
    }
}

/// Copies `t` into `d` (`-r t d`, `d/t` existing) with `sparse`; returns the exit status.
fn copy(cmd: &mut Command, dir: &Path, sparse: &str) -> Option<i32> {
    cmd.current_dir(dir)
        .args(["-r", sparse, "t", "d"])
        .status()
        .unwrap()
        .code()
}

#[test]
fn dest_ends_as_cps_with_holes_and_zero_tails_over_longer_files() {
    for sparse in ["--sparse=auto", "--sparse=always", "--sparse=never"] {
        for backend in BACKENDS {
            let dir = tempfile::tempdir().unwrap();
            let at = dir.path();
            make_source(&at.join("t"));
            make_longer_dest(&at.join("d"));
            let cp_dir = tempfile::tempdir().unwrap();
            make_source(&cp_dir.path().join("t"));
            make_longer_dest(&cp_dir.path().join("d"));

            let mut cmd = aiscp_command();
            backend.apply(&mut cmd, &at.join("report"));
            assert_eq!(copy(&mut cmd, at, sparse), Some(0), "{backend:?} {sparse}");
            assert_eq!(
                copy(&mut Command::new("cp"), cp_dir.path(), sparse),
                Some(0)
            );
            backend.assert_report_clean(&at.join("report"));

            for name in ["lead", "trail", "zero-tail", "dense"] {
                let case = format!("{backend:?} {sparse} {name}");
                let src = fs::read(at.join("t").join(name)).unwrap();
                let ours = at.join("d/t").join(name);
                assert!(fs::read(&ours).unwrap() == src, "{case}: DEST differs");
                let theirs = fs::metadata(cp_dir.path().join("d/t").join(name)).unwrap();
                let ours = fs::metadata(&ours).unwrap();
                assert_eq!(ours.len(), theirs.len(), "{case}: size");
                // Where cp's copy keeps a hole, so does ours (cp's own test of a hole).
                let holes = |m: &fs::Metadata| m.blocks() < m.len() / 512;
                if holes(&theirs) {
                    assert!(
                        holes(&ours),
                        "{case}: cp's DEST has holes ({} blocks), ours none ({} blocks)",
                        theirs.blocks(),
                        ours.blocks()
                    );
                }
            }
        }
    }
}

/// The SOURCE of each case has the shape it claims (on a filesystem that keeps holes): a
/// SOURCE with holes reports fewer blocks than its size, so it is looked at for holes.
#[test]
fn the_sources_have_the_holes_the_cases_need() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t");
    make_source(&t);
    let blocks = |name: &str| {
        let m = fs::metadata(t.join(name)).unwrap();
        (m.blocks(), m.len() / 512)
    };
    let (lead, lead_len) = blocks("lead");
    if lead >= lead_len {
        return; // this filesystem keeps no holes
    }
    let (trail, trail_len) = blocks("trail");
    assert!(trail < trail_len);
    let (zero_tail, zero_tail_len) = blocks("zero-tail");
    assert!(
        zero_tail >= zero_tail_len,
        "the zero tail is written, not a hole"
    );
}
