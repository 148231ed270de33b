//! Devices: the count, PCI bus ids and the current device, and the leak report.

use std::ffi::{c_char, c_int};
use std::os::unix::process::ExitStatusExt;

use crate::api::*;
use crate::support::run;

pub fn scenario_devices(api: &Api) {
    let want: c_int = std::env::var("AISCP_FAKE_GPU_DEVICES")
        .unwrap()
        .parse()
        .unwrap();
    let mut count = -1;
    let rc = unsafe { (api.get_device_count)(&mut count) };
    assert_eq!(count, want);
    if want == 0 {
        assert_eq!(rc, 100);
        assert_eq!(unsafe { (api.set_device)(0) }, 100);
        assert_eq!(api.malloc(4096), Err(100));
        assert_eq!(
            unsafe { (api.driver_open)() },
            HipFileError {
                err: 5011,
                hip_drv_err: 100
            }
        );
    } else {
        assert_eq!(rc, 0);
        assert_eq!(unsafe { (api.set_device)(want - 1) }, 0);
        assert_eq!(unsafe { (api.set_device)(want) }, 101);
        assert_eq!(unsafe { (api.set_device)(-1) }, 101);
    }
}

/// Leaves one of everything behind.
pub fn scenario_leaks(api: &Api) {
    assert_eq!(unsafe { (api.driver_open)() }, OK);
    let file = rw(&dir().join("f"));
    let fh = api.register(&file).unwrap();
    let buf = api.device_buffer(4096);
    let _plain = api.malloc(8192).unwrap();
    let mut host = std::ptr::null_mut();
    assert_eq!(unsafe { (api.host_malloc)(&mut host, 12288, 0) }, 0);
    let mut stream = std::ptr::null_mut();
    assert_eq!(unsafe { (api.stream_create)(&mut stream, 0) }, 0);
    assert_eq!(unsafe { (api.stream_register)(stream, 0) }, OK);
    let _ = (fh, buf);
    std::mem::forget(file);
}

/// Runs with 2 devices and `AISCP_FAKE_GPU_BUS_IDS=0000:03:00.0,0000:81:00.0`.
pub fn scenario_bus_ids(api: &Api) {
    let id = |device: c_int, len: c_int| {
        let mut buf = [0 as c_char; 32];
        let rc = unsafe { (api.pci_bus_id)(buf.as_mut_ptr(), len, device) };
        (rc, text(buf.as_ptr()))
    };
    assert_eq!(id(0, 32), (0, "0000:03:00.0".to_owned()));
    assert_eq!(id(1, 13), (0, "0000:81:00.0".to_owned()));
    assert_eq!(id(1, 12).0, 1, "no room for the NUL");
    assert_eq!(id(2, 32).0, 101);
    assert_eq!(id(-1, 32).0, 101);
    // Memory of device 1 used from a thread whose current device is 0: recorded.
    assert_eq!(unsafe { (api.set_device)(1) }, 0);
    let p = api.malloc(4096).unwrap();
    let host = [7u8; 4096];
    assert_eq!(unsafe { (api.memcpy)(p, host.as_ptr().cast(), 4096, 1) }, 0);
    assert_eq!(unsafe { (api.set_device)(0) }, 0);
    assert_eq!(unsafe { (api.memcpy)(p, host.as_ptr().cast(), 4096, 1) }, 0);
    assert_eq!(unsafe { (api.free)(p) }, 0);
}

#[test]
fn device_count_follows_the_environment() {
    for n in ["0", "2"] {
        run("devices", &[("AISCP_FAKE_GPU_DEVICES", n)]).assert_clean();
    }
}

#[test]
fn bus_ids_and_current_device_checks() {
    let out = run(
        "bus_ids",
        &[
            ("AISCP_FAKE_GPU_DEVICES", "2"),
            ("AISCP_FAKE_GPU_BUS_IDS", "0000:03:00.0,0000:81:00.0"),
        ],
    );
    out.assert_passed();
    let misuse = &out.report().misuse;
    assert_eq!(misuse.len(), 1, "{}", out.report());
    assert!(
        misuse[0].starts_with("hipMemcpy on memory 0x")
            && misuse[0].ends_with(" of device 1 from a thread whose current device is 0"),
        "{}",
        out.report()
    );
    assert_eq!(out.report().devices.mallocs, [0, 1], "{}", out.report());
    assert_eq!(out.report().devices.bytes, [0, 8192], "{}", out.report());
    // A list that does not match the device count aborts, naming the variable.
    let out = run(
        "bus_ids",
        &[
            ("AISCP_FAKE_GPU_DEVICES", "3"),
            ("AISCP_FAKE_GPU_BUS_IDS", "0000:03:00.0,0000:81:00.0"),
        ],
    );
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{}", out.stderr);
    assert!(
        out.stderr.contains("malformed AISCP_FAKE_GPU_BUS_IDS"),
        "{}",
        out.stderr
    );
}

#[test]
fn report_lists_every_leak() {
    let out = run("leaks", &[]);
    out.assert_passed();
    let leaks = &out.report().leaks;
    for needle in [
        "file handle",
        "buffer",
        "device allocation",
        "(8192 bytes) not freed",
        "pinned host allocation",
        "not destroyed",
        "still registered with hipFile",
        "driver open count 1",
    ] {
        assert!(
            leaks.iter().any(|l| l.contains(needle)),
            "no leak line with {needle:?} in\n{}",
            out.report()
        );
    }
    assert_eq!(leaks.len(), 8, "{}", out.report());
    assert!(out.report().misuse.is_empty(), "{}", out.report());
}
