//! Async ops on streams, misuse of streams, I/O from several threads, and the trace.

use std::fs::{self, File};

use rand::Rng;

use crate::api::*;
use crate::support::run;

pub fn scenario_async(api: &Api) {
    let data = random_bytes(20000);
    let src_path = dir().join("src");
    fs::write(&src_path, &data).unwrap();
    let src = File::open(&src_path).unwrap();
    let dst = rw(&dir().join("dst"));
    let (sfh, dfh) = (api.register(&src).unwrap(), api.register(&dst).unwrap());
    let buf = api.device_buffer(32768);
    let mut stream = std::ptr::null_mut();
    assert_eq!(unsafe { (api.stream_create)(&mut stream, 1) }, 0);
    assert_eq!(unsafe { (api.stream_register)(stream, 0) }, OK);
    let (mut size, mut file_off, mut buf_off, mut done) = (1usize, 0i64, 0i64, -99isize);
    let e = unsafe {
        (api.read_async)(
            sfh,
            buf,
            &mut size,
            &mut file_off,
            &mut buf_off,
            &mut done,
            stream,
        )
    };
    assert_eq!(e, OK);
    assert_eq!(done, -99, "nothing runs before synchronize");
    // Parameters are read when the stream reaches the op, not at enqueue.
    size = 32768;
    assert_eq!(unsafe { (api.stream_sync)(stream) }, 0);
    assert_eq!(done, 20000);
    let (mut wsize, mut wfile_off, mut wbuf_off, mut wdone) = (20000usize, 0i64, 0i64, 0isize);
    let e = unsafe {
        (api.write_async)(
            dfh,
            buf,
            &mut wsize,
            &mut wfile_off,
            &mut wbuf_off,
            &mut wdone,
            stream,
        )
    };
    assert_eq!(e, OK);
    assert_eq!(unsafe { (api.stream_sync)(stream) }, 0);
    assert_eq!(wdone, 20000);
    assert_eq!(fs::read(dir().join("dst")).unwrap(), data);
    // The null stream works without creation.
    let e = unsafe {
        (api.read_async)(
            sfh,
            buf,
            &mut size,
            &mut file_off,
            &mut buf_off,
            &mut done,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(e, OK);
    assert_eq!(unsafe { (api.stream_sync)(std::ptr::null_mut()) }, 0);
    assert_eq!(done, 20000);
    assert_eq!(unsafe { (api.stream_deregister)(stream) }, OK);
    assert_eq!(unsafe { (api.stream_destroy)(stream) }, 0);
    unsafe { (api.handle_deregister)(sfh) };
    unsafe { (api.handle_deregister)(dfh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

/// Destroying/deregistering streams with ops pending, and broken PAGE_ALIGNED promises.
pub fn scenario_async_misuse(api: &Api) {
    let file = rw(&dir().join("f"));
    file.set_len(8192).unwrap();
    let fh = api.register(&file).unwrap();
    let buf = api.device_buffer(8192);
    // The parameter block lives on the heap and is read through raw pointers, as C would.
    let params: *mut (usize, i64, i64, isize) = Box::into_raw(Box::new((4096, 0, 0, -99)));
    let (mut a, mut b) = (std::ptr::null_mut(), std::ptr::null_mut());
    assert_eq!(unsafe { (api.stream_create)(&mut a, 0) }, 0);
    assert_eq!(unsafe { (api.stream_create)(&mut b, 0) }, 0);
    assert_eq!(unsafe { (api.stream_register)(b, 8) }, OK);
    let enqueue = move |s: Stream| unsafe {
        let p = &mut *params;
        (api.read_async)(fh, buf, &mut p.0, &mut p.1, &mut p.2, &mut p.3, s)
    };
    assert_eq!(enqueue(a), OK);
    assert_eq!(unsafe { (api.stream_destroy)(a) }, 0);
    assert_eq!(unsafe { (*params).3 }, -99, "dropped op never ran");
    unsafe { (*params).0 = 100 };
    assert_eq!(enqueue(b), OK);
    assert_eq!(unsafe { (api.stream_sync)(b) }, 0);
    assert_eq!(unsafe { (*params).3 }, -5022);
    assert_eq!(enqueue(b), OK);
    assert_eq!(unsafe { (api.stream_deregister)(b) }, OK);
    assert_eq!(unsafe { (api.stream_destroy)(b) }, 0);
    drop(unsafe { Box::from_raw(params) });
    assert_eq!(
        unsafe { (api.stream_register)(0x99usize as Stream, 0) },
        code(5022)
    );
    unsafe { (api.handle_deregister)(fh) };
    api.release_buffer(buf);
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

/// Several threads reading and writing at once, each with its own buffer.
pub fn scenario_threads(api: &Api) {
    const THREADS: usize = 4;
    const CHUNK: usize = 8192;
    const CHUNKS: usize = 16;
    let data = random_bytes(CHUNK * CHUNKS * THREADS - rand::thread_rng().gen_range(1..CHUNK));
    let src_path = dir().join("src");
    fs::write(&src_path, &data).unwrap();
    let src = File::open(&src_path).unwrap();
    let dst = rw(&dir().join("dst"));
    let (sfh, dfh) = (
        api.register(&src).unwrap() as usize,
        api.register(&dst).unwrap() as usize,
    );
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let buf = api.device_buffer(CHUNK);
                for c in (t..CHUNKS * THREADS).step_by(THREADS) {
                    let off = (c * CHUNK) as i64;
                    let n = api.read(sfh as Handle, buf, CHUNK, off, 0);
                    assert!(n >= 0);
                    assert_eq!(api.write(dfh as Handle, buf, n as usize, off, 0), n);
                }
                api.release_buffer(buf);
            });
        }
    });
    unsafe { (api.handle_deregister)(sfh as Handle) };
    unsafe { (api.handle_deregister)(dfh as Handle) };
    assert_eq!(fs::read(dir().join("dst")).unwrap(), data);
    fs::write(dir().join("result"), data.len().to_string()).unwrap();
    assert_eq!(unsafe { (api.driver_close)() }, OK);
}

#[test]
fn async_ops_run_at_synchronize_with_parameters_read_then() {
    let out = run("async", &[]);
    out.assert_clean();
    assert_eq!(out.report().stats.reads, 2);
    assert_eq!(out.report().stats.read_bytes, 40000);
    assert_eq!(out.report().stats.write_bytes, 20000);
}

#[test]
fn async_misuse_is_recorded() {
    let out = run("async_misuse", &[]);
    out.assert_passed();
    let misuse = &out.report().misuse;
    for needle in [
        "hipStreamDestroy of stream",
        "PAGE_ALIGNED_INPUTS",
        "hipFileStreamDeregister of stream",
        "hipFileStreamRegister of unknown stream 0x99",
    ] {
        assert!(
            misuse.iter().any(|l| l.contains(needle)),
            "no misuse line with {needle:?} in\n{}",
            out.report()
        );
    }
    assert_eq!(misuse.len(), 4, "{}", out.report());
}

#[test]
fn concurrent_io_from_several_threads() {
    let out = run("threads", &[]);
    out.assert_clean();
    let len: u64 = out.result.parse().unwrap();
    assert_eq!(out.report().stats.read_bytes, len);
    assert_eq!(out.report().stats.write_bytes, len);
    assert_eq!(out.report().stats.reads, 64);
}

#[test]
fn trace_has_one_line_per_io_call() {
    let out = run("range", &[("AISCP_FAKE_GPU_TRACE", "{dir}/trace")]);
    out.assert_passed();
    let lines: Vec<&str> = out.trace.lines().collect();
    assert_eq!(lines.len(), 7, "{}", out.trace);
    assert!(lines[0].starts_with("read fd="), "{}", lines[0]);
    assert!(
        lines[0].ends_with("size=8192 file_off=0 buf_off=0 result=8192"),
        "{}",
        lines[0]
    );
    assert!(lines[2].ends_with("result=-5014"), "{}", lines[2]);
}
