//! The documentation matches the binary: every option `--help` lists is in the man page and
//! in every completion script, every environment variable the code reads is in the man page
//! and README, and the man page states the usage forms and every exit status.

use crate::support::{aiscp_command, skip};
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The options `--help` lists: (short letters, long names) from each option's header line.
fn help_options() -> (BTreeSet<char>, BTreeSet<String>) {
    let out = aiscp_command().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let (mut shorts, mut longs) = (BTreeSet::new(), BTreeSet::new());
    for line in help.lines() {
        let head = line.trim_start();
        if !head.starts_with('-') || line.len() - head.len() > 6 {
            continue; // not an option header (descriptions are indented further)
        }
        for word in head.split([' ', ',', '[', '=']) {
            if let Some(long) = word.strip_prefix("--") {
                if !long.is_empty() {
                    longs.insert(long.to_owned());
                }
            } else if let Some(short) = word.strip_prefix('-') {
                if short.chars().count() == 1 {
                    shorts.insert(short.chars().next().unwrap());
                }
            }
        }
    }
    // Aliases shown as "[alias: -r]" on their own line.
    for line in help.lines() {
        if let Some(rest) = line.trim().strip_prefix("[alias: -") {
            shorts.insert(rest.chars().next().unwrap());
        }
    }
    (shorts, longs)
}

#[test]
fn every_option_in_help_is_in_the_man_page_and_completions() {
    let (shorts, longs) = help_options();
    // The options cp 9.1 lists must all be there (-r among them), plus our own.
    for cp in [
        "recursive",
        "archive",
        "no-clobber",
        "target-directory",
        "reflink",
        "sparse",
    ] {
        assert!(longs.contains(cp), "--help lacks --{cp}: {longs:?}");
    }
    for c in [
        'r', 'R', 'a', 'b', 'd', 'f', 'i', 'H', 'l', 'L', 'n', 'P', 'p', 's', 'S', 't', 'T', 'u',
        'v', 'x', 'Z',
    ] {
        assert!(shorts.contains(&c), "--help lacks -{c}: {shorts:?}");
    }
    for own in ["stats", "progress", "backend", "route", "gpu"] {
        assert!(longs.contains(own), "--help lacks --{own}");
    }
    let man = read("man/aiscp.1");
    for long in &longs {
        let roff = format!("\\-\\-{}", long.replace('-', "\\-"));
        assert!(man.contains(&roff), "man page lacks --{long}");
    }
    for c in &shorts {
        assert!(
            man.contains(&format!("\\fB\\-{c}\\fR")),
            "man page lacks -{c}"
        );
    }
    for (file, spell) in [
        ("completions/aiscp.bash", "--{}"),
        ("completions/_aiscp", "--{}"),
        ("completions/aiscp.fish", "-l {}"),
        ("completions/aiscp.elv", "--{}"),
        ("completions/_aiscp.ps1", "'--{}'"),
    ] {
        let text = read(file);
        for long in &longs {
            let want = spell.replace("{}", long);
            assert!(text.contains(&want), "{file} lacks --{long}");
        }
    }
}

#[test]
fn man_page_has_usage_exit_status_and_environment() {
    let man = read("man/aiscp.1");
    let synopsis = man.split(".SH SYNOPSIS").nth(1).unwrap();
    let synopsis = synopsis.split(".SH").next().unwrap();
    assert!(
        synopsis.contains("\\fISOURCE\\fR \\fIDEST\\fR"),
        "{synopsis}"
    );
    assert!(synopsis.contains("\\fIDIRECTORY\\fR"), "{synopsis}");
    let exit = man.split(".SH \"EXIT STATUS\"").nth(1).unwrap();
    let exit = exit.split(".SH").next().unwrap();
    let help = aiscp_command().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    for (code, signal) in [
        ("0", ""),
        ("1", ""),
        ("130", "SIGINT"),
        ("143", "SIGTERM"),
        ("129", "SIGHUP"),
    ] {
        assert!(
            exit.contains(&format!(".B {code}\n")),
            "exit status {code}: {exit}"
        );
        if !signal.is_empty() {
            assert!(
                help.contains(&format!("{code} after {signal}")),
                "--help lacks exit status {code}: {help}"
            );
        }
    }
    // What --doctor and the warnings point to is in the page itself, not only the README.
    let trouble = man
        .split(".SH TROUBLESHOOTING")
        .nth(1)
        .expect("TROUBLESHOOTING");
    let trouble = trouble.split("\n.SH").next().unwrap();
    for needed in [
        "\\-\\-doctor",
        "\\fB\\-q\\fR",
        "AISCP_BACKEND=host",
        "/run/udev/data",
        "ID_FS_USAGE=filesystem",
        "O_DIRECT",
        "AISCP_CUFILE_LIB",
    ] {
        assert!(
            trouble.contains(needed),
            "TROUBLESHOOTING lacks {needed}: {trouble}"
        );
    }
    // Every AISCP_* variable the code reads, in the man page's ENVIRONMENT and the README.
    let mut vars = BTreeSet::new();
    for dir in ["src", "crates/hipfile-rs/src"] {
        collect_vars(&root().join(dir), &mut vars);
    }
    assert!(vars.contains("AISCP_ROUTE"), "{vars:?}");
    let env = man.split(".SH ENVIRONMENT").nth(1).unwrap();
    let env = env.split(".SH").next().unwrap();
    let readme = read("README.md");
    for v in &vars {
        assert!(
            env.contains(&format!(".B {v}\n")),
            "man page ENVIRONMENT lacks {v}"
        );
        assert!(readme.contains(v.as_str()), "README lacks {v}");
    }
    // The driver library, not the CUDA runtime.
    let cuda = env.split(".B AISCP_CUDA_LIB").nth(1).unwrap();
    assert!(
        cuda.contains("libcuda.so.1") && cuda.contains("driver"),
        "{cuda}"
    );
}

/// `--help` and the man page are read by people who have only the binary: neither points
/// into the repository (its README, benchmarks or sources), and both list every way to run
/// aiscp in their usage lines, `--doctor` and `--serve` included.
#[test]
fn help_and_man_page_stand_alone() {
    let help = aiscp_command().arg("--help").output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let man = read("man/aiscp.1");
    for (name, text) in [("--help", &help), ("man page", &man)] {
        for repo in [
            ".md",
            "README",
            "BENCHMARKS",
            "contrib/",
            "bench/",
            "scripts/",
            "tests/",
            "src/",
        ] {
            assert!(
                !text.contains(repo),
                "{name} points into the repository: {repo}"
            );
        }
    }
    let usage = help
        .split("Usage: ")
        .nth(1)
        .expect("--help has usage lines");
    let usage = usage.split("\n\n").next().unwrap();
    let synopsis = man.split(".SH SYNOPSIS").nth(1).unwrap();
    let synopsis = synopsis.split(".SH").next().unwrap();
    for (flag, roff) in [("--doctor", "\\-\\-doctor"), ("--serve", "\\-\\-serve")] {
        assert!(usage.contains(flag), "--help's usage lacks {flag}: {usage}");
        assert!(synopsis.contains(roff), "SYNOPSIS lacks {flag}: {synopsis}");
    }
}

/// The man page's EXAMPLES show `--stats` as it prints: the same labelled lines, in the same
/// order, as a real run's summary.
#[test]
fn man_page_stats_example_matches_the_output() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a"), "data\n").unwrap();
    let out = aiscp_command()
        .current_dir(dir.path())
        .env("AISCP_BACKEND", "host")
        .args(["--stats", "a", "b"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let labels = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.split_once(':').map(|(label, _)| label.to_owned()))
            .collect()
    };
    let printed = labels(&String::from_utf8(out.stdout).unwrap());
    assert!(printed.len() >= 7, "{printed:?}");
    let man = read("man/aiscp.1");
    let examples = man.split(".SH EXAMPLES").nth(1).expect("EXAMPLES");
    let examples = examples.split("\n.SH").next().unwrap();
    let example = examples
        .split_once("\\-\\-stats")
        .and_then(|(_, e)| e.split(".nf\n").nth(1))
        .and_then(|e| e.split("\n.fi").next())
        .expect("an example of --stats's output");
    assert_eq!(labels(example), printed, "{example}");
}

/// A citation of a benchmark section (`BENCHMARKS.md, "SECTION"` or
/// `bench/results/HISTORY.md, "SECTION"`) in the sources, scripts and docs names a heading
/// that exists in that file, so moving or renaming a section cannot leave a comment's
/// measurement behind.
#[test]
fn benchmark_citations_resolve() {
    let mut files = Vec::new();
    for dir in ["src", "crates", "bench", "scripts", "docs", ".ci"] {
        files_under(&root().join(dir), &mut files);
    }
    for top in ["README.md", "BENCHMARKS.md"] {
        files.push(root().join(top));
    }
    let mut cited = 0;
    for file in files.iter().filter(|f| f.exists()) {
        // Comment markers and line breaks out, so that a citation may wrap.
        let text: String = read(&file.to_string_lossy())
            .lines()
            .map(|l| {
                let l = l.trim_start();
                ["//!", "///", "//", "#"]
                    .iter()
                    .find_map(|m| l.strip_prefix(m))
                    .unwrap_or(l)
                    .trim()
            })
            .collect::<Vec<_>>()
            .join(" ");
        for (doc, target) in [
            ("bench/results/HISTORY.md, \"", "bench/results/HISTORY.md"),
            ("BENCHMARKS.md, \"", "BENCHMARKS.md"),
        ] {
            let mut rest = text.as_str();
            while let Some(at) = rest.find(doc) {
                rest = &rest[at + doc.len()..];
                let Some(end) = rest.find('"') else { break };
                let section = squeeze(&rest[..end]);
                let headings: Vec<String> = read(target)
                    .lines()
                    .filter_map(|l| l.strip_prefix('#'))
                    .map(|h| squeeze(h.trim_start_matches('#')))
                    .collect();
                assert!(
                    headings.iter().any(|h| h.contains(&section)),
                    "{} cites {target}, \"{section}\": no such heading",
                    file.display()
                );
                cited += 1;
            }
        }
    }
    assert!(cited > 10, "{cited} benchmark citations read");
}

/// One space between words and one kind of dash, as a citation and a heading may differ.
fn squeeze(text: &str) -> String {
    text.replace('–', "-")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every `.rs`, `.sh`, `.py` and `.md` file under `dir` (none when it is missing).
fn files_under(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, files);
        } else if path
            .extension()
            .is_some_and(|e| ["rs", "sh", "py", "md"].iter().any(|x| e == *x))
        {
            files.push(path);
        }
    }
}

/// `"AISCP_..."` string literals under `dir`.
fn collect_vars(dir: &Path, vars: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_vars(&path, vars);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = fs::read_to_string(&path).unwrap();
            for piece in text.split("\"AISCP_").skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                if piece[name.len()..].starts_with('"') {
                    vars.insert(format!("AISCP_{name}"));
                }
            }
        }
    }
}

#[test]
fn license_matches_cargo_toml() {
    let cargo = read("Cargo.toml");
    assert!(
        cargo.contains("license = \"MIT\""),
        "Cargo.toml's license changed"
    );
    let license = read("LICENSE");
    assert!(
        license.starts_with("MIT License"),
        "LICENSE is not the MIT text"
    );
    assert!(license.contains("Permission is hereby granted, free of charge"));
}

/// docs/ARCHITECTURE.md's layering: imports only point down, in all five crates. No module of a crate imports
/// one that imports it back, directly or through others, and no module of the engine or of
/// the binary's copy/ names an item through a module enclosing it (lib.rs's re-exports, its
/// parent's): each imports from where things are defined (scripts/import-circles.py says
/// how edges and back-arrows are found).
#[test]
fn no_import_circles() {
    let out = Command::new("python3")
        .arg(root().join("scripts/import-circles.py"))
        .args([
            "--no-back-arrows",
            "crates/engine/src",
            "--no-back-arrows",
            "src/cp/copy",
        ])
        .args([
            "src",
            "crates/engine/src",
            "crates/hipfile-rs/src",
            "crates/fake-gpu/src",
            "crates/test-support/src",
        ])
        .current_dir(root())
        .output()
        .expect("python3 runs scripts/import-circles.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "import circles or back-arrows:\n{text}"
    );
    assert_eq!(text.matches("circles: none").count(), 5, "{text}");
    assert_eq!(
        text.matches("back-arrows not allowed: none").count(),
        5,
        "{text}"
    );
}

/// docs/ARCHITECTURE.md's source map names paths that exist.
#[test]
fn layout_table_paths_exist() {
    let architecture = read("docs/ARCHITECTURE.md");
    let table = architecture
        .split("| path | what |")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has the source map");
    let rows = table.lines().skip(2).take_while(|l| l.starts_with('|'));
    let mut named = 0;
    for row in rows {
        let first = row.split(" | ").next().unwrap();
        for path in first.split('`').skip(1).step_by(2) {
            assert!(
                root().join(path).exists(),
                "the source map names {path}, not in the tree"
            );
            named += 1;
        }
    }
    assert!(named > 40, "{named} paths read from the source map");
}

/// One integration-test binary per package (`tests/it/main.rs`), so the suites compile and
/// link once and share one set of helpers: no other test target.
#[test]
fn one_test_binary_per_package() {
    let mut packages = vec![root().to_path_buf()];
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        packages.push(entry.unwrap().path());
    }
    for package in packages {
        let tests = package.join("tests");
        let Ok(entries) = fs::read_dir(&tests) else {
            continue;
        };
        let names: Vec<String> = entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["it"], "{}", tests.display());
        assert!(tests.join("it/main.rs").exists(), "{}", tests.display());
    }
}

/// The documents a reader is sent to: the README, BENCHMARKS.md and docs/.
fn documents() -> Vec<String> {
    let mut docs = vec!["README.md".to_owned(), "BENCHMARKS.md".to_owned()];
    let mut more: Vec<String> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| format!("docs/{}", e.unwrap().file_name().to_string_lossy()))
        .filter(|name| name.ends_with(".md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// Every file or folder of this repository that the README, BENCHMARKS.md or a document in
/// docs/ names in backticks exists (GNU's own `tests/cp/...` are not ours), so moving a test
/// or a module cannot leave a stale pointer.
#[test]
fn readme_paths_exist() {
    let ours = [
        "src/",
        "tests/it",
        "crates/",
        "scripts/",
        "bench/",
        "man/",
        "completions/",
        "contrib/",
        "docs/",
        ".ci/",
    ];
    let mut named = 0;
    for doc in documents() {
        // Inline code only: the fenced blocks (commands) are left out, fences and all.
        let prose: String = read(&doc)
            .split("```")
            .step_by(2)
            .collect::<Vec<_>>()
            .join("\n");
        for quoted in prose.split('`').skip(1).step_by(2) {
            if quoted.contains(' ') || !ours.iter().any(|p| quoted.starts_with(p)) {
                continue;
            }
            assert!(
                root().join(quoted).exists(),
                "{doc} names {quoted}, not in the tree"
            );
            named += 1;
        }
    }
    assert!(named > 100, "{named} paths read from the documents");
}

/// Every relative link in the README, BENCHMARKS.md and docs/ leads to a file that exists,
/// and to a heading of it where it names one (GitHub's anchors: lower case, punctuation
/// dropped, spaces as dashes).
#[test]
fn document_links_resolve() {
    let mut links = 0;
    for doc in documents() {
        let text = read(&doc);
        let dir = Path::new(&doc).parent().unwrap();
        for piece in text.split("](").skip(1) {
            let target = piece.split(')').next().unwrap();
            if target.starts_with("http") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let path = if file.is_empty() {
                Path::new(&doc).to_path_buf()
            } else {
                dir.join(file)
            };
            assert!(
                root().join(&path).exists(),
                "{doc} links to {target}: no such file"
            );
            if !anchor.is_empty() {
                let headings: Vec<String> = read(&path.to_string_lossy())
                    .lines()
                    .filter_map(|l| l.strip_prefix('#'))
                    .map(|h| anchor_of(h.trim_start_matches('#').trim()))
                    .collect();
                assert!(
                    headings.iter().any(|h| h == anchor),
                    "{doc} links to {target}: no such heading"
                );
            }
            links += 1;
        }
    }
    assert!(links > 20, "{links} links read");
}

/// The anchor GitHub gives a heading.
fn anchor_of(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The README is a user's page: what aiscp is, installing, examples, options, troubleshooting.
/// The rest (the source map, guarantees, CI, benchmarks' history) lives in docs/ and
/// bench/results/HISTORY.md, and the README links to each document in docs/.
#[test]
fn readme_stays_a_users_page() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move detail into docs/"
    );
    for doc in documents().iter().filter(|d| d.starts_with("docs/")) {
        assert!(
            readme.contains(&format!("]({doc})")),
            "README.md does not link to {doc}"
        );
    }
    for heading in [
        "## Install",
        "## Quick start",
        "## Where aiscp differs from GNU cp on purpose",
        "## Troubleshooting",
    ] {
        assert!(readme.contains(heading), "README.md lacks {heading}");
    }
}

/// README's sentence on tmpfs and O_DIRECT (tmpfs takes it from Linux 6.6 on) holds on the
/// running kernel, and says how to check.
#[test]
fn readme_on_tmpfs_direct_io_holds_here() {
    let readme = read("README.md");
    let para = readme
        .split("**tmpfs and other filesystems without direct I/O.**")
        .nth(1)
        .expect("the tmpfs paragraph");
    let para = para.split("\n\n").next().unwrap();
    assert!(para.contains("before Linux 6.6"), "{para}");
    assert!(para.contains("aiscp --doctor"), "no way to check: {para}");
    let release = nix::sys::utsname::uname().unwrap();
    let release = release.release().to_string_lossy().into_owned();
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let version = (numbers.next().unwrap(), numbers.next().unwrap());
    let shm = Path::new("/dev/shm");
    let on_tmpfs = nix::sys::statfs::statfs(shm)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    if !on_tmpfs {
        skip("/dev/shm is not tmpfs", "");
        return;
    }
    let probe = tempfile::NamedTempFile::new_in(shm).unwrap();
    let direct = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(probe.path());
    assert_eq!(
        direct.is_ok(),
        version >= (6, 6),
        "Linux {release}: O_DIRECT on tmpfs {:?}",
        direct.err()
    );
}
