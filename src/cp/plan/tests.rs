//! Plan from operands, one rule per test: which SOURCE goes to which DEST, and cp's words for
//! the operand lists it refuses. Operands name real files in a fresh directory, since cp
//! asks the filesystem whether the last one is a directory.

use super::*;
use crate::cp::options::tests::resolve;
use aiscp_engine::quote::quote_os;
use std::fs;

/// A directory holding `dir/` (a directory) and `file` (a regular file).
fn place() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    fs::create_dir(t.path().join("dir")).unwrap();
    fs::write(t.path().join("file"), b"x").unwrap();
    t
}

fn paths(t: &tempfile::TempDir, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| t.path().join(n)).collect()
}

/// A job as its names' bytes: `Path`'s own equality ignores a trailing or doubled slash,
/// which cp's rules do not.
#[derive(Debug, PartialEq, Eq)]
struct Names {
    src: OsString,
    dst: OsString,
    parents_of: Option<OsString>,
    no_backup: bool,
}

impl From<CopyJob> for Names {
    fn from(j: CopyJob) -> Names {
        Names {
            src: j.src.into_os_string(),
            dst: j.dst.into_os_string(),
            parents_of: j.parents_of.map(PathBuf::into_os_string),
            no_backup: j.no_backup,
        }
    }
}

fn jobs(flags: &[&str], operands: &[PathBuf]) -> Vec<Names> {
    plan(operands, &resolve(flags))
        .unwrap_or_else(|e| panic!("{operands:?} refused: {e:?}"))
        .into_iter()
        .map(Names::from)
        .collect()
}

fn usage(flags: &[&str], operands: &[PathBuf]) -> UsageError {
    match plan(operands, &resolve(flags)) {
        Err(PlanError::Usage(e)) => e,
        other => panic!("not a usage error: {other:?}"),
    }
}

fn fatal(flags: &[&str], operands: &[PathBuf]) -> String {
    match plan(operands, &resolve(flags)) {
        Err(PlanError::Fatal(msg)) => msg,
        other => panic!("not a fatal error: {other:?}"),
    }
}

fn job(src: &Path, dst: &Path) -> Names {
    Names {
        src: src.as_os_str().to_owned(),
        dst: dst.as_os_str().to_owned(),
        parents_of: None,
        no_backup: false,
    }
}

#[test]
fn no_operand_is_a_missing_file_operand() {
    assert_eq!(usage(&[], &[]).msg, "missing file operand");
}

#[test]
fn one_operand_is_a_missing_destination() {
    let t = place();
    let ops = paths(&t, &["file"]);
    let want = format!("missing destination file operand after {}", quote(&ops[0]));
    assert_eq!(usage(&[], &ops).msg, want);
    assert_eq!(usage(&["-T"], &ops).msg, want);
}

#[test]
fn two_operands_and_the_last_no_directory_copy_source_to_dest() {
    let t = place();
    let ops = paths(&t, &["file", "new"]);
    assert_eq!(jobs(&[], &ops), [job(&ops[0], &ops[1])]);
}

#[test]
fn a_directory_last_receives_each_source_by_its_last_component() {
    let t = place();
    let ops = paths(&t, &["file", "dir/", "dir"]);
    let dir = &ops[2];
    assert_eq!(
        jobs(&[], &ops),
        [
            job(&ops[0], &dir.join("file")),
            // The trailing slash goes from DEST's name, not from SOURCE.
            job(&ops[1], &dir.join("dir")),
        ]
    );
}

#[test]
fn strip_trailing_slashes_applies_only_into_a_directory() {
    let t = place();
    let into = paths(&t, &["dir/", "dir"]);
    assert_eq!(
        jobs(&["--strip-trailing-slashes"], &into),
        [job(&t.path().join("dir"), &into[1].join("dir"))]
    );
    let pair = paths(&t, &["dir/", "new"]);
    assert_eq!(
        jobs(&["--strip-trailing-slashes"], &pair),
        [job(&pair[0], &pair[1])]
    );
}

#[test]
fn several_sources_need_a_directory_last() {
    let t = place();
    let ops = paths(&t, &["file", "dir", "file"]);
    assert_eq!(
        fatal(&[], &ops),
        format!("target {}: Not a directory", quote(&ops[2]))
    );
    let ops = paths(&t, &["file", "dir", "missing"]);
    assert_eq!(
        fatal(&[], &ops),
        format!("target {}: No such file or directory", quote(&ops[2]))
    );
}

#[test]
fn no_target_directory_takes_two_operands_even_onto_a_directory() {
    let t = place();
    let ops = paths(&t, &["file", "dir"]);
    assert_eq!(jobs(&["-T"], &ops), [job(&ops[0], &ops[1])]);
    let ops = paths(&t, &["file", "dir", "x"]);
    assert_eq!(
        usage(&["-T"], &ops).msg,
        format!("extra operand {}", quote_os(ops[2].as_os_str()))
    );
}

#[test]
fn target_directory_makes_every_operand_a_source() {
    let t = place();
    let dir = t.path().join("dir");
    let d = dir.to_str().unwrap();
    let ops = paths(&t, &["file", "missing"]);
    assert_eq!(
        jobs(&["-t", d], &ops),
        [
            job(&ops[0], &dir.join("file")),
            job(&ops[1], &dir.join("missing"))
        ]
    );
}

#[test]
fn target_directory_must_be_a_directory() {
    let t = place();
    let file = t.path().join("file");
    assert_eq!(
        fatal(&["-t", file.to_str().unwrap()], &paths(&t, &["dir"])),
        format!("target directory {}: Not a directory", quote(&file))
    );
    let missing = t.path().join("missing");
    assert_eq!(
        fatal(&["-t", missing.to_str().unwrap()], &paths(&t, &["dir"])),
        format!(
            "target directory {}: No such file or directory",
            quote(&missing)
        )
    );
}

#[test]
fn parents_needs_a_directory_and_keeps_the_whole_name() {
    let t = place();
    assert_eq!(
        usage(&["--parents"], &paths(&t, &["file", "new"])).msg,
        "with --parents, the destination must be a directory"
    );
    let dir = t.path().join("dir");
    let src = t.path().join("file");
    let got = jobs(&["--parents"], &[src.clone(), dir.clone()]);
    // An absolute SOURCE's name is kept whole below DIRECTORY, its leading '/' dropped.
    let rel: PathBuf = src.components().skip(1).collect();
    assert_eq!(
        got,
        [Names {
            src: src.clone().into_os_string(),
            dst: join(&dir, &rel).into_os_string(),
            parents_of: Some(dir.clone().into_os_string()),
            no_backup: false,
        }]
    );
}

#[test]
fn force_backup_of_a_file_onto_itself_copies_to_the_backup_name() {
    let t = place();
    let file = t.path().join("file");
    let ops = [file.clone(), file.clone()];
    let got = jobs(&["-f", "-b"], &ops);
    assert_eq!(
        got,
        [Names {
            src: file.clone().into_os_string(),
            dst: t.path().join("file~").into_os_string(),
            parents_of: None,
            no_backup: true,
        }]
    );
    // Without -f it stays a copy onto itself (refused later as the same file).
    assert_eq!(jobs(&["-b"], &ops), [job(&file, &file)]);
}
