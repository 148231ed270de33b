//! Loaded code and kernel launches: a [`Module`] from a compiled image
//! ([`crate::Compiler::compile`]), its [`Kernel`]s, and the plain [`ComputeStream`]s they
//! run on.
//!
//! On NVIDIA these are the driver API's cuModuleLoadData / cuModuleGetFunction /
//! cuLaunchKernel in libcuda, which this crate already runs on: they work in the device's
//! primary context, the one every buffer and stream here lives in (the runtime API's
//! cudaLibrary* calls would need libcudart too, and would reach the same context). On AMD
//! they are HIP's hipModule* calls, the same shapes.

use std::ffi::{c_int, c_void, CString};
use std::sync::Arc;

use crate::device::Device;
use crate::runtime_ops::DeviceContext;
use crate::{sys, Error};

impl Device {
    fn module_functions(&self, call: &'static str) -> Result<sys::ModuleFunctions, Error> {
        self.runtime().inner.modules.ok_or_else(|| {
            Error::Os(std::io::Error::other(format!(
                "{call}: the GPU runtime ({}) has no module calls",
                self.runtime().path().display()
            )))
        })
    }

    /// The architecture a run-time compiler targets for this device, for its
    /// `--gpu-architecture` option: `sm_90` style on NVIDIA (so NVRTC emits a CUBIN the
    /// driver loads as is), the `gcnArchName` on AMD (`gfx942:sramecc+:xnack-`, features
    /// included: a code object must match them). None on AMD when the runtime does not say
    /// (hiprtc then compiles for the current device).
    pub fn compile_arch(&self) -> Result<Option<String>, Error> {
        let DeviceContext::Cuda { dev, .. } = self.context() else {
            return self.gcn_arch_name();
        };
        let call = "cuDeviceGetAttribute";
        let get = self
            .module_functions(call)?
            .device_get_attribute
            .ok_or_else(|| Error::Os(std::io::Error::other(format!("{call} missing"))))?;
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: valid out pointers and a device handle of this runtime.
        unsafe {
            self.runtime().check(
                call,
                get(
                    &mut major,
                    sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                    *dev,
                ),
            )?;
            self.runtime().check(
                call,
                get(
                    &mut minor,
                    sys::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                    *dev,
                ),
            )?;
        }
        Ok(Some(format!("sm_{major}{minor}")))
    }

    /// HIP's `gcnArchName` for this device, found in `hipDeviceProp_t` by its form: the
    /// struct's layout changed between ROCm releases (R0000, R0600), so it is read into a
    /// buffer larger than any of them and the name is the one field that starts `gfx`.
    fn gcn_arch_name(&self) -> Result<Option<String>, Error> {
        let call = "hipGetDeviceProperties";
        let Some(get) = self.module_functions(call)?.get_device_properties else {
            return Ok(None);
        };
        let mut props = vec![0u8; PROPS_ROOM];
        // SAFETY: the buffer is larger than every release's hipDeviceProp_t, and the
        // device ordinal is this runtime's.
        self.runtime().check(call, unsafe {
            get(props.as_mut_ptr().cast(), self.index() as c_int)
        })?;
        Ok(arch_name_in(&props))
    }

    /// Loads `image` (a CUBIN / code object) into this device's context; unloaded when the
    /// last [`Module`] clone and its kernels are dropped.
    pub fn load_module(&self, image: &[u8]) -> Result<Module, Error> {
        let (call, _, _, _) = self.module_names();
        let f = self.module_functions(call)?;
        self.make_current()?;
        let mut raw: sys::ModuleRaw = std::ptr::null_mut();
        // SAFETY: valid out pointer; the image outlives the call (the runtime copies it).
        self.runtime().check(call, unsafe {
            (f.load_data)(&mut raw, image.as_ptr().cast())
        })?;
        Ok(Module {
            inner: Arc::new(ModuleInner {
                device: self.clone(),
                functions: f,
                raw,
            }),
        })
    }

    /// A plain non-blocking stream on this device (not registered with the I/O library),
    /// for kernels.
    pub fn create_compute_stream(&self) -> Result<ComputeStream, Error> {
        self.make_current()?;
        let raw = self.runtime().stream_create()?;
        Ok(ComputeStream {
            device: self.clone(),
            raw,
        })
    }

    /// This flavor's (load, get function, unload, launch) call names.
    fn module_names(&self) -> (&'static str, &'static str, &'static str, &'static str) {
        let [a, b, c, d] = match self.runtime().flavor() {
            crate::Flavor::HipFile => sys::HIP_MODULE_SYMBOLS,
            crate::Flavor::CuFile => sys::CUDA_MODULE_SYMBOLS,
        };
        (a, b, c, d)
    }
}

struct ModuleInner {
    device: Device,
    functions: sys::ModuleFunctions,
    raw: sys::ModuleRaw,
}

// SAFETY: module and function handles are process-wide in both runtimes; every use makes
// the device current first.
unsafe impl Send for ModuleInner {}
// SAFETY: as above; nothing is mutated after creation.
unsafe impl Sync for ModuleInner {}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        let _ = self.device.make_current();
        // SAFETY: loaded once in load_module; every kernel holds a clone, so none is alive.
        let _ = unsafe { (self.functions.unload)(self.raw) };
    }
}

/// Code loaded on one device. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

impl Module {
    /// The `extern "C"` kernel `name`.
    pub fn kernel(&self, name: &str) -> Result<Kernel, Error> {
        let device = &self.inner.device;
        let (_, call, _, _) = device.module_names();
        let cname = CString::new(name)
            .map_err(|_| Error::Os(std::io::Error::other("a kernel name holds a NUL")))?;
        device.make_current()?;
        let mut raw: sys::FunctionRaw = std::ptr::null_mut();
        // SAFETY: a live module; valid out pointer and NUL-terminated name.
        device.runtime().check(call, unsafe {
            (self.inner.functions.get_function)(&mut raw, self.inner.raw, cname.as_ptr())
        })?;
        Ok(Kernel {
            module: self.clone(),
            raw,
        })
    }
}

/// One kernel of a [`Module`], which it keeps loaded. `Send + Sync`.
#[derive(Clone)]
pub struct Kernel {
    module: Module,
    raw: sys::FunctionRaw,
}

// SAFETY: see ModuleInner.
unsafe impl Send for Kernel {}
// SAFETY: see ModuleInner.
unsafe impl Sync for Kernel {}

impl Kernel {
    /// Queues the kernel on `stream` over a one-dimensional grid of `grid` blocks of `block`
    /// threads with `shared` bytes of dynamic shared memory. `args[i]` points at the value
    /// of the kernel's `i`-th parameter (a device address is its `u64`).
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number, order and size, and any device
    /// memory they name must stay valid, and untouched by others, until `stream` is
    /// synchronized.
    pub unsafe fn launch(
        &self,
        stream: &ComputeStream,
        grid: u32,
        block: u32,
        shared: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), Error> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_on(&stream.device, stream.raw, grid, block, shared, args) }
    }

    /// [`Kernel::launch`] on `raw`, a live stream of `device`.
    ///
    /// # Safety
    /// As [`Kernel::launch`].
    pub(crate) unsafe fn launch_on(
        &self,
        device: &Device,
        raw: sys::StreamRaw,
        grid: u32,
        block: u32,
        shared: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), Error> {
        let own = &self.module.inner.device;
        if !own.same(device) {
            return Err(Error::Os(std::io::Error::other(
                "kernel launch on a stream of another device",
            )));
        }
        let (_, _, _, call) = own.module_names();
        own.make_current()?;
        // SAFETY: a live function and stream of this device; the rest is the caller's.
        own.runtime().check(call, unsafe {
            (self.module.inner.functions.launch_kernel)(
                self.raw,
                grid,
                1,
                1,
                block,
                1,
                1,
                shared,
                raw,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}

/// A plain non-blocking stream for kernels; destroyed (after synchronizing) on drop.
pub struct ComputeStream {
    device: Device,
    raw: sys::StreamRaw,
}

// SAFETY: the stream handle may be used from any thread once its device is current, which
// every call here makes it.
unsafe impl Send for ComputeStream {}

impl ComputeStream {
    /// Waits for everything queued on the stream; a kernel's failure shows here.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.device.sync_stream(self.raw)
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
}

impl Drop for ComputeStream {
    fn drop(&mut self) {
        let _ = self.synchronize();
        self.device.destroy_stream(self.raw);
    }
}

/// Bytes given to hipGetDeviceProperties: hipDeviceProp_t is under 2 KiB in every ROCm
/// release; the rest is room for a later one that grows.
const PROPS_ROOM: usize = 64 << 10;

/// The first NUL-terminated string in `props` that starts a field with `gfx` and is an
/// architecture's name (letters, digits and `:+-_`), as `gcnArchName` holds it.
fn arch_name_in(props: &[u8]) -> Option<String> {
    let mut at = 0;
    while let Some(found) = props[at..].windows(3).position(|w| w == b"gfx") {
        let start = at + found;
        at = start + 3;
        if start > 0 && props[start - 1] != 0 {
            continue;
        }
        let Some(len) = props[start..].iter().take(256).position(|&b| b == 0) else {
            continue;
        };
        let name = &props[start..start + len];
        let valid = |b: &u8| b.is_ascii_alphanumeric() || b":+-_".contains(b);
        if name.len() > 3 && name.iter().all(valid) {
            return Some(String::from_utf8_lossy(name).into_owned());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::arch_name_in;

    /// A struct of some layout: `name` first, the architecture's name further on.
    fn props(fields: &[(usize, &[u8])]) -> Vec<u8> {
        let mut p = vec![0u8; 2048];
        for (at, bytes) in fields {
            p[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        p
    }

    #[test]
    fn the_architecture_is_found_wherever_the_layout_puts_it() {
        for at in [396, 1160, 1600] {
            let p = props(&[(0, b"AMD Instinct MI300X"), (at, b"gfx942:sramecc+:xnack-")]);
            assert_eq!(arch_name_in(&p).as_deref(), Some("gfx942:sramecc+:xnack-"));
        }
    }

    #[test]
    fn gfx_inside_a_field_or_an_unterminated_one_is_not_the_architecture() {
        let p = props(&[(0, b"Radeon (gfx1103)"), (700, b"gfx1103")]);
        assert_eq!(arch_name_in(&p).as_deref(), Some("gfx1103"));
        assert_eq!(arch_name_in(&props(&[(0, b"Radeon (gfx1103)")])), None);
        let mut full = vec![0u8; 8];
        full.extend(std::iter::repeat_n(b'x', 300));
        full[8..11].copy_from_slice(b"gfx");
        assert_eq!(arch_name_in(&full), None);
        assert_eq!(arch_name_in(&[0u8; 64]), None);
    }
}
