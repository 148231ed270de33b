//! One GPU, made current on whichever thread uses it. Each kind of object made on a device
//! is made in its own module (`Device::alloc` in `buffer`, `register_file` in `file`,
//! `create_stream` in `stream`, `alloc_window` in `window`), so imports only point down:
//! those modules know the device, the device knows none of them.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::Failure;
use crate::library::{Driver, Library};
use crate::runtime::Runtime;
use crate::runtime_ops::DeviceContext;
use crate::{sys, Error};

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
        // SAFETY: balances the retain in Device::open; every buffer and stream of this device
        // holds a clone of it, so none is alive.
        unsafe { self.lib.runtime().release_context(&self.ctx) };
    }
}

impl Library {
    /// Device `index` for staging memory and copies only, without opening the I/O driver:
    /// for callers that move file data with their own POSIX I/O (where the library could only
    /// emulate DMA, its driver would cost start-up time and host memory for nothing).
    /// Registering files, buffers or streams on it fails with DriverNotInitialized (5001).
    pub fn staging_device(&self, index: u32) -> Result<Device, Error> {
        Device::open(self, None, index)
    }
}

impl Driver {
    /// Selects device `index`, checked against the device count ([`Error::NoSuchDevice`]),
    /// and makes it current on the calling thread. Files, buffers and streams of this device
    /// can be registered with the driver.
    pub fn device(&self, index: u32) -> Result<Device, Error> {
        Device::open(self.library(), Some(self.clone()), index)
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
    pub(crate) fn open(lib: &Library, driver: Option<Driver>, index: u32) -> Result<Device, Error> {
        let count = match lib.device_count() {
            Ok(n) => n,
            Err(e) if e.code() == Some(sys::RUNTIME_NO_DEVICE) => 0,
            Err(e) => return Err(e),
        };
        if index >= count {
            return Err(Error::NoSuchDevice { index, count });
        }
        let ctx = lib.runtime().retain_context(index)?;
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

    pub(crate) fn library(&self) -> &Library {
        &self.inner.lib
    }

    /// The library, if the I/O driver is open for this device: registration needs it.
    /// `call` picks the failing call's name in this flavor's symbol set.
    pub(crate) fn io_library(
        &self,
        call: fn(&sys::IoSymbols) -> &'static str,
    ) -> Result<&Library, Error> {
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

    pub(crate) fn runtime(&self) -> &Runtime {
        self.library().runtime()
    }

    /// The file of the runtime (HIP or CUDA) driving this device: where
    /// [`crate::Compiler::load_for`] looks last.
    pub fn runtime_path(&self) -> &std::path::Path {
        self.runtime().path()
    }

    /// What makes the device current (its CUDA device handle, for attribute queries).
    pub(crate) fn context(&self) -> &DeviceContext {
        &self.inner.ctx
    }

    /// Whether `other` is this very device (not merely the same index).
    pub(crate) fn same(&self, other: &Device) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Makes the device current on the calling thread (hipSetDevice / cuCtxSetCurrent are
    /// per thread), unless this crate already made it current there: every call of the crate
    /// goes through here, so a thread that keeps working for the same device pays once.
    pub fn make_current(&self) -> Result<(), Error> {
        if CURRENT_DEVICE.with(Cell::get) == self.inner.id {
            return Ok(());
        }
        self.runtime()
            .set_current(self.inner.index, &self.inner.ctx)?;
        CURRENT_DEVICE.with(|c| c.set(self.inner.id));
        Ok(())
    }

    /// Waits for everything queued on `raw`, a live stream of this device.
    pub(crate) fn sync_stream(&self, raw: sys::StreamRaw) -> Result<(), Error> {
        self.make_current()?;
        // SAFETY: callers pass streams they created on this device and still hold.
        unsafe { self.runtime().stream_synchronize(raw) }
    }

    /// Destroys `raw`, a live stream of this device with nothing in flight, not used after.
    pub(crate) fn destroy_stream(&self, raw: sys::StreamRaw) {
        let _ = self.make_current();
        // SAFETY: as the callers promise above.
        unsafe { self.runtime().stream_destroy(raw) };
    }
}
