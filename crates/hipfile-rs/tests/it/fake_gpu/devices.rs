//! Devices: none, an index out of range, PCI bus ids and memory per device, and device
//! copies without the driver.

use super::*;

#[test]
fn no_device_is_typed() {
    support::fake(
        "fake_gpu::devices::no_device_is_typed",
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
        "fake_gpu::devices::device_index_is_checked",
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
fn staging_device_copies_without_opening_the_driver() {
    support::fake(
        "fake_gpu::devices::staging_device_copies_without_opening_the_driver",
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
        "fake_gpu::devices::pci_bus_ids_and_memory_per_device",
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
