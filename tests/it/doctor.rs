//! `aiscp --doctor` on the fake GPU library: what it finds, the route it predicts per path,
//! a refused registration, and its exit status; and with no library at all.

use crate::support::{aiscp_command, fake_gpu_lib, hermetic, program, write_random};
use std::path::Path;
use std::process::{Command, Output};

fn doctor(env: &[(&str, String)], paths: &[&Path]) -> Output {
    let mut cmd = aiscp_command();
    cmd.env_remove("AISCP_BACKEND").arg("--doctor").args(paths);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn fake_env() -> Vec<(&'static str, String)> {
    let lib = fake_gpu_lib().display().to_string();
    vec![("AISCP_HIPFILE_LIB", lib.clone()), ("AISCP_HIP_LIB", lib)]
}

#[test]
fn doctor_on_the_fake_library_finds_a_gpu_route() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    write_random(&file, 8192, 1);
    let out = doctor(&fake_env(), &[dir.path(), &file]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    let lib = fake_gpu_lib().display().to_string();
    assert!(
        text.contains(&format!("  hipFile: {lib} (hipFile ")),
        "{text}"
    );
    assert!(
        text.contains("GPU(s)") && text.contains("GPU 0: PCI "),
        "{text}"
    );
    assert!(text.contains("GPU 0: context ok"), "{text}");
    assert!(text.contains("hipFile driver: opened"), "{text}");
    for p in [dir.path(), &file] {
        let section = text
            .split(&format!("path '{}':\n", p.display()))
            .nth(1)
            .unwrap_or_else(|| panic!("no section for {}: {text}", p.display()));
        let section = section.split("\npath ").next().unwrap();
        assert!(section.contains("  filesystem: "), "{section}");
        assert!(section.contains("  udev record: "), "{section}");
        assert!(section.contains("  O_DIRECT: "), "{section}");
        if section.contains("O_DIRECT: supported") {
            assert!(section.contains("registration: accepted"), "{section}");
            assert!(
                section.contains("route (--route auto): library: hipFileRead/hipFileWrite"),
                "{section}"
            );
            assert!(
                section.contains("; files under 1.00 MiB in flight: bounce: O_DIRECT"),
                "{section}"
            );
        }
    }
    assert!(text.ends_with("verdict: a GPU route is possible through hipFile on GPU 0\n"));
    // The directory probe leaves nothing behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn doctor_names_a_refused_registration_and_the_bounce_route() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = fake_env();
    env.push(("AISCP_FAKE_GPU_FAULTS", "register=5027".into()));
    let out = doctor(&env, &[dir.path()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    if text.contains("O_DIRECT: supported") {
        assert!(text.contains("hipFile registration: refused: "), "{text}");
        assert!(text.contains("5027"), "{text}");
        assert!(
            text.contains("route (--route auto): bounce: O_DIRECT into pinned memory"),
            "{text}"
        );
    }
}

#[test]
fn doctor_without_a_library_says_so_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.so").display().to_string();
    let env: Vec<(&str, String)> = [
        "AISCP_HIPFILE_LIB",
        "AISCP_HIP_LIB",
        "AISCP_CUFILE_LIB",
        "AISCP_CUDA_LIB",
    ]
    .iter()
    .map(|v| (*v, missing.clone()))
    .collect();
    let out = doctor(&env, &[dir.path(), &dir.path().join("nosuch")]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("  hipFile: not loaded: "), "{text}");
    assert!(text.contains("  cuFile: not loaded: "), "{text}");
    assert!(
        text.contains("route: host memory (no GPU library came up)"),
        "{text}"
    );
    assert!(
        text.contains("cannot stat: No such file or directory"),
        "{text}"
    );
    assert!(text.contains("verdict: no GPU route"), "{text}");
    assert!(text.contains("nvidia-fs: "), "{text}");
}

/// A FIFO (or any file that is not regular) is described, never opened: its open() would
/// wait for a writer that never comes.
#[test]
fn doctor_describes_a_fifo_without_opening_it() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut cmd = Command::new("timeout");
    hermetic(&mut cmd)
        .args(["5"])
        .arg(program())
        .env_remove("AISCP_BACKEND")
        .arg("--doctor")
        .arg(&fifo);
    for (k, v) in fake_env() {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_ne!(out.status.code(), Some(124), "--doctor blocked on the FIFO");
    assert!(
        text.contains(&format!("path '{}':\n  filesystem: ", fifo.display())),
        "{text}"
    );
    assert!(
        text.contains("  type: FIFO (not opened: a copy reads it as a stream, without O_DIRECT)"),
        "{text}"
    );
    assert!(
        text.contains("  route: bounce through hipFile GPU memory with buffered POSIX I/O"),
        "{text}"
    );
}
