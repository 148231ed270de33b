//! One cp invocation over MPI ranks: the binary built with `--features mpi`, started by
//! `mpirun -n 4` (as root: `--allow-run-as-root --oversubscribe`), compared byte for byte and
//! attribute for attribute with the same command run as one process and with GNU cp.
//!
//! Run with `cargo test --features mpi --test it -- mpi::` on a machine with Open MPI (Debian:
//! openmpi-bin, libopenmpi-dev; libclang-dev to build the bindings).

mod source_changes;
mod whole_files;

use crate::support::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

const CHUNK: usize = 64 << 10;
/// Bytes per part with `--chunk-size 64K --streams 2`: chunk x streams x 2.
const PART: usize = 4 * CHUNK;
/// The engine flags every run here uses, so that files of a few MiB have many parts.
const SMALL_PARTS: [&str; 4] = ["--chunk-size", "64K", "--streams", "2"];

/// `mpirun` with `ranks` processes; each rank's extra environment from `env_of(rank)`
/// (one app context per rank, so the fake GPU's report and faults can differ by rank).
fn mpirun(
    ranks: usize,
    dir: &Path,
    env: &[(&str, String)],
    env_of: impl Fn(usize) -> Vec<(String, String)>,
    args: &[&str],
) -> Output {
    mpirun_with(ranks, dir, env, |r| (vec![], env_of(r)), args)
}

/// [`mpirun`] where `of(rank)` also gives a command each rank is started under (its
/// arguments, then the program's).
fn mpirun_with(
    ranks: usize,
    dir: &Path,
    env: &[(&str, String)],
    of: impl Fn(usize) -> (Vec<String>, Vec<(String, String)>),
    args: &[&str],
) -> Output {
    // Each rank's stderr also goes to a file of its own: mpirun forwards the ranks' output
    // in reads of up to 4 KiB, so a long burst from one rank can be cut mid-line by another
    // rank's lines; the files keep each rank's lines whole. Its stderr is theirs, rank by
    // rank.
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let files = dir.join(".ompi-session").join(format!("output-{run}"));
    let mut out = mpirun_command(ranks, dir, env, of, args, Some(&files))
        .output()
        .expect("mpirun (Open MPI) must be installed for the mpi feature's tests");
    let per_rank: Vec<Vec<u8>> = (0..ranks)
        .map(|r| fs::read(files.join(format!("1/rank.{r}/stderr"))).unwrap_or_default())
        .collect();
    if per_rank.iter().any(|e| !e.is_empty()) || out.stderr.is_empty() {
        out.stderr = per_rank.concat();
    }
    out
}

/// The `mpirun` command [`mpirun_with`] runs, not yet started; with `output_files`, each
/// rank's output is also written under that directory (`1/rank.N/stderr`).
fn mpirun_command(
    ranks: usize,
    dir: &Path,
    env: &[(&str, String)],
    of: impl Fn(usize) -> (Vec<String>, Vec<(String, String)>),
    args: &[&str],
    output_files: Option<&Path>,
) -> Command {
    // Each run keeps its Open MPI session files in the test's directory: under the shared
    // /tmp/ompi.HOST.UID, one run ending removes the directory another is starting in
    // ("orte_session_dir failed"), when the tests run at once.
    let session = dir.join(".ompi-session");
    fs::create_dir_all(&session).unwrap();
    let mut cmd = Command::new("mpirun");
    // The ranks (local processes) inherit mpirun's environment.
    hermetic(&mut cmd)
        .args(["--allow-run-as-root", "--oversubscribe"])
        .env("OMPI_MCA_orte_tmpdir_base", &session)
        .current_dir(dir)
        .env_remove("AISCP_FAKE_GPU_FAULTS")
        .env_remove("AISCP_BACKEND");
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(files) = output_files {
        cmd.arg("--output-filename").arg(files);
    }
    for rank in 0..ranks {
        if rank > 0 {
            cmd.arg(":");
        }
        let (under, env_of_rank) = of(rank);
        cmd.args(["-n", "1"]).args(under).arg("env");
        for (k, v) in env_of_rank {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.arg(program()).args(args);
    }
    cmd
}

/// The same command as one process.
fn alone(dir: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    let mut cmd = aiscp_command();
    cmd.current_dir(dir)
        .env_remove("AISCP_FAKE_GPU_FAULTS")
        .env_remove("AISCP_BACKEND");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(args).output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The ranks' stderr without what mpirun adds when a rank exits with a status other than 0
/// (a banner between lines of dashes).
fn ranks_stderr(out: &Output) -> String {
    let all = text(&out.stderr);
    match all.find("\n-----") {
        Some(i) => all[..=i].to_owned(),
        None => all,
    }
}

/// A tree of random files: several larger than many parts (one with an unaligned tail,
/// one sparse), small and empty files, nested directories with their own modes, a symlink.
fn tree(root: &Path) {
    fs::create_dir_all(root.join("a/b/c")).unwrap();
    fs::create_dir_all(root.join("empty")).unwrap();
    write_random(&root.join("big"), 37 * PART + 4097, 1);
    write_random(&root.join("a/exact"), 8 * PART, 2);
    write_random(&root.join("a/b/just-over"), PART + 1, 3);
    write_sparse(
        &root.join("a/b/c/sparse"),
        (20 * PART) as u64,
        &[
            (3 * PART as u64, &random_bytes(5000, 4)),
            ((15 * PART + 77) as u64, &[7; 9000]),
        ],
    );
    for i in 0..6 {
        write_random(&root.join(format!("a/small{i}")), i * 1000, 10 + i as u64);
    }
    symlink("big", root.join("a/link")).unwrap();
    fs::set_permissions(root.join("a/b"), fs::Permissions::from_mode(0o750)).unwrap();
    fs::set_permissions(root.join("a/exact"), fs::Permissions::from_mode(0o640)).unwrap();
    // Old times, so a directory whose time is set before its contents are written shows.
    let out = Command::new("touch")
        .args(["-d", "2001-02-03 04:05:06.789"])
        .args(["a", "a/b", "a/b/c", "empty", "big", "a/exact"])
        .current_dir(root)
        .status()
        .unwrap();
    assert!(out.success());
}

/// Each of the 4 ranks' fake GPU reports (`reportN` in `dir`) shows nothing leaked or misused.
fn assert_rank_reports_clean(dir: &Path) {
    for r in 0..4 {
        Report::read(&dir.join(format!("report{r}"))).assert_clean();
    }
}

fn host() -> Vec<(&'static str, String)> {
    vec![("AISCP_BACKEND", "host".to_owned())]
}

fn fake_gpu(dir: &Path) -> Vec<(&'static str, String)> {
    Backend::FakeGpu.env(&dir.join("unused-report"))
}

#[test]
fn a_tree_matches_one_process_and_gnu_cp() {
    for backend in ["host", "fake-gpu"] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        tree(&dir.join("src"));
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
        assert!(ranks.status.success(), "{backend}: {}", text(&ranks.stderr));
        let one = alone(dir, &env, &[&args[..], &["src", "one"]].concat());
        assert!(one.status.success(), "{}", text(&one.stderr));
        let gnu = Command::new("cp")
            .args(["-a", "src", "gnu"])
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(gnu.success());
        let want = listing_with_times(&dir.join("gnu"));
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
        // The big file went to several ranks.
        let err = text(&ranks.stderr);
        let line = err
            .lines()
            .find(|l| l.contains(": debug: 'src/big': 38 parts of 262144 bytes ("))
            .unwrap_or_else(|| panic!("{err}"));
        assert!(line.matches("rank ").count() >= 3, "{line}");
        if backend == "fake-gpu" {
            assert_rank_reports_clean(dir);
        }
    }
}

#[test]
fn many_operands_into_a_directory() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let mut names = Vec::new();
    for i in 0..7 {
        let name = format!("f{i}");
        write_random(&dir.join(&name), i * 3 * PART + i * 999, 100 + i as u64);
        names.push(name);
    }
    fs::create_dir(dir.join("ranks")).unwrap();
    fs::create_dir(dir.join("gnu")).unwrap();
    let mut args: Vec<&str> = SMALL_PARTS.to_vec();
    args.push("-v");
    args.extend(names.iter().map(String::as_str));
    let out = mpirun(
        4,
        dir,
        &host(),
        |_| vec![],
        &[&args[..], &["ranks"]].concat(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let gnu = Command::new("cp")
        .arg("-v")
        .args(&names)
        .arg("gnu")
        .current_dir(dir)
        .output()
        .unwrap();
    // Same files, and -v's lines in cp's order, from rank 0 alone.
    assert_eq!(listing(&dir.join("ranks")), listing(&dir.join("gnu")));
    assert_eq!(
        text(&out.stdout),
        text(&gnu.stdout).replace("'gnu/", "'ranks/")
    );
}

/// --sums under ranks: a large file cut in parts over the ranks and small files in flight on
/// them, each listed with the digest of DEST as written, in cp's order.
#[test]
fn digests_of_files_copied_by_ranks_are_dest_s() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    fs::create_dir(dir.join("src")).unwrap();
    let sizes = [61 * PART + 12345, 0, 1025, 3 * CHUNK + 1, PART];
    for (i, len) in sizes.into_iter().enumerate() {
        write_random(&dir.join(format!("src/f{i}")), len, 40 + i as u64);
    }
    let mut args = SMALL_PARTS.to_vec();
    args.extend(["-r", "--sums", "src", "d"]);
    let out = mpirun(4, dir, &host(), |_| vec![], &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut names = Vec::new();
    for line in text(&out.stdout).lines() {
        let (digest, name) = line.split_once("  ").unwrap();
        let bytes = fs::read(dir.join(name)).unwrap();
        assert_eq!(digest, blake3::hash(&bytes).to_hex().as_str(), "{name}");
        names.push(name.to_owned());
    }
    let mut want: Vec<String> = (0..sizes.len()).map(|i| format!("d/f{i}")).collect();
    want.sort();
    names.sort();
    assert_eq!(names, want);
}

#[test]
fn one_large_file_by_many_ranks() {
    for backend in ["host", "fake-gpu"] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let data = write_random(&dir.join("s"), 61 * PART + 12345, 7);
        let env = if backend == "host" {
            host()
        } else {
            fake_gpu(dir)
        };
        let mut args = SMALL_PARTS.to_vec();
        args.extend(["--debug", "s", "d"]);
        let out = mpirun(
            4,
            dir,
            &env,
            |r| vec![("AISCP_FAKE_GPU_REPORT".into(), format!("report{r}"))],
            &args,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_same_bytes(&fs::read(dir.join("d")).unwrap(), &data, backend);
        let err = text(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.contains("'s': 62 parts"))
            .unwrap_or_else(|| panic!("{err}"));
        for r in 0..4 {
            assert!(line.contains(&format!("rank {r}: ")), "{line}");
        }
        if backend == "fake-gpu" {
            assert_rank_reports_clean(dir);
        }
    }
}

/// A large file cut to an unaligned size inside its parts, or grown, after rank 0 opened
/// it: the ranks copy the parts they were given as far as SOURCE goes, and rank 0 ends the
/// file as one process does (DEST is SOURCE as changed, never padded to the size at open).
#[test]
fn a_file_changed_while_its_parts_are_copied_ends_where_reading_ended() {
    for backend in ["host", "fake-gpu"] {
        for new_len in [0, 20 * PART + 777, 61 * PART + 12345 + 3 * PART + 1] {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path();
            let old_len = 61 * PART + 12345;
            write_random(&dir.join("s"), old_len, 9);
            let env = if backend == "host" {
                host()
            } else {
                fake_gpu(dir)
            };
            let mut args = SMALL_PARTS.to_vec();
            args.extend(["s", "d"]);
            let cmd = mpirun_command(
                4,
                dir,
                &env,
                |r| {
                    let report = ("AISCP_FAKE_GPU_REPORT".into(), format!("report{r}"));
                    (vec![], vec![report])
                },
                &args,
                None,
            );
            let out = paused_at(cmd, "dest-open", dir, || {
                let f = fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("s"))
                    .unwrap();
                if new_len > old_len {
                    let more = random_bytes(new_len - old_len, 10);
                    std::os::unix::fs::FileExt::write_all_at(&f, &more, old_len as u64).unwrap();
                } else {
                    f.set_len(new_len as u64).unwrap();
                }
            });
            let what = format!("{backend}, {old_len} -> {new_len}");
            assert!(out.status.success(), "{what}: {}", text(&out.stderr));
            assert_same_bytes(
                &fs::read(dir.join("d")).unwrap(),
                &fs::read(dir.join("s")).unwrap(),
                &what,
            );
            if backend == "fake-gpu" {
                assert_rank_reports_clean(dir);
            }
        }
    }
}

/// Ranks 1-3 cannot read the large file's parts through the GPU (every offset a part other
/// than the first starts at); rank 0 can. The parts they take fail, the failure is printed
/// once by rank 0 in cp's words, the rest of the run (the small file, which a rank copies
/// whole) goes on, and the exit status is 1, as when one process meets that read error.
#[test]
fn a_rank_failing_a_file_is_reported_by_rank_0_and_the_run_goes_on() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    fs::create_dir(dir.join("src")).unwrap();
    let big = write_random(&dir.join("src/big"), 30 * PART + 5, 1);
    let small = write_random(&dir.join("src/small"), 5000, 2);
    let mut args = SMALL_PARTS.to_vec();
    args.extend(["-r", "src", "dst"]);
    let out = mpirun(
        4,
        dir,
        &fake_gpu(dir),
        |r| {
            let mut env = vec![("AISCP_FAKE_GPU_REPORT".into(), format!("report{r}"))];
            if r > 0 {
                let faults: Vec<String> = (1..=30)
                    .map(|k| format!("read@{}*=EIO", k * PART))
                    .collect();
                env.push(("AISCP_FAKE_GPU_FAULTS".into(), faults.join(";")));
            }
            env
        },
        &args,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        ranks_stderr(&out),
        format!(
            "{}: error reading 'src/big': Input/output error\n",
            program().display()
        )
    );
    // DST holds no more than the parts before the failure.
    let got = fs::read(dir.join("dst/big")).unwrap();
    assert!(
        got.len() < big.len() && got.len() % PART == 0,
        "{}",
        got.len()
    );
    assert_same_bytes(&got, &big[..got.len()], "prefix");
    assert_same_bytes(&fs::read(dir.join("dst/small")).unwrap(), &small, "small");
    assert_rank_reports_clean(dir);
}

#[test]
fn interactive_is_refused_under_several_ranks() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    write_random(&dir.join("a"), 10, 1);
    let old = write_random(&dir.join("b"), 20, 2);
    let out = mpirun(2, dir, &host(), |_| vec![], &["-i", "a", "b"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        ranks_stderr(&out),
        format!(
            "{}: -i (--interactive) cannot ask questions under 2 MPI ranks; \
             run aiscp as one process to be asked\n",
            program().display()
        )
    );
    assert_eq!(fs::read(dir.join("b")).unwrap(), old);
}

/// Tasks that srun started without an MPI plugin would each copy everything: refused.
#[test]
fn slurm_tasks_without_mpi_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    write_random(&dir.join("a"), 10, 1);
    let mut env = host();
    env.push(("SLURM_STEP_NUM_TASKS", "4".to_owned()));
    let out = alone(dir, &env, &["a", "b"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "{}: started as one of 4 Slurm tasks without MPI (no PMI or PMIx); run srun \
             with --mpi=pmix (or pmi2), or as one task\n",
            program().display()
        )
    );
    assert!(!dir.join("b").exists());
    // One task is one process.
    env.pop();
    env.push(("SLURM_STEP_NUM_TASKS", "1".to_owned()));
    assert!(alone(dir, &env, &["a", "b"]).status.success());
}

/// One rank is one process: the same messages and exit status as without mpirun.
#[test]
fn one_rank_is_one_process() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let data = write_random(&dir.join("a"), 20 * PART, 1);
    for (args, status) in [(["-v", "a", "b"], 0), (["-v", "a", "nodir/b"], 1)] {
        let ranks = mpirun(1, dir, &host(), |_| vec![], &args);
        if status == 0 {
            assert_same_bytes(&fs::read(dir.join("b")).unwrap(), &data, "b");
            fs::remove_file(dir.join("b")).unwrap();
        }
        let one = alone(dir, &host(), &args);
        assert_eq!(one.status.code(), Some(status), "{}", text(&one.stderr));
        assert_eq!(ranks.status.code(), Some(status));
        assert_eq!(text(&ranks.stdout), text(&one.stdout));
        assert_eq!(ranks_stderr(&ranks), text(&one.stderr));
    }
}

/// Each rank stages through its node-local rank modulo the node's GPUs, unless --gpu says
/// which: the fake library's per-rank report shows where each rank allocated.
#[test]
fn each_rank_takes_its_local_gpu_unless_told() {
    for (gpu, want) in [(None, [0, 1, 0, 1]), (Some("1"), [1, 1, 1, 1])] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path();
        let data = write_random(&dir.join("s"), 80 * PART + 3, 9);
        let mut env = fake_gpu(dir);
        env.push(("AISCP_FAKE_GPU_DEVICES", "2".to_owned()));
        let mut args = SMALL_PARTS.to_vec();
        if let Some(g) = gpu {
            args.extend(["--gpu", g]);
        }
        args.extend(["--debug", "s", "d"]);
        let out = mpirun(
            4,
            dir,
            &env,
            |r| vec![("AISCP_FAKE_GPU_REPORT".into(), format!("report{r}"))],
            &args,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_same_bytes(&fs::read(dir.join("d")).unwrap(), &data, "d");
        let err = text(&out.stderr);
        let line = err
            .lines()
            .find(|l| l.contains("'s': 81 parts"))
            .expect(&err);
        for (r, &device) in want.iter().enumerate() {
            // Only ranks that copied a part started their engine.
            if !line.contains(&format!("rank {r}: ")) {
                continue;
            }
            let report = Report::read(&dir.join(format!("report{r}")));
            let mallocs = &report.devices.mallocs;
            assert!(
                mallocs[device] > 0 && mallocs[1 - device] == 0,
                "rank {r} ({gpu:?}): {mallocs:?}"
            );
            report.assert_clean();
        }
        assert!(line.matches("rank ").count() >= 3, "{line}");
    }
}

/// A rank whose backend cannot start ends the run before anything is copied, as one process
/// does, naming the rank.
#[test]
fn a_rank_without_its_backend_ends_the_run_before_dest_is_touched() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    write_random(&dir.join("s"), 9 * PART, 1);
    let missing = dir.join("none.so").display().to_string();
    let mut args = SMALL_PARTS.to_vec();
    args.extend(["s", "d"]);
    let out = mpirun(
        3,
        dir,
        &fake_gpu(dir),
        |r| match r {
            0 => vec![],
            _ => vec![("AISCP_HIPFILE_LIB".into(), missing.clone())],
        },
        &args,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        ranks_stderr(&out),
        format!(
            "{}: rank 1: hipFile: libhipfile not found (searched: {missing})\n",
            program().display()
        )
    );
    assert!(!dir.join("d").exists());
}
