//! Memory and streams: pinned buffers, copy windows, a handle shared by threads, async
//! streams and their errors, and objects that outlive the handles that made them.

use super::*;

#[test]
fn pinned_buffers_bounce() {
    support::fake(
        "fake_gpu::memory::pinned_buffers_bounce",
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
        "fake_gpu::memory::copy_windows_queue_and_wait",
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
        "fake_gpu::memory::file_handle_is_shared_by_threads",
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
        "fake_gpu::memory::async_stream_roundtrip",
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
        "fake_gpu::memory::async_errors_surface_at_synchronize",
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
        "fake_gpu::memory::objects_outlive_the_handles_that_made_them",
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
