//! Moving bytes: a copy through device memory, O_DIRECT alignment and short counts,
//! unregistered handles and buffers, ranges, the per-call cap.

use std::ffi::c_void;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;

use crate::api::*;
use crate::support::run;

/// Copies files of boundary sizes through a small device buffer, the way the engine will.
pub fn scenario_copy(api: &Api) {
    const CHUNK: usize = 64 * 1024;
    assert_eq!(unsafe { (api.driver_open)() }, OK);
    let buf = api.device_buffer(CHUNK);
    let mut total = 0usize;
    for (i, len) in [
        0,
        1,
        4095,
        4096,
        4097,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        3 * CHUNK + 17,
    ]
    .into_iter()
    .enumerate()
    {
        let data = random_bytes(len);
        let src_path = dir().join(format!("src{i}"));
        let dst_path = dir().join(format!("dst{i}"));
        fs::write(&src_path, &data).unwrap();
        let (src, dst) = (File::open(&src_path).unwrap(), rw(&dst_path));
        let (sfh, dfh) = (api.register(&src).unwrap(), api.register(&dst).unwrap());
        let mut off = 0usize;
        loop {
            let n = api.read(sfh, buf, CHUNK, off as i64, 0);
            assert!(n >= 0, "read returned {n}");
            if n == 0 {
                break;
            }
            // Round-trip through host memory too, so htod/dtoh get counted.
            let mut host = vec![0u8; n as usize];
            assert_eq!(
                unsafe { (api.memcpy)(host.as_mut_ptr().cast(), buf, n as usize, 2) },
                0
            );
            assert_eq!(host, data[off..off + n as usize]);
            assert_eq!(
                unsafe { (api.memcpy)(buf, host.as_ptr().cast(), n as usize, 1) },
                0
            );
            assert_eq!(api.write(dfh, buf, n as usize, off as i64, 0), n);
            off += n as usize;
        }
        assert_eq!(off, len);
        unsafe { (api.handle_deregister)(sfh) };
        unsafe { (api.handle_deregister)(dfh) };
        drop((src, dst));
        assert_eq!(fs::read(&dst_path).unwrap(), data, "copy of {len} bytes");
        total += len;
    }
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
    fs::write(dir().join("result"), total.to_string()).unwrap();
}

/// Version, use count, error strings.
pub fn scenario_identity(api: &Api) {
    let (mut major, mut minor, mut patch) = (9, 9, 9);
    assert_eq!(
        unsafe { (api.get_version)(&mut major, &mut minor, &mut patch) },
        OK
    );
    assert_eq!((major, minor, patch), (0, 2, 0));
    assert_eq!(
        unsafe { (api.get_version)(std::ptr::null_mut(), &mut minor, std::ptr::null_mut()) },
        OK
    );
    let mut version = 0;
    assert_eq!(unsafe { (api.runtime_version)(&mut version) }, 0);
    assert!(version > 0);
    assert_eq!(text(unsafe { (api.error_string)(2) }), "out of memory");
    assert_eq!(
        text(unsafe { (api.error_string)(100) }),
        "no ROCm-capable device is detected"
    );
    assert_eq!(text(unsafe { (api.error_string)(0) }), "no error");
    let unknown = text(unsafe { (api.op_error_string)(4242) });
    for code in (5001..=5039).filter(|c| *c != 5021 && *c != 5032) {
        let s = text(unsafe { (api.op_error_string)(code) });
        assert!(!s.is_empty() && s != unknown, "text for {code}");
    }
    assert_eq!(
        text(unsafe { (api.op_error_string)(5027) }),
        "File handle for GPU IO is not registered"
    );
    // Use count: explicit opens, plus an implicit one from registration at zero.
    assert_eq!(unsafe { (api.use_count)() }, 0);
    assert_eq!(unsafe { (api.driver_open)() }, OK);
    assert_eq!(unsafe { (api.driver_open)() }, OK);
    assert_eq!(unsafe { (api.use_count)() }, 2);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
    assert_eq!(unsafe { (api.use_count)() }, 0);
    let buf = api.device_buffer(4096);
    assert_eq!(unsafe { (api.use_count)() }, 1);
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

/// O_DIRECT: file offset, size and buffer address must all be 4096-aligned.
pub fn scenario_o_direct(api: &Api) {
    let path = dir().join("direct");
    fs::write(&path, random_bytes(3 * 4096)).unwrap();
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            println!(
                "SKIP: the filesystem under {} refuses O_DIRECT",
                path.display()
            );
            fs::write(dir().join("result"), "skipped").unwrap();
            return;
        }
        Err(e) => panic!("open O_DIRECT: {e}"),
    };
    let fh = api.register(&file).unwrap();
    let buf = api.device_buffer(4 * 4096);
    assert_eq!(api.read(fh, buf, 4096, 4096, 4096), 4096);
    assert_eq!(api.write(fh, buf, 8192, 0, 0), 8192);
    for (size, off, buf_off) in [(4096, 512, 0), (4095, 0, 0), (4096, 0, 512)] {
        set_errno(0);
        assert_eq!(api.read(fh, buf, size, off, buf_off), -1);
        assert_eq!(errno(), libc::EINVAL);
        set_errno(0);
        assert_eq!(api.write(fh, buf, size, off, buf_off), -1);
        assert_eq!(errno(), libc::EINVAL);
    }
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

/// Runs with [`O_DIRECT_SHORT_FAULTS`]: an unaligned short count on an O_DIRECT fd moves an
/// aligned amount and reports the short count; an aligned one moves exactly that.
pub fn scenario_o_direct_short(api: &Api) {
    let path = dir().join("direct");
    let data = random_bytes(4 * 4096);
    fs::write(&path, &data).unwrap();
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            fs::write(dir().join("result"), "skipped").unwrap();
            return;
        }
        Err(e) => panic!("open O_DIRECT: {e}"),
    };
    let fh = api.register(&file).unwrap();
    let buf = api.device_buffer(4 * 4096);
    assert_eq!(api.read(fh, buf, 4 * 4096, 0, 0), 1, "read 1: short:1");
    let mut host = vec![0u8; 4096];
    assert_eq!(
        unsafe { (api.memcpy)(host.as_mut_ptr().cast(), buf, 4096, 2) },
        0
    );
    assert_eq!(
        host,
        data[..4096],
        "the aligned call moved the first 4096 bytes"
    );
    assert_eq!(
        api.read(fh, buf, 4 * 4096, 0, 0),
        8192,
        "read 2: short:8192"
    );
    assert_eq!(
        api.write(fh, buf, 3 * 4096, 0, 0),
        5000,
        "write 1: short:5000"
    );
    assert_eq!(api.write(fh, buf, 4096, 0, 0), 4096, "write 2: short:9000");
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

const O_DIRECT_SHORT_FAULTS: &str = "read#1=short:1; read#2=short:8192; write#1=short:5000; \
                                     write#2=short:9000";

/// I/O and deregistration on things never registered, and freeing a registered buffer.
pub fn scenario_unregistered(api: &Api) {
    let file = rw(&dir().join("f"));
    let fh = api.register(&file).unwrap();
    assert_eq!(api.register(&file), Err(code(5028)), "same fd twice");
    let buf = api.device_buffer(8192);
    let bogus = 0x1234usize as Handle;
    assert_eq!(api.read(bogus, buf, 4096, 0, 0), -5027);
    assert_eq!(api.write(bogus, buf, 4096, 0, 0), -5027);
    // Lookup is by exact base: an interior pointer is not registered.
    let interior = (buf as usize + 4096) as *mut c_void;
    assert_eq!(api.read(fh, interior, 4096, 0, 0), -5024);
    let unregistered = api.malloc(4096).unwrap();
    assert_eq!(api.write(fh, unregistered, 1, 0, 0), -5024);
    // Host memory cannot be registered.
    let mut host = std::ptr::null_mut();
    assert_eq!(unsafe { (api.host_malloc)(&mut host, 4096, 0) }, 0);
    assert_eq!(unsafe { (api.buf_register)(host, 4096, 0) }, code(5013));
    assert_eq!(unsafe { (api.buf_register)(buf, 8192, 0) }, code(5023));
    assert_eq!(
        unsafe { (api.free)(buf) },
        1,
        "free while registered is refused"
    );
    unsafe { (api.handle_deregister)(bogus) };
    assert_eq!(unsafe { (api.buf_deregister)(unregistered) }, code(5024));
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.free)(unregistered) }, 0);
    assert_eq!(unsafe { (api.host_free)(host) }, 0);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

/// buffer_offset + size must stay inside the registered length; offsets are non-negative.
pub fn scenario_range(api: &Api) {
    let file = rw(&dir().join("f"));
    file.set_len(65536).unwrap();
    let fh = api.register(&file).unwrap();
    let alloc = api.malloc(16384).unwrap();
    assert_eq!(unsafe { (api.buf_register)(alloc, 16385, 0) }, code(5014));
    assert_eq!(unsafe { (api.buf_register)(alloc, 8192, 0) }, OK);
    assert_eq!(api.read(fh, alloc, 8192, 0, 0), 8192);
    assert_eq!(api.read(fh, alloc, 4096, 0, 4096), 4096);
    assert_eq!(api.read(fh, alloc, 8193, 0, 0), -5014);
    assert_eq!(api.write(fh, alloc, 4097, 0, 4096), -5014);
    assert_eq!(api.read(fh, alloc, 1, 0, 8192), -5014);
    assert_eq!(api.read(fh, alloc, 1, -1, 0), -5022);
    assert_eq!(api.write(fh, alloc, 1, 0, -1), -5022);
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(alloc);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

/// One call moves at most 0x7ffff000 bytes. /dev/null takes the write without touching the
/// lazily mapped buffer, so this costs no memory.
pub fn scenario_cap(api: &Api) {
    let size = 0x8000_0000usize + 4096;
    let null = OpenOptions::new().write(true).open("/dev/null").unwrap();
    let fh = api.register(&null).unwrap();
    let buf = api.device_buffer(size);
    assert_eq!(api.write(fh, buf, size, 0, 0), MAX_IO as isize);
    assert_eq!(api.write(fh, buf, MAX_IO + 1, 0, 4095), MAX_IO as isize);
    assert_eq!(api.write(fh, buf, MAX_IO - 1, 0, 0), (MAX_IO - 1) as isize);
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

#[test]
fn copies_through_device_memory_and_reports_clean_stats() {
    let out = run("copy", &[]);
    out.assert_clean();
    let sizes = [
        0u64,
        1,
        4095,
        4096,
        4097,
        65535,
        65536,
        65537,
        3 * 65536 + 17,
    ];
    let total: u64 = sizes.iter().sum();
    assert_eq!(out.result, total.to_string());
    let reads: u64 = sizes.iter().map(|s| s.div_ceil(65536) + 1).sum();
    assert_eq!(out.report().stats.reads, reads);
    assert_eq!(out.report().stats.writes, reads - sizes.len() as u64);
    let stats = &out.report().stats;
    for (key, bytes) in [
        ("read_bytes", stats.read_bytes),
        ("write_bytes", stats.write_bytes),
        ("htod_bytes", stats.htod_bytes),
        ("dtoh_bytes", stats.dtoh_bytes),
    ] {
        assert_eq!(bytes, total, "{key}");
    }
    assert_eq!(out.report().stats.mallocs, 1);
    assert_eq!(out.report().stats.max_alloc, 65536);
    assert_eq!(out.report().stats.handles, 2 * sizes.len() as u64);
}

#[test]
fn version_use_count_and_error_strings() {
    run("identity", &[]).assert_clean();
}

#[test]
fn o_direct_requires_4096_alignment() {
    let out = run("o_direct", &[]);
    out.assert_passed();
    if out.result == "skipped" {
        test_support::skip::skip(
            "TMPDIR refuses O_DIRECT",
            &format!("under {}", env!("CARGO_TARGET_TMPDIR")),
        );
        return;
    }
    let misuse = &out.report().misuse;
    assert_eq!(misuse.len(), 6, "{}", out.report());
    assert!(
        misuse.iter().all(|l| l.contains("O_DIRECT")),
        "{}",
        out.report()
    );
    assert!(out.report().leaks.is_empty(), "{}", out.report());
    assert_eq!(out.report().stats.read_bytes, 4096);
    assert_eq!(out.report().stats.write_bytes, 8192);
}

#[test]
fn unaligned_short_counts_on_o_direct_move_aligned_amounts() {
    let out = run(
        "o_direct_short",
        &[("AISCP_FAKE_GPU_FAULTS", O_DIRECT_SHORT_FAULTS)],
    );
    out.assert_passed();
    if out.result == "skipped" {
        test_support::skip::skip(
            "TMPDIR refuses O_DIRECT",
            &format!("under {}", env!("CARGO_TARGET_TMPDIR")),
        );
        return;
    }
    out.assert_clean();
    // Bytes moved, not bytes reported: 4096 + 8192 read, 8192 + 4096 written.
    assert_eq!(out.report().stats.read_bytes, 3 * 4096);
    assert_eq!(out.report().stats.write_bytes, 3 * 4096);
}

#[test]
fn unregistered_handles_and_buffers_are_refused_and_recorded() {
    let out = run("unregistered", &[]);
    out.assert_passed();
    assert!(out.report().leaks.is_empty(), "{}", out.report());
    let misuse = &out.report().misuse;
    for needle in [
        "read on unregistered file handle 0x1234",
        "write on unregistered file handle 0x1234",
        "into unregistered buffer",
        "already registered",
        "pinned host memory",
        "while buffer(s)",
        "hipFileHandleDeregister of unregistered handle 0x1234",
        "hipFileBufDeregister of unregistered buffer",
    ] {
        assert!(
            misuse.iter().any(|l| l.contains(needle)),
            "no misuse line with {needle:?} in\n{}",
            out.report()
        );
    }
    assert_eq!(misuse.len(), 10, "{}", out.report());
}

#[test]
fn ranges_outside_the_registered_buffer_are_refused() {
    let out = run("range", &[]);
    out.assert_passed();
    assert_eq!(out.report().misuse.len(), 6, "{}", out.report());
    assert!(out.report().leaks.is_empty(), "{}", out.report());
    assert_eq!(out.report().stats.read_bytes, 8192 + 4096);
}

#[test]
fn one_call_moves_at_most_0x7ffff000_bytes() {
    let out = run("cap", &[]);
    out.assert_clean();
    assert_eq!(out.report().stats.max_alloc, 0x8000_0000 + 4096);
    assert_eq!(out.report().stats.write_bytes, 3 * MAX_IO as u64 - 1);
}
