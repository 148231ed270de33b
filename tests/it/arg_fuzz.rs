//! Argument fuzzing: random mixes of real flags, bogus flags, values and existing or missing
//! paths. Whatever the mix, the binary never panics or dies by a signal, exits 0 or 1, and
//! an exit 1 always comes with a message that starts with the program name.

use crate::support::{aiscp_command, program};
use proptest::prelude::*;
use std::process::Stdio;

/// Words an argument vector is made of.
fn word() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        // real flags, with and without their values
        "-r",
        "-R",
        "-a",
        "-p",
        "-f",
        "-n",
        "-u",
        "-v",
        "-l",
        "-s",
        "-L",
        "-P",
        "-H",
        "-x",
        "-T",
        "-t",
        "-b",
        "-S",
        "--backup",
        "--backup=numbered",
        "--suffix",
        "--sparse=never",
        "--sparse=bogus",
        "--preserve=mode,timestamps",
        "--preserve=nonsense",
        "--no-preserve=all",
        "--parents",
        "--atomic",
        "--fsync",
        "--verify",
        "--debug",
        "--reflink=auto",
        "--reflink=always",
        "--attributes-only",
        "--remove-destination",
        "--strip-trailing-slashes",
        "--update=older",
        "--update=wrong",
        "--one-file-system",
        "--backend",
        "--backend=host",
        "--backend=bogus",
        "--gpu",
        "--gpu=7",
        "--gpu=-1",
        "--chunk-size",
        "--chunk-size=0",
        "--chunk-size=64K",
        "--chunk-size=99999999999T",
        "--chunk-size=0x7ffff001",
        "--streams=0",
        "--streams=3",
        "--streams",
        "--async",
        "--progress",
        "--no-progress",
        "-q",
        "--target-directory",
        "--no-target-directory",
        "--generate",
        "--generate=nothing",
        "--help",
        "--version",
        // bogus flags and values
        "--",
        "-",
        "-Z",
        "-\u{e9}",
        "--nope",
        "--chunk",
        "---",
        "-rf",
        "-vvv",
        "=",
        "",
        "64M",
        "0x",
        "1e9",
        "\u{1f600}",
        "a\nb",
        "-1",
        "--gpu=99999999999999999999",
        // paths, existing and not; all inside the test's directory (the tests run as root:
        // "/" or "/dev/null" as a DEST, with --atomic or -f, would damage the machine)
        "src",
        "src2",
        "dir",
        "dir/",
        "missing",
        "missing/deeper",
        "dst",
        "dir/dst",
        ".",
        "/nonexistent/x",
        "src/",
    ])
    .prop_map(str::to_owned);
    prop_oneof![
        8 => fixed,
        // printable junk, but no absolute or parent paths (see above)
        1 => "[a-z=,-]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 300,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn never_panics_and_exits_0_or_1_with_a_message(args in prop::collection::vec(word(), 0..7)) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("src"), b"some bytes\n").unwrap();
        std::fs::write(dir.path().join("src2"), vec![7u8; 70_000]).unwrap();
        std::fs::create_dir(dir.path().join("dir")).unwrap();
        let out = aiscp_command()
            .current_dir(dir.path())
            .args(&args)
            .env("AISCP_BACKEND", "host")
            .env_remove("AISCP_HIPFILE_LIB")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        prop_assert!(!stderr.contains("panicked"), "{:?}: {}", args, stderr);
        let code = out.status.code();
        prop_assert!(code == Some(0) || code == Some(1), "{:?}: exit {:?}: {}", args, out.status, stderr);
        if code == Some(1) {
            let prefix = format!("{}: ", program().display());
            prop_assert!(stderr.starts_with(&prefix), "{:?}: no message: {:?}", args, stderr);
        }
    }
}
