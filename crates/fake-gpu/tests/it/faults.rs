//! Injected faults (`AISCP_FAKE_GPU_FAULTS`): I/O errors, error codes, malformed rules.

use std::ffi::c_void;
use std::fs;
use std::os::unix::process::ExitStatusExt;

use crate::api::*;
use crate::support::run;

/// Runs with [`IO_FAULTS`].
pub fn scenario_io_faults(api: &Api) {
    let data = random_bytes(16384);
    let path = dir().join("f");
    fs::write(&path, &data).unwrap();
    let file = rw(&path);
    let fh = api.register(&file).unwrap();
    let buf = api.device_buffer(16384);
    let r = |size: usize, off: i64| {
        set_errno(77);
        let n = api.read(fh, buf, size, off, 0);
        (n, errno())
    };
    assert_eq!(r(4096, 0).0, 4096); // read 1
    assert_eq!(r(4096, 4096).0, 4096); // read 2 ends just before 8192
    assert_eq!(r(4096, 8191), (-1, libc::EIO)); // read 3 covers 8192
    assert_eq!(r(4096, 8192).0, 4096); // read 4: @8192 fires once
    assert_eq!(r(0, 8192).0, 0); // read 5: an empty range covers nothing
    assert_eq!(r(4096, 0).0, -5030); // read 6
    assert_eq!(r(4096, 0), (-1, 0)); // read 7: HIP error 1, errno cleared
    assert_eq!(r(4096, 0).0, 0); // read 8: short:0
    assert_eq!(r(4096, 0).0, 4096); // read 9
    let w = |size: usize, off: i64| {
        set_errno(77);
        let n = api.write(fh, buf, size, off, 0);
        (n, errno())
    };
    assert_eq!(w(4096, 0).0, 4096); // write 1
    assert_eq!(w(4096, 0), (-1, libc::ENOSPC)); // write 2
    assert_eq!(w(4096, 0).0, 4096); // write 3
    assert_eq!(w(4096, 0).0, 100); // write 4: short:100
    assert_eq!(w(4096, 65536 - 4096).0, 4096); // write 5 ends before 65536
    assert_eq!(w(4096, 65536 - 4095), (-1, libc::EDQUOT)); // write 6 covers it
    assert_eq!(w(1, 65536), (-1, libc::EDQUOT)); // write 7: `*` repeats
    assert_eq!(w(1, 65537).0, 1); // write 8
    assert_eq!(w(1, 0), (-1, libc::EINTR)); // write 9
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

const IO_FAULTS: &str = "read@8192=EIO; write#2=ENOSPC; read#6=hipfile:5030; read#7=hiperr:1; \
                         read#8=short:0; write#4=short:100; write@65536*=EDQUOT; write#9=EINTR;";

/// Runs with [`CODE_FAULTS`].
pub fn scenario_code_faults(api: &Api) {
    assert_eq!(unsafe { (api.driver_open)() }, code(5033));
    assert_eq!(unsafe { (api.use_count)() }, 0);
    assert_eq!(unsafe { (api.driver_open)() }, OK);
    let file = rw(&dir().join("f"));
    let other = rw(&dir().join("g"));
    let fh = api.register(&file).unwrap();
    assert_eq!(api.register(&other), Err(code(5027)));
    let fh2 = api.register(&other).unwrap();
    assert_eq!(api.malloc(8193), Err(2)); // malloc 1: over the limit
    assert_eq!(api.malloc(4096), Err(2)); // malloc 2: #2
    let p = api.malloc(8192).unwrap(); // malloc 3
    assert_eq!(unsafe { (api.buf_register)(p, 8192, 0) }, code(5036));
    assert_eq!(unsafe { (api.buf_register)(p, 8192, 0) }, OK);
    api.release_buffer(p);
    unsafe { (api.handle_deregister)(fh) };
    unsafe { (api.handle_deregister)(fh2) };
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

const CODE_FAULTS: &str =
    "register#2=5027;bufregister#1=5036;malloc>8192;malloc#2=oom;driver#1=5033";

/// Runs with `register=5030;driver=hipfile:5001`: the plain forms fire every time.
pub fn scenario_always_faults(api: &Api) {
    assert_eq!(unsafe { (api.driver_open)() }, code(5001));
    assert_eq!(unsafe { (api.driver_open)() }, code(5001));
    let file = rw(&dir().join("f"));
    for _ in 0..3 {
        assert_eq!(api.register(&file), Err(code(5030)));
    }
    // Registration opens the driver implicitly, so a driver fault fails it too.
    let p = api.malloc(4096).unwrap();
    assert_eq!(unsafe { (api.buf_register)(p, 4096, 0) }, code(5001));
    assert_eq!(unsafe { (api.free)(p) }, 0);
}

/// Runs with [`CORRUPT_FAULTS`]: each corrupted transfer delivers its data with the first
/// byte's bits flipped, and nothing else changed; the source of a write is left intact.
pub fn scenario_corrupt_faults(api: &Api) {
    let data = random_bytes(8192);
    let flipped = |mut v: Vec<u8>| {
        v[0] ^= 0xff;
        v
    };
    let src = dir().join("src");
    fs::write(&src, &data).unwrap();
    let src = rw(&src);
    let dst_path = dir().join("dst");
    let dst = rw(&dst_path);
    let fh = api.register(&src).unwrap();
    let dh = api.register(&dst).unwrap();
    let buf = api.device_buffer(8192);
    let device = |len: usize| unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
    assert_eq!(api.read(fh, buf, 8192, 0, 0), 8192); // read 1: corrupt lands in device memory
    assert_eq!(device(8192), &flipped(data.clone())[..]);
    assert_eq!(api.read(fh, buf, 8192, 0, 0), 8192); // read 2: clean
    assert_eq!(device(8192), &data[..]);
    assert_eq!(api.write(dh, buf, 4096, 4096, 4096), 4096); // write 1: clean
    assert_eq!(api.write(dh, buf, 4096, 0, 0), 4096); // write 2: covers 0, corrupt
    assert_eq!(
        device(8192),
        &data[..],
        "a corrupt write leaves its source alone"
    );
    assert_eq!(fs::read(&dst_path).unwrap(), flipped(data.clone()));
    // Copies: htod 1 clean, htod 2 corrupt; dtoh 1 fails with 700, dtoh 2 corrupt (async).
    let mut host = data.clone();
    let copy =
        |dst: *mut c_void, src: *const c_void, kind| unsafe { (api.memcpy)(dst, src, 8192, kind) };
    assert_eq!(copy(buf, host.as_ptr().cast(), 1), 0);
    assert_eq!(copy(buf, host.as_ptr().cast(), 1), 0);
    assert_eq!(device(8192), &flipped(data.clone())[..]);
    assert_eq!(copy(host.as_mut_ptr().cast(), buf, 2), 700);
    assert_eq!(host, data, "a failed copy moves nothing");
    let mut stream: Stream = std::ptr::null_mut();
    assert_eq!(unsafe { (api.stream_create)(&mut stream, 0) }, 0);
    let queued = unsafe { (api.memcpy_async)(host.as_mut_ptr().cast(), buf, 8192, 2, stream) };
    assert_eq!(queued, 0);
    assert_eq!(host, data, "queued, not yet run");
    assert_eq!(unsafe { (api.stream_sync)(stream) }, 0);
    // The device held the flipped byte; the corrupt copy flips it back on arrival.
    assert_eq!(host, data);
    assert_eq!(unsafe { (api.stream_destroy)(stream) }, 0);
    unsafe { (api.handle_deregister)(fh) };
    unsafe { (api.handle_deregister)(dh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

const CORRUPT_FAULTS: &str = "read#1=corrupt;write@0=corrupt;htod#2=corrupt;dtoh#1=700;\
                              dtoh#2=corrupt";

/// Runs with [`RUNTIME_FAULTS`]: hipSetDevice, stream creation and synchronization fail
/// on the selected call only, returning the code and doing nothing.
pub fn scenario_runtime_faults(api: &Api) {
    assert_eq!(unsafe { (api.set_device)(0) }, 0); // setdevice 1
    assert_eq!(unsafe { (api.set_device)(0) }, 101); // setdevice 2
    assert_eq!(unsafe { (api.set_device)(0) }, 0); // setdevice 3
    let mut stream: Stream = std::ptr::null_mut();
    assert_eq!(unsafe { (api.stream_create)(&mut stream, 0) }, 2); // streamcreate 1
    assert!(stream.is_null(), "a failed create gives no stream");
    assert_eq!(unsafe { (api.stream_create)(&mut stream, 0) }, 0);
    let data = random_bytes(4096);
    let buf = api.malloc(4096).unwrap();
    let queued = unsafe { (api.memcpy_async)(buf, data.as_ptr().cast(), 4096, 1, stream) };
    assert_eq!(queued, 0);
    assert_eq!(unsafe { (api.stream_sync)(stream) }, 719); // streamsync 1: the copy is lost
    let mut back = vec![0u8; 4096];
    assert_eq!(
        unsafe { (api.memcpy)(back.as_mut_ptr().cast(), buf, 4096, 2) },
        0
    );
    assert_ne!(back, data, "the failed stream's copy never ran");
    assert_eq!(unsafe { (api.stream_sync)(stream) }, 0);
    assert_eq!(unsafe { (api.stream_destroy)(stream) }, 0);
    assert_eq!(unsafe { (api.free)(buf) }, 0);
}

const RUNTIME_FAULTS: &str = "setdevice#2=101;streamcreate#1=hiperr:2;streamsync#1=719";

#[test]
fn corrupt_faults_flip_the_first_byte_in_transit() {
    let out = run(
        "corrupt_faults",
        &[("AISCP_FAKE_GPU_FAULTS", CORRUPT_FAULTS)],
    );
    out.assert_clean();
    assert_eq!(out.report().stats.htod_bytes, 2 * 8192);
    assert_eq!(
        out.report().stats.dtoh_bytes,
        8192,
        "the failed copy moved nothing"
    );
}

#[test]
fn runtime_faults_fire_as_selected() {
    run(
        "runtime_faults",
        &[("AISCP_FAKE_GPU_FAULTS", RUNTIME_FAULTS)],
    )
    .assert_clean();
}

#[test]
fn read_and_write_faults_fire_as_selected() {
    let out = run("io_faults", &[("AISCP_FAKE_GPU_FAULTS", IO_FAULTS)]);
    out.assert_clean();
    assert_eq!(out.report().stats.reads, 9);
    assert_eq!(out.report().stats.writes, 9);
    assert_eq!(out.report().stats.read_bytes, 4 * 4096);
    assert_eq!(out.report().stats.write_bytes, 3 * 4096 + 100 + 1);
}

#[test]
fn register_malloc_and_driver_faults_fire_as_selected() {
    let out = run("code_faults", &[("AISCP_FAKE_GPU_FAULTS", CODE_FAULTS)]);
    out.assert_clean();
    assert_eq!(out.report().stats.mallocs, 1);
    assert_eq!(out.report().stats.handles, 2);
    run(
        "always_faults",
        &[("AISCP_FAKE_GPU_FAULTS", "register=5030;driver=hipfile:5001")],
    )
    .assert_clean();
}

#[test]
fn a_malformed_rule_aborts_naming_it() {
    let out = run(
        "identity",
        &[("AISCP_FAKE_GPU_FAULTS", "read#1=EIO;read@x=EIO")],
    );
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("fake-gpu: malformed AISCP_FAKE_GPU_FAULTS rule `read@x=EIO`"),
        "{}",
        out.stderr
    );
}
