//! Faults while setting up: the library refusing a file or a buffer, device and pinned
//! memory running out, the driver failing to open.

use super::*;

#[test]
fn refused_file_registration_takes_the_bounce_route() {
    // 5027 is what cuFile answers for tmpfs; 5008 and 5030 are other refusals; 5019 what
    // it answers for a SOURCE opened with O_NOFOLLOW (every file of `-r`).
    for (code, engine) in [5027, 5030, 5008, 5019]
        .into_iter()
        .zip(ENGINES.into_iter().cycle())
    {
        let scene = Scene::for_engine(code, engine);
        let out = scene.run_all(&format!("register={code}"));
        let report = assert_clean_success(&scene, &out);
        // No library I/O at all: every byte went host -> device -> host.
        let total = (BIG + MID + SMALL) as u64;
        assert_eq!(report.stats.reads, 0, "register={code}");
        assert_eq!(report.stats.writes, 0, "register={code}");
        assert_eq!(report.stats.htod_bytes, total, "register={code}");
        assert_eq!(report.stats.dtoh_bytes, total, "register={code}");
    }
}

#[test]
fn refusing_only_the_destination_still_copies_through_device_memory() {
    // The 2nd registration is big's DST: SRC goes direct, DST bounces.
    for engine in ENGINES {
        let scene = Scene::for_engine(8, engine);
        let out = scene.run_all("register#2=5027");
        let report = assert_clean_success(&scene, &out);
        assert!(report.stats.dtoh_bytes >= BIG as u64 / 2, "{report:?}");
    }
}

#[test]
fn refusing_only_the_source_still_copies_through_device_memory() {
    // The 1st registration is big's SRC: SRC bounces into the slot, DST is written from it
    // by the library, which must find every upload landed (the fake runs queued copies only
    // when their stream is synchronized).
    for engine in ENGINES {
        let scene = Scene::for_engine(10, engine);
        let out = scene.run_all("register#1=5027");
        let report = assert_clean_success(&scene, &out);
        assert!(report.stats.htod_bytes >= BIG as u64 / 2, "{report:?}");
        assert!(report.stats.write_bytes >= BIG as u64 / 2, "{report:?}");
    }
}

#[test]
fn device_allocation_failure_retries_with_a_smaller_chunk() {
    // 4 MiB slots do not fit; the engine halves the chunk to 1 MiB and the copy is whole.
    for engine in ENGINES {
        let scene = Scene::for_engine(9, engine);
        let out = scene.run_chunk("malloc>1048576", 4 << 20, &["big", "mid", "small", "out/"]);
        let report = assert_clean_success(&scene, &out);
        assert_eq!(report.stats.max_alloc, 1 << 20, "{report:?}");
        assert!(report.stats.read_bytes > 0, "still direct: {report:?}");
    }
}

#[test]
fn device_allocation_failure_names_the_size() {
    // A 64 KiB chunk is below the size the engine shrinks to, so it fails at once, naming
    // the size; a 4 MiB chunk shrinks to 1 MiB first and names both.
    let scene = Scene::new(9);
    let out = scene.run("malloc>16384", &["big", "out/big"]);
    assert_one_error(
        &out,
        &[
            "cannot allocate 65536 bytes of GPU memory to copy 'big'",
            "out of memory",
        ],
    );
    scene.assert_prefix("big", 0);
    scene.assert_sources_untouched();
    scene.report().assert_clean();
    let out = scene.run_chunk("malloc>16384", 4 << 20, &["big", "out/big"]);
    assert_one_error(
        &out,
        &["cannot allocate 4194304 bytes of GPU memory (nor down to 1048576) to copy 'big'"],
    );
    scene.report().assert_clean();
}

#[test]
fn device_allocation_failure_leaves_an_existing_dst_intact() {
    // The first buffer is allocated before DEST is opened: with no device memory for it the
    // file fails, and the DEST it would have replaced keeps every byte (with and without
    // --atomic), while no new DEST is created for the other operand.
    for atomic in [&[][..], &["--atomic"][..]] {
        let scene = Scene::new(12);
        let old = random_bytes(70_000, 99);
        fs::write(scene.path("out/big"), &old).unwrap();
        let mut args = atomic.to_vec();
        args.extend(["big", "out/big"]);
        let out = scene.run("malloc>16384", &args);
        assert_one_error(
            &out,
            &["cannot allocate 65536 bytes of GPU memory to copy 'big'"],
        );
        assert_same_bytes(
            &fs::read(scene.path("out/big")).unwrap(),
            &old,
            &format!("the old out/big ({atomic:?})"),
        );
        let out = scene.run("malloc>16384", &["mid", "out/mid"]);
        assert_eq!(out.status.code(), Some(1));
        assert!(!scene.path("out/mid").exists(), "no empty DEST is left");
        assert_eq!(
            fs::read_dir(scene.path("out")).unwrap().count(),
            1,
            "no temporary file is left ({atomic:?})"
        );
        scene.assert_sources_untouched();
        scene.report().assert_clean();
    }
}

#[test]
fn pinned_memory_failure_leaves_an_existing_dst_intact() {
    // The first slot's host window (pinned memory: the bounce route and every unaligned tail
    // go through it) is allocated before DEST is opened too. Pinning it takes two calls when
    // the first fails: the registration of aiscp's own pages, then the runtime's allocation.
    let scene = Scene::new(13);
    let old = random_bytes(70_000, 98);
    fs::write(scene.path("out/big"), &old).unwrap();
    let out = scene.run("hostmalloc#1=oom;hostmalloc#2=oom", &["big", "out/big"]);
    assert_one_error(
        &out,
        &[
            "cannot allocate 65536 bytes of pinned host memory to copy 'big'",
            "out of memory",
        ],
    );
    assert_same_bytes(
        &fs::read(scene.path("out/big")).unwrap(),
        &old,
        "the old out/big",
    );
    scene.assert_sources_untouched();
    scene.report().assert_clean();
}

#[test]
fn a_single_failed_allocation_spares_the_other_operands() {
    // The second slot's allocation fails (64 KiB is too small to shrink): the copy goes on
    // with the one slot it has, whole, for every operand.
    let scene = Scene::new(10);
    let out = scene.run_all("malloc#2=oom");
    let report = assert_clean_success(&scene, &out);
    assert_eq!(report.stats.mallocs, 1, "one slot for the run: {report:?}");
}

#[test]
fn refused_buffer_registration_bounces_through_device_memory() {
    // The buffer is device memory all the same: the bounce route copies through it with
    // hipMemcpy, the files keep O_DIRECT, and nothing is reported.
    for engine in ENGINES {
        let scene = Scene::for_engine(13, engine);
        let out = scene.run_all("bufregister=5030");
        let report = assert_clean_success(&scene, &out);
        let total = (BIG + MID + SMALL) as u64;
        assert_eq!(report.stats.reads + report.stats.writes, 0, "{report:?}");
        assert_eq!(report.stats.htod_bytes, total);
        assert_eq!(report.stats.dtoh_bytes, total);
    }
}

#[test]
fn driver_open_failure_is_one_clear_message() {
    let scene = Scene::new(11);
    let out = scene.run_all("driver=5011");
    assert_one_error(
        &out,
        &["cannot open the hipFile driver: ", "HipDriverError 5011"],
    );
    for name in ["big", "mid", "small"] {
        scene.assert_prefix(name, 0);
    }
    scene.assert_sources_untouched();
    scene.report().assert_clean();
}

#[test]
fn the_fake_library_is_really_loaded() {
    // Guards every test above: a malformed rule aborts the fake, so a run that ignored
    // AISCP_FAKE_GPU_FAULTS would not have loaded it at all.
    let scene = Scene::new(12);
    let out = scene.run("read@=EIO", &["big", "out/big"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("malformed AISCP_FAKE_GPU_FAULTS"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A runtime that will not pin memory it did not allocate (hipHostRegister refused with 801):
/// the windows fall back to the runtime's own pinned memory, and every GPU route copies as
/// before, with nothing leaked. Out of memory is not refused support: it still fails the file
/// (`pinned_memory_failure_leaves_an_existing_dst_intact`).
#[test]
fn pinned_windows_fall_back_where_registration_is_refused() {
    use crate::routes::GPU_ROUTES;
    for route in GPU_ROUTES {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let data = random_bytes(BIG, 41);
        fs::write(d.join("a"), &data).unwrap();
        let report = d.join("report");
        let out = route
            .aiscp(d, &report)
            .env("AISCP_FAKE_GPU_HOST_REGISTER", "refuse")
            .args(["--chunk-size", "64K", "a", "b"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{route:?}: {stderr}");
        assert_same_bytes(
            &fs::read(d.join("b")).unwrap(),
            &data,
            &format!("{route:?}: b"),
        );
        Backend::FakeGpu.assert_report_clean(&report);
    }
}

/// --debug says how the bounce windows were pinned: on aiscp's own memory (asking for huge
/// pages where a window is large enough), or on the runtime's memory with the refusal that
/// sent them there, so a slower run can be told apart without a profiler.
#[test]
fn debug_says_how_the_windows_were_pinned() {
    use crate::routes::Route;
    for (chunk, refuse, said) in [
        (
            "4M",
            false,
            "pinned windows: 2 on aiscp's own memory, huge pages asked for\n",
        ),
        (
            "64K",
            false,
            "pinned windows: 2 on aiscp's own memory, 4 KiB pages (each under 2 MiB)\n",
        ),
        (
            "4M",
            true,
            "pinned windows: 2 on the runtime's pinned memory, as registering ours was \
             refused: hipHostRegister: operation not supported (error 801)\n",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("a"), random_bytes(BIG, 42)).unwrap();
        let report = d.join("report");
        let mut cmd = Route::Bounce.aiscp(d, &report);
        if refuse {
            cmd.env("AISCP_FAKE_GPU_HOST_REGISTER", "refuse");
        }
        let out = cmd
            .args(["--debug", "--streams", "1", "--chunk-size", chunk, "a", "b"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains(said), "{chunk}, refuse {refuse}: {stderr}");
        Backend::FakeGpu.assert_report_clean(&report);
    }
}
