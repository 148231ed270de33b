//! Injected faults (`AISCP_FAKE_GPU_FAULTS`): I/O errors, error codes, malformed rules.

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
