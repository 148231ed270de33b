//! Devices: the count, PCI bus ids and the current device, and the leak report.

use std::ffi::{c_char, c_int, c_void};
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

/// Host memory of our own pinned with hipHostRegister: counted as pinned for copies, refused
/// twice, unregistered once; a range left registered is a leak. With `hostmalloc#2=oom` the
/// second pinning (the allocation below) fails with 2 (out of memory).
pub fn scenario_host_register(api: &Api) {
    let mut host = vec![5u8; 8192];
    let p = host.as_mut_ptr().cast::<c_void>();
    assert_eq!(unsafe { (api.host_register)(p, 8192, 0) }, 0);
    let dev = api.malloc(8192).unwrap();
    assert_eq!(unsafe { (api.memcpy)(dev, p, 8192, 1) }, 0);
    assert_eq!(
        unsafe { (api.host_register)(p, 4096, 0) },
        1,
        "already pinned"
    );
    let mut pinned = std::ptr::null_mut();
    let second = unsafe { (api.host_malloc)(&mut pinned, 4096, 0) };
    std::fs::write(dir().join("result"), second.to_string()).unwrap();
    if second == 0 {
        assert_eq!(unsafe { (api.host_free)(pinned) }, 0);
    }
    assert_eq!(unsafe { (api.host_unregister)(p) }, 0);
    assert_eq!(unsafe { (api.host_unregister)(p) }, 1, "unregistered twice");
    assert_eq!(unsafe { (api.free)(dev) }, 0);
    let mut kept = vec![0u8; 4096];
    assert_eq!(
        unsafe { (api.host_register)(kept.as_mut_ptr().cast(), 4096, 0) },
        0
    );
    std::mem::forget(kept);
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
fn host_ranges_registered_count_as_pinned_and_leak_when_kept() {
    let out = run("host_register", &[]);
    out.assert_passed();
    assert_eq!(out.result, "0");
    let report = out.report();
    assert_eq!(report.leaks.len(), 1, "{report}");
    assert!(
        report.leaks[0].contains("pinned host range")
            && report.leaks[0].contains("(4096 bytes) not unregistered"),
        "{report}"
    );
    for needle in [
        "already pinned host memory",
        "not a registered host range's base",
    ] {
        assert!(
            report.misuse.iter().any(|m| m.contains(needle)),
            "{needle}: {report}"
        );
    }
    let out = run(
        "host_register",
        &[("AISCP_FAKE_GPU_FAULTS", "hostmalloc#2=oom")],
    );
    out.assert_passed();
    assert_eq!(out.result, "2", "the second pinning, an allocation, fails");
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
