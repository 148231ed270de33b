//! Differential fuzzing against GNU cp: random small SOURCE trees, DEST states and option
//! sets, each run by `cp` and by aiscp (invoked through a link named `cp`, so even the
//! program name in messages must match) in two directories built alike and walked by cp in
//! the same order; exit status, stdout and stderr (line for line, in order) and the resulting
//! tree must be the same.
//!
//! 300 cases of a fixed seed run by default; `AISCP_FUZZ_CASES=N` runs N and
//! `AISCP_FUZZ_SEED=S` draws others (a failure prints the minimal case proptest shrank it to).

use crate::support::{hermetic, listing, program, walked_alike, Backend};
use proptest::prelude::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// One entry of a generated tree, by its path relative to the tree's root.
#[derive(Debug, Clone)]
enum Entry {
    File {
        name: String,
        data: Vec<u8>,
        mode: u32,
        /// mtime in seconds: fixed, so -u decides the same way in both runs.
        mtime: i64,
    },
    Dir {
        name: String,
        mode: u32,
    },
    Symlink {
        name: String,
        target: String,
    },
    /// A hard link to an earlier file of the same tree.
    HardLink {
        name: String,
        to: usize,
    },
}

/// What DEST is before the run.
#[derive(Debug, Clone)]
enum DestState {
    Absent,
    File(Vec<u8>, i64),
    /// A directory holding some of the names SOURCE has (so merges and overwrites happen).
    Dir(Vec<Entry>),
    SymlinkToFile,
    Dangling,
}

#[derive(Debug, Clone)]
struct Case {
    src: Vec<Entry>,
    dest: DestState,
    options: Vec<&'static str>,
    /// Which operands: the whole tree, or some of its top-level names.
    operands: Operands,
}

#[derive(Debug, Clone)]
enum Operands {
    Tree,
    Names(Vec<usize>),
}

const NAMES: [&str; 5] = ["a", "b", "c", "d1", "d2"];

/// Options cp 9.1 and aiscp share, each independently on or off (conflicting ones are
/// resolved by both programs the same way: the last wins or cp refuses).
const OPTIONS: [&str; 32] = [
    "-r",
    "-a",
    "-p",
    "-P",
    "-L",
    "-H",
    "-n",
    "-u",
    "-f",
    "-b",
    "--remove-destination",
    "-l",
    "-s",
    "-T",
    "-v",
    "-d",
    "--attributes-only",
    "--preserve=links",
    "--no-preserve=mode",
    "--sparse=always",
    "-x",
    "--strip-trailing-slashes",
    "--parents",
    "--backup=numbered",
    "--backup=existing",
    "-Sx",
    "--copy-contents",
    "--preserve=all",
    "--no-preserve=all",
    "--reflink=never",
    "--sparse=never",
    "--one-file-system",
];

fn entry() -> impl Strategy<Value = Entry> {
    let name = proptest::sample::select(&NAMES[..]).prop_map(str::to_owned);
    prop_oneof![
        4 => (
            name.clone(),
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::sample::select(vec![0o644u32, 0o600, 0o755, 0o444, 0o4755]),
            1_000_000_000i64..1_000_000_100,
        )
            .prop_map(|(name, data, mode, mtime)| Entry::File { name, data, mode, mtime }),
        2 => (name.clone(), proptest::sample::select(vec![0o755u32, 0o700, 0o555]))
            .prop_map(|(name, mode)| Entry::Dir { name, mode }),
        1 => (name.clone(), proptest::sample::select(vec!["a", "d1", "missing", ".", "../a", "d1/a"]))
            .prop_map(|(name, target)| Entry::Symlink { name, target: target.to_owned() }),
        1 => (name, 0usize..4).prop_map(|(name, to)| Entry::HardLink { name, to }),
    ]
}

/// Entries may nest: "d1/a" puts `a` inside d1 when d1 is a directory made earlier.
fn tree() -> impl Strategy<Value = Vec<Entry>> {
    proptest::collection::vec((entry(), proptest::option::of(0usize..2)), 0..7).prop_map(|items| {
        items
            .into_iter()
            .map(|(mut e, parent)| {
                if let Some(p) = parent {
                    let dir = ["d1", "d2"][p];
                    let rename = |n: &mut String| {
                        if !n.starts_with('d') {
                            *n = format!("{dir}/{n}");
                        }
                    };
                    match &mut e {
                        Entry::File { name, .. }
                        | Entry::Dir { name, .. }
                        | Entry::Symlink { name, .. }
                        | Entry::HardLink { name, .. } => rename(name),
                    }
                }
                e
            })
            .collect()
    })
}

fn case() -> impl Strategy<Value = Case> {
    let dest = prop_oneof![
        3 => Just(DestState::Absent),
        2 => (proptest::collection::vec(any::<u8>(), 0..32), 1_000_000_000i64..1_000_000_100)
            .prop_map(|(d, t)| DestState::File(d, t)),
        3 => tree().prop_map(DestState::Dir),
        1 => Just(DestState::SymlinkToFile),
        1 => Just(DestState::Dangling),
    ];
    // -r and -v on their own draws, half the time each: from the list they came too seldom
    // together to test the order of a tree's copy.
    let common = |o: &'static str| proptest::bool::ANY.prop_map(move |on| on.then_some(o));
    let options = (
        proptest::collection::vec(proptest::sample::select(&OPTIONS[..]), 0..4),
        common("-r"),
        common("-v"),
    )
        .prop_map(|(mut options, r, v)| {
            options.extend(r.into_iter().chain(v));
            options
        });
    let operands = prop_oneof![
        1 => Just(Operands::Tree),
        2 => proptest::collection::vec(0usize..5, 1..3).prop_map(Operands::Names),
    ];
    (tree(), dest, options, operands).prop_map(|(src, dest, options, operands)| Case {
        src,
        dest,
        options,
        operands,
    })
}

fn set_mtime(path: &Path, secs: i64) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let t = libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    };
    // SAFETY: a valid path and a two-element timespec array.
    unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            [t, t].as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
}

/// Makes the entries under `root` (those whose parent is missing or not a directory are
/// skipped, as are names already taken). `in_dest`: set-user-ID bits are left off, as DEST
/// files: GNU cp -p over an existing set-user-ID DEST sets the mode through an ACL, which
/// leaves that bit on the new content (aiscp drops it; a difference kept on purpose).
fn build(root: &Path, entries: &[Entry], in_dest: bool) {
    fs::create_dir_all(root).unwrap();
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    for e in entries {
        let name = match e {
            Entry::File { name, .. }
            | Entry::Dir { name, .. }
            | Entry::Symlink { name, .. }
            | Entry::HardLink { name, .. } => name,
        };
        let path = root.join(name);
        if fs::symlink_metadata(&path).is_ok() || !path.parent().unwrap().is_dir() {
            continue;
        }
        match e {
            Entry::File {
                data, mode, mtime, ..
            } => {
                fs::write(&path, data).unwrap();
                let mode = if in_dest { mode & 0o777 } else { *mode };
                fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
                set_mtime(&path, *mtime);
                files.push(path);
            }
            Entry::Dir { mode, .. } => {
                fs::create_dir(&path).unwrap();
                dirs.push((path, *mode));
            }
            Entry::Symlink { target, .. } => symlink(target, &path).unwrap(),
            Entry::HardLink { to, .. } => {
                if let Some(first) = files.get(*to) {
                    fs::hard_link(first, &path).unwrap();
                }
            }
        }
    }
    // Modes last, so a 0555 directory could still be filled.
    for (d, mode) in dirs.iter().rev() {
        fs::set_permissions(d, fs::Permissions::from_mode(*mode)).unwrap();
        set_mtime(d, 1_000_000_050);
    }
}

/// Lets the test remove what the run made read-only.
fn make_writable(root: &Path) {
    let _ = Command::new("chmod")
        .args(["-R", "u+rwx"])
        .arg(root)
        .status();
}

/// A directory holding `cp`, a link to aiscp: run through it, aiscp calls itself `cp`. It
/// sits beside the binary (and is remade each run), so nothing is left in /tmp.
fn aiscp_as_cp() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = program().with_file_name("aiscp-as-cp");
        fs::create_dir_all(&dir).unwrap();
        let link = dir.join("cp");
        let _ = fs::remove_file(&link);
        symlink(program(), &link).unwrap();
        dir
    })
}

#[derive(Debug, PartialEq)]
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    tree: Vec<String>,
    src: Vec<String>,
}

/// Builds the case's SOURCE and DEST in `d`.
fn lay_out(case: &Case, d: &Path) {
    build(&d.join("src"), &case.src, false);
    match &case.dest {
        DestState::Absent => {}
        DestState::File(data, t) => {
            fs::write(d.join("dst"), data).unwrap();
            set_mtime(&d.join("dst"), *t);
        }
        DestState::Dir(entries) => build(&d.join("dst"), entries, true),
        DestState::SymlinkToFile => {
            fs::write(d.join("target"), b"target\n").unwrap();
            symlink("target", d.join("dst")).unwrap();
        }
        DestState::Dangling => symlink("nowhere", d.join("dst")).unwrap(),
    }
}

/// Runs `cp` found in the directory `bin` (argv[0] is then "cp" for both programs) in `d`,
/// a tree of the case.
fn run(case: &Case, bin: &Path, backend: Backend, d: &Path) -> Outcome {
    let mut args: Vec<String> = case.options.iter().map(|s| s.to_string()).collect();
    match &case.operands {
        Operands::Tree => args.push("src".into()),
        Operands::Names(ix) => {
            args.extend(ix.iter().map(|&i| format!("src/{}", NAMES[i])));
        }
    }
    args.push("dst".into());
    let mut cmd = Command::new("cp");
    hermetic(&mut cmd)
        .current_dir(d)
        .args(&args)
        .env("PATH", bin)
        .env("LC_ALL", "C")
        .stdin(Stdio::null());
    backend.apply(&mut cmd, &d.join("report"));
    let out = cmd.output().unwrap();
    let outcome = Outcome {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        tree: [listing(&d.join("dst")), listing(&d.join("target"))].concat(),
        src: listing(&d.join("src")),
    };
    make_writable(d);
    outcome
}

/// The generator's seed: fixed, so CI runs the same cases every time;
/// `AISCP_FUZZ_SEED=N` explores others.
fn seed() -> u64 {
    std::env::var("AISCP_FUZZ_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

fn cases() -> u32 {
    std::env::var("AISCP_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(seed()),
        ..ProptestConfig::default()
    })]

    #[test]
    fn aiscp_does_what_cp_does(case in case(), fake_gpu in proptest::bool::weighted(0.2)) {
        let backend = if fake_gpu { Backend::FakeGpu } else { Backend::Host };
        let tree = || {
            let tmp = tempfile::tempdir().unwrap();
            lay_out(&case, tmp.path());
            tmp
        };
        let [gnu_tree, our_tree] = walked_alike(&case, tree, |t| make_writable(t.path()));
        let gnu = run(&case, Path::new("/usr/bin"), Backend::Host, gnu_tree.path());
        let ours = run(&case, aiscp_as_cp(), backend, our_tree.path());
        prop_assert!(!ours.stderr.contains("panicked"), "{}", ours.stderr);
        prop_assert_eq!(ours, gnu);
    }
}
