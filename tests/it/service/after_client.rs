//! A DEST is its client's again once the client is gone: the service begins no write to it
//! and never changes its size after it has seen the client's connection close or its Cancel.
//! Each case stops a client while the service is held mid-file (a pause point between
//! slices), lets GNU cp write DEST anew the moment the client's shell would, then lets the
//! service go on, and requires DEST to be exactly what cp wrote.

use super::{dir, paused_between_slices, signal, wait_flag, wait_for, Service};
use crate::support::{write_random, Backend, BACKENDS};
use nix::sys::signal::Signal;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A client of `svc` copying `src` to `dst`, its stderr piped.
fn start_client(svc: &Service, src: &Path, dst: &Path) -> Child {
    svc.client()
        .arg(src)
        .arg(dst)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// GNU cp writes `new` over `dst`, as the next command of the client's script would.
fn cp_over(new: &Path, dst: &Path) {
    let st = Command::new("cp").arg(new).arg(dst).status().unwrap();
    assert!(st.success());
}

/// Waits until the service has let client `pid` go: its files have all ended.
fn wait_left(svc: &Service, pid: u32) {
    let left = format!("client pid {pid} left");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !svc.log().contains(&left) {
        assert!(Instant::now() < deadline, "never left:\n{}", svc.log());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// DEST equals `new` byte for byte, some time after the service is done with the client.
fn assert_untouched(dst: &Path, new: &Path, how: &str) {
    std::thread::sleep(Duration::from_millis(200));
    let (got, want) = (fs::read(dst).unwrap(), fs::read(new).unwrap());
    assert!(
        got == want,
        "{how}: DEST is {} bytes, not the {} cp wrote",
        got.len(),
        want.len()
    );
}

#[test]
fn a_client_killed_mid_file_gets_its_dest_back_untouched() {
    for backend in BACKENDS {
        let d = dir();
        let (svc, flag) = paused_between_slices(backend, d.path(), &[]);
        let (src, dst, new) = (d.path().join("a"), d.path().join("d"), d.path().join("n"));
        write_random(&src, 4 << 20, 21);
        write_random(&new, 3 << 20, 22);
        let mut client = start_client(&svc, &src, &dst);
        wait_flag(&flag);
        let pid = client.id();
        signal(pid as i32, Signal::SIGKILL);
        wait_for(&mut client, Duration::from_secs(5));
        cp_over(&new, &dst);
        // The service goes on from the slice it was held before.
        fs::remove_file(&flag).unwrap();
        wait_left(&svc, pid);
        assert_untouched(&dst, &new, &format!("{backend:?}, kill -9"));
        assert!(svc.stop().success());
    }
}

#[test]
fn a_second_sigint_waits_for_the_service_and_leaves_a_prefix() {
    for backend in BACKENDS {
        let d = dir();
        let (svc, flag) = paused_between_slices(backend, d.path(), &[]);
        let (src, dst, new) = (d.path().join("a"), d.path().join("d"), d.path().join("n"));
        write_random(&src, 4 << 20, 23);
        write_random(&new, 1 << 20, 24);
        let mut client = start_client(&svc, &src, &dst);
        wait_flag(&flag);
        let pid = client.id();
        signal(pid as i32, Signal::SIGINT);
        std::thread::sleep(Duration::from_millis(20));
        signal(pid as i32, Signal::SIGINT);
        // It waits for the service to say the file stopped, which the pause holds back.
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            client.try_wait().unwrap().is_none(),
            "{backend:?}: the client died before its service stopped writing its file"
        );
        fs::remove_file(&flag).unwrap();
        let st = wait_for(&mut client, Duration::from_secs(5));
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&st),
            Some(libc::SIGINT),
            "{backend:?}"
        );
        // What an interrupted cp leaves: a prefix of SOURCE.
        let (got, whole) = (fs::read(&dst).unwrap(), fs::read(&src).unwrap());
        assert!(got.len() < whole.len() && got[..] == whole[..got.len()]);
        cp_over(&new, &dst);
        wait_left(&svc, pid);
        assert_untouched(&dst, &new, &format!("{backend:?}, two SIGINTs"));
        assert!(svc.stop().success());
    }
}

#[test]
fn a_sigint_during_a_stalled_write_waits_for_the_service() {
    let d = dir();
    // The library route, whose second write stalls 3 s inside the library.
    let svc = Service::start(
        Backend::FakeGpu,
        d.path(),
        &["--route", "library", "--chunk-size", "256K"],
        &[("AISCP_FAKE_GPU_FAULTS", "write#2=stall:3000")],
    );
    let (src, dst, new) = (d.path().join("a"), d.path().join("d"), d.path().join("n"));
    write_random(&src, 4 << 20, 25);
    write_random(&new, 1 << 20, 26);
    let mut client = start_client(&svc, &src, &dst);
    // Into the stall: DEST has its first slice.
    let deadline = Instant::now() + Duration::from_secs(10);
    while fs::metadata(&dst).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "{}", svc.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(100));
    let pid = client.id();
    signal(pid as i32, Signal::SIGINT);
    wait_for(&mut client, Duration::from_secs(15));
    cp_over(&new, &dst);
    wait_left(&svc, pid);
    assert_untouched(&dst, &new, "a stalled library write");
    assert!(svc.stop().success());
}

/// The files in flight of a client killed mid-tree, on the route `auto` takes on hipFile
/// (small files bounce in flight): each download stalls inside the runtime, out of reach of
/// the client's cancel, so files are between their download and their write when the client
/// dies. GNU cp then writes every DEST that exists anew, and not one is written again.
#[test]
fn a_client_killed_mid_tree_has_no_file_in_flight_written_after() {
    let d = dir();
    let slow = ("AISCP_FAKE_GPU_FAULTS", "dtoh=stall:100");
    let svc = Service::start(Backend::FakeGpu, d.path(), &["--chunk-size", "4M"], &[slow]);
    let (src, dst, new) = (
        d.path().join("src"),
        d.path().join("dst"),
        d.path().join("n"),
    );
    fs::create_dir(&src).unwrap();
    for i in 0..64 {
        write_random(&src.join(format!("f{i}")), 20_000 + i as usize, 0x4b + i);
    }
    write_random(&new, 3000, 27);
    let mut client = svc.client().arg("-r").arg(&src).arg(&dst).spawn().unwrap();
    // Some files written, more in flight (4 workers, 100 ms a download).
    let deadline = Instant::now() + Duration::from_secs(20);
    while fs::read_dir(&dst).map_or(0, |e| e.count()) < 8 {
        assert!(Instant::now() < deadline, "{}", svc.log());
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = client.id();
    signal(pid as i32, Signal::SIGKILL);
    wait_for(&mut client, Duration::from_secs(5));
    let dests: Vec<_> = fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for dest in &dests {
        cp_over(&new, dest);
    }
    wait_left(&svc, pid);
    // Longer than a stalled download: a worker held in one when the client died is out.
    std::thread::sleep(Duration::from_millis(300));
    let want = fs::read(&new).unwrap();
    for dest in &dests {
        let got = fs::read(dest).unwrap();
        assert!(
            got == want,
            "{}: written after its client died",
            dest.display()
        );
    }
    assert!(svc.stop().success());
}
