//! Safe bindings to AMD hipFile and NVIDIA cuFile (GPU-direct file I/O), loaded at run time.
//!
//! Nothing is linked: [`Library::load`] finds the vendor libraries with the dynamic loader, so a
//! program using this crate builds and runs on machines with neither ROCm nor CUDA, and can say
//! exactly what it looked for ([`LoadError`] lists every path tried).
//!
//! Layers (after cudarc), each calling only into the rows above it (the wrappers of the last
//! row hold one another: a buffer holds its device, which makes buffers):
//!
//! | module | what it holds |
//! |---|---|
//! | [`sys`] | the `#[repr(C)]` types, constants and function tables (no calls) |
//! | [`error`] | decoding the return conventions into [`Error`] |
//! | `flavor`, `load` | which vendor; finding the libraries and filling the tables |
//! | `runtime`, `runtime_ops` | the GPU runtime; every HIP/CUDA call, each dispatched once |
//! | `library`, `io_ops` | the I/O library and its driver; every hipFile/cuFile call |
//! | `stats` | the library's own statistics as plain values ([`IoStats`]) |
//! | `rtc` | the run-time compiler (hiprtc / NVRTC): kernel source to a loadable image |
//! | `device`, `buffer`, `file`, `stream`, `window`, `module` | RAII wrappers: no dispatch of their own |
//!
//! The RAII wrappers' `Drop` gives back what they hold, in the order the library requires.
//! Every object keeps the objects it depends on alive (a buffer holds its device, the device
//! its driver, the driver its library), so no drop order can close the driver under a live
//! handle or buffer.
//!
//! # Where the libraries are looked for
//!
//! | flavor | I/O library | GPU runtime |
//! |---|---|---|
//! | [`Flavor::HipFile`] | `libhipfile.so.0`, `libhipfile.so` | `libamdhip64.so.7`, `.6`, `.5`, `libamdhip64.so` |
//! | [`Flavor::CuFile`] | `libcufile.so.0`, `libcufile.so` | `libcuda.so.1`, `libcuda.so` |
//!
//! The run-time compiler for kernels ([`Compiler`]) is `libhiprtc.so.7`, `.6`, `.5`,
//! `libhiprtc.so` (AMD) or `libnvrtc.so.13`, `.12`, `.11.2`, `.11.1`, `libnvrtc.so`
//! (NVIDIA), searched the same way; the module and launch calls are the runtime's own
//! (resolved only if all are there, so a runtime without them still stages copies).
//!
//! Each name is tried on the loader path first (`LD_LIBRARY_PATH`, ld.so.cache), then in
//! `$ROCM_PATH/lib`, `/opt/rocm/lib` and `/opt/rocm/core-*/lib` (AMD), or `/usr/local/cuda/lib64`
//! and `/usr/local/cuda/targets/x86_64-linux/lib` (NVIDIA).
//!
//! # Exact paths
//!
//! For non-standard installs (and for tests, which point them at a fake library),
//! [`Library::load_from`] and [`Runtime::load_from`] take exact paths ([`LibraryPaths`]): a
//! path given is the only one tried for its library. This crate reads no variables of its
//! own; where such paths come from is the calling program's choice.
//!
//! # Threads
//!
//! The current GPU is per thread in both runtimes. Calls that need it ([`FileHandle::read`],
//! [`Device::alloc`], ...) make the right device current on the calling thread themselves (a
//! thread-local remembers which one is, so this costs nothing when it already is).

pub mod error;
pub mod sys;

mod buffer;
mod device;
mod file;
mod flavor;
mod host_pages;
mod io_ops;
mod library;
mod load;
mod module;
mod readahead;
mod rtc;
mod runtime;
mod runtime_ops;
mod stats;
mod stream;
mod window;

pub use buffer::{DeviceBuffer, PinnedBuffer, Pinning, RegisteredBuffer};
pub use device::Device;
pub use error::{Error, LoadError};
pub use file::FileHandle;
pub use flavor::Flavor;
pub use library::{Driver, Library};
pub use load::LibraryPaths;
pub use module::{ComputeStream, Kernel, Module};
pub use rtc::Compiler;
pub use runtime::Runtime;
pub use stats::{GpuIoStats, IoStats, OpCount, StatsError};
pub use stream::Stream;
pub use window::CopyWindow;

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
        send_sync::<Compiler>();
        send_sync::<Module>();
        send_sync::<Kernel>();
        send::<ComputeStream>();
    }
}
