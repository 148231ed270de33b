//! The engine's flags through the built binary, on both backends of the matrix.

use crate::support::*;
use assert_cmd::Command;
use std::fs;

fn aiscp(backend: Backend, report: &std::path::Path) -> Command {
    let mut cmd = aiscp_assert();
    cmd.env_remove("AISCP_BACKEND")
        .env_remove("AISCP_FAKE_GPU_FAULTS");
    for (k, v) in backend.env(report) {
        cmd.env(k, v);
    }
    cmd
}

#[test]
fn copies_with_small_chunks_on_every_backend() {
    for backend in BACKENDS {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report");
        for (i, size) in [0usize, 1, 4097, 65535, 65536, 65537, 20 * 65536 + 3]
            .into_iter()
            .enumerate()
        {
            let src = dir.path().join(format!("s{i}"));
            let dst = dir.path().join(format!("d{i}"));
            let data = write_random(&src, size, i as u64);
            aiscp(backend, &report)
                .args(["--chunk-size", "64K", "--streams", "3"])
                .arg(&src)
                .arg(&dst)
                .assert()
                .success();
            assert_same_bytes(
                &fs::read(&dst).unwrap(),
                &data,
                &format!("{backend:?} {size}"),
            );
            backend.assert_report_clean(&report);
        }
    }
}

#[test]
fn bad_values_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 10, 1);
    let dst = dir.path().join("d");
    let report = dir.path().join("report");
    for args in [
        &["--chunk-size", "0"][..],
        &["--chunk-size", "0x7ffff001"],
        &["--chunk-size", "abc"],
        &["--streams", "0"],
        &["--backend", "tpu"],
    ] {
        aiscp(Backend::Host, &report)
            .args(args)
            .arg(&src)
            .arg(&dst)
            .assert()
            .code(1);
    }
    assert!(!dst.exists());
}

#[test]
fn missing_gpu_index_names_the_device_count() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 10, 1);
    let report = dir.path().join("report");
    aiscp(Backend::FakeGpu, &report)
        .args(["--gpu", "1"])
        .arg(&src)
        .arg(dir.path().join("d"))
        .assert()
        .code(1)
        .stderr(predicates::str::contains(
            "GPU 1 does not exist: 1 device(s) found",
        ));
}

#[test]
fn auto_without_a_gpu_library_warns_once_and_copies() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    let data = write_random(&src, 5000, 1);
    let dst = dir.path().join("d");
    let out = aiscp_assert()
        .env("AISCP_BACKEND", "auto")
        .env("AISCP_HIPFILE_LIB", dir.path().join("none.so"))
        .env("AISCP_CUFILE_LIB", dir.path().join("none.so"))
        .env("AISCP_HIP_LIB", dir.path().join("none.so"))
        .env("AISCP_CUDA_LIB", dir.path().join("none.so"))
        .arg(&src)
        .arg(&dst)
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("hipFile") && stderr.contains("cuFile") && stderr.contains("host memory"),
        "{stderr}"
    );
    assert_same_bytes(&fs::read(&dst).unwrap(), &data, "auto fallback");
}

/// `aiscp --backend VALUE SRC DST` with no library override set, in a fresh directory.
fn without_overrides(backend: &str) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 5000, 7);
    let mut cmd = aiscp_assert();
    for var in [
        "AISCP_BACKEND",
        "AISCP_HIPFILE_LIB",
        "AISCP_HIP_LIB",
        "AISCP_CUFILE_LIB",
        "AISCP_CUDA_LIB",
    ] {
        cmd.env_remove(var);
    }
    let out = cmd
        .args(["--backend", backend])
        .arg(&src)
        .arg(dir.path().join("d"))
        .output()
        .unwrap();
    (out, dir)
}

/// Whether this machine has either vendor's kernel driver (then the skip cannot be seen).
fn has_gpu_driver() -> bool {
    ["/dev/kfd", "/dev/nvidiactl", "/dev/dxg"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

#[test]
fn gpu_backend_skips_vendors_whose_kernel_driver_is_absent() {
    if has_gpu_driver() {
        not_here("this machine has a GPU kernel driver");
        return;
    }
    let (out, dir) = without_overrides("gpu");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hipFile: no GPU driver (/dev/kfd not found)")
            && stderr.contains("cuFile: no GPU driver (/dev/nvidiactl not found)"),
        "{stderr}"
    );
    assert!(!dir.path().join("d").exists(), "nothing is created");
}

#[test]
fn a_backend_that_cannot_start_leaves_an_existing_dst_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 5000, 9);
    for atomic in [false, true] {
        let dst = dir.path().join("d");
        fs::write(&dst, b"precious").unwrap();
        let missing = dir.path().join("none.so");
        let mut cmd = aiscp_assert();
        cmd.env_remove("AISCP_BACKEND");
        for var in [
            "AISCP_HIPFILE_LIB",
            "AISCP_HIP_LIB",
            "AISCP_CUFILE_LIB",
            "AISCP_CUDA_LIB",
        ] {
            cmd.env(var, &missing);
        }
        if atomic {
            cmd.arg("--atomic");
        }
        let out = cmd
            .args(["--backend", "gpu"])
            .arg(&src)
            .arg(&dst)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "atomic {atomic}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no usable GPU I/O library"), "{stderr}");
        assert_eq!(fs::read(&dst).unwrap(), b"precious", "atomic {atomic}");
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "no temporary files: {left:?}");
    }
}

#[test]
fn an_explicit_backend_tries_its_libraries_even_without_the_driver() {
    if has_gpu_driver() {
        not_here("this machine has a GPU kernel driver");
        return;
    }
    for backend in ["hipfile", "cufile"] {
        let (out, _dir) = without_overrides(backend);
        assert_eq!(out.status.code(), Some(1), "{backend}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("no GPU driver") && stderr.contains("searched"),
            "{backend}: {stderr}"
        );
    }
}

#[test]
fn an_override_makes_auto_try_that_vendor_anyway() {
    if has_gpu_driver() {
        not_here("this machine has a GPU kernel driver");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    let data = write_random(&src, 5000, 8);
    let missing = dir.path().join("none.so");
    let out = aiscp_assert()
        .env("AISCP_BACKEND", "auto")
        .env("AISCP_HIP_LIB", &missing)
        .env_remove("AISCP_HIPFILE_LIB")
        .env_remove("AISCP_CUFILE_LIB")
        .env_remove("AISCP_CUDA_LIB")
        .arg(&src)
        .arg(dir.path().join("d"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&*missing.to_string_lossy())
            && stderr.contains("cuFile: no GPU driver (/dev/nvidiactl not found)")
            && stderr.contains("copying through host memory"),
        "{stderr}"
    );
    assert_same_bytes(&fs::read(dir.path().join("d")).unwrap(), &data, "fallback");
}

#[test]
fn help_states_the_gpu_memory_used() {
    aiscp_assert()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "GPU memory used = STREAMS x SIZE",
        ));
}

#[test]
fn debug_names_backend_and_route() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 300_000, 1);
    let report = dir.path().join("report");
    aiscp(Backend::FakeGpu, &report)
        .args(["--debug", "--chunk-size", "64K"])
        .arg(&src)
        .arg(dir.path().join("d"))
        .assert()
        .success()
        .stderr(predicates::str::contains("backend hipFile"))
        .stderr(predicates::str::contains("read direct, write direct"));
}

/// Copies a small file on the fake GPU with --debug; returns the environment the fake was
/// given and stderr.
fn fake_gpu_debug_run() -> (Vec<(&'static str, String)>, String) {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 5000, 2);
    let report = dir.path().join("report");
    let out = aiscp(Backend::FakeGpu, &report)
        .arg("--debug")
        .arg(&src)
        .arg(dir.path().join("d"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (Backend::FakeGpu.env(&report), stderr)
}

/// The library files named by AISCP_HIPFILE_LIB / AISCP_HIP_LIB are the ones read ahead of
/// loading.
#[test]
fn debug_names_the_library_files_read_ahead() {
    let (env, stderr) = fake_gpu_debug_run();
    let lib = |name: &str| {
        let (_, value) = env.iter().find(|(k, _)| *k == name).expect(name);
        value.clone()
    };
    // The fake is one file standing for both libraries: read once.
    assert_eq!(lib("AISCP_HIP_LIB"), lib("AISCP_HIPFILE_LIB"));
    let wanted = format!("read ahead: {}\n", lib("AISCP_HIP_LIB"));
    assert!(stderr.contains(&wanted), "wanted `{wanted}` in {stderr}");
}

/// The engine's last --debug line says the staging memory went first and the GPU follows,
/// so a slow shutdown shows which part it is.
#[test]
fn debug_ends_with_the_engine_stopping() {
    let (_, stderr) = fake_gpu_debug_run();
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("stopping: staging memory freed in ")
            && last.ends_with(" s; the GPU context and the libraries are released next"),
        "{stderr}"
    );
}

/// The work-queue setting is CUDA's alone: --debug on hipFile does not mention it.
#[test]
fn debug_on_hipfile_says_nothing_of_cuda_work_queues() {
    let (_, stderr) = fake_gpu_debug_run();
    assert!(stderr.contains("backend hipFile"), "{stderr}");
    assert!(!stderr.contains("CUDA_DEVICE_MAX_CONNECTIONS"), "{stderr}");
}

/// What the GPU runtime finds in CUDA_DEVICE_MAX_CONNECTIONS when aiscp brings it up: 1 on
/// the own bounce route unless the user chose a value; CUDA's default where cuFile's streams
/// would do the copying (`--route library`, `--async`). The fake records the variable when
/// first called, as a runtime reads it at initialisation.
#[test]
fn the_runtime_starts_with_one_work_queue_unless_told_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    write_random(&src, 70_000, 3);
    let report = dir.path().join("report");
    let cases: [(&[&str], Option<&str>, Option<&str>); 5] = [
        (&["--route", "bounce"], None, Some("1")),
        (&["--route", "bounce"], Some("4"), Some("4")),
        (&["--route", "bounce"], Some(""), Some("")),
        (&["--route", "library"], None, None),
        (&["--async"], None, None),
    ];
    for (i, (args, user, seen)) in cases.into_iter().enumerate() {
        let mut cmd = aiscp(Backend::FakeGpu, &report);
        cmd.env_remove("CUDA_DEVICE_MAX_CONNECTIONS");
        if let Some(value) = user {
            cmd.env("CUDA_DEVICE_MAX_CONNECTIONS", value);
        }
        let out = cmd
            .arg("--debug")
            .args(args)
            .arg(&src)
            .arg(dir.path().join(format!("d{i}")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?} {user:?}: {out:?}");
        let r = Report::read(&report);
        r.assert_clean();
        assert_eq!(
            r.work_queues.as_deref(),
            seen,
            "{args:?} with {user:?}:\n{r}"
        );
    }
}

#[test]
fn async_uses_streams_on_the_gpu_and_says_it_is_moot_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("s");
    let data = write_random(&src, 5 * 65536 + 4097, 7);
    for backend in BACKENDS {
        let dst = dir.path().join(format!("d-{backend:?}"));
        let out = aiscp(backend, &report)
            .args(["--chunk-size", "64K", "--async", "--debug"])
            .arg(&src)
            .arg(&dst)
            .output()
            .unwrap();
        assert!(out.status.success(), "{backend:?}: {out:?}");
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, &format!("{backend:?}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        let warnings: Vec<_> = stderr
            .lines()
            .filter(|l| !l.contains(": debug: "))
            .collect();
        match backend {
            Backend::Host => {
                assert_eq!(warnings.len(), 1, "{stderr}");
                assert!(
                    warnings[0].contains("--async has no effect with host memory staging"),
                    "{stderr}"
                );
                assert!(!stderr.contains("async streams"), "{stderr}");
            }
            Backend::FakeGpu => {
                assert!(warnings.is_empty(), "{stderr}");
                // All four flags hold: fixed parameter blocks, page-aligned requests.
                assert!(stderr.contains("registered with flags 0xf"), "{stderr}");
                assert!(stderr.contains("async streams"), "{stderr}");
                Report::read(&report).assert_clean();
            }
        }
    }
}

/// The binary under a small open-file limit: files in flight hold two descriptors each, so the
/// queue shrinks to fit instead of failing opens with EMFILE.
#[test]
fn a_tree_under_a_small_descriptor_limit() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("s");
    let mut want = Vec::new();
    for i in 0..300usize {
        let sub = src.join(format!("d{}", i / 50));
        fs::create_dir_all(&sub).unwrap();
        let path = sub.join(format!("f{i}"));
        want.push((
            path.strip_prefix(&src).unwrap().to_path_buf(),
            write_random(&path, 100 + i * 37, i as u64),
        ));
    }
    let dst = dir.path().join("d");
    let mut cmd = aiscp_command();
    cmd.args(["--backend", "host", "--no-progress", "-r"])
        .arg(&src)
        .arg(&dst);
    // SAFETY: setrlimit is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            let rl = libc::rlimit {
                rlim_cur: 40,
                rlim_max: 40,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &rl) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (rel, data) in &want {
        assert_same_bytes(
            &fs::read(dst.join(rel)).unwrap(),
            data,
            &rel.display().to_string(),
        );
    }
}
