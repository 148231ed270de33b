//! Several GPUs in one run (`--gpu LIST|all|auto`) on the fake library with several devices:
//! slots spread over the devices, files rotated over them, auto placement by a synthetic
//! sysfs, and each worker working on its own device (the fake records memory used from a
//! thread whose current device is another).

use crate::support::*;
use assert_cmd::Command;
use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::Path;

const CHUNK: usize = 64 << 10;

fn aiscp(report: &Path, devices: u32) -> Command {
    let mut cmd = aiscp_assert();
    cmd.env_remove("AISCP_FAKE_GPU_FAULTS")
        .env_remove("AISCP_FAKE_GPU_BUS_IDS")
        .env_remove("AISCP_TEST_SYSFS")
        .env("AISCP_FAKE_GPU_DEVICES", devices.to_string());
    for (k, v) in Backend::FakeGpu.env(report) {
        cmd.env(k, v);
    }
    cmd
}

/// The fake's `devices:` line: per device, (mallocs, bytes moved through its memory).
fn per_device(report: &Path) -> Vec<(u64, u64)> {
    let devices = Report::read(report).devices;
    devices.mallocs.into_iter().zip(devices.bytes).collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A tree of random files: one of many chunks, a few small ones, an empty one.
fn tree(root: &Path) {
    fs::create_dir_all(root.join("sub/deeper")).unwrap();
    write_random(&root.join("big"), 23 * CHUNK + 1234, 1);
    for (i, len) in [1usize, 4096, 5000, CHUNK + 1, 0].into_iter().enumerate() {
        write_random(&root.join(format!("sub/f{i}")), len, 10 + i as u64);
    }
    write_random(&root.join("sub/deeper/g"), 3 * CHUNK, 20);
}

fn same_tree(a: &Path, b: &Path) {
    let out = std::process::Command::new("diff")
        .arg("-r")
        .arg(a)
        .arg(b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn gpu_all_spreads_slots_and_slices_over_every_device() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("src");
    tree(&src);
    let out = aiscp(&report, 3)
        .args([
            "-r",
            "--gpu",
            "all",
            "--chunk-size",
            "64K",
            "--streams",
            "2",
        ])
        .arg("--debug")
        .arg(&src)
        .arg(dir.path().join("dst"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let gnu = dir.path().join("gnu");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(&src)
        .arg(&gnu)
        .status()
        .unwrap();
    assert!(status.success());
    same_tree(&gnu, &dir.path().join("dst"));
    Report::read(&report).assert_clean();
    // Two slots on each device, each one used.
    let use_ = per_device(&report);
    assert_eq!(use_.len(), 3);
    for (d, (mallocs, bytes)) in use_.iter().enumerate() {
        assert_eq!(*mallocs, 2, "device {d}: {use_:?}");
        assert!(*bytes > 0, "device {d} moved nothing: {use_:?}");
    }
    let err = stderr(&out);
    assert!(
        err.contains("GPU 0 (0000:10:00.0), 1 (0000:11:00.0), 2 (0000:12:00.0) of 3"),
        "{err}"
    );
    // The big file's slices ran on all three.
    let big = format!("{}': GPUs ", src.join("big").display());
    let line = err.lines().find(|l| l.contains(&big)).expect(&err);
    assert!(line.ends_with("(--gpu all)"), "{line}");
    for d in ["0", "1", "2"] {
        assert!(line.split("GPUs ").nth(1).unwrap().contains(d), "{line}");
    }
}

#[test]
fn small_files_take_turns_on_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("src");
    fs::create_dir(&src).unwrap();
    let mut data = Vec::new();
    for i in 0..4 {
        data.push(write_random(&src.join(format!("s{i}")), 9000 + i, i as u64));
    }
    // Copied in turn, as the library route asked for copies every file.
    let out = aiscp(&report, 2)
        .args(["-r", "--route=library", "--gpu", "0,1", "--debug"])
        .arg(&src)
        .arg(dir.path().join("dst"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for (i, want) in data.iter().enumerate() {
        let got = fs::read(dir.path().join(format!("dst/s{i}"))).unwrap();
        assert_same_bytes(&got, want, &format!("s{i}"));
    }
    Report::read(&report).assert_clean();
    let err = stderr(&out);
    let mut firsts: Vec<&str> = err
        .lines()
        .filter(|l| l.ends_with("(--gpu 0,1)"))
        .map(|l| l.rsplit(": ").next().unwrap())
        .collect();
    firsts.sort();
    assert_eq!(
        firsts,
        [
            "GPU 0 (--gpu 0,1)",
            "GPU 0 (--gpu 0,1)",
            "GPU 1 (--gpu 0,1)",
            "GPU 1 (--gpu 0,1)"
        ],
        "{err}"
    );
    let use_ = per_device(&report);
    assert!(use_.iter().all(|&(_, bytes)| bytes > 0), "{use_:?}");
}

/// 41 slices: with 9, one GPU's worker took every slice once in a loaded CI run, as it had in
/// `auto_puts_each_file_on_the_gpu_nearest_its_drive`.
#[test]
fn a_list_uses_only_its_devices() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("s");
    let data = write_random(&src, 41 * CHUNK + 7, 3);
    let dst = dir.path().join("d");
    let out = aiscp(&report, 4)
        .args(["--gpu", "3,1", "--chunk-size", "64K", "--debug"])
        .arg(&src)
        .arg(&dst)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_same_bytes(&fs::read(&dst).unwrap(), &data, "d");
    Report::read(&report).assert_clean();
    let use_ = per_device(&report);
    assert_eq!((use_[0], use_[2]), ((0, 0), (0, 0)), "{use_:?}");
    assert!(use_[1].1 > 0 && use_[3].1 > 0, "{use_:?}");
    assert!(stderr(&out).contains("GPU 3 (0000:13:00.0), 1 (0000:11:00.0) of 4"));
}

#[test]
fn a_gpu_past_the_count_is_refused_before_dst_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let src = dir.path().join("s");
    write_random(&src, 100, 1);
    let dst = dir.path().join("d");
    aiscp(&report, 2)
        .args(["--gpu", "0,2"])
        .arg(&src)
        .arg(&dst)
        .assert()
        .code(1)
        .stderr(format!(
            "{}: GPU 2 does not exist: 2 device(s) found\n",
            program().display()
        ));
    assert!(!dst.exists());
}

/// A sysfs where the test directory's filesystem is an NVMe drive under bridge
/// 0000:40:01.1, beside GPU 1 (0000:43:00.0); GPU 0 (0000:03:00.0) is under another root.
fn sysfs(root: &Path, dev: u64, with_block: bool) {
    let drive = "pci0000:40/0000:40:01.1/0000:44:00.0/nvme/nvme1/nvme1n1";
    let gpus = [
        ("0000:03:00.0", "pci0000:00/0000:00:01.0/0000:03:00.0"),
        ("0000:43:00.0", "pci0000:40/0000:40:01.1/0000:43:00.0"),
    ];
    fs::create_dir_all(root.join("devices").join(drive)).unwrap();
    fs::create_dir_all(root.join("dev/block")).unwrap();
    fs::create_dir_all(root.join("bus/pci/devices")).unwrap();
    for (id, path) in gpus {
        fs::create_dir_all(root.join("devices").join(path)).unwrap();
        symlink(
            format!("../../../devices/{path}"),
            root.join("bus/pci/devices").join(id),
        )
        .unwrap();
    }
    if with_block {
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        symlink(
            format!("../../devices/{drive}"),
            root.join(format!("dev/block/{major}:{minor}")),
        )
        .unwrap();
    }
}

#[test]
fn auto_puts_each_file_on_the_gpu_nearest_its_drive() {
    for with_block in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report");
        let src = dir.path().join("s");
        // 41 slices: enough that a busy machine cannot leave one GPU's workers without any.
        let data = write_random(&src, 40 * CHUNK + 3, 5);
        let dst = dir.path().join("d");
        let dev = fs::metadata(dir.path()).unwrap().dev();
        let sys = dir.path().join("sys");
        sysfs(&sys, dev, with_block);
        let out = aiscp(&report, 2)
            .env("AISCP_FAKE_GPU_BUS_IDS", "0000:03:00.0,0000:43:00.0")
            .env("AISCP_TEST_SYSFS", &sys)
            .args(["--gpu", "auto", "--chunk-size", "64K", "--debug"])
            .arg(&src)
            .arg(&dst)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, "d");
        Report::read(&report).assert_clean();
        let err = stderr(&out);
        let use_ = per_device(&report);
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        if with_block {
            assert!(
                err.contains("': GPU 1 (nearest: under PCI bridge 0000:40:01.1 with nvme1n1)"),
                "{err}"
            );
            // Device 0 got its first slot (secured before DST was opened), never a byte.
            assert_eq!(use_[0], (1, 0), "{use_:?}");
            assert!(use_[1].1 > 0, "{use_:?}");
        } else {
            assert!(
                err.contains(&format!(
                    "': GPUs 0,1 (storage locality unknown (device {major}:{minor}: no block device))"
                )),
                "{err}"
            );
            assert!(use_.iter().all(|&(_, bytes)| bytes > 0), "{use_:?}");
        }
    }
}

/// A slot that cannot be had is given up for the run and the copy goes on with the others,
/// on both devices, threaded or with --async (each slot's stream on its own device).
#[test]
fn a_slot_short_of_memory_is_given_up_and_the_devices_go_on() {
    for extra in [None, Some("--async")] {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join("report");
        let src = dir.path().join("s");
        let data = write_random(&src, 40 * CHUNK + 1, 4);
        let dst = dir.path().join("d");
        let mut cmd = aiscp(&report, 2);
        cmd.env("AISCP_FAKE_GPU_FAULTS", "malloc#3=oom").args([
            "--gpu",
            "all",
            "--chunk-size",
            "64K",
            "--streams",
            "2",
            "--debug",
        ]);
        if let Some(flag) = extra {
            cmd.arg(flag);
        }
        let out = cmd.arg(&src).arg(&dst).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        assert_same_bytes(&fs::read(&dst).unwrap(), &data, "d");
        Report::read(&report).assert_clean();
        let err = stderr(&out);
        assert!(err.contains("slot 2: hipMalloc: out of memory"), "{err}");
        let use_ = per_device(&report);
        assert!(
            use_.iter().all(|&(m, b)| m == 1 && b > 0),
            "{extra:?}: {use_:?}"
        );
    }
}

/// Copies a tree of 12 files of ~70 KB with `cmd` (made by [`aiscp`] with `report` in
/// `dir`), adding `-r --debug` and the bounce route, on which they are kept in flight;
/// checks the copy and the fake's report. Returns stderr, the GPU each file in flight
/// named, and each device's use.
fn tree_in_flight(dir: &Path, mut cmd: Command) -> (String, Vec<String>, Vec<(u64, u64)>) {
    let src = dir.join("src");
    fs::create_dir(&src).unwrap();
    for i in 0..12u64 {
        write_random(&src.join(format!("s{i}")), 70_000 + i as usize, i);
    }
    let out = cmd
        .env("AISCP_ROUTE", "bounce")
        .args(["-r", "--debug"])
        .arg(&src)
        .arg(dir.join("dst"))
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    same_tree(&src, &dir.join("dst"));
    let report = dir.join("report");
    Report::read(&report).assert_clean();
    let gpus: Vec<String> = err
        .lines()
        .filter(|l| l.contains(", in flight)"))
        .map(|l| {
            let named = l.split(" on GPU ").nth(1).and_then(|r| r.split(',').next());
            named
                .unwrap_or_else(|| panic!("no GPU named: {l}"))
                .to_owned()
        })
        .collect();
    assert_eq!(gpus.len(), 12, "{err}");
    (err, gpus, per_device(&report))
}

/// `--debug` names the GPU each file in flight used: with `--gpu 1` every one says GPU 1,
/// with `--gpu all` each says one of the two.
#[test]
fn files_in_flight_name_their_gpu() {
    for (gpu, allowed) in [("1", &["1"][..]), ("all", &["0", "1"][..])] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = aiscp(&dir.path().join("report"), 2);
        cmd.args(["--gpu", gpu]);
        let (err, gpus, _) = tree_in_flight(dir.path(), cmd);
        assert!(
            gpus.iter().all(|g| allowed.contains(&g.as_str())),
            "--gpu {gpu}: {err}"
        );
    }
}

/// `--gpu auto` places files in flight too: a tree on a drive nearest GPU 1 keeps every file
/// on GPU 1 (device 0 only holds the first slot, secured before any DST is opened, and
/// moves no byte); where locality is unknown they go to either.
#[test]
fn auto_puts_files_in_flight_on_the_gpu_nearest_their_drive() {
    for with_block in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let dev = fs::metadata(dir.path()).unwrap().dev();
        let sys = dir.path().join("sys");
        sysfs(&sys, dev, with_block);
        let mut cmd = aiscp(&dir.path().join("report"), 2);
        cmd.env("AISCP_FAKE_GPU_BUS_IDS", "0000:03:00.0,0000:43:00.0")
            .env("AISCP_TEST_SYSFS", &sys)
            .args(["--gpu", "auto"]);
        let (err, gpus, use_) = tree_in_flight(dir.path(), cmd);
        if with_block {
            let why =
                "files in flight: GPU 1 (nearest: under PCI bridge 0000:40:01.1 with nvme1n1)";
            assert!(err.contains(why), "{err}");
            assert!(gpus.iter().all(|g| g == "1"), "{err}");
            assert_eq!(use_[0].1, 0, "{use_:?}");
        } else {
            let why = "files in flight: GPUs 0,1 (storage locality unknown";
            assert!(err.contains(why), "{err}");
            assert!(use_[1].1 > 0, "{use_:?}");
        }
    }
}
