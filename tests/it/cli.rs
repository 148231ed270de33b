//! The CLI beyond parity: where aiscp differs from GNU cp 9.1 on purpose, --atomic, --fsync,
//! the program name in messages, and the generated man page and completions.

use crate::support::{aiscp_assert, hermetic, program, skip};
use assert_cmd::Command;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn aiscp(dir: &Path) -> Command {
    let mut c = aiscp_assert();
    c.current_dir(dir)
        .env("AISCP_BACKEND", "host")
        .env("LC_ALL", "C.UTF-8");
    c
}

fn setup() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("a"), "new\n").unwrap();
    std::fs::write(t.path().join("b"), "old\n").unwrap();
    t
}

/// GNU 9.1 lacks --update=WHEN (newer GNU has it): aiscp follows newer GNU's documentation.
#[test]
fn update_none_fail_differs_from_9_1_on_purpose() {
    let t = setup();
    aiscp(t.path())
        .args(["--update=none-fail", "a", "b"])
        .assert()
        .code(1)
        .stdout("")
        .stderr(format!("{}: not replacing 'b'\n", program().display()));
    assert_eq!(
        std::fs::read_to_string(t.path().join("b")).unwrap(),
        "old\n"
    );
    // GNU 9.1 refuses the option altogether.
    let gnu = std::process::Command::new("cp")
        .args(["--update=none-fail", "a", "b"])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(gnu.status.code(), Some(1));
}

#[test]
fn update_none_skips_and_update_all_overwrites() {
    let t = setup();
    aiscp(t.path())
        .args(["--update=none", "a", "b"])
        .assert()
        .code(0);
    assert_eq!(
        std::fs::read_to_string(t.path().join("b")).unwrap(),
        "old\n"
    );
    aiscp(t.path())
        .args(["--update=all", "a", "b"])
        .assert()
        .code(0);
    assert_eq!(
        std::fs::read_to_string(t.path().join("b")).unwrap(),
        "new\n"
    );
}

/// Data must pass through the GPU, so no clone is ever made: refused on every filesystem,
/// even where GNU cp could clone (btrfs, XFS).
#[test]
fn reflink_always_is_refused_everywhere() {
    let t = setup();
    aiscp(t.path())
        .args(["--reflink=always", "a", "c"])
        .assert()
        .code(1)
        .stderr(format!(
            "{}: failed to clone 'c' from 'a': Operation not supported\n",
            program().display()
        ));
}

#[test]
fn program_name_is_argv0_as_invoked() {
    let t = setup();
    aiscp(t.path())
        .arg("missing")
        .arg("x")
        .assert()
        .code(1)
        .stderr(format!(
            "{}: cannot stat 'missing': No such file or directory\n",
            program().display()
        ));
}

/// `--update=older` is newer GNU's name for plain `-u`: it replaces only a DEST older than
/// SOURCE, exactly as cp 9.1's `-u` does (the oracle); 9.1 itself refuses the spelling.
#[test]
fn update_older_is_cp_u() {
    for dest_is_older in [true, false] {
        let run = |prog: &str, args: &[&str]| {
            let t = setup();
            let (old, new) = (filetime(1_000_000_000), filetime(1_500_000_000));
            let (a_time, b_time) = if dest_is_older {
                (new, old)
            } else {
                (old, new)
            };
            set_mtime(&t.path().join("a"), a_time);
            set_mtime(&t.path().join("b"), b_time);
            let status = if prog == "aiscp" {
                aiscp(t.path()).args(args).output().unwrap().status
            } else {
                std::process::Command::new(prog)
                    .args(args)
                    .current_dir(t.path())
                    .output()
                    .unwrap()
                    .status
            };
            let b = std::fs::read_to_string(t.path().join("b")).unwrap();
            (status.code(), b)
        };
        let ours = run("aiscp", &["--update=older", "a", "b"]);
        let gnu = run("cp", &["-u", "a", "b"]);
        assert_eq!(ours, gnu, "DEST older: {dest_is_older}");
        let want = if dest_is_older { "new\n" } else { "old\n" };
        assert_eq!(ours, (Some(0), want.to_owned()));
    }
    let t = setup();
    let gnu = std::process::Command::new("cp")
        .args(["--update=older", "a", "b"])
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(gnu.status.code(), Some(1), "cp 9.1 refuses --update=WHEN");
}

fn filetime(secs: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: secs,
        tv_nsec: 0,
    }
}

fn set_mtime(path: &Path, t: libc::timespec) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid path and a two-element timespec array.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0) };
    assert_eq!(rc, 0);
}

/// `-h` and `-V` are clap's short forms of `--help` (the summary) and `--version` (the
/// same text); both exit 0. cp 9.1 has neither and refuses them.
#[test]
fn short_help_and_version_are_aiscps_own() {
    let t = setup();
    let text = |arg: &str| {
        let out = aiscp(t.path()).arg(arg).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{arg}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(
        text("-h").contains("Usage: aiscp [OPTION]..."),
        "{}",
        text("-h")
    );
    assert_eq!(text("-V"), text("--version"));
    for short in ["-h", "-V"] {
        let gnu = std::process::Command::new("cp")
            .arg(short)
            .current_dir(t.path())
            .output()
            .unwrap();
        assert_eq!(gnu.status.code(), Some(1), "cp 9.1 accepted {short}");
    }
}

#[test]
fn help_and_version_exit_zero() {
    let t = setup();
    aiscp(t.path()).arg("--help").assert().code(0);
    aiscp(t.path()).arg("--version").assert().code(0);
}

#[test]
fn atomic_replaces_existing_keeping_its_mode() {
    let t = setup();
    let b = t.path().join("b");
    std::fs::set_permissions(&b, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = std::fs::metadata(&b).unwrap().ino();
    aiscp(t.path())
        .args(["--atomic", "a", "b"])
        .assert()
        .code(0);
    let m = std::fs::metadata(&b).unwrap();
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "new\n");
    assert_eq!(m.mode() & 0o7777, 0o600);
    assert_ne!(m.ino(), before, "--atomic renames a new file over DEST");
    let names: Vec<_> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "temporary left behind: {names:?}");
}

#[test]
fn atomic_new_file_gets_source_mode_under_umask() {
    let t = setup();
    let a = t.path().join("a");
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o4755)).unwrap();
    aiscp(t.path())
        .args(["--atomic", "a", "c"])
        .assert()
        .code(0);
    let m = std::fs::metadata(t.path().join("c")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o755 & !current_umask());
}

/// --atomic makes a new file with the same mode the plain path gives it, --no-preserve=mode
/// included (0666 less the umask, not SOURCE's bits).
#[test]
fn atomic_new_file_mode_matches_the_plain_copy() {
    let t = setup();
    std::fs::set_permissions(t.path().join("a"), std::fs::Permissions::from_mode(0o700)).unwrap();
    for extra in [&[][..], &["--no-preserve=mode"][..]] {
        for (atomic, out) in [(false, "plain"), (true, "atomic")] {
            let mut cmd = aiscp(t.path());
            if atomic {
                cmd.arg("--atomic");
            }
            cmd.args(extra).args(["a", out]).assert().code(0);
        }
        let mode = |n: &str| std::fs::metadata(t.path().join(n)).unwrap().mode() & 0o7777;
        assert_eq!(mode("atomic"), mode("plain"), "{extra:?}");
        std::fs::remove_file(t.path().join("plain")).unwrap();
        std::fs::remove_file(t.path().join("atomic")).unwrap();
    }
}

/// This process's umask, read without setting it (umask(2) can only be read by changing it,
/// which would race with the other tests of this binary creating files).
fn current_umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let umask = status
        .lines()
        .find_map(|l| l.strip_prefix("Umask:"))
        .expect("Umask line in /proc/self/status");
    u32::from_str_radix(umask.trim(), 8).unwrap()
}

/// A read error mid-copy (/proc/self/mem fails at offset 0) leaves no temporary and no DEST.
#[test]
fn atomic_failure_removes_the_temporary() {
    let t = setup();
    std::fs::create_dir(t.path().join("d")).unwrap();
    aiscp(t.path())
        .args(["--atomic", "/proc/self/mem", "d/x"])
        .assert()
        .code(1);
    let left: Vec<_> = std::fs::read_dir(t.path().join("d")).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn fsync_copies_new_and_existing() {
    let t = setup();
    aiscp(t.path()).args(["--fsync", "a", "b"]).assert().code(0);
    aiscp(t.path()).args(["--fsync", "a", "c"]).assert().code(0);
    for n in ["b", "c"] {
        assert_eq!(std::fs::read_to_string(t.path().join(n)).unwrap(), "new\n");
    }
}

/// The committed man page and completions are what the code generates now.
#[test]
fn generated_files_are_current() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (what, file) in [
        ("man", "man/aiscp.1"),
        ("bash", "completions/aiscp.bash"),
        ("zsh", "completions/_aiscp"),
        ("fish", "completions/aiscp.fish"),
        ("elvish", "completions/aiscp.elv"),
        ("powershell", "completions/_aiscp.ps1"),
    ] {
        let out = aiscp_assert().args(["--generate", what]).output().unwrap();
        assert!(out.status.success(), "--generate {what} failed");
        let committed = std::fs::read(root.join(file)).unwrap_or_default();
        assert!(
            committed == out.stdout,
            "{file} is stale: run `aiscp --generate {what} > {file}` (scripts/regenerate.sh)"
        );
    }
}

/// `--generate` takes unique abbreviations, like every GNU-style choice.
#[test]
fn generate_accepts_abbreviations() {
    let gen = |what: &str| {
        let out = aiscp_assert().args(["--generate", what]).output().unwrap();
        assert!(out.status.success(), "--generate {what} failed");
        out.stdout
    };
    assert!(gen("m") == gen("man"), "--generate m is not the man page");
    assert!(gen("z") == gen("zsh"), "--generate z is not the zsh script");
}

#[test]
fn bash_completion_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg("source completions/aiscp.bash && complete -p aiscp")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("-F _aiscp aiscp"));
}

#[test]
fn man_page_renders() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let Ok(out) = std::process::Command::new("man")
        .args(["-l", "man/aiscp.1"])
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .current_dir(root)
        .output()
    else {
        skip("no man", "man is not installed");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for section in [
        "EXIT STATUS",
        "ENVIRONMENT",
        "EXAMPLES",
        "SEE ALSO",
        "AISCP_BACKEND",
    ] {
        assert!(text.contains(section), "man page lacks {section}");
    }
}

/// getopt gives an option that takes a value the next word, dash or not: `--streams -1` is a
/// bad stream count, not an unknown option `-1`.
#[test]
fn staging_values_may_start_with_a_dash() {
    let t = setup();
    let bin = program().display().to_string();
    for (opt, why) in [
        ("--streams", "invalid digit found in string"),
        (
            "--gpu",
            "'-1' is not a GPU index (use N, a list such as 0,2,3, all or auto)",
        ),
        ("--chunk-size", "'-1' is not a size"),
    ] {
        aiscp(t.path())
            .args([opt, "-1", "a", "b"])
            .assert()
            .code(1)
            .stderr(format!(
                "{bin}: invalid argument '-1' for '{opt}': {why}\n\
                 Try '{bin} --help' for more information.\n"
            ));
    }
}

/// `-p` over an existing set-user-ID DEST: the new content never carries the bit cp 9.1
/// leaves on it (GNU sets the mode through its ACL path); aiscp gives SOURCE's mode.
#[test]
fn preserve_mode_over_a_setuid_dest_drops_the_bit_on_purpose() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(d.join("a"), b"new\n").unwrap();
    std::fs::set_permissions(d.join("a"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(d.join("z"), b"old setuid program\n").unwrap();
    std::fs::set_permissions(d.join("z"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    aiscp(d).args(["-p", "a", "z"]).assert().success();
    assert_eq!(
        std::fs::metadata(d.join("z")).unwrap().mode() & 0o7777,
        0o644
    );
    assert_eq!(std::fs::read(d.join("z")).unwrap(), b"new\n");
}

/// `-b d/a dl/a` with `dl` a symlink to `d`: one file under two names. cp 9.1 renames it to
/// its backup name and then cannot open SOURCE; aiscp refuses before touching anything.
#[test]
fn backup_onto_the_source_through_a_symlinked_directory_is_refused_on_purpose() {
    let dir = setup();
    let d = dir.path();
    std::fs::create_dir(d.join("d")).unwrap();
    std::fs::write(d.join("d/a"), b"precious\n").unwrap();
    std::os::unix::fs::symlink("d", d.join("dl")).unwrap();
    let out = aiscp(d).args(["-b", "d/a", "dl/a"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("'d/a' and 'dl/a' are the same file"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(d.join("d/a")).unwrap(), b"precious\n");
    assert!(!d.join("d/a~").exists());
}

/// One name per run: warnings, --debug lines (the engine's and the cp layer's), progress
/// lines and errors all start with argv[0] as invoked, as GNU's messages do.
#[test]
fn one_program_name_in_every_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a"), vec![7u8; 70_000]).unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    let renamed = dir.path().join("mycp");
    std::os::unix::fs::symlink(program(), &renamed).unwrap();
    for (env_backend, extra) in [("auto", &["--gpu", "0"][..]), ("host", &["--atomic"][..])] {
        let out = hermetic(&mut std::process::Command::new(&renamed))
            .current_dir(dir.path())
            .env("AISCP_BACKEND", env_backend)
            .env("LC_ALL", "C.UTF-8")
            .env_remove("AISCP_HIPFILE_LIB")
            .env_remove("AISCP_CUFILE_LIB")
            .args(["--debug", "--progress"])
            .args(extra)
            .args(["a", "missing", "d/"])
            .output()
            .unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let prefix = format!("{}: ", renamed.display());
        assert!(stderr.lines().count() >= 4, "{stderr}");
        for line in stderr.lines() {
            assert!(
                line.starts_with(&prefix),
                "{env_backend}: {line:?} in {stderr}"
            );
        }
        // Sizes in binary units, as docs/USAGE.md promises, lengths also exact (host
        // memory's default chunk: both runs stage there).
        assert!(
            stderr.contains(": debug: +")
                && stderr
                    .contains("s chunk 16.00 MiB, 4 slot(s): up to 64.00 MiB of staging memory"),
            "{stderr}"
        );
        assert!(
            stderr.contains("'d/a': 68.36 KiB (70000 bytes) in "),
            "{stderr}"
        );
    }
}
