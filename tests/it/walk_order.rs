//! The order of effects while many files are in flight. GNU cp copies one file at a time;
//! aiscp copies many at once on several workers, and everything a user or a script sees
//! must still come in cp's order: `-v` lines, messages between them, prompts and the answers
//! they take, hard-link groups, and what a SIGINT leaves. Each test copies one source tree
//! with GNU cp and with aiscp (host memory, the fake GPU, and far more files in flight than
//! the default), so both read the same directories in the same order.

use crate::parity::harness::{bin_dir, nobody_runs, AS_NOBODY};
use crate::support::{aiscp_command, hermetic, listing, random_bytes, skip, Backend, Report};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Files in flight far past the default (64 files), so that hundreds of small files are
/// copied at once and their results come back in any order.
const MANY_IN_FLIGHT: &str = "1000,1073741824";

/// Who copies: GNU cp, or aiscp on a backend, with an `AISCP_IN_FLIGHT` setting or none.
#[derive(Clone, Copy, Debug)]
enum Copier {
    Gnu,
    Ours(Backend, Option<&'static str>),
}

/// The aiscp runs a tree is copied with.
const OURS: [Copier; 4] = [
    Copier::Ours(Backend::Host, None),
    Copier::Ours(Backend::FakeGpu, None),
    Copier::Ours(Backend::Host, Some(MANY_IN_FLIGHT)),
    Copier::Ours(Backend::FakeGpu, Some(MANY_IN_FLIGHT)),
];

/// A source tree's entries, relative to its root.
struct Tree {
    dirs: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

/// A source tree both programs read: `dirs` directories nested at random under `src`,
/// `files` files spread over them (a quarter empty, a quarter of at most 512 bytes, the
/// rest up to `max_len`) of random bytes. Made readable by anyone, for the runs as nobody.
fn random_tree(src: &Path, seed: u64, dirs: usize, files: usize, max_len: usize) -> Tree {
    let mut rng = StdRng::seed_from_u64(seed);
    let pool = random_bytes(max_len + 4096, seed);
    fs::create_dir_all(src).unwrap();
    for d in src.ancestors().take(2) {
        fs::set_permissions(d, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut all_dirs = vec![PathBuf::new()];
    for i in 0..dirs {
        let parent = all_dirs[rng.gen_range(0..all_dirs.len())].clone();
        let d = parent.join(format!("d{i}"));
        fs::create_dir(src.join(&d)).unwrap();
        all_dirs.push(d);
    }
    let files = (0..files)
        .map(|i| {
            let d = &all_dirs[rng.gen_range(0..all_dirs.len())];
            let len = match rng.gen_range(0..4) {
                0 => 0,
                1 => rng.gen_range(1..=512),
                _ => rng.gen_range(1..=max_len),
            };
            let at = rng.gen_range(0..4096);
            let f = d.join(format!("f{i}"));
            fs::write(src.join(&f), &pool[at..at + len]).unwrap();
            f
        })
        .collect();
    all_dirs.remove(0);
    Tree {
        dirs: all_dirs,
        files,
    }
}

/// Makes every directory under `root` (itself too) writable by anyone, for the runs as
/// nobody in a DEST made by root.
fn open_to_all(root: &Path) {
    fs::set_permissions(root, fs::Permissions::from_mode(0o777)).unwrap();
    for e in fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            open_to_all(&e.path());
        }
    }
}

/// What makes a run's directory ready: DEST's old entries.
type Before<'a> = Option<&'a dyn Fn(&Path)>;

/// What a run is given besides its arguments.
#[derive(Default)]
struct Setup<'a> {
    /// Run as nobody (root reads unreadable files).
    nobody: bool,
    /// Makes what the run's directory holds first (DEST is `dst` in it).
    before: Before<'a>,
    /// Everything stdin gives.
    stdin: &'a str,
    /// stderr into stdout's file (compared as stdout), so that the two streams'
    /// interleaving is compared.
    merged: bool,
}

struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    /// DEST's entries ([`listing`]).
    tree: Vec<String>,
    /// The run's directory, DEST in it as `dst`.
    dir: tempfile::TempDir,
}

/// `cp` (GNU's or aiscp under that name) as `copier` runs it, as nobody with `nobody`; the
/// fake GPU's report goes to `report`. GNU cp's stdout is line-buffered, as on a terminal
/// (stdbuf): in a pipe or file its `-v` lines would come out in blocks, behind prompts and
/// messages written to stderr at once, where aiscp writes each line as it prints it.
fn command(copier: Copier, nobody: bool, report: &Path) -> Command {
    const GNU: [&str; 3] = ["stdbuf", "-oL", "cp"];
    let mut cmd = match (nobody, copier) {
        (true, Copier::Gnu) => {
            let mut c = Command::new("setpriv");
            c.args(AS_NOBODY).args(GNU);
            c
        }
        (true, Copier::Ours(..)) => {
            let mut c = Command::new("setpriv");
            c.args(AS_NOBODY).arg("cp");
            let path = std::env::var("PATH").unwrap_or_default();
            c.env("PATH", format!("{}:{path}", bin_dir().display()));
            c
        }
        (false, Copier::Gnu) => {
            let mut c = Command::new(GNU[0]);
            c.args(&GNU[1..]);
            c
        }
        (false, Copier::Ours(..)) => {
            let mut c = aiscp_command();
            c.arg0("cp");
            c
        }
    };
    hermetic(&mut cmd)
        .env("LC_ALL", "C.UTF-8")
        .env_remove("AISCP_IN_FLIGHT")
        .env_remove("POSIXLY_CORRECT");
    if let Copier::Ours(backend, in_flight) = copier {
        backend.apply(&mut cmd, report);
        if let Some(value) = in_flight {
            cmd.env("AISCP_IN_FLIGHT", value);
        }
    }
    cmd
}

/// Runs `cp ARGS SRC dst` in a fresh directory made as `setup` says.
fn run(copier: Copier, src: &Path, args: &[&str], setup: &Setup<'_>) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    if let Some(before) = setup.before {
        before(dir.path());
    }
    let report = dir.path().join("report");
    let mut cmd = command(copier, setup.nobody, &report);
    cmd.args(args)
        .arg(src)
        .arg("dst")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // One file behind both streams: each program writes every line as it prints it.
    let merged = setup.merged.then(|| tempfile::tempfile().unwrap());
    if let Some(f) = &merged {
        cmd.stdout(f.try_clone().unwrap())
            .stderr(f.try_clone().unwrap());
    }
    let mut child = cmd.spawn().unwrap();
    // A program that stops reading (cp at its last prompt) closes the pipe: not an error.
    let _ = child
        .stdin
        .take()
        .unwrap()
        .write_all(setup.stdin.as_bytes());
    let mut out = child.wait_with_output().unwrap();
    if let Some(mut f) = merged {
        f.rewind().unwrap();
        f.read_to_end(&mut out.stdout).unwrap();
    }
    if setup.nobody {
        // setpriv failing would make both runs fail alike and compare equal.
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            !matches!(out.status.code(), Some(126 | 127)) && !said.starts_with("setpriv:"),
            "setpriv did not run {copier:?}: {:?} {said}",
            out.status
        );
    }
    assert_report_clean(&report);
    Outcome {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        tree: listing(&dir.path().join("dst")),
        dir,
    }
}

/// The fake GPU library's report, where a run loaded it, shows nothing leaked.
fn assert_report_clean(report: &Path) {
    if report.exists() {
        Report::read(report).assert_clean();
    }
}

/// Where two texts part, line by line: the line number and a few lines of each from there
/// (whole outputs of thousands of lines would bury it); None when they are equal.
fn first_difference<T: AsRef<str> + PartialEq>(ours: &[T], gnu: &[T]) -> Option<String> {
    let at = (0..ours.len().max(gnu.len())).find(|&i| ours.get(i) != gnu.get(i))?;
    let around = |l: &[T]| {
        l.iter()
            .skip(at.saturating_sub(2))
            .take(6)
            .map(|s| format!("    {}", s.as_ref()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(format!(
        "line {} of {} (aiscp) / {} (GNU cp):\n  aiscp:\n{}\n  GNU cp:\n{}",
        at + 1,
        ours.len(),
        gnu.len(),
        around(ours),
        around(gnu)
    ))
}

/// Asserts aiscp's run ended as GNU cp's: exit status, stdout, stderr, DEST's entries.
fn assert_like_cp(ours: &Outcome, gnu: &Outcome, what: &str) {
    assert_eq!(
        ours.status.code(),
        gnu.status.code(),
        "{what}: exit status (aiscp, GNU cp); stderr:\n{}",
        ours.stderr
    );
    for (name, o, g) in [
        ("stdout", &ours.stdout, &gnu.stdout),
        ("stderr", &ours.stderr, &gnu.stderr),
    ] {
        let lines = |t: &str| {
            t.split_inclusive('\n')
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        if let Some(diff) = first_difference(&lines(o), &lines(g)) {
            panic!("{what}: {name} differs at {diff}");
        }
    }
    if let Some(diff) = first_difference(&ours.tree, &gnu.tree) {
        panic!("{what}: DEST differs at {diff}");
    }
}

/// Copies `src` with GNU cp and then with every aiscp of [`OURS`], asserting each ends as
/// cp did; returns cp's outcome.
fn like_cp(src: &Path, args: &[&str], setup: &Setup<'_>) -> Outcome {
    let gnu = run(Copier::Gnu, src, args, setup);
    for copier in OURS {
        let ours = run(copier, src, args, setup);
        assert_like_cp(&ours, &gnu, &format!("{copier:?} cp {args:?}"));
    }
    gnu
}

/// Several thousand small files over many directories: `-v` names them in cp's order, line
/// for line, however many are in flight and in whatever order the workers end them.
#[test]
fn many_small_files_are_named_in_cps_order() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let tree = random_tree(&src, 1, 80, 3000, 16 << 10);
    let gnu = like_cp(&src, &["-rv"], &Setup::default());
    assert!(gnu.status.success(), "{}", gnu.stderr);
    let named = tree.dirs.len() + tree.files.len() + 1;
    assert_eq!(gnu.stdout.lines().count(), named);
}

/// Errors in the middle of a tree (unreadable files and a directory, run as nobody; DEST
/// entries of the wrong kind): each message comes between the same `-v` lines as cp's, in
/// one stream, the run ends with 1, and DEST holds what cp's holds.
#[test]
fn errors_in_a_tree_come_between_the_same_lines_as_cps() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let tree = random_tree(&src, 2, 40, 1500, 16 << 10);
    let nobody = match nobody_runs() {
        Ok(()) => true,
        Err(why) => {
            skip("cannot run as nobody (not root)", &why);
            false
        }
    };
    // Two directories with files: one unreadable, one that is a file in DEST.
    let full: Vec<&PathBuf> = tree
        .dirs
        .iter()
        .filter(|d| tree.files.iter().filter(|f| f.starts_with(d)).count() > 10)
        .collect();
    let (unreadable_dir, file_in_dest) = (full[full.len() - 1], full[full.len() - 2]);
    if nobody {
        for f in tree.files.iter().step_by(23) {
            fs::set_permissions(src.join(f), fs::Permissions::from_mode(0o000)).unwrap();
        }
        fs::set_permissions(src.join(unreadable_dir), fs::Permissions::from_mode(0o000)).unwrap();
    }
    // Directories in DEST where SOURCE has files.
    let dirs_in_dest: Vec<&PathBuf> = tree
        .files
        .iter()
        .skip(5)
        .step_by(97)
        .filter(|f| !f.starts_with(file_in_dest))
        .collect();
    let before = |dir: &Path| {
        let dst = dir.join("dst");
        for f in &dirs_in_dest {
            fs::create_dir_all(dst.join(f)).unwrap();
        }
        fs::create_dir_all(dst.join(file_in_dest).parent().unwrap()).unwrap();
        fs::write(dst.join(file_in_dest), b"not a directory\n").unwrap();
        open_to_all(&dst);
    };
    let setup = Setup {
        nobody,
        before: Some(&before),
        merged: true,
        ..Setup::default()
    };
    let gnu = like_cp(&src, &["-rvT"], &setup);
    assert_eq!(gnu.status.code(), Some(1));
    let said = &gnu.stdout;
    assert!(said.contains("cannot overwrite directory"), "{said}");
    assert!(said.contains("cannot overwrite non-directory"), "{said}");
    if nobody {
        assert!(said.contains("Permission denied"), "{said}");
    }
}

/// How long a conversation with `-i` waits for the next prompt or the end.
const PROMPT_WAIT: Duration = Duration::from_secs(15);

/// A child killed (and reaped) when the test lets go of it, passing or not.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cp ARGS SRC dst` as `copier` with stdout and stderr in one pipe, answering each
/// prompt only once it has been printed, with `answer`'s word for the prompt's line.
/// Returns the outcome, the whole conversation as its stdout.
fn converse(
    copier: Copier,
    src: &Path,
    args: &[&str],
    before: &dyn Fn(&Path),
    answer: &dyn Fn(&str) -> bool,
) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    before(dir.path());
    let report = dir.path().join("report");
    let (reader, writer) = nix::unistd::pipe().unwrap();
    let mut reader = fs::File::from(reader);
    let mut cmd = command(copier, false, &report);
    cmd.args(args)
        .arg(src)
        .arg("dst")
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::from(writer.try_clone().unwrap()))
        .stderr(Stdio::from(writer));
    let mut child = Reaped(cmd.spawn().unwrap());
    // The command holds the pipe's writing end: the pipe ends only once it is gone.
    drop(cmd);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 1 << 16];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut stdin = child.0.stdin.take().unwrap();
    let mut said = String::new();
    let mut answered = 0;
    loop {
        match rx.recv_timeout(PROMPT_WAIT) {
            Ok(piece) => said.push_str(&String::from_utf8_lossy(&piece)),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "{copier:?}: silent for {PROMPT_WAIT:?} after {answered} answers (a prompt not \
                 shown before its answer is read?); it said last:\n{}",
                &said[said.len().saturating_sub(400)..]
            ),
        }
        if said.ends_with("? ") && said.matches("'? ").count() > answered {
            let prompt = said.rsplit('\n').next().unwrap();
            let word: &[u8] = if answer(prompt) { b"y\n" } else { b"n\n" };
            // One that ended meanwhile reads no more.
            let _ = stdin.write_all(word);
            answered += 1;
        }
    }
    drop(stdin);
    let status = child.0.wait().unwrap();
    assert_report_clean(&report);
    Outcome {
        status,
        stdout: said,
        stderr: String::new(),
        tree: listing(&dir.path().join("dst")),
        dir,
    }
}

/// The number in a name ending `fN` (the files of [`random_tree`]) on `line`.
fn file_number(line: &str) -> u64 {
    let tail = &line[line.rfind('f').expect("a file's name") + 1..];
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// `-i` over a DEST that holds some of the files: the prompts come in cp's order, between
/// the same `-v` lines, each only once the files before it have been copied and named, and
/// each answer is taken for the file it was asked about (whether read line by line from a
/// script or given only once the prompt shows), so DEST ends as cp's.
#[test]
fn prompts_come_in_cps_order_and_take_their_own_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let tree = random_tree(&src, 3, 30, 1000, 8 << 10);
    let existing: Vec<&PathBuf> = tree.files.iter().step_by(4).collect();
    let before = |dir: &Path| {
        let dst = dir.join("dst");
        for d in &tree.dirs {
            fs::create_dir_all(dst.join(d)).unwrap();
        }
        for f in &existing {
            fs::write(dst.join(f), b"old\n").unwrap();
        }
    };
    let args = ["-rviT"];
    // A script of answers, one line per prompt (some not y or n).
    let script: String = (0..existing.len())
        .map(|i| ["y\n", "n\n", "yes\n", "\n", "Y\n", "nope\n"][i % 6])
        .collect();
    let setup = Setup {
        before: Some(&before),
        stdin: &script,
        merged: true,
        ..Setup::default()
    };
    let gnu = like_cp(&src, &args, &setup);
    assert_eq!(gnu.stdout.matches("overwrite").count(), existing.len());
    // Answered as the prompts come, by the file each names.
    let answer = |prompt: &str| file_number(prompt) % 3 != 1;
    let gnu = converse(Copier::Gnu, &src, &args, &before, &answer);
    assert!(gnu.status.success(), "{}", gnu.stdout);
    assert_eq!(gnu.stdout.matches("overwrite").count(), existing.len());
    for copier in OURS {
        let ours = converse(copier, &src, &args, &before, &answer);
        assert_like_cp(&ours, &gnu, &format!("{copier:?}, answered as asked"));
    }
}

/// DEST's hard-link groups: for each inode with more than one name under `root`, its names.
fn link_groups(root: &Path) -> Vec<Vec<PathBuf>> {
    fn walk(root: &Path, rel: &Path, groups: &mut BTreeMap<(u64, u64), Vec<PathBuf>>) {
        for e in fs::read_dir(root.join(rel)).unwrap() {
            let e = e.unwrap();
            let name = rel.join(e.file_name());
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                walk(root, &name, groups);
            } else if meta.nlink() > 1 {
                groups
                    .entry((meta.dev(), meta.ino()))
                    .or_default()
                    .push(name);
            }
        }
    }
    let mut groups = BTreeMap::new();
    walk(root, Path::new(""), &mut groups);
    let mut groups: Vec<Vec<PathBuf>> = groups
        .into_values()
        .map(|mut g| {
            g.sort();
            g
        })
        .collect();
    groups.sort();
    groups
}

/// Groups of hard links spread over the tree, among many files in flight: with `-a` and
/// with `--preserve=links`, DEST's names fall into the same groups of one inode as cp's.
#[test]
fn hard_link_groups_across_the_tree_are_cps() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    let tree = random_tree(&src, 4, 40, 1500, 8 << 10);
    let mut rng = StdRng::seed_from_u64(4);
    let mut places = tree.dirs.clone();
    places.push(PathBuf::new());
    for g in 0..60 {
        // Each group's first name: a file of the tree (in the middle of the files in flight)
        // or a new one.
        let first = match g % 2 {
            0 => src.join(&tree.files[rng.gen_range(0..tree.files.len())]),
            _ => {
                let f = src.join(&places[rng.gen_range(0..places.len())]);
                let f = f.join(format!("h{g}"));
                fs::write(&f, random_bytes(rng.gen_range(0..3000), g)).unwrap();
                f
            }
        };
        for k in 0..rng.gen_range(1..=4) {
            let at = src.join(&places[rng.gen_range(0..places.len())]);
            let _ = fs::hard_link(&first, at.join(format!("h{g}_{k}")));
        }
    }
    let want = link_groups(&src);
    assert!(want.len() >= 50, "{} groups made", want.len());
    for args in [&["-av"][..], &["-rv", "--preserve=links"]] {
        let gnu = run(Copier::Gnu, &src, args, &Setup::default());
        assert!(gnu.status.success(), "{}", gnu.stderr);
        let gnu_groups = link_groups(&gnu.dir.path().join("dst"));
        assert_eq!(gnu_groups, want, "GNU cp {args:?}");
        for copier in OURS {
            let ours = run(copier, &src, args, &Setup::default());
            assert_like_cp(&ours, &gnu, &format!("{copier:?} cp {args:?}"));
            let groups = link_groups(&ours.dir.path().join("dst"));
            if let Some(diff) = first_difference(
                &groups.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>(),
                &gnu_groups
                    .iter()
                    .map(|g| format!("{g:?}"))
                    .collect::<Vec<_>>(),
            ) {
                panic!("{copier:?} cp {args:?}: hard-link groups differ at {diff}");
            }
        }
    }
}

/// The workers files in flight are copied on (`--streams`' default): at most this many
/// files are being copied when a stop comes.
const WORKERS: usize = 4;

/// What an interrupted run printed and left.
struct Stopped {
    status: ExitStatus,
    stdout: Vec<String>,
    stderr: String,
    dir: tempfile::TempDir,
}

/// Runs `cp -rvT SRC dst` as `copier` in a fresh directory made by `before`, and sends it
/// SIGINT `delay` after it has printed `lines` lines.
fn interrupted(
    copier: Copier,
    src: &Path,
    before: Before<'_>,
    lines: usize,
    delay: Duration,
) -> Stopped {
    let dir = tempfile::tempdir().unwrap();
    if let Some(before) = before {
        before(dir.path());
    }
    let report = dir.path().join("report");
    let mut cmd = command(copier, false, &report);
    cmd.args(["-rvT"])
        .arg(src)
        .arg("dst")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Reaped(cmd.spawn().unwrap());
    let pid = nix::unistd::Pid::from_raw(child.0.id() as i32);
    let stdout = child.0.stdout.take().unwrap();
    // Read on as the signal lands, so the copy never waits on a full pipe.
    let reader = std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in BufReader::new(stdout).lines() {
            said.push(line.unwrap());
            if said.len() == lines {
                std::thread::sleep(delay);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
            }
        }
        said
    });
    let mut stderr = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let stdout = reader.join().unwrap();
    let status = child.0.wait().unwrap();
    assert_report_clean(&report);
    Stopped {
        status,
        stdout,
        stderr,
        dir,
    }
}

/// The DEST a `-v` line names, relative to DEST (`dst`).
fn named_dest(line: &str) -> PathBuf {
    let (_, dst) = line.split_once(" -> ").expect("a -v line");
    let dst = dst.trim_matches('\'');
    PathBuf::from(dst.strip_prefix("dst").unwrap().trim_start_matches('/'))
}

/// SIGINT at random points of a tree copied with `-v`, many files in flight: aiscp dies of
/// it as cp does, silently; its `-v` lines are the first lines of cp's, in cp's order; every
/// entry named is there (a file named holds SOURCE's bytes, or a prefix of them where its
/// copy was cut); every file left holds SOURCE's bytes, a prefix of them, or (one the run
/// never began) its old bytes, never named then; and at most one file per worker was cut
/// short, as cp cuts at most its one file (README's Guarantees, "Signals").
#[test]
fn a_sigint_at_random_points_leaves_only_what_began() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    // Files up to 512 KiB: the walk runs ahead of the workers, so many files are queued
    // and not yet begun when the signal comes; few to a directory, so that the walk has made
    // directories past the last file begun.
    let tree = random_tree(&src, 5, 150, 600, 512 << 10);
    let old = |dir: &Path| {
        let dst = dir.join("dst");
        for d in &tree.dirs {
            fs::create_dir_all(dst.join(d)).unwrap();
        }
        for f in &tree.files {
            fs::write(dst.join(f), b"old\n").unwrap();
        }
    };
    // cp's lines for the whole tree, into a new DEST and over an old one.
    let whole = |before: Before<'_>| {
        let setup = Setup {
            before,
            ..Setup::default()
        };
        let gnu = run(Copier::Gnu, &src, &["-rvT"], &setup);
        assert!(gnu.status.success(), "{}", gnu.stderr);
        gnu.stdout.lines().map(str::to_owned).collect::<Vec<_>>()
    };
    let (into_new, over_old) = (whole(None), whole(Some(&old)));
    let gnu = interrupted(Copier::Gnu, &src, None, 5, Duration::ZERO);
    assert_eq!(gnu.status.signal(), Some(libc::SIGINT), "GNU cp");
    let mut rng = StdRng::seed_from_u64(5);
    for round in 0..8 {
        let copier = OURS[round % OURS.len()];
        // Mostly into a new DEST, where a DEST made for a file never begun must go again.
        let existing = round >= 6;
        let (before, cps): (Before<'_>, _) = match existing {
            true => (Some(&old), &over_old),
            false => (None, &into_new),
        };
        let lines = rng.gen_range(1..cps.len() * 3 / 5);
        let delay = Duration::from_micros(rng.gen_range(0..3000));
        let what =
            format!("{copier:?}, DEST there: {existing}, SIGINT {delay:?} after line {lines}");
        let stopped = interrupted(copier, &src, before, lines, delay);
        assert_eq!(stopped.status.signal(), Some(libc::SIGINT), "{what}");
        assert_eq!(stopped.stderr, "", "{what}");
        let said = &stopped.stdout;
        assert!(said.len() < cps.len(), "{what}: not interrupted");
        if let Some(diff) = first_difference(said, &cps[..said.len()]) {
            panic!("{what}: -v lines are not cp's first lines: {diff}");
        }
        let dst = stopped.dir.path().join("dst");
        let named: std::collections::HashSet<PathBuf> =
            said.iter().map(|l| named_dest(l)).collect();
        let mut wrong = Vec::new();
        for n in &named {
            if fs::symlink_metadata(dst.join(n)).is_err() {
                wrong.push(format!("{}: named, not there", n.display()));
            }
        }
        let mut cut = Vec::new();
        for f in &tree.files {
            let Ok(left) = fs::read(dst.join(f)) else {
                continue;
            };
            // Made by this run, so begun: cp names a file before it begins it.
            if !existing && !named.contains(f) {
                wrong.push(format!("{}: there, never named", f.display()));
            }
            let want = fs::read(src.join(f)).unwrap();
            if left == want {
                continue;
            }
            if existing && left == b"old\n" {
                if named.contains(f) {
                    wrong.push(format!("{}: named, left untouched", f.display()));
                }
            } else if want.starts_with(&left) {
                cut.push(format!(
                    "{} ({} of {} bytes)",
                    f.display(),
                    left.len(),
                    want.len()
                ));
            } else {
                wrong.push(format!(
                    "{}: {} bytes, not SOURCE's",
                    f.display(),
                    left.len()
                ));
            }
        }
        assert!(wrong.is_empty(), "{what}: {wrong:#?}");
        assert!(
            cut.len() <= WORKERS,
            "{what}: {} files cut short: {cut:#?}",
            cut.len()
        );
    }
}
