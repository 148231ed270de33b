//! The safe layer against the fake GPU library (crates/fake-gpu): registration, alignment on
//! O_DIRECT fds, short counts, every injected fault, async streams, and a clean leak report
//! after normal use and after errors. Each test body runs in its own child process (see
//! `common`).

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

#[test]
fn read_fault_at_offset_fires_once() {
    support::fake(
        "fake_gpu::read_fault_at_offset_fires_once",
        "read@8192=EIO",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let src =
                File::open(file_with(dir.path(), "src", &support::random_bytes(16384))).unwrap();
            let h = dev.register_file(src.as_fd()).unwrap();
            let mut buf = registered(&dev, 8192);
            assert_eq!(h.read(&mut buf, 4096, 0, 0).unwrap(), 4096);
            let err = h.read(&mut buf, 8192, 4096, 0).unwrap_err();
            assert_eq!(err.errno(), Some(libc::EIO), "{err}");
            assert_eq!(h.read(&mut buf, 8192, 4096, 0).unwrap(), 8192);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn nth_write_fails_with_enospc() {
    support::fake(
        "fake_gpu::nth_write_fails_with_enospc",
        "write#2=ENOSPC",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let dst = File::create(dir.path().join("dst")).unwrap();
            let h = dev.register_file(dst.as_fd()).unwrap();
            let buf = registered(&dev, 4096);
            assert_eq!(h.write(&buf, 4096, 0, 0).unwrap(), 4096);
            let err = h.write(&buf, 4096, 4096, 0).unwrap_err();
            assert_eq!(err.errno(), Some(libc::ENOSPC));
            let io: std::io::Error = err.into();
            assert_eq!(io.raw_os_error(), Some(libc::ENOSPC));
            assert_eq!(h.write(&buf, 4096, 4096, 0).unwrap(), 4096);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn library_and_runtime_codes_are_decoded() {
    support::fake(
        "fake_gpu::library_and_runtime_codes_are_decoded",
        "read#1=hipfile:5030;read#2=hiperr:2;read#3=hiperr:1",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let src =
                File::open(file_with(dir.path(), "src", &support::random_bytes(4096))).unwrap();
            let h = dev.register_file(src.as_fd()).unwrap();
            let mut buf = registered(&dev, 4096);

            let err = h.read(&mut buf, 4096, 0, 0).unwrap_err();
            assert!(
                matches!(
                    &err,
                    Error::Library {
                        code: 5030,
                        name: "InternalError",
                        ..
                    }
                ),
                "{err:?}"
            );
            let io: std::io::Error = err.into();
            assert_eq!(io.kind(), std::io::ErrorKind::Other);

            let err = h.read(&mut buf, 4096, 0, 0).unwrap_err();
            assert!(
                matches!(
                    &err,
                    Error::Runtime {
                        code: 2,
                        call: "hipFileRead",
                        ..
                    }
                ),
                "{err:?}"
            );
            // hiperr:1 is -1 with errno 0: hipErrorInvalidValue, not EPERM.
            let err = h.read(&mut buf, 4096, 0, 0).unwrap_err();
            assert!(matches!(&err, Error::Runtime { code: 1, .. }), "{err:?}");
            assert_eq!(err.errno(), None);
            assert_eq!(h.read(&mut buf, 4096, 0, 0).unwrap(), 4096);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn handle_registration_faults() {
    support::fake(
        "fake_gpu::handle_registration_faults",
        "register#2=5027",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let f = File::open(file_with(dir.path(), "f", b"x")).unwrap();
            let first = dev.register_file(f.as_fd()).unwrap();
            let g = File::open(file_with(dir.path(), "g", b"y")).unwrap();
            let err = dev
                .register_file(g.as_fd())
                .err()
                .expect("second registration fails");
            assert_eq!(err.code(), Some(5027), "{err}");
            assert!(err.to_string().contains("5027"));
            drop(first);
            assert!(dev.register_file(g.as_fd()).is_ok());
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn every_registration_refused() {
    support::fake(
        "fake_gpu::every_registration_refused",
        "register=5027",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let f = File::open(file_with(dir.path(), "f", b"x")).unwrap();
            for _ in 0..3 {
                assert_eq!(
                    dev.register_file(f.as_fd()).err().unwrap().code(),
                    Some(5027)
                );
            }
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn buffer_registration_refused_returns_the_buffer() {
    support::fake(
        "fake_gpu::buffer_registration_refused_returns_the_buffer",
        "bufregister=5036",
        None,
        || {
            let dev = device(0);
            let (mut buf, err) = dev.alloc(8192).unwrap().register().err().expect("refused");
            assert_eq!(err.code(), Some(5036), "{err}");
            // The buffer is still usable for a bounce path, and freed normally.
            let data = support::random_bytes(8192);
            buf.copy_from_host(0, &data).unwrap();
            let mut back = vec![0u8; 8192];
            buf.copy_to_host(0, &mut back).unwrap();
            assert_eq!(back, data);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn allocation_faults() {
    support::fake(
        "fake_gpu::allocation_faults",
        "malloc>65536;malloc#2=oom",
        None,
        || {
            let dev = device(0);
            let first = dev.alloc(4096).unwrap();
            let err = dev.alloc(4096).err().expect("2nd hipMalloc fails");
            assert!(
                matches!(
                    &err,
                    Error::Runtime {
                        code: 2,
                        call: "hipMalloc",
                        ..
                    }
                ),
                "{err:?}"
            );
            let err = dev.alloc(65537).err().expect("over the limit");
            assert_eq!(err.code(), Some(2));
            assert_eq!(dev.alloc(65536).unwrap().len(), 65536);
            assert_eq!(first.len(), 4096);
            assert!(dev.alloc(0).unwrap().is_empty());
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn driver_open_fault() {
    support::fake(
        "fake_gpu::driver_open_fault",
        "driver=5026",
        None,
        || {
            let lib = Library::load_from(Flavor::HipFile, &support::fake_paths()).unwrap();
            let err = lib.open_driver().err().expect("driver refused");
            assert_eq!(err.code(), Some(5026), "{err}");
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn no_device_is_typed() {
    support::fake(
        "fake_gpu::no_device_is_typed",
        "",
        Some(0),
        || {
            let lib = Library::load_from(Flavor::HipFile, &support::fake_paths()).unwrap();
            assert_eq!(lib.device_count().unwrap_err().code(), Some(100));
            // Like the real runtime, the driver refuses to open without a GPU.
            let err = lib.open_driver().err().expect("no driver without a device");
            assert_eq!(err.code(), Some(100), "{err}");
        },
        |r| {
            r.assert_clean();
        },
    );
}

#[test]
fn device_index_is_checked() {
    support::fake(
        "fake_gpu::device_index_is_checked",
        "",
        Some(2),
        || {
            let lib = Library::load_from(Flavor::HipFile, &support::fake_paths()).unwrap();
            assert_eq!(lib.device_count().unwrap(), 2);
            let driver = lib.open_driver().unwrap();
            let one = driver.device(1).unwrap();
            assert_eq!(one.index(), 1);
            let err = driver.device(2).err().unwrap();
            assert!(
                matches!(err, Error::NoSuchDevice { index: 2, count: 2 }),
                "{err:?}"
            );
            assert_eq!(err.to_string(), "GPU 2 does not exist: 2 device(s) found");
            // Work on device 1 from another thread: it is made current there by the calls.
            std::thread::scope(|s| {
                s.spawn(|| {
                    let buf = registered(&one, 4096);
                    drop(buf);
                });
            });
        },
        |r| {
            r.assert_clean();
        },
    );
}

#[test]
fn pinned_buffers_bounce() {
    support::fake(
        "fake_gpu::pinned_buffers_bounce",
        "",
        None,
        || {
            let dev = device(0);
            let mut pinned = dev.alloc_pinned(4097).unwrap();
            let data = support::random_bytes(4097);
            pinned.as_mut_slice().copy_from_slice(&data);
            let mut buf = dev.alloc(4097).unwrap();
            buf.copy_from_host(0, pinned.as_slice()).unwrap();
            let mut back = dev.alloc_pinned(4097).unwrap();
            buf.copy_to_host(0, back.as_mut_slice()).unwrap();
            assert_eq!(back.as_slice(), &data[..]);
            assert!(dev.alloc_pinned(0).unwrap().as_slice().is_empty());
            assert!(buf.copy_to_host(1, back.as_mut_slice()).is_err());
        },
        |r| {
            r.assert_clean();
            assert_eq!(r.stats.htod_bytes, 4097);
            assert_eq!(r.stats.dtoh_bytes, 4097);
        },
    );
}

#[test]
fn copy_windows_queue_and_wait() {
    support::fake(
        "fake_gpu::copy_windows_queue_and_wait",
        "",
        None,
        || {
            let dev = device(0);
            let data = support::random_bytes(3 * 4096 + 5);
            let mut buf = dev.alloc(2 * data.len()).unwrap();
            let mut a = dev.alloc_window(data.len()).unwrap();
            let mut b = dev.alloc_window(data.len()).unwrap();
            a.host().unwrap().copy_from_slice(&data);
            a.upload(data.len(), &mut buf, 7).unwrap();
            // host() waits for the queued upload before handing the bytes out: scribbling on
            // them afterwards cannot reach the device buffer.
            a.host().unwrap().fill(0xa5);
            b.download(&buf, 7, data.len()).unwrap();
            assert_eq!(
                b.host().unwrap(),
                &data[..],
                "the bytes came back from the device"
            );
            // Ranges are checked before anything is queued.
            assert!(
                a.upload(data.len() + 1, &mut buf, 0).is_err(),
                "longer than the window"
            );
            assert!(
                b.download(&buf, data.len() + 8, data.len()).is_err(),
                "past the buffer"
            );
            // A window dropped with a copy queued drains it first (the fake reports a stream
            // destroyed with work pending as misuse).
            a.upload(data.len(), &mut buf, 0).unwrap();
            drop(a);
        },
        |r| {
            r.assert_clean();
            assert_eq!(r.stats.htod_bytes, 2 * (3 * 4096 + 5));
            assert_eq!(r.stats.dtoh_bytes, 3 * 4096 + 5);
        },
    );
}

#[test]
fn file_handle_is_shared_by_threads() {
    support::fake(
        "fake_gpu::file_handle_is_shared_by_threads",
        "",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let data = support::random_bytes(8 * 65536);
            let src = File::open(file_with(dir.path(), "src", &data)).unwrap();
            let dst = File::create(dir.path().join("dst")).unwrap();
            let (s, d) = (
                dev.register_file(src.as_fd()).unwrap(),
                dev.register_file(dst.as_fd()).unwrap(),
            );
            std::thread::scope(|scope| {
                for t in 0..4u64 {
                    let (s, d, dev) = (&s, &d, &dev);
                    scope.spawn(move || {
                        let mut buf = registered(dev, 65536);
                        for chunk in [t, t + 4] {
                            let off = chunk * 65536;
                            assert_eq!(s.read(&mut buf, 65536, off, 0).unwrap(), 65536);
                            assert_eq!(d.write(&buf, 65536, off, 0).unwrap(), 65536);
                        }
                    });
                }
            });
            drop((s, d));
            assert_eq!(std::fs::read(dir.path().join("dst")).unwrap(), data);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn async_stream_roundtrip() {
    support::fake(
        "fake_gpu::async_stream_roundtrip",
        "",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let data = support::random_bytes(3 * 4096 + 5);
            let src = File::open(file_with(dir.path(), "src", &data)).unwrap();
            let dst_path = dir.path().join("dst");
            let dst = File::create(&dst_path).unwrap();
            let s = dev.register_file(src.as_fd()).unwrap();
            let d = dev.register_file(dst.as_fd()).unwrap();
            let buf = dev
                .alloc(data.len())
                .unwrap()
                .register()
                .map_err(|(_, e)| e)
                .unwrap();
            {
                let mut stream = dev.create_stream(0).unwrap();
                assert_eq!(stream.read_async(&s, &buf, 8192, 0, 0).unwrap(), 0);
                assert_eq!(
                    stream
                        .read_async(&s, &buf, data.len() - 8192, 8192, 8192)
                        .unwrap(),
                    1
                );
                assert_eq!(stream.write_async(&d, &buf, data.len(), 0, 0).unwrap(), 2);
                assert_eq!(stream.pending(), 3);
                assert_eq!(
                    stream.synchronize().unwrap(),
                    vec![8192, data.len() - 8192, data.len()]
                );
                assert_eq!(stream.pending(), 0);
                // Left pending: the drop synchronizes before deregistering.
                stream
                    .write_async(&d, &buf, 5, data.len() as u64, 0)
                    .unwrap();
            }
            let mut expect = data.clone();
            expect.extend_from_slice(&data[..5]);
            assert_eq!(std::fs::read(&dst_path).unwrap(), expect);
            assert!(dev.create_stream(0x10).is_err());
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn async_errors_surface_at_synchronize() {
    support::fake(
        "fake_gpu::async_errors_surface_at_synchronize",
        "read#1=EIO;read#2=hipfile:5014",
        None,
        || {
            let dev = device(0);
            let dir = tempfile::tempdir().unwrap();
            let src =
                File::open(file_with(dir.path(), "src", &support::random_bytes(4096))).unwrap();
            let s = dev.register_file(src.as_fd()).unwrap();
            let buf = registered(&dev, 4096);
            let mut stream = dev
                .create_stream(hipfile::sys::STREAM_FIXED_FILE_SIZE)
                .unwrap();
            stream.read_async(&s, &buf, 4096, 0, 0).unwrap();
            let err = stream.synchronize().unwrap_err();
            assert_eq!(err.errno(), Some(libc::EIO), "{err}");
            stream.read_async(&s, &buf, 4096, 0, 0).unwrap();
            assert_eq!(stream.synchronize().unwrap_err().code(), Some(5014));
            stream.read_async(&s, &buf, 4096, 0, 0).unwrap();
            assert_eq!(stream.synchronize().unwrap(), vec![4096]);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn objects_outlive_the_handles_that_made_them() {
    support::fake(
        "fake_gpu::objects_outlive_the_handles_that_made_them",
        "",
        None,
        || {
            // Dropping the library, driver and device first must not close anything under the
            // buffer and handle: they hold what they need.
            let dir = tempfile::tempdir().unwrap();
            let f = File::open(file_with(dir.path(), "f", &support::random_bytes(4096))).unwrap();
            let (h, mut buf) = {
                let lib = Library::load_from(Flavor::HipFile, &support::fake_paths()).unwrap();
                let driver = lib.open_driver().unwrap();
                let dev = driver.device(0).unwrap();
                let h = dev.register_file(f.as_fd()).unwrap();
                let buf = registered(&dev, 4096);
                (h, buf)
            };
            assert_eq!(h.read(&mut buf, 4096, 0, 0).unwrap(), 4096);
            let plain = buf.deregister().unwrap();
            assert_eq!(plain.len(), 4096);
        },
        |r| r.assert_clean(),
    );
}

#[test]
fn staging_device_copies_without_opening_the_driver() {
    support::fake(
        "fake_gpu::staging_device_copies_without_opening_the_driver",
        "",
        None,
        || {
            let lib = Library::load_from(Flavor::HipFile, &support::fake_paths())
                .expect("load the fake library");
            let dev = lib.staging_device(0).expect("staging device");
            assert!(dev.driver().is_none());
            let data = support::random_bytes(3 * 4096 + 17);
            let mut buf = dev.alloc(data.len()).unwrap();
            buf.copy_from_host(0, &data).unwrap();
            let mut back = vec![0u8; data.len()];
            buf.copy_to_host(0, &mut back).unwrap();
            assert_eq!(back, data);
            let mut pinned = dev.alloc_pinned(4096).unwrap();
            pinned.as_mut_slice()[0] = 7;
            // Registration needs the driver: a typed DriverNotInitialized, not a call into a
            // library whose driver nobody opened.
            let dir = tempfile::tempdir().unwrap();
            let f = File::open(file_with(dir.path(), "f", b"x")).unwrap();
            let err = dev.register_file(f.as_fd()).err().expect("refused");
            assert_eq!(err.code(), Some(5001), "{err}");
            let (_buf, err) = buf.register().err().expect("refused");
            assert_eq!(err.code(), Some(5001), "{err}");
            assert_eq!(
                dev.create_stream(0).err().expect("refused").code(),
                Some(5001)
            );
            assert_eq!(lib.use_count(), Some(0), "the driver was never opened");
        },
        |r| {
            r.assert_clean();
            assert_eq!(r.stats.handles, 0);
            assert!(r.stats.htod_bytes >= 3 * 4096 + 17);
        },
    );
}

#[test]
fn pci_bus_ids_and_memory_per_device() {
    support::fake(
        "fake_gpu::pci_bus_ids_and_memory_per_device",
        "",
        Some(3),
        || {
            // Read by the fake at its first call, which comes below.
            std::env::set_var(
                "AISCP_FAKE_GPU_BUS_IDS",
                "0000:03:00.0,0000:43:00.0,0000:C4:00.0",
            );
            let lib = Library::load_from(Flavor::HipFile, &support::fake_paths()).unwrap();
            assert_eq!(lib.device_count().unwrap(), 3);
            let ids: Vec<_> = (0..3).map(|i| lib.pci_bus_id(i).unwrap()).collect();
            assert_eq!(
                ids,
                [
                    Some("0000:03:00.0".to_owned()),
                    Some("0000:43:00.0".to_owned()),
                    // Lower-cased, as sysfs spells PCI addresses.
                    Some("0000:c4:00.0".to_owned())
                ]
            );
            let err = lib.pci_bus_id(3).unwrap_err();
            assert_eq!(err.code(), Some(101), "{err}");
            // Memory on devices 0 and 2, each used from a thread that has its own device
            // current (the crate makes it so per call).
            let driver = lib.open_driver().unwrap();
            let (zero, two) = (driver.device(0).unwrap(), driver.device(2).unwrap());
            let mut a = zero.alloc(4096).unwrap();
            let mut b = two.alloc(8192).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| a.copy_from_host(0, &[1; 4096]).unwrap());
                s.spawn(|| b.copy_from_host(0, &[2; 8192]).unwrap());
            });
        },
        |r| {
            r.assert_clean();
            assert_eq!(r.devices.mallocs, [1, 0, 1], "{r}");
            assert_eq!(r.devices.bytes, [4096, 0, 8192], "{r}");
        },
    );
}
