//! Injected faults: I/O errors at an offset or a call, library and runtime codes, refused
//! registrations and allocations, a driver that will not open.

use super::*;

#[test]
fn read_fault_at_offset_fires_once() {
    support::fake(
        "fake_gpu::faults::read_fault_at_offset_fires_once",
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
        "fake_gpu::faults::nth_write_fails_with_enospc",
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
        "fake_gpu::faults::library_and_runtime_codes_are_decoded",
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
        "fake_gpu::faults::handle_registration_faults",
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
        "fake_gpu::faults::every_registration_refused",
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
        "fake_gpu::faults::buffer_registration_refused_returns_the_buffer",
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
        "fake_gpu::faults::allocation_faults",
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
        "fake_gpu::faults::driver_open_fault",
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
