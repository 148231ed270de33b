//! The safe layer against the fake GPU library (crates/fake-gpu): registration, alignment on
//! O_DIRECT fds, short counts, every injected fault, async streams, and a clean leak report
//! after normal use and after errors. Each test body runs in its own child process (see
//! `support`).

mod devices;
mod faults;
mod memory;
mod stats;

use crate::support;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hipfile::{Device, Error, Flavor, Library, RegisteredBuffer};

fn device(index: u32) -> Device {
    let lib =
        Library::load_from(Flavor::HipFile, &support::fake_paths()).expect("load the fake library");
    assert_eq!(lib.flavor(), Flavor::HipFile);
    let driver = lib.open_driver().expect("open the driver");
    driver.device(index).expect("device")
}

/// A registered device buffer of `len` bytes (the test fails if registration does).
fn registered(dev: &Device, len: usize) -> RegisteredBuffer {
    dev.alloc(len)
        .unwrap()
        .register()
        .map_err(|(_, e)| e)
        .expect("register the buffer")
}

fn file_with(dir: &Path, name: &str, data: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    File::create(&path).unwrap().write_all(data).unwrap();
    path
}

fn open_direct(path: &Path, write: bool) -> File {
    OpenOptions::new()
        .read(true)
        .write(write)
        .create(write)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .unwrap()
}

const SIZES: [usize; 7] = [0, 1, 4095, 4096, 4097, 65535, 65537];

#[test]
fn sync_io_moves_exact_bytes() {
    support::fake(
        "fake_gpu::sync_io_moves_exact_bytes",
        "",
        None,
        || {
            let dev = device(0);
            let lib = dev.driver().expect("opened through the driver").library();
            assert!(
                lib.version().unwrap().starts_with("hipFile "),
                "{:?}",
                lib.version()
            );
            // The exact path given is exactly what was loaded.
            let wanted = support::fake_paths().io.expect("fake library path");
            assert_eq!(lib.io_library_path(), wanted);
            let dir = tempfile::tempdir().unwrap();
            let mut buf = registered(&dev, 128 * 1024);
            for (i, &size) in SIZES.iter().enumerate() {
                let data = support::random_bytes(size);
                let src = File::open(file_with(dir.path(), &format!("src{i}"), &data)).unwrap();
                let dst_path = dir.path().join(format!("dst{i}"));
                let dst = File::create(&dst_path).unwrap();
                let src_h = dev.register_file(src.as_fd()).unwrap();
                let dst_h = dev.register_file(dst.as_fd()).unwrap();
                // Read at a buffer offset, so base + offset (not an interior pointer) is exercised.
                let buf_offset = 3;
                assert_eq!(src_h.read(&mut buf, size, 0, buf_offset).unwrap(), size);
                let mut host = vec![0u8; size];
                buf.buffer().copy_to_host(buf_offset, &mut host).unwrap();
                assert_eq!(host, data, "size {size}");
                assert_eq!(dst_h.write(&buf, size, 0, buf_offset).unwrap(), size);
                // Past EOF: 0 bytes.
                assert_eq!(src_h.read(&mut buf, 10, size as u64, 0).unwrap(), 0);
                drop((src_h, dst_h));
                assert_eq!(std::fs::read(&dst_path).unwrap(), data, "size {size}");
            }
            // A range outside the buffer is refused before the library is called.
            let f = File::open(file_with(dir.path(), "x", b"abc")).unwrap();
            let h = dev.register_file(f.as_fd()).unwrap();
            let err = h.read(&mut buf, 10, 0, 128 * 1024 - 5).unwrap_err();
            assert_eq!(err.code(), Some(5022), "{err}");
        },
        |r| {
            r.assert_clean();
            let total: u64 = SIZES.iter().map(|&s| s as u64).sum();
            assert_eq!(r.stats.read_bytes, total);
            assert_eq!(r.stats.write_bytes, total);
            assert_eq!(r.stats.dtoh_bytes, total);
        },
    );
}

#[test]
fn o_direct_requires_alignment() {
    support::fake(
        "fake_gpu::o_direct_requires_alignment",
        "",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let data = support::random_bytes(3 * 4096 + 100);
            let path = file_with(dir.path(), "src", &data);
            let f = open_direct(&path, false);
            let h = dev.register_file(f.as_fd()).unwrap();
            let mut buf = registered(&dev, 16384);

            assert_eq!(h.read(&mut buf, 8192, 4096, 4096).unwrap(), 8192);
            let mut host = vec![0u8; 8192];
            buf.buffer().copy_to_host(4096, &mut host).unwrap();
            assert_eq!(host, &data[4096..12288]);

            for (len, file_offset, buf_offset) in [(4096, 100, 0), (4097, 0, 0), (4096, 0, 512)] {
                let err = h.read(&mut buf, len, file_offset, buf_offset).unwrap_err();
                assert_eq!(
                    err.errno(),
                    Some(libc::EINVAL),
                    "{len} {file_offset} {buf_offset}: {err}"
                );
                let io: std::io::Error = err.into();
                assert_eq!(io.raw_os_error(), Some(libc::EINVAL));
            }
            // The aligned tail read is short, not an error.
            assert_eq!(h.read(&mut buf, 8192, 8192, 0).unwrap(), 4096 + 100);
        },
        |r| {
            // The fake records refused unaligned I/O as misuse: exactly our three probes.
            r.assert_no_leaks();
            assert_eq!(r.misuse.len(), 3, "{r}");
            assert!(r.misuse.iter().all(|l| l.contains("not 4096-aligned")));
        },
    );
}

#[test]
fn short_counts_are_returned() {
    support::fake(
        "fake_gpu::short_counts_are_returned",
        "read#1=short:100;write#2=short:0",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let data = support::random_bytes(8192);
            let src = File::open(file_with(dir.path(), "src", &data)).unwrap();
            let dst = File::create(dir.path().join("dst")).unwrap();
            let (s, d) = (
                dev.register_file(src.as_fd()).unwrap(),
                dev.register_file(dst.as_fd()).unwrap(),
            );
            let mut buf = registered(&dev, 8192);
            assert_eq!(s.read(&mut buf, 8192, 0, 0).unwrap(), 100);
            assert_eq!(s.read(&mut buf, 8192, 0, 0).unwrap(), 8192);
            assert_eq!(d.write(&buf, 8192, 0, 0).unwrap(), 8192);
            assert_eq!(d.write(&buf, 8192, 8192, 0).unwrap(), 0);
        },
        |r| r.assert_clean(),
    );
}
