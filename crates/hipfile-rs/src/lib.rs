//! Safe bindings to AMD hipFile and NVIDIA cuFile (GPU-direct file I/O), loaded at run time.
//!
//! Nothing is linked: [`Library::load`] finds the vendor libraries with the dynamic loader, so a
//! program using this crate builds and runs on machines with neither ROCm nor CUDA, and can say
//! exactly what it looked for ([`LoadError`] lists every path tried).
//!
//! Layers (after cudarc): [`sys`] holds the `#[repr(C)]` types and the function tables;
//! [`error`] decodes the return conventions; the types at the crate root are RAII wrappers whose
//! `Drop` gives back what they hold, in the order the library requires. Every object keeps the
//! objects it depends on alive (a buffer holds its device, the device its driver, the driver its
//! library), so no drop order can close the driver under a live handle or buffer.
//!
//! # Where the libraries are looked for
//!
//! | flavor | I/O library | GPU runtime |
//! |---|---|---|
//! | [`Flavor::HipFile`] | `libhipfile.so.0`, `libhipfile.so` | `libamdhip64.so.7`, `.6`, `.5`, `libamdhip64.so` |
//! | [`Flavor::CuFile`] | `libcufile.so.0`, `libcufile.so` | `libcuda.so.1`, `libcuda.so` |
//!
//! Each name is tried on the loader path first (`LD_LIBRARY_PATH`, ld.so.cache), then in
//! `$ROCM_PATH/lib`, `/opt/rocm/lib` and `/opt/rocm/core-*/lib` (AMD), or `/usr/local/cuda/lib64`
//! and `/usr/local/cuda/targets/x86_64-linux/lib` (NVIDIA).
//!
//! # Environment overrides
//!
//! For non-standard installs (and for tests, which point them at a fake library). When one is
//! set, only that path is tried:
//!
//! - `AISCP_HIPFILE_LIB`: path of libhipfile.
//! - `AISCP_HIP_LIB`: path of the HIP runtime (libamdhip64).
//! - `AISCP_CUFILE_LIB`: path of libcufile.
//! - `AISCP_CUDA_LIB`: path of the CUDA driver library (libcuda).
//!
//! # Threads
//!
//! The current GPU is per thread in both runtimes. Calls that need it ([`FileHandle::read`],
//! [`Device::alloc`], ...) make the right device current on the calling thread themselves (a
//! thread-local remembers which one is, so this costs nothing when it already is).

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

pub mod error;
mod load;
pub mod sys;
mod window;

pub use error::{Error, LoadError};
pub use load::{ENV_CUDA_LIB, ENV_CUFILE_LIB, ENV_HIPFILE_LIB, ENV_HIP_LIB};
pub use window::CopyWindow;

use error::{decode_file_error, decode_io_result, decode_runtime_status, Failure};

/// Which vendor library fills the function table. Both have the same API shape and the same
/// 5000-based error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// AMD: libhipfile.so.0 + libamdhip64.so.{7,6,5}.
    HipFile,
    /// NVIDIA: libcufile.so.0 + libcuda.so.1.
    CuFile,
}

impl Flavor {
    /// The library's name as its vendor writes it, for messages: `hipFile` or `cuFile`.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::HipFile => "hipFile",
            Flavor::CuFile => "cuFile",
        }
    }

    /// The kernel driver's device node that every GPU of this vendor needs (AMD's KFD,
    /// NVIDIA's control device). Without it the runtime can find no GPU.
    pub fn device_node(self) -> &'static Path {
        Path::new(match self {
            Flavor::HipFile => "/dev/kfd",
            Flavor::CuFile => "/dev/nvidiactl",
        })
    }

    /// Whether the vendor's kernel driver is there, so loading its libraries can be worth it.
    /// A cheap stat: a failed search for a library through the loader path costs tens of
    /// directory lookups (every path entry and glibc-hwcaps subdirectory, for every name),
    /// which measured 0.35 s with cold caches on the H200 machine for the four HIP names.
    pub fn driver_present(self) -> bool {
        // WSL2 exposes NVIDIA GPUs through /dev/dxg instead of the Linux driver's nodes.
        self.device_node().exists() || (self == Flavor::CuFile && Path::new("/dev/dxg").exists())
    }

    /// Whether an AISCP_* override names one of this flavor's libraries: then the caller
    /// asked for those files, whatever the machine has.
    pub fn overridden(self) -> bool {
        let vars: [&str; 2] = match self {
            Flavor::HipFile => [load::ENV_HIPFILE_LIB, load::ENV_HIP_LIB],
            Flavor::CuFile => [load::ENV_CUFILE_LIB, load::ENV_CUDA_LIB],
        };
        vars.iter()
            .any(|v| std::env::var_os(v).is_some_and(|p| !p.is_empty()))
    }
}

impl std::fmt::Display for Flavor {
    /// The name used on command lines: `hipfile` or `cufile`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Flavor::HipFile => "hipfile",
            Flavor::CuFile => "cufile",
        })
    }
}

impl std::str::FromStr for Flavor {
    type Err = String;
    fn from_str(s: &str) -> Result<Flavor, String> {
        match s.to_ascii_lowercase().as_str() {
            "hipfile" => Ok(Flavor::HipFile),
            "cufile" => Ok(Flavor::CuFile),
            _ => Err(format!(
                "unknown GPU I/O library '{s}' (expected hipfile or cufile)"
            )),
        }
    }
}

fn c_text(p: *const std::ffi::c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: the libraries return static NUL-terminated strings.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

fn errno_location() -> *mut c_int {
    // SAFETY: always valid for the calling thread.
    unsafe { libc::__errno_location() }
}

// =============================================================================================
// Runtime
// =============================================================================================

/// The GPU runtime alone (libamdhip64 or libcuda): enough to count devices on a machine that
/// has no hipFile/cuFile. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    flavor: Flavor,
    table: sys::RuntimeFunctions,
    /// `cuInit(0)`'s status, run once before the first CUDA call.
    cuda_init: OnceLock<sys::RuntimeStatus>,
    /// Dropped last: the table points into it.
    lib: load::Loaded,
}

impl Runtime {
    /// Loads the GPU runtime of `flavor`, honouring `AISCP_HIP_LIB` / `AISCP_CUDA_LIB`.
    pub fn load(flavor: Flavor) -> Result<Runtime, LoadError> {
        let (table, lib) = load::load_runtime(flavor)?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                flavor,
                table,
                cuda_init: OnceLock::new(),
                lib,
            }),
        })
    }

    pub fn flavor(&self) -> Flavor {
        self.inner.flavor
    }

    /// Where libamdhip64 / libcuda was found.
    pub fn path(&self) -> &Path {
        &self.inner.lib.path
    }

    /// "HIP 5.2.21153" / "CUDA driver 13.0", when the runtime can tell.
    pub fn version(&self) -> Option<String> {
        let mut v: c_int = 0;
        match &self.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                // SAFETY: valid out pointer.
                let status = unsafe { (hip.runtime_get_version?)(&mut v) };
                (status == 0).then(|| {
                    format!(
                        "HIP {}.{}.{}",
                        v / 10_000_000,
                        (v / 100_000) % 100,
                        v % 100_000
                    )
                })
            }
            sys::RuntimeFunctions::Cuda(cu) => {
                // SAFETY: valid out pointer.
                let status = unsafe { (cu.driver_get_version?)(&mut v) };
                (status == 0).then(|| format!("CUDA driver {}.{}", v / 1000, (v % 1000) / 10))
            }
        }
    }

    /// The runtime's own text for a status (hipGetErrorString / cuGetErrorString).
    pub fn error_text(&self, status: sys::RuntimeStatus) -> Option<String> {
        match &self.inner.table {
            // SAFETY: returns a static string for any value.
            sys::RuntimeFunctions::Hip(hip) => c_text(unsafe { (hip.get_error_string)(status) }),
            sys::RuntimeFunctions::Cuda(cu) => {
                let mut p = std::ptr::null();
                // SAFETY: valid out pointer; fails (and leaves it null) for unknown values.
                let rc = unsafe { (cu.get_error_string)(status, &mut p) };
                if rc == 0 {
                    c_text(p)
                } else {
                    None
                }
            }
        }
    }

    fn error(&self, call: &'static str, code: sys::RuntimeStatus) -> Error {
        Error::from_failure(
            call,
            Failure::Runtime(code),
            |_| None,
            |c| self.error_text(c),
        )
    }

    fn check(&self, call: &'static str, status: sys::RuntimeStatus) -> Result<(), Error> {
        decode_runtime_status(status).map_err(|_| self.error(call, status))
    }

    /// cuInit(0) once per process (the driver API refuses every call before it).
    fn cuda(&self) -> Result<&sys::CudaFunctions, Error> {
        let sys::RuntimeFunctions::Cuda(cu) = &self.inner.table else {
            unreachable!("cuda() is only called on the CuFile flavor")
        };
        // SAFETY: no pointers involved.
        let status = *self.inner.cuda_init.get_or_init(|| unsafe { (cu.init)(0) });
        self.check("cuInit", status)?;
        Ok(cu)
    }

    /// Number of GPUs. With none, the runtime's own "no device" status (100) is the error.
    pub fn device_count(&self) -> Result<u32, Error> {
        let mut n: c_int = 0;
        match &self.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                // SAFETY: valid out pointer.
                let status = unsafe { (hip.get_device_count)(&mut n) };
                self.check("hipGetDeviceCount", status)?;
            }
            sys::RuntimeFunctions::Cuda(_) => {
                let cu = self.cuda()?;
                // SAFETY: valid out pointer.
                let status = unsafe { (cu.device_get_count)(&mut n) };
                self.check("cuDeviceGetCount", status)?;
            }
        }
        Ok(u32::try_from(n).unwrap_or(0))
    }

    /// Device `index`'s PCI address as the runtime gives it ("0000:43:00.0", lower-cased),
    /// for placing files near their GPU. `Ok(None)` when the runtime lacks the call.
    pub fn pci_bus_id(&self, index: u32) -> Result<Option<String>, Error> {
        // "DDDD:BB:DD.F" plus the NUL; some runtimes write a longer domain.
        let mut text = [0 as std::ffi::c_char; 64];
        let len = text.len() as c_int;
        match &self.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                let Some(get) = hip.device_get_pci_bus_id else {
                    return Ok(None);
                };
                // SAFETY: `text` is valid for `len` bytes.
                let status = unsafe { get(text.as_mut_ptr(), len, index as c_int) };
                self.check("hipDeviceGetPCIBusId", status)?;
            }
            sys::RuntimeFunctions::Cuda(_) => {
                let cu = self.cuda()?;
                let Some(get) = cu.device_get_pci_bus_id else {
                    return Ok(None);
                };
                let mut dev: sys::CuDevice = 0;
                // SAFETY: valid out pointer; the runtime checks the index.
                self.check("cuDeviceGet", unsafe {
                    (cu.device_get)(&mut dev, index as c_int)
                })?;
                // SAFETY: `text` is valid for `len` bytes.
                let status = unsafe { get(text.as_mut_ptr(), len, dev) };
                self.check("cuDeviceGetPCIBusId", status)?;
            }
        }
        // The runtime NUL-terminates within `len`; the last byte stays 0 regardless.
        text[text.len() - 1] = 0;
        // SAFETY: NUL-terminated above.
        let id = unsafe { CStr::from_ptr(text.as_ptr()) };
        Ok(Some(id.to_string_lossy().to_ascii_lowercase()))
    }

    /// Device `index`'s memory in bytes, asked without a context (so it answers even when
    /// the GPU is too full for one). `Ok(None)` when the runtime lacks the call.
    pub fn total_memory(&self, index: u32) -> Result<Option<u64>, Error> {
        let mut bytes: usize = 0;
        match &self.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                let Some(get) = hip.device_total_mem else {
                    return Ok(None);
                };
                // SAFETY: valid out pointer; the runtime checks the index.
                self.check("hipDeviceTotalMem", unsafe {
                    get(&mut bytes, index as c_int)
                })?;
            }
            sys::RuntimeFunctions::Cuda(_) => {
                let cu = self.cuda()?;
                let Some(get) = cu.device_total_mem else {
                    return Ok(None);
                };
                let mut dev: sys::CuDevice = 0;
                // SAFETY: valid out pointer; the runtime checks the index.
                self.check("cuDeviceGet", unsafe {
                    (cu.device_get)(&mut dev, index as c_int)
                })?;
                // SAFETY: valid out pointer.
                self.check("cuDeviceTotalMem_v2", unsafe { get(&mut bytes, dev) })?;
            }
        }
        Ok(Some(bytes as u64))
    }
}

// =============================================================================================
// Library
// =============================================================================================

/// The loaded libraries and their resolved function table. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Library {
    inner: Arc<LibraryInner>,
}

struct LibraryInner {
    io: sys::IoFunctions,
    names: &'static sys::IoSymbols,
    runtime: Runtime,
    /// Dropped after `io`, which points into it.
    io_lib: load::Loaded,
}

impl Library {
    /// Loads the I/O library and the GPU runtime of `flavor`, honouring the AISCP_* overrides.
    pub fn load(flavor: Flavor) -> Result<Library, LoadError> {
        // The runtime first: the I/O library needs it, and on a machine with neither the
        // runtime is the more telling thing to report missing.
        let runtime = Runtime::load(flavor)?;
        let (io, io_lib) = load::load_io(flavor)?;
        Ok(Library {
            inner: Arc::new(LibraryInner {
                io,
                names: match flavor {
                    Flavor::HipFile => &sys::HIPFILE_SYMBOLS,
                    Flavor::CuFile => &sys::CUFILE_SYMBOLS,
                },
                runtime,
                io_lib,
            }),
        })
    }

    pub fn flavor(&self) -> Flavor {
        self.inner.runtime.flavor()
    }

    /// Where libhipfile / libcufile was found.
    pub fn io_library_path(&self) -> &Path {
        &self.inner.io_lib.path
    }

    /// Where libamdhip64 / libcuda was found.
    pub fn runtime_library_path(&self) -> &Path {
        self.inner.runtime.path()
    }

    /// The GPU runtime this library runs on.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// "hipFile 0.2.0" style text, when the library can tell.
    pub fn version(&self) -> Option<String> {
        match self.inner.io.get_version? {
            sys::VersionFn::HipFile(f) => {
                let (mut major, mut minor, mut patch) = (0, 0, 0);
                // SAFETY: valid out pointers.
                let e = unsafe { f(&mut major, &mut minor, &mut patch) };
                decode_file_error(e).ok()?;
                Some(format!("hipFile {major}.{minor}.{patch}"))
            }
            sys::VersionFn::CuFile(f) => {
                let mut v: c_int = 0;
                // SAFETY: valid out pointer.
                let e = unsafe { f(&mut v) };
                decode_file_error(e).ok()?;
                Some(format!(
                    "cuFile {}.{}.{}",
                    v / 1000,
                    (v % 1000) / 10,
                    v % 10
                ))
            }
        }
    }

    /// The library's driver reference count (hipFileUseCount / cuFileUseCount), if exported.
    pub fn use_count(&self) -> Option<i64> {
        // SAFETY: no arguments.
        self.inner.io.use_count.map(|f| unsafe { f() })
    }

    pub fn device_count(&self) -> Result<u32, Error> {
        self.inner.runtime.device_count()
    }

    /// Device `index`'s PCI address; see [`Runtime::pci_bus_id`].
    pub fn pci_bus_id(&self, index: u32) -> Result<Option<String>, Error> {
        self.inner.runtime.pci_bus_id(index)
    }

    /// Device `index` for staging memory and copies only, without opening the I/O driver:
    /// for callers that move file data with their own POSIX I/O (where the library could only
    /// emulate DMA, its driver would cost start-up time and host memory for nothing).
    /// Registering files, buffers or streams on it fails with DriverNotInitialized (5001).
    pub fn staging_device(&self, index: u32) -> Result<Device, Error> {
        Device::open(self, None, index)
    }

    /// Opens the driver once; it is closed when the last clone of the `Driver` is dropped.
    pub fn open_driver(&self) -> Result<Driver, Error> {
        if self.flavor() == Flavor::CuFile {
            // cuFile runs on the driver API, which refuses every call before cuInit.
            self.inner.runtime.cuda()?;
        }
        // SAFETY: no arguments.
        let e = unsafe { (self.inner.io.driver_open)() };
        self.check_file_error(self.inner.names.driver_open, e)?;
        Ok(Driver {
            inner: Arc::new(DriverInner { lib: self.clone() }),
        })
    }

    /// The library's text for a 5000-based code (hipFileGetOpErrorString), if it has one.
    fn op_text(&self, code: c_int) -> Option<String> {
        // SAFETY: returns a static string for any value.
        self.inner
            .io
            .get_op_error_string
            .and_then(|f| c_text(unsafe { f(code) }))
    }

    fn error(&self, call: &'static str, failure: Failure) -> Error {
        Error::from_failure(
            call,
            failure,
            |c| self.op_text(c),
            |c| self.inner.runtime.error_text(c),
        )
    }

    fn check_file_error(&self, call: &'static str, e: sys::FileError) -> Result<(), Error> {
        decode_file_error(e).map_err(|f| self.error(call, f))
    }

    fn invalid(&self, what: String) -> Error {
        Error::Library {
            code: sys::INVALID_VALUE,
            name: "InvalidValue",
            text: what,
        }
    }
}

// =============================================================================================
// Driver
// =============================================================================================

/// An open hipFile/cuFile driver. Clone shares it; closed once, on the last drop.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<DriverInner>,
}

struct DriverInner {
    lib: Library,
}

impl Drop for DriverInner {
    fn drop(&mut self) {
        // SAFETY: balances the DriverOpen that created this; every object using the driver
        // holds a clone of it, so none is alive now. A failing close cannot be acted on.
        let _ = unsafe { (self.lib.inner.io.driver_close)() };
    }
}

impl Driver {
    pub fn library(&self) -> &Library {
        &self.inner.lib
    }

    /// Selects device `index`, checked against the device count ([`Error::NoSuchDevice`]),
    /// and makes it current on the calling thread. Files, buffers and streams of this device
    /// can be registered with the driver.
    pub fn device(&self, index: u32) -> Result<Device, Error> {
        Device::open(self.library(), Some(self.clone()), index)
    }
}

// =============================================================================================
// Device
// =============================================================================================

enum DeviceContext {
    /// hipSetDevice(index) selects it.
    Hip,
    /// The retained primary context, made current with cuCtxSetCurrent.
    Cuda {
        dev: sys::CuDevice,
        ctx: sys::CuContext,
    },
}

struct DeviceInner {
    lib: Library,
    /// The open I/O driver, for devices that register files, buffers and streams; `None` for
    /// a device used only for staging memory and copies (see [`Library::staging_device`]).
    driver: Option<Driver>,
    index: u32,
    /// Process-unique, for the per-thread "current device" cache.
    id: u64,
    ctx: DeviceContext,
}

// SAFETY: the CUDA context pointer is a process-wide handle that the driver API allows on any
// thread; the HIP variant holds nothing.
unsafe impl Send for DeviceInner {}
// SAFETY: as above; nothing in DeviceInner is mutated after creation.
unsafe impl Sync for DeviceInner {}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        if let DeviceContext::Cuda { dev, .. } = self.ctx {
            if let sys::RuntimeFunctions::Cuda(cu) = &self.lib.runtime().inner.table {
                // SAFETY: balances the retain in Driver::device; every buffer and stream of
                // this device holds a clone of it, so none is alive.
                let _ = unsafe { (cu.primary_ctx_release)(dev) };
            }
        }
    }
}

thread_local! {
    /// The `DeviceInner::id` current on this thread (0: unknown).
    static CURRENT_DEVICE: Cell<u64> = const { Cell::new(0) };
}

/// One GPU. `Send + Sync`; every call that needs the device current makes it so itself.
#[derive(Clone)]
pub struct Device {
    inner: Arc<DeviceInner>,
}

impl Device {
    /// Checks `index` against the device count, retains the device's context (CUDA) and
    /// makes it current on the calling thread.
    fn open(lib: &Library, driver: Option<Driver>, index: u32) -> Result<Device, Error> {
        let count = match lib.device_count() {
            Ok(n) => n,
            Err(e) if e.code() == Some(sys::RUNTIME_NO_DEVICE) => 0,
            Err(e) => return Err(e),
        };
        if index >= count {
            return Err(Error::NoSuchDevice { index, count });
        }
        let runtime = lib.runtime();
        let ctx = match &runtime.inner.table {
            sys::RuntimeFunctions::Hip(_) => DeviceContext::Hip,
            sys::RuntimeFunctions::Cuda(_) => {
                let cu = runtime.cuda()?;
                let mut dev: sys::CuDevice = 0;
                // SAFETY: valid out pointer; index < count.
                runtime.check("cuDeviceGet", unsafe {
                    (cu.device_get)(&mut dev, index as c_int)
                })?;
                let mut ctx: sys::CuContext = std::ptr::null_mut();
                // SAFETY: valid out pointer; released in DeviceInner::drop.
                runtime.check("cuDevicePrimaryCtxRetain", unsafe {
                    (cu.primary_ctx_retain)(&mut ctx, dev)
                })?;
                DeviceContext::Cuda { dev, ctx }
            }
        };
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let device = Device {
            inner: Arc::new(DeviceInner {
                lib: lib.clone(),
                driver,
                index,
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                ctx,
            }),
        };
        device.make_current()?;
        Ok(device)
    }

    pub fn index(&self) -> u32 {
        self.inner.index
    }

    /// The open I/O driver, when this device came from [`Driver::device`].
    pub fn driver(&self) -> Option<&Driver> {
        self.inner.driver.as_ref()
    }

    fn library(&self) -> &Library {
        &self.inner.lib
    }

    /// The library, if the I/O driver is open for this device: registration needs it.
    /// `call` picks the failing call's name in this flavor's symbol set.
    fn io_library(&self, call: fn(&sys::IoSymbols) -> &'static str) -> Result<&Library, Error> {
        match &self.inner.driver {
            Some(driver) => Ok(driver.library()),
            None => {
                let lib = self.library();
                Err(lib.error(
                    call(lib.inner.names),
                    Failure::Op(sys::DRIVER_NOT_INITIALIZED),
                ))
            }
        }
    }

    fn runtime(&self) -> &Runtime {
        self.library().runtime()
    }

    /// Makes the device current on the calling thread (hipSetDevice / cuCtxSetCurrent are
    /// per thread), unless this crate already made it current there: every call of the crate
    /// goes through here, so a thread that keeps working for the same device pays once.
    pub fn make_current(&self) -> Result<(), Error> {
        if CURRENT_DEVICE.with(Cell::get) == self.inner.id {
            Ok(())
        } else {
            self.set_current()
        }
    }

    fn set_current(&self) -> Result<(), Error> {
        let rt = self.runtime();
        match (&rt.inner.table, &self.inner.ctx) {
            (sys::RuntimeFunctions::Hip(hip), _) => {
                // SAFETY: index was checked against the device count.
                rt.check("hipSetDevice", unsafe {
                    (hip.set_device)(self.inner.index as c_int)
                })?;
            }
            (sys::RuntimeFunctions::Cuda(cu), DeviceContext::Cuda { ctx, .. }) => {
                // SAFETY: the context is retained for as long as self lives.
                rt.check("cuCtxSetCurrent", unsafe { (cu.ctx_set_current)(*ctx) })?;
            }
            (sys::RuntimeFunctions::Cuda(_), DeviceContext::Hip) => {
                unreachable!("a CUDA device always has a context")
            }
        }
        CURRENT_DEVICE.with(|c| c.set(self.inner.id));
        Ok(())
    }

    /// Device memory (hipMalloc / cuMemAlloc_v2), freed on drop.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer, Error> {
        let mut addr = 0usize;
        if len > 0 {
            self.make_current()?;
            let rt = self.runtime();
            match &rt.inner.table {
                sys::RuntimeFunctions::Hip(hip) => {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    // SAFETY: valid out pointer; freed in DeviceBuffer::drop.
                    rt.check("hipMalloc", unsafe { (hip.malloc)(&mut p, len) })?;
                    addr = p as usize;
                }
                sys::RuntimeFunctions::Cuda(cu) => {
                    let mut p: sys::CuDevicePtr = 0;
                    // SAFETY: valid out pointer; freed in DeviceBuffer::drop.
                    rt.check("cuMemAlloc_v2", unsafe { (cu.mem_alloc)(&mut p, len) })?;
                    addr = p as usize;
                }
            }
        }
        Ok(DeviceBuffer {
            device: self.clone(),
            addr,
            len,
        })
    }

    /// Pinned host memory (hipHostMalloc / cuMemHostAlloc) for the bounce path, freed on drop.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer, Error> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        if len > 0 {
            self.make_current()?;
            let rt = self.runtime();
            let call = match &rt.inner.table {
                sys::RuntimeFunctions::Hip(hip) => {
                    // SAFETY: valid out pointer; freed in PinnedBuffer::drop.
                    rt.check("hipHostMalloc", unsafe {
                        (hip.host_malloc)(&mut ptr, len, sys::HOST_ALLOC_DEFAULT)
                    })?;
                    "hipHostMalloc"
                }
                sys::RuntimeFunctions::Cuda(cu) => {
                    // SAFETY: valid out pointer; freed in PinnedBuffer::drop.
                    rt.check("cuMemHostAlloc", unsafe {
                        (cu.mem_host_alloc)(&mut ptr, len, sys::HOST_ALLOC_DEFAULT)
                    })?;
                    "cuMemHostAlloc"
                }
            };
            if ptr.is_null() {
                return Err(rt.error(call, sys::RUNTIME_OUT_OF_MEMORY));
            }
        }
        Ok(PinnedBuffer {
            device: self.clone(),
            ptr: NonNull::new(ptr.cast()).unwrap_or(NonNull::dangling()),
            len,
        })
    }

    /// Registers a borrowed fd (descriptor type OpaqueFD); deregistered on drop, which the
    /// borrow forces before the fd can close.
    pub fn register_file<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<FileHandle<'fd>, Error> {
        let lib = self.io_library(|n| n.handle_register)?;
        let mut descr = sys::FileDescr::from_fd(fd.as_raw_fd());
        let mut handle: sys::FileHandleRaw = std::ptr::null_mut();
        // SAFETY: valid pointers; the descriptor is only read during the call.
        let e = unsafe { (lib.inner.io.handle_register)(&mut handle, &mut descr) };
        lib.check_file_error(lib.inner.names.handle_register, e)?;
        Ok(FileHandle {
            device: self.clone(),
            raw: handle,
            in_flight: AtomicUsize::new(0),
            _fd: PhantomData,
        })
    }

    /// A non-blocking stream registered with `flags` (sys::STREAM_* bits). The stream borrows
    /// the handles and buffers given to its async ops for `'io`.
    pub fn create_stream<'io>(&self, flags: u32) -> Result<Stream<'io>, Error> {
        let lib = self.io_library(|n| n.stream_register)?;
        let (Some(register), Some(_), Some(_), Some(_)) = (
            lib.inner.io.stream_register,
            lib.inner.io.stream_deregister,
            lib.inner.io.read_async,
            lib.inner.io.write_async,
        ) else {
            return Err(lib.error(
                lib.inner.names.stream_register,
                Failure::Op(sys::ASYNC_NOT_SUPPORTED),
            ));
        };
        if flags & !sys::STREAM_FLAGS_MASK != 0 {
            return Err(lib.invalid(format!("stream flags {flags:#x} outside mask 0xf")));
        }
        self.make_current()?;
        let rt = self.runtime();
        let mut raw: sys::StreamRaw = std::ptr::null_mut();
        match &rt.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                // SAFETY: valid out pointer; destroyed in Stream::drop.
                rt.check("hipStreamCreateWithFlags", unsafe {
                    (hip.stream_create_with_flags)(&mut raw, sys::STREAM_NON_BLOCKING)
                })?;
            }
            sys::RuntimeFunctions::Cuda(cu) => {
                // SAFETY: valid out pointer; destroyed in Stream::drop.
                rt.check("cuStreamCreate", unsafe {
                    (cu.stream_create)(&mut raw, sys::STREAM_NON_BLOCKING)
                })?;
            }
        }
        // SAFETY: `raw` is a live stream.
        let e = unsafe { register(raw, flags) };
        if let Err(f) = decode_file_error(e) {
            self.destroy_stream(raw);
            return Err(lib.error(lib.inner.names.stream_register, f));
        }
        Ok(Stream {
            device: self.clone(),
            raw,
            ops: Vec::new(),
        })
    }

    fn sync_stream(&self, raw: sys::StreamRaw) -> Result<(), Error> {
        self.make_current()?;
        let rt = self.runtime();
        match &rt.inner.table {
            // SAFETY: raw is a live stream of this device.
            sys::RuntimeFunctions::Hip(hip) => rt.check("hipStreamSynchronize", unsafe {
                (hip.stream_synchronize)(raw)
            }),
            // SAFETY: as above.
            sys::RuntimeFunctions::Cuda(cu) => rt.check("cuStreamSynchronize", unsafe {
                (cu.stream_synchronize)(raw)
            }),
        }
    }

    fn destroy_stream(&self, raw: sys::StreamRaw) {
        let _ = self.make_current();
        // SAFETY: raw is a live stream with nothing in flight; not used afterwards.
        unsafe {
            match &self.runtime().inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.stream_destroy)(raw),
                sys::RuntimeFunctions::Cuda(cu) => (cu.stream_destroy)(raw),
            };
        }
    }
}

// =============================================================================================
// Buffers
// =============================================================================================

/// Device memory. `Send`. Freed on drop.
pub struct DeviceBuffer {
    device: Device,
    /// Device address (a `void*` on HIP, a `CUdeviceptr` on CUDA); 0 when `len` is 0.
    addr: usize,
    len: usize,
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.addr == 0 {
            return;
        }
        // CUDA refuses calls without a current context; a failure leaves us nothing to do.
        let _ = self.device.make_current();
        // SAFETY: allocated by Device::alloc and no longer registered (RegisteredBuffer
        // deregisters first, or leaks when I/O may still be in flight).
        unsafe {
            match &self.device.runtime().inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.free)(self.addr as *mut c_void),
                sys::RuntimeFunctions::Cuda(cu) => (cu.mem_free)(self.addr as sys::CuDevicePtr),
            };
        }
    }
}

impl DeviceBuffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
    /// Registers the buffer for I/O; the returned guard deregisters before the memory is freed.
    /// On failure the buffer comes back, so the caller can fall back to a bounce path.
    pub fn register(self) -> Result<RegisteredBuffer, (DeviceBuffer, Error)> {
        let lib = match self.device.io_library(|n| n.buf_register) {
            Ok(lib) => lib,
            Err(e) => return Err((self, e)),
        };
        // SAFETY: the whole allocation, registered once; deregistered in RegisteredBuffer.
        let e = unsafe { (lib.inner.io.buf_register)(self.addr as *const c_void, self.len, 0) };
        match lib.check_file_error(lib.inner.names.buf_register, e) {
            Ok(()) => Ok(RegisteredBuffer {
                buf: ManuallyDrop::new(self),
                in_flight: AtomicUsize::new(0),
            }),
            Err(err) => Err((self, err)),
        }
    }

    fn check_range(&self, offset: usize, len: usize) -> Result<(), Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(self.device.library().invalid(format!(
                "range {offset}+{len} exceeds device buffer of {} bytes",
                self.len
            ))),
        }
    }

    /// hipMemcpy host to device at `offset`.
    pub fn copy_from_host(&mut self, offset: usize, src: &[u8]) -> Result<(), Error> {
        self.check_range(offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.device.make_current()?;
        let rt = self.device.runtime();
        let dst = self.addr + offset;
        match &rt.inner.table {
            // SAFETY: range checked; src is valid for its length.
            sys::RuntimeFunctions::Hip(hip) => rt.check("hipMemcpy", unsafe {
                (hip.memcpy)(
                    dst as *mut c_void,
                    src.as_ptr().cast(),
                    src.len(),
                    sys::HIP_MEMCPY_HOST_TO_DEVICE,
                )
            }),
            // SAFETY: as above.
            sys::RuntimeFunctions::Cuda(cu) => rt.check("cuMemcpyHtoD_v2", unsafe {
                (cu.memcpy_htod)(dst as sys::CuDevicePtr, src.as_ptr().cast(), src.len())
            }),
        }
    }

    /// hipMemcpy device to host from `offset`.
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<(), Error> {
        self.check_range(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.device.make_current()?;
        let rt = self.device.runtime();
        let src = self.addr + offset;
        match &rt.inner.table {
            // SAFETY: range checked; dst is valid for its length.
            sys::RuntimeFunctions::Hip(hip) => rt.check("hipMemcpy", unsafe {
                (hip.memcpy)(
                    dst.as_mut_ptr().cast(),
                    src as *const c_void,
                    dst.len(),
                    sys::HIP_MEMCPY_DEVICE_TO_HOST,
                )
            }),
            // SAFETY: as above.
            sys::RuntimeFunctions::Cuda(cu) => rt.check("cuMemcpyDtoH_v2", unsafe {
                (cu.memcpy_dtoh)(dst.as_mut_ptr().cast(), src as sys::CuDevicePtr, dst.len())
            }),
        }
    }
}

/// A registered device buffer: owns the [`DeviceBuffer`]; on drop deregisters, then frees.
pub struct RegisteredBuffer {
    buf: ManuallyDrop<DeviceBuffer>,
    /// Async ops submitted on a stream and not yet synchronized. Non-zero at drop means a
    /// stream was leaked with I/O in flight: then the memory is leaked too, never freed under
    /// the library's feet.
    in_flight: AtomicUsize,
}

impl Drop for RegisteredBuffer {
    fn drop(&mut self) {
        if self.in_flight.load(Ordering::Acquire) != 0 {
            return;
        }
        let _ = self.deregister_raw();
        // SAFETY: dropped once, here; the field is not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.buf) };
    }
}

impl RegisteredBuffer {
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buf
    }
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        &mut self.buf
    }
    pub fn len(&self) -> usize {
        self.buffer().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn deregister_raw(&self) -> Result<(), Error> {
        let lib = self.buf.device.library();
        // SAFETY: the base pointer registered in DeviceBuffer::register; nothing in flight.
        let e = unsafe { (lib.inner.io.buf_deregister)(self.buf.addr as *const c_void) };
        lib.check_file_error(lib.inner.names.buf_deregister, e)
    }

    /// Deregisters explicitly, reporting a failure the drop would have to ignore, and gives
    /// the memory back.
    pub fn deregister(self) -> Result<DeviceBuffer, Error> {
        let mut this = ManuallyDrop::new(self);
        if this.in_flight.load(Ordering::Acquire) != 0 {
            // Leaked on purpose: see `in_flight`.
            return Err(this.buf.device.library().invalid(
                "buffer deregistered with async I/O in flight (a stream was leaked)".into(),
            ));
        }
        let result = this.deregister_raw();
        // SAFETY: `this` is never dropped, so the buffer is moved out exactly once.
        let buf = unsafe { ManuallyDrop::take(&mut this.buf) };
        result.map(|()| buf)
    }
}

/// Pinned host memory, usable as a byte slice.
pub struct PinnedBuffer {
    device: Device,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain host memory owned by this value; slices follow the usual borrow rules.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above.
unsafe impl Sync for PinnedBuffer {}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        let _ = self.device.make_current();
        let p = self.ptr.as_ptr().cast::<c_void>();
        // SAFETY: allocated by Device::alloc_pinned; no slice outlives self.
        unsafe {
            match &self.device.runtime().inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.host_free)(p),
                sys::RuntimeFunctions::Cuda(cu) => (cu.mem_free_host)(p),
            };
        }
    }
}

impl PinnedBuffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` bytes allocated by the runtime (or dangling with len 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

// =============================================================================================
// File handles and synchronous I/O
// =============================================================================================

/// A file registered with hipFile/cuFile. `Sync`: workers on several threads share one.
///
/// Sharing is sound because the handle is an opaque token the library looks up on every call
/// and both libraries document Read/Write as safe to call concurrently on one handle; this
/// type never mutates it, and deregistration needs ownership (drop), which cannot happen while
/// another thread still holds a `&FileHandle`.
pub struct FileHandle<'fd> {
    device: Device,
    raw: sys::FileHandleRaw,
    /// Async ops not yet synchronized (see [`RegisteredBuffer`]).
    in_flight: AtomicUsize,
    _fd: PhantomData<BorrowedFd<'fd>>,
}

// SAFETY: see the type's documentation.
unsafe impl Send for FileHandle<'_> {}
// SAFETY: see the type's documentation.
unsafe impl Sync for FileHandle<'_> {}

impl Drop for FileHandle<'_> {
    fn drop(&mut self) {
        if self.in_flight.load(Ordering::Acquire) != 0 {
            // A stream with I/O on this handle was leaked: keep the registration rather than
            // pull it from under the library.
            return;
        }
        // SAFETY: registered in Device::register_file; no I/O in flight on it.
        unsafe { (self.device.library().inner.io.handle_deregister)(self.raw) };
    }
}

impl FileHandle<'_> {
    fn check_io(
        &self,
        buf: &DeviceBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<(), Error> {
        let lib = self.device.library();
        if !Arc::ptr_eq(&lib.inner, &buf.device.library().inner) {
            return Err(lib.invalid("buffer and file belong to different libraries".into()));
        }
        buf.check_range(buf_offset, len)?;
        if i64::try_from(file_offset).is_err() {
            return Err(lib.invalid(format!("file offset {file_offset} beyond off_t")));
        }
        buf.device.make_current()
    }

    /// Runs one synchronous call with errno cleared before it, and decodes its result.
    fn run(&self, call: &'static str, f: impl FnOnce() -> isize) -> Result<usize, Error> {
        // SAFETY: errno is thread-local and writable.
        unsafe { *errno_location() = 0 };
        let ret = f();
        // SAFETY: as above.
        let errno = unsafe { *errno_location() };
        decode_io_result(ret, errno).map_err(|fail| self.device.library().error(call, fail))
    }

    /// hipFileRead: up to `len` bytes at `file_offset` into `buf` at `buf_offset`.
    /// May return a short count (EOF, the 0x7ffff000 per-call cap).
    pub fn read(
        &self,
        buf: &mut RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.check_io(&buf.buf, len, file_offset, buf_offset)?;
        let lib = self.device.library();
        let base = buf.buf.addr as *mut c_void;
        // SAFETY: registered handle and the registered base pointer; range checked above.
        self.run(lib.inner.names.read, || unsafe {
            (lib.inner.io.read)(self.raw, base, len, file_offset as i64, buf_offset as i64)
        })
    }

    /// hipFileWrite: up to `len` bytes from `buf` at `buf_offset` to `file_offset`.
    pub fn write(
        &self,
        buf: &RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.check_io(&buf.buf, len, file_offset, buf_offset)?;
        let lib = self.device.library();
        let base = buf.buf.addr as *const c_void;
        // SAFETY: registered handle and the registered base pointer; range checked above.
        self.run(lib.inner.names.write, || unsafe {
            (lib.inner.io.write)(self.raw, base, len, file_offset as i64, buf_offset as i64)
        })
    }
}

// =============================================================================================
// Streams and async I/O
// =============================================================================================

/// The parameters of one async op. The library reads them through pointers when the stream
/// reaches the op, and writes `bytes_done` at completion, so the block lives on the heap, at a
/// fixed address, until the stream is synchronized.
#[repr(C)]
struct AsyncParams {
    size: usize,
    file_offset: sys::Offset,
    buf_offset: sys::Offset,
    bytes_done: isize,
}

struct PendingOp<'io> {
    /// From `Box::into_raw`; turned back into a Box only after synchronization. A raw pointer,
    /// not a Box, because the library writes through it while we hold it.
    params: NonNull<AsyncParams>,
    buf_in_flight: &'io AtomicUsize,
    file_in_flight: &'io AtomicUsize,
    /// ReadAsync or WriteAsync, for the error message.
    call: &'static str,
}

/// A registered non-blocking stream. Async ops keep their parameter blocks alive inside the
/// stream until [`Stream::synchronize`]; dropping synchronizes before deregistering.
///
/// The file handles and buffers given to the ops are borrowed for `'io`, which outlives the
/// stream, so the borrow checker keeps them alive (and registered) while ops are in flight.
/// Buffers are borrowed shared: ops on one stream run in order, so reading into a buffer and
/// then writing it out is the intended use; [`DeviceBuffer::copy_from_host`] (which needs
/// `&mut`) cannot race with them. Should a stream be leaked (`mem::forget`) with ops in flight,
/// the buffers and handles it used are leaked rather than freed.
pub struct Stream<'io> {
    device: Device,
    raw: sys::StreamRaw,
    ops: Vec<PendingOp<'io>>,
}

// SAFETY: the stream pointer may be used from any thread (the device is made current first);
// the pending ops hold heap blocks owned by the stream and shared references to atomics.
unsafe impl Send for Stream<'_> {}

impl<'io> Stream<'io> {
    /// Operations submitted since the last synchronize.
    pub fn pending(&self) -> usize {
        self.ops.len()
    }

    fn submit(
        &mut self,
        write: bool,
        file: &'io FileHandle<'_>,
        buf: &'io RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        file.check_io(&buf.buf, len, file_offset, buf_offset)?;
        if !Arc::ptr_eq(&self.device.inner, &buf.buf.device.inner) {
            return Err(self
                .device
                .library()
                .invalid("buffer is on another device than the stream".into()));
        }
        let lib = self.device.library();
        let (f, call) = if write {
            (lib.inner.io.write_async, lib.inner.names.write_async)
        } else {
            (lib.inner.io.read_async, lib.inner.names.read_async)
        };
        let f = f.expect("create_stream checked the async symbols");
        let params = NonNull::from(Box::leak(Box::new(AsyncParams {
            size: len,
            file_offset: file_offset as i64,
            buf_offset: buf_offset as i64,
            bytes_done: 0,
        })));
        let p = params.as_ptr();
        // SAFETY: registered handle and buffer base; the parameter block stays at this address
        // until synchronize; `'io` keeps the handle and buffer alive that long.
        let e = unsafe {
            f(
                file.raw,
                buf.buf.addr as *mut c_void,
                &raw mut (*p).size,
                &raw mut (*p).file_offset,
                &raw mut (*p).buf_offset,
                &raw mut (*p).bytes_done,
                self.raw,
            )
        };
        if let Err(fail) = decode_file_error(e) {
            // SAFETY: refused at submission, so the library holds no pointer into the block.
            drop(unsafe { Box::from_raw(p) });
            return Err(lib.error(call, fail));
        }
        buf.in_flight.fetch_add(1, Ordering::AcqRel);
        file.in_flight.fetch_add(1, Ordering::AcqRel);
        self.ops.push(PendingOp {
            params,
            buf_in_flight: &buf.in_flight,
            file_in_flight: &file.in_flight,
            call,
        });
        Ok(self.ops.len() - 1)
    }

    /// hipFileReadAsync: queues a read of `len` bytes at `file_offset` into `buf` at
    /// `buf_offset`. Returns the op's index in the next [`Stream::synchronize`] result.
    pub fn read_async(
        &mut self,
        file: &'io FileHandle<'_>,
        buf: &'io RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.submit(false, file, buf, len, file_offset, buf_offset)
    }

    /// hipFileWriteAsync: queues a write of `len` bytes from `buf` at `buf_offset` to
    /// `file_offset`. Returns the op's index in the next [`Stream::synchronize`] result.
    pub fn write_async(
        &mut self,
        file: &'io FileHandle<'_>,
        buf: &'io RegisteredBuffer,
        len: usize,
        file_offset: u64,
        buf_offset: usize,
    ) -> Result<usize, Error> {
        self.submit(true, file, buf, len, file_offset, buf_offset)
    }

    /// Waits for every queued op and returns their byte counts in submission order. The first
    /// failed op is the error (all ops are complete either way). If the stream itself fails to
    /// synchronize, the ops stay pending: their memory is then never freed under the library.
    pub fn synchronize(&mut self) -> Result<Vec<usize>, Error> {
        self.synchronize_each()?.into_iter().collect()
    }

    /// Like [`Stream::synchronize`], but with every op's own result, in submission order, so
    /// that a caller can tell which op failed (a read or the write queued after it). The outer
    /// error is the stream's own synchronization failing (the ops then stay pending).
    pub fn synchronize_each(&mut self) -> Result<Vec<Result<usize, Error>>, Error> {
        // Ops that run inside the synchronization (compatibility paths) leave errno behind
        // with a stored -1, as a synchronous call would.
        self.device.make_current()?;
        // SAFETY: errno is thread-local and writable.
        unsafe { *errno_location() = 0 };
        self.device.sync_stream(self.raw)?;
        // SAFETY: as above.
        let errno = unsafe { *errno_location() };
        let lib = self.device.library();
        let mut results = Vec::with_capacity(self.ops.len());
        for op in self.ops.drain(..) {
            // SAFETY: the stream is synchronized, so the library is done with the block.
            let params = unsafe { Box::from_raw(op.params.as_ptr()) };
            op.buf_in_flight.fetch_sub(1, Ordering::AcqRel);
            op.file_in_flight.fetch_sub(1, Ordering::AcqRel);
            results.push(
                decode_io_result(params.bytes_done, errno).map_err(|fail| lib.error(op.call, fail)),
            );
        }
        Ok(results)
    }
}

impl Drop for Stream<'_> {
    fn drop(&mut self) {
        if !self.ops.is_empty() && self.synchronize_each().is_err() {
            // Could not synchronize: the library may still use the stream and the blocks.
            return;
        }
        let io = &self.device.library().inner.io;
        if let Some(deregister) = io.stream_deregister {
            let _ = self.device.make_current();
            // SAFETY: registered in create_stream; nothing in flight.
            let _ = unsafe { deregister(self.raw) };
        }
        self.device.destroy_stream(self.raw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}

    #[test]
    fn thread_safety_of_the_public_types() {
        // Workers on several threads share the library, driver, device and file handles, and
        // move buffers between them.
        send_sync::<Library>();
        send_sync::<Runtime>();
        send_sync::<Driver>();
        send_sync::<Device>();
        send_sync::<FileHandle<'static>>();
        send_sync::<DeviceBuffer>();
        send_sync::<RegisteredBuffer>();
        send_sync::<PinnedBuffer>();
        send::<Stream<'static>>();
    }

    #[test]
    fn flavor_names_round_trip() {
        for f in [Flavor::HipFile, Flavor::CuFile] {
            assert_eq!(f.to_string().parse::<Flavor>(), Ok(f));
        }
        assert_eq!("CuFile".parse::<Flavor>(), Ok(Flavor::CuFile));
        assert!("rocm".parse::<Flavor>().is_err());
    }
}
