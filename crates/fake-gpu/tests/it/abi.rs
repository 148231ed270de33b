//! C-ABI tests of the fake GPU library: the built `libfake_gpu.so` is dlopened and driven
//! through its exported symbols, exactly as hipfile-rs will.
//!
//! The library reads its environment once per process and writes its report at exit, so
//! every scenario runs in a child process: this test binary re-executes itself with
//! `FAKE_GPU_SCENARIO` set, the child runs [`child_scenario_entry`] (which asserts inside
//! the child) and exits, and the parent checks the exit status and the report.

//!
//! Every `unsafe` call here drives an export through the signature of its C header, with
//! pointers to live locals: that one contract is stated here instead of on each call.
#![allow(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::{self, File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use rand::{Rng, RngCore};

use fake_gpu_support::{library, Report};

const MAX_IO: usize = 0x7fff_f000;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HipFileError {
    err: c_int,
    hip_drv_err: c_int,
}

const OK: HipFileError = HipFileError {
    err: 0,
    hip_drv_err: 0,
};

fn code(err: c_int) -> HipFileError {
    HipFileError {
        err,
        hip_drv_err: 0,
    }
}

#[repr(C)]
struct Descr {
    handle_type: c_int,
    fd: i64,
    fs_ops: *const c_void,
}

type Handle = *mut c_void;
type Stream = *mut c_void;

/// The exported symbols, typed as in hipfile.h / hip_runtime_api.h.
#[allow(clippy::type_complexity)]
struct Api {
    driver_open: unsafe extern "C" fn() -> HipFileError,
    driver_close: unsafe extern "C" fn() -> HipFileError,
    use_count: unsafe extern "C" fn() -> i64,
    handle_register: unsafe extern "C" fn(*mut Handle, *mut Descr) -> HipFileError,
    handle_deregister: unsafe extern "C" fn(Handle),
    buf_register: unsafe extern "C" fn(*const c_void, usize, c_int) -> HipFileError,
    buf_deregister: unsafe extern "C" fn(*const c_void) -> HipFileError,
    read: unsafe extern "C" fn(Handle, *mut c_void, usize, i64, i64) -> isize,
    write: unsafe extern "C" fn(Handle, *const c_void, usize, i64, i64) -> isize,
    read_async: unsafe extern "C" fn(
        Handle,
        *mut c_void,
        *mut usize,
        *mut i64,
        *mut i64,
        *mut isize,
        Stream,
    ) -> HipFileError,
    write_async: unsafe extern "C" fn(
        Handle,
        *mut c_void,
        *mut usize,
        *mut i64,
        *mut i64,
        *mut isize,
        Stream,
    ) -> HipFileError,
    stream_register: unsafe extern "C" fn(Stream, c_uint) -> HipFileError,
    stream_deregister: unsafe extern "C" fn(Stream) -> HipFileError,
    op_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    get_version: unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint) -> HipFileError,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    set_device: unsafe extern "C" fn(c_int) -> c_int,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    free: unsafe extern "C" fn(*mut c_void) -> c_int,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
    host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int,
    host_free: unsafe extern "C" fn(*mut c_void) -> c_int,
    stream_create: unsafe extern "C" fn(*mut Stream, c_uint) -> c_int,
    stream_sync: unsafe extern "C" fn(Stream) -> c_int,
    stream_destroy: unsafe extern "C" fn(Stream) -> c_int,
    error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    runtime_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
}

impl Api {
    /// Loads the library named by `FAKE_GPU_LIB` and never unloads it, so its exit report
    /// handler stays valid.
    fn load() -> &'static Api {
        let path = std::env::var_os("FAKE_GPU_LIB").expect("FAKE_GPU_LIB");
        // SAFETY: loading our own test double; its initialisers have no preconditions.
        let lib = Box::leak(Box::new(unsafe { libloading::Library::new(path) }.unwrap()));
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the field types above are the C signatures of these symbols.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .unwrap_or_else(|e| panic!("{}: {e}", $name))
            };
        }
        Box::leak(Box::new(Api {
            driver_open: sym!("hipFileDriverOpen"),
            driver_close: sym!("hipFileDriverClose"),
            use_count: sym!("hipFileUseCount"),
            handle_register: sym!("hipFileHandleRegister"),
            handle_deregister: sym!("hipFileHandleDeregister"),
            buf_register: sym!("hipFileBufRegister"),
            buf_deregister: sym!("hipFileBufDeregister"),
            read: sym!("hipFileRead"),
            write: sym!("hipFileWrite"),
            read_async: sym!("hipFileReadAsync"),
            write_async: sym!("hipFileWriteAsync"),
            stream_register: sym!("hipFileStreamRegister"),
            stream_deregister: sym!("hipFileStreamDeregister"),
            op_error_string: sym!("hipFileGetOpErrorString"),
            get_version: sym!("hipFileGetVersion"),
            get_device_count: sym!("hipGetDeviceCount"),
            set_device: sym!("hipSetDevice"),
            malloc: sym!("hipMalloc"),
            free: sym!("hipFree"),
            memcpy: sym!("hipMemcpy"),
            host_malloc: sym!("hipHostMalloc"),
            host_free: sym!("hipHostFree"),
            stream_create: sym!("hipStreamCreateWithFlags"),
            stream_sync: sym!("hipStreamSynchronize"),
            stream_destroy: sym!("hipStreamDestroy"),
            error_string: sym!("hipGetErrorString"),
            runtime_version: sym!("hipRuntimeGetVersion"),
            pci_bus_id: sym!("hipDeviceGetPCIBusId"),
        }))
    }

    fn register(&self, file: &File) -> Result<Handle, HipFileError> {
        let mut descr = Descr {
            handle_type: 1,
            fd: file.as_raw_fd() as i64,
            fs_ops: std::ptr::null(),
        };
        let mut fh: Handle = std::ptr::null_mut();
        let e = unsafe { (self.handle_register)(&mut fh, &mut descr) };
        if e == OK {
            Ok(fh)
        } else {
            Err(e)
        }
    }

    fn malloc(&self, size: usize) -> Result<*mut c_void, c_int> {
        let mut p = std::ptr::null_mut();
        match unsafe { (self.malloc)(&mut p, size) } {
            0 => Ok(p),
            e => Err(e),
        }
    }

    /// A registered device buffer of `size` bytes.
    fn device_buffer(&self, size: usize) -> *mut c_void {
        let p = self.malloc(size).unwrap();
        assert_eq!(p as usize % 4096, 0, "device memory is 4096-aligned");
        assert_eq!(unsafe { (self.buf_register)(p, size, 0) }, OK);
        p
    }

    fn release_buffer(&self, p: *mut c_void) {
        assert_eq!(unsafe { (self.buf_deregister)(p) }, OK);
        assert_eq!(unsafe { (self.free)(p) }, 0);
    }

    fn read(&self, fh: Handle, buf: *mut c_void, size: usize, off: i64, buf_off: i64) -> isize {
        unsafe { (self.read)(fh, buf, size, off, buf_off) }
    }

    fn write(&self, fh: Handle, buf: *mut c_void, size: usize, off: i64, buf_off: i64) -> isize {
        unsafe { (self.write)(fh, buf, size, off, buf_off) }
    }
}

fn set_errno(value: c_int) {
    unsafe { *libc::__errno_location() = value };
}

fn errno() -> c_int {
    unsafe { *libc::__errno_location() }
}

fn text(p: *const c_char) -> String {
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn random_bytes(len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut data);
    data
}

fn dir() -> PathBuf {
    PathBuf::from(std::env::var_os("FAKE_GPU_DIR").expect("FAKE_GPU_DIR"))
}

fn rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// Parent side
// ---------------------------------------------------------------------------------------

struct Outcome {
    status: std::process::ExitStatus,
    stderr: String,
    report: Option<Report>,
    /// What the child left in `{dir}/result`, if anything.
    result: String,
    /// The trace file `{dir}/trace`, if the child wrote one.
    trace: String,
}

impl Outcome {
    /// The report the child wrote at exit (a child that aborted writes none).
    fn report(&self) -> &Report {
        self.report
            .as_ref()
            .unwrap_or_else(|| panic!("the child wrote no report:\n{}", self.stderr))
    }

    /// The child passed and left neither leaks nor misuse.
    fn assert_clean(&self) {
        self.assert_passed();
        self.report().assert_clean();
    }

    fn assert_passed(&self) {
        assert!(
            self.status.success(),
            "child failed ({:?}):\n{}",
            self.status,
            self.stderr
        );
    }
}

/// Runs `scenario` in a child process with `env` on top of a clean fake-gpu environment.
fn run(scenario: &str, env: &[(&str, &str)]) -> Outcome {
    let lib = library();
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let report = tmp.path().join("report.txt");
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "abi::child_scenario_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FAKE_GPU_SCENARIO", scenario)
        .env("FAKE_GPU_LIB", lib)
        .env("FAKE_GPU_DIR", tmp.path())
        .env("AISCP_FAKE_GPU_REPORT", &report);
    for var in [
        "AISCP_FAKE_GPU_FAULTS",
        "AISCP_FAKE_GPU_DEVICES",
        "AISCP_FAKE_GPU_TRACE",
        "AISCP_FAKE_GPU_INIT_DELAY_MS",
    ] {
        child.env_remove(var);
    }
    for (k, v) in env {
        child.env(k, v.replace("{dir}", &tmp.path().to_string_lossy()));
    }
    let out = child.output().unwrap();
    let stderr =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Outcome {
        status: out.status,
        stderr,
        report: report.exists().then(|| Report::read(&report)),
        result: fs::read_to_string(tmp.path().join("result")).unwrap_or_default(),
        trace: fs::read_to_string(tmp.path().join("trace")).unwrap_or_default(),
    }
}

// ---------------------------------------------------------------------------------------
// Child side
// ---------------------------------------------------------------------------------------

/// Harness plumbing, not a test of its own: does nothing unless started by [`run`].
#[test]
fn child_scenario_entry() {
    let Ok(scenario) = std::env::var("FAKE_GPU_SCENARIO") else {
        return;
    };
    let api = Api::load();
    match scenario.as_str() {
        "copy" => scenario_copy(api),
        "identity" => scenario_identity(api),
        "o_direct" => scenario_o_direct(api),
        "o_direct_short" => scenario_o_direct_short(api),
        "unregistered" => scenario_unregistered(api),
        "range" => scenario_range(api),
        "cap" => scenario_cap(api),
        "io_faults" => scenario_io_faults(api),
        "code_faults" => scenario_code_faults(api),
        "always_faults" => scenario_always_faults(api),
        "devices" => scenario_devices(api),
        "bus_ids" => scenario_bus_ids(api),
        "leaks" => scenario_leaks(api),
        "async" => scenario_async(api),
        "async_misuse" => scenario_async_misuse(api),
        "threads" => scenario_threads(api),
        other => panic!("unknown scenario {other}"),
    }
}

/// Copies files of boundary sizes through a small device buffer, the way the engine will.
fn scenario_copy(api: &Api) {
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
fn scenario_identity(api: &Api) {
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
        "file handle is not registered"
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
fn scenario_o_direct(api: &Api) {
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
fn scenario_o_direct_short(api: &Api) {
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
fn scenario_unregistered(api: &Api) {
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
fn scenario_range(api: &Api) {
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
fn scenario_cap(api: &Api) {
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

/// Runs with [`IO_FAULTS`].
fn scenario_io_faults(api: &Api) {
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
fn scenario_code_faults(api: &Api) {
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
fn scenario_always_faults(api: &Api) {
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

fn scenario_devices(api: &Api) {
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
fn scenario_leaks(api: &Api) {
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

fn scenario_async(api: &Api) {
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
fn scenario_async_misuse(api: &Api) {
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
fn scenario_threads(api: &Api) {
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

// ---------------------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------------------

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
        println!(
            "skipped: O_DIRECT not supported under {}",
            env!("CARGO_TARGET_TMPDIR")
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
        println!(
            "skipped: O_DIRECT not supported under {}",
            env!("CARGO_TARGET_TMPDIR")
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

#[test]
fn device_count_follows_the_environment() {
    for n in ["0", "2"] {
        run("devices", &[("AISCP_FAKE_GPU_DEVICES", n)]).assert_clean();
    }
}

/// Runs with 2 devices and `AISCP_FAKE_GPU_BUS_IDS=0000:03:00.0,0000:81:00.0`.
fn scenario_bus_ids(api: &Api) {
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
