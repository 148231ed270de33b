//! Every call into the GPU runtime, each written once: the HIP and the CUDA form side by side,
//! the `unsafe` call and its status check in one place (cudarc's `result` layer). The RAII
//! types above ([`crate::Device`], the buffers, streams and windows) call these and hold no
//! dispatch on the flavor of their own.
//!
//! Functions taking device addresses, host pointers or streams are `unsafe`: what they point
//! at is the caller's to keep valid, and each caller says why it is.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::runtime::Runtime;
use crate::{sys, Error};

/// What makes a device current on a thread.
pub(crate) enum DeviceContext {
    /// hipSetDevice(index) selects it.
    Hip,
    /// The retained primary context, made current with cuCtxSetCurrent.
    Cuda {
        dev: sys::CuDevice,
        ctx: sys::CuContext,
    },
}

/// A static NUL-terminated string from a library, or None for a null pointer.
pub(crate) fn c_text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: the libraries return static NUL-terminated strings.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

impl Runtime {
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

    /// cuInit(0) once per process (the driver API refuses every call before it).
    pub(crate) fn cuda(&self) -> Result<&sys::CudaFunctions, Error> {
        let sys::RuntimeFunctions::Cuda(cu) = &self.inner.table else {
            unreachable!("cuda() is only called on the CuFile flavor")
        };
        // SAFETY: no pointers involved.
        let status = *self.inner.cuda_init.get_or_init(|| unsafe { (cu.init)(0) });
        self.check("cuInit", status)?;
        Ok(cu)
    }

    /// cuDeviceGet: the driver API's handle for device `index`.
    fn cu_device(&self, cu: &sys::CudaFunctions, index: u32) -> Result<sys::CuDevice, Error> {
        let mut dev: sys::CuDevice = 0;
        // SAFETY: valid out pointer; the runtime checks the index.
        self.check("cuDeviceGet", unsafe {
            (cu.device_get)(&mut dev, index as c_int)
        })?;
        Ok(dev)
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
        let mut text = [0 as c_char; 64];
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
                let dev = self.cu_device(cu, index)?;
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
                let dev = self.cu_device(cu, index)?;
                // SAFETY: valid out pointer.
                self.check("cuDeviceTotalMem_v2", unsafe { get(&mut bytes, dev) })?;
            }
        }
        Ok(Some(bytes as u64))
    }

    /// What device `index` needs to be made current: nothing on HIP, the retained primary
    /// context on CUDA (given back by [`Runtime::release_context`]).
    pub(crate) fn retain_context(&self, index: u32) -> Result<DeviceContext, Error> {
        match &self.inner.table {
            sys::RuntimeFunctions::Hip(_) => Ok(DeviceContext::Hip),
            sys::RuntimeFunctions::Cuda(_) => {
                let cu = self.cuda()?;
                let dev = self.cu_device(cu, index)?;
                let mut ctx: sys::CuContext = std::ptr::null_mut();
                // SAFETY: valid out pointer.
                self.check("cuDevicePrimaryCtxRetain", unsafe {
                    (cu.primary_ctx_retain)(&mut ctx, dev)
                })?;
                Ok(DeviceContext::Cuda { dev, ctx })
            }
        }
    }

    /// Balances [`Runtime::retain_context`]; a failure cannot be acted on.
    ///
    /// # Safety
    /// Nothing may use the context afterwards.
    pub(crate) unsafe fn release_context(&self, ctx: &DeviceContext) {
        if let (DeviceContext::Cuda { dev, .. }, sys::RuntimeFunctions::Cuda(cu)) =
            (ctx, &self.inner.table)
        {
            // SAFETY: forwarded from the caller.
            let _ = unsafe { (cu.primary_ctx_release)(*dev) };
        }
    }

    /// hipSetDevice / cuCtxSetCurrent: makes device `index` current on the calling thread.
    pub(crate) fn set_current(&self, index: u32, ctx: &DeviceContext) -> Result<(), Error> {
        match (&self.inner.table, ctx) {
            (sys::RuntimeFunctions::Hip(hip), _) => {
                // SAFETY: no pointers; the runtime checks the index.
                self.check("hipSetDevice", unsafe { (hip.set_device)(index as c_int) })
            }
            (sys::RuntimeFunctions::Cuda(cu), DeviceContext::Cuda { ctx, .. }) => {
                // SAFETY: a context from retain_context, retained while its device lives.
                self.check("cuCtxSetCurrent", unsafe { (cu.ctx_set_current)(*ctx) })
            }
            (sys::RuntimeFunctions::Cuda(_), DeviceContext::Hip) => {
                unreachable!("a CUDA device always has a context")
            }
        }
    }

    /// hipMalloc / cuMemAlloc_v2 on the current device: the new allocation's address.
    pub(crate) fn malloc(&self, len: usize) -> Result<usize, Error> {
        match &self.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: valid out pointer.
                self.check("hipMalloc", unsafe { (hip.malloc)(&mut p, len) })?;
                Ok(p as usize)
            }
            sys::RuntimeFunctions::Cuda(cu) => {
                let mut p: sys::CuDevicePtr = 0;
                // SAFETY: valid out pointer.
                self.check("cuMemAlloc_v2", unsafe { (cu.mem_alloc)(&mut p, len) })?;
                Ok(p as usize)
            }
        }
    }

    /// hipFree / cuMemFree_v2; a failure cannot be acted on.
    ///
    /// # Safety
    /// `addr` came from [`Runtime::malloc`], is freed once, and nothing uses it afterwards.
    pub(crate) unsafe fn free(&self, addr: usize) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match &self.inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.free)(addr as *mut c_void),
                sys::RuntimeFunctions::Cuda(cu) => (cu.mem_free)(addr as sys::CuDevicePtr),
            };
        }
    }

    /// hipHostMalloc / cuMemHostAlloc: `len` (> 0) bytes of pinned host memory, never null.
    pub(crate) fn host_alloc(&self, len: usize) -> Result<*mut c_void, Error> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let call = match &self.inner.table {
            sys::RuntimeFunctions::Hip(hip) => {
                // SAFETY: valid out pointer.
                self.check("hipHostMalloc", unsafe {
                    (hip.host_malloc)(&mut ptr, len, sys::HOST_ALLOC_DEFAULT)
                })?;
                "hipHostMalloc"
            }
            sys::RuntimeFunctions::Cuda(cu) => {
                // SAFETY: valid out pointer.
                self.check("cuMemHostAlloc", unsafe {
                    (cu.mem_host_alloc)(&mut ptr, len, sys::HOST_ALLOC_DEFAULT)
                })?;
                "cuMemHostAlloc"
            }
        };
        if ptr.is_null() {
            return Err(self.error(call, sys::RUNTIME_OUT_OF_MEMORY));
        }
        Ok(ptr)
    }

    /// hipHostFree / cuMemFreeHost; a failure cannot be acted on.
    ///
    /// # Safety
    /// `ptr` came from [`Runtime::host_alloc`], is freed once, and nothing uses it afterwards.
    pub(crate) unsafe fn host_free(&self, ptr: *mut c_void) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match &self.inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.host_free)(ptr),
                sys::RuntimeFunctions::Cuda(cu) => (cu.mem_free_host)(ptr),
            };
        }
    }

    /// hipHostRegister / cuMemHostRegister: pins `len` (> 0) bytes of host memory at `ptr`
    /// for the device's copies, until [`Runtime::host_unregister`].
    ///
    /// # Safety
    /// `[ptr, ptr + len)` is mapped host memory that stays mapped until it is unregistered.
    pub(crate) unsafe fn host_register(&self, ptr: *mut c_void, len: usize) -> Result<(), Error> {
        match &self.inner.table {
            // SAFETY: forwarded from the caller.
            sys::RuntimeFunctions::Hip(hip) => self.check("hipHostRegister", unsafe {
                (hip.host_register)(ptr, len, sys::HOST_REGISTER_DEFAULT)
            }),
            // SAFETY: forwarded from the caller.
            sys::RuntimeFunctions::Cuda(cu) => self.check("cuMemHostRegister", unsafe {
                (cu.mem_host_register)(ptr, len, sys::HOST_REGISTER_DEFAULT)
            }),
        }
    }

    /// hipHostUnregister / cuMemHostUnregister: whether the range is unpinned now.
    ///
    /// # Safety
    /// `ptr` was registered by [`Runtime::host_register`], is unregistered once, and no copy
    /// still uses it.
    pub(crate) unsafe fn host_unregister(&self, ptr: *mut c_void) -> bool {
        // SAFETY: forwarded from the caller.
        let status = unsafe {
            match &self.inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.host_unregister)(ptr),
                sys::RuntimeFunctions::Cuda(cu) => (cu.mem_host_unregister)(ptr),
            }
        };
        status == 0
    }

    /// hipStreamCreateWithFlags / cuStreamCreate: a non-blocking stream on the current
    /// device, to be given back with [`Runtime::stream_destroy`].
    pub(crate) fn stream_create(&self) -> Result<sys::StreamRaw, Error> {
        let mut raw: sys::StreamRaw = std::ptr::null_mut();
        match &self.inner.table {
            // SAFETY: valid out pointer.
            sys::RuntimeFunctions::Hip(hip) => self.check("hipStreamCreateWithFlags", unsafe {
                (hip.stream_create_with_flags)(&mut raw, sys::STREAM_NON_BLOCKING)
            })?,
            // SAFETY: valid out pointer.
            sys::RuntimeFunctions::Cuda(cu) => self.check("cuStreamCreate", unsafe {
                (cu.stream_create)(&mut raw, sys::STREAM_NON_BLOCKING)
            })?,
        }
        Ok(raw)
    }

    /// hipStreamSynchronize / cuStreamSynchronize: waits for everything queued on `raw`.
    ///
    /// # Safety
    /// `raw` is a live stream of the current device.
    pub(crate) unsafe fn stream_synchronize(&self, raw: sys::StreamRaw) -> Result<(), Error> {
        match &self.inner.table {
            // SAFETY: forwarded from the caller.
            sys::RuntimeFunctions::Hip(hip) => self.check("hipStreamSynchronize", unsafe {
                (hip.stream_synchronize)(raw)
            }),
            // SAFETY: forwarded from the caller.
            sys::RuntimeFunctions::Cuda(cu) => self.check("cuStreamSynchronize", unsafe {
                (cu.stream_synchronize)(raw)
            }),
        }
    }

    /// hipStreamDestroy / cuStreamDestroy; a failure cannot be acted on.
    ///
    /// # Safety
    /// `raw` is a live stream with nothing in flight, not used afterwards.
    pub(crate) unsafe fn stream_destroy(&self, raw: sys::StreamRaw) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match &self.inner.table {
                sys::RuntimeFunctions::Hip(hip) => (hip.stream_destroy)(raw),
                sys::RuntimeFunctions::Cuda(cu) => (cu.stream_destroy)(raw),
            };
        }
    }

    /// hipMemcpy / cuMemcpyHtoD_v2: `src` to device address `dst`, synchronously.
    ///
    /// # Safety
    /// `dst` is device memory of the current device, valid for `src.len()` bytes.
    pub(crate) unsafe fn memcpy_to_device(&self, dst: usize, src: &[u8]) -> Result<(), Error> {
        match &self.inner.table {
            // SAFETY: forwarded from the caller; src is valid for its length.
            sys::RuntimeFunctions::Hip(hip) => self.check("hipMemcpy", unsafe {
                (hip.memcpy)(
                    dst as *mut c_void,
                    src.as_ptr().cast(),
                    src.len(),
                    sys::HIP_MEMCPY_HOST_TO_DEVICE,
                )
            }),
            // SAFETY: as above.
            sys::RuntimeFunctions::Cuda(cu) => self.check("cuMemcpyHtoD_v2", unsafe {
                (cu.memcpy_htod)(dst as sys::CuDevicePtr, src.as_ptr().cast(), src.len())
            }),
        }
    }

    /// hipMemcpy / cuMemcpyDtoH_v2: device address `src` to `dst`, synchronously.
    ///
    /// # Safety
    /// `src` is device memory of the current device, valid for `dst.len()` bytes.
    pub(crate) unsafe fn memcpy_to_host(&self, dst: &mut [u8], src: usize) -> Result<(), Error> {
        match &self.inner.table {
            // SAFETY: forwarded from the caller; dst is valid for its length.
            sys::RuntimeFunctions::Hip(hip) => self.check("hipMemcpy", unsafe {
                (hip.memcpy)(
                    dst.as_mut_ptr().cast(),
                    src as *const c_void,
                    dst.len(),
                    sys::HIP_MEMCPY_DEVICE_TO_HOST,
                )
            }),
            // SAFETY: as above.
            sys::RuntimeFunctions::Cuda(cu) => self.check("cuMemcpyDtoH_v2", unsafe {
                (cu.memcpy_dtoh)(dst.as_mut_ptr().cast(), src as sys::CuDevicePtr, dst.len())
            }),
        }
    }

    /// hipMemcpyAsync / cuMemcpy{HtoD,DtoH}Async_v2: queues a copy of `len` bytes between
    /// pinned `host` and device address `dev` on `stream`, towards the device when
    /// `to_device`.
    ///
    /// # Safety
    /// Both ranges are valid for `len` bytes until `stream` is synchronized, `host` is pinned
    /// memory, and `stream` is a live stream of the current device.
    pub(crate) unsafe fn memcpy_async(
        &self,
        to_device: bool,
        host: *mut u8,
        dev: usize,
        len: usize,
        stream: sys::StreamRaw,
    ) -> Result<(), Error> {
        match (&self.inner.table, to_device) {
            // SAFETY: forwarded from the caller.
            (sys::RuntimeFunctions::Hip(hip), true) => self.check("hipMemcpyAsync", unsafe {
                (hip.memcpy_async)(
                    dev as *mut c_void,
                    host.cast(),
                    len,
                    sys::HIP_MEMCPY_HOST_TO_DEVICE,
                    stream,
                )
            }),
            // SAFETY: forwarded from the caller.
            (sys::RuntimeFunctions::Hip(hip), false) => self.check("hipMemcpyAsync", unsafe {
                (hip.memcpy_async)(
                    host.cast(),
                    dev as *const c_void,
                    len,
                    sys::HIP_MEMCPY_DEVICE_TO_HOST,
                    stream,
                )
            }),
            // SAFETY: forwarded from the caller.
            (sys::RuntimeFunctions::Cuda(cu), true) => self.check("cuMemcpyHtoDAsync_v2", unsafe {
                (cu.memcpy_htod_async)(dev as sys::CuDevicePtr, host.cast(), len, stream)
            }),
            (sys::RuntimeFunctions::Cuda(cu), false) => {
                // SAFETY: forwarded from the caller.
                self.check("cuMemcpyDtoHAsync_v2", unsafe {
                    (cu.memcpy_dtoh_async)(host.cast(), dev as sys::CuDevicePtr, len, stream)
                })
            }
        }
    }
}
