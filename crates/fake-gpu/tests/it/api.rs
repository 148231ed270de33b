//! The fake's C ABI as the suites call it: the exported symbols loaded from the library the
//! parent names (`FAKE_GPU_LIB`), and small helpers for the child side.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use rand::RngCore;

pub const MAX_IO: usize = 0x7fff_f000;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HipFileError {
    pub err: c_int,
    pub hip_drv_err: c_int,
}

pub const OK: HipFileError = HipFileError {
    err: 0,
    hip_drv_err: 0,
};

pub fn code(err: c_int) -> HipFileError {
    HipFileError {
        err,
        hip_drv_err: 0,
    }
}

#[repr(C)]
pub struct Descr {
    pub handle_type: c_int,
    pub fd: i64,
    pub fs_ops: *const c_void,
}

pub type Handle = *mut c_void;
pub type Stream = *mut c_void;

/// The exported symbols, typed as in hipfile.h / hip_runtime_api.h.
#[allow(clippy::type_complexity)]
pub struct Api {
    pub driver_open: unsafe extern "C" fn() -> HipFileError,
    pub driver_close: unsafe extern "C" fn() -> HipFileError,
    pub use_count: unsafe extern "C" fn() -> i64,
    pub handle_register: unsafe extern "C" fn(*mut Handle, *mut Descr) -> HipFileError,
    pub handle_deregister: unsafe extern "C" fn(Handle),
    pub buf_register: unsafe extern "C" fn(*const c_void, usize, c_int) -> HipFileError,
    pub buf_deregister: unsafe extern "C" fn(*const c_void) -> HipFileError,
    pub read: unsafe extern "C" fn(Handle, *mut c_void, usize, i64, i64) -> isize,
    pub write: unsafe extern "C" fn(Handle, *const c_void, usize, i64, i64) -> isize,
    pub read_async: unsafe extern "C" fn(
        Handle,
        *mut c_void,
        *mut usize,
        *mut i64,
        *mut i64,
        *mut isize,
        Stream,
    ) -> HipFileError,
    pub write_async: unsafe extern "C" fn(
        Handle,
        *mut c_void,
        *mut usize,
        *mut i64,
        *mut i64,
        *mut isize,
        Stream,
    ) -> HipFileError,
    pub stream_register: unsafe extern "C" fn(Stream, c_uint) -> HipFileError,
    pub stream_deregister: unsafe extern "C" fn(Stream) -> HipFileError,
    pub op_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    pub get_version: unsafe extern "C" fn(*mut c_uint, *mut c_uint, *mut c_uint) -> HipFileError,
    pub get_device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub set_device: unsafe extern "C" fn(c_int) -> c_int,
    pub malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    pub free: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
    pub memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, Stream) -> c_int,
    pub host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int,
    pub host_free: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub host_register: unsafe extern "C" fn(*mut c_void, usize, c_uint) -> c_int,
    pub host_unregister: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub stream_create: unsafe extern "C" fn(*mut Stream, c_uint) -> c_int,
    pub stream_sync: unsafe extern "C" fn(Stream) -> c_int,
    pub stream_destroy: unsafe extern "C" fn(Stream) -> c_int,
    pub error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    pub runtime_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    pub pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
}

impl Api {
    /// Loads the library named by `FAKE_GPU_LIB` and never unloads it, so its exit report
    /// handler stays valid.
    pub fn load() -> &'static Api {
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
            memcpy_async: sym!("hipMemcpyAsync"),
            host_malloc: sym!("hipHostMalloc"),
            host_free: sym!("hipHostFree"),
            host_register: sym!("hipHostRegister"),
            host_unregister: sym!("hipHostUnregister"),
            stream_create: sym!("hipStreamCreateWithFlags"),
            stream_sync: sym!("hipStreamSynchronize"),
            stream_destroy: sym!("hipStreamDestroy"),
            error_string: sym!("hipGetErrorString"),
            runtime_version: sym!("hipRuntimeGetVersion"),
            pci_bus_id: sym!("hipDeviceGetPCIBusId"),
        }))
    }

    pub fn register(&self, file: &File) -> Result<Handle, HipFileError> {
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

    pub fn malloc(&self, size: usize) -> Result<*mut c_void, c_int> {
        let mut p = std::ptr::null_mut();
        match unsafe { (self.malloc)(&mut p, size) } {
            0 => Ok(p),
            e => Err(e),
        }
    }

    /// A registered device buffer of `size` bytes.
    pub fn device_buffer(&self, size: usize) -> *mut c_void {
        let p = self.malloc(size).unwrap();
        assert_eq!(p as usize % 4096, 0, "device memory is 4096-aligned");
        assert_eq!(unsafe { (self.buf_register)(p, size, 0) }, OK);
        p
    }

    pub fn release_buffer(&self, p: *mut c_void) {
        assert_eq!(unsafe { (self.buf_deregister)(p) }, OK);
        assert_eq!(unsafe { (self.free)(p) }, 0);
    }

    pub fn read(&self, fh: Handle, buf: *mut c_void, size: usize, off: i64, buf_off: i64) -> isize {
        unsafe { (self.read)(fh, buf, size, off, buf_off) }
    }

    pub fn write(
        &self,
        fh: Handle,
        buf: *mut c_void,
        size: usize,
        off: i64,
        buf_off: i64,
    ) -> isize {
        unsafe { (self.write)(fh, buf, size, off, buf_off) }
    }
}

pub fn set_errno(value: c_int) {
    unsafe { *libc::__errno_location() = value };
}

pub fn errno() -> c_int {
    unsafe { *libc::__errno_location() }
}

pub fn text(p: *const c_char) -> String {
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub fn random_bytes(len: usize) -> Vec<u8> {
    let mut data = vec![0u8; len];
    rand::thread_rng().fill_bytes(&mut data);
    data
}

pub fn dir() -> PathBuf {
    PathBuf::from(std::env::var_os("FAKE_GPU_DIR").expect("FAKE_GPU_DIR"))
}

pub fn rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}
