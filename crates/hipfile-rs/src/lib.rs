//! Safe bindings to AMD hipFile and NVIDIA cuFile, loaded at run time.
//!
//! CONTRACT SKELETON: the public signatures below are what the rest of the workspace codes
//! against. Bodies are being filled in (issue 2); keep the signatures stable or update callers.
//!
//! Layers (after cudarc): [`sys`] holds `#[repr(C)]` types and the function table loaded with
//! libloading; [`error`] decodes return conventions; the types at the crate root are RAII
//! wrappers whose `Drop` gives back what they hold, in the order the library requires.

use std::os::fd::BorrowedFd;
use std::path::Path;

pub mod error;
pub mod sys;

pub use error::{Error, LoadError};

/// Which vendor library fills the function table. Both have the same API shape and the same
/// 5000-based error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// AMD: libhipfile.so.0 + libamdhip64.so.{7,6,5}.
    HipFile,
    /// NVIDIA: libcufile.so.0 + libcuda.so.1.
    CuFile,
}

/// The loaded libraries and their resolved function table. Cheap to clone (shared inside).
#[derive(Clone)]
pub struct Library {
    _private: (),
}

impl Library {
    /// Loads the I/O library and the GPU runtime of `flavor`, honouring the AISCP_* overrides.
    pub fn load(_flavor: Flavor) -> Result<Library, LoadError> {
        todo!()
    }
    pub fn flavor(&self) -> Flavor {
        todo!()
    }
    /// Where libhipfile / libcufile was found.
    pub fn io_library_path(&self) -> &Path {
        todo!()
    }
    /// Where libamdhip64 / libcuda was found.
    pub fn runtime_library_path(&self) -> &Path {
        todo!()
    }
    /// "hipFile 0.2.0" style text, when the library can tell.
    pub fn version(&self) -> Option<String> {
        todo!()
    }
    pub fn device_count(&self) -> Result<u32, Error> {
        todo!()
    }
    /// Opens the driver once; it is closed when the last clone of the `Driver` is dropped.
    pub fn open_driver(&self) -> Result<Driver, Error> {
        todo!()
    }
}

/// An open hipFile/cuFile driver. Clone shares it; closed once, on the last drop.
#[derive(Clone)]
pub struct Driver {
    _private: (),
}

impl Driver {
    pub fn library(&self) -> &Library {
        todo!()
    }
    /// Selects device `index`, checked against the device count ([`Error::NoSuchDevice`]).
    pub fn device(&self, _index: u32) -> Result<Device, Error> {
        todo!()
    }
}

/// One GPU. `Send + Sync`; call [`Device::make_current`] on every thread that does I/O.
#[derive(Clone)]
pub struct Device {
    _private: (),
}

impl Device {
    pub fn index(&self) -> u32 {
        todo!()
    }
    /// hipSetDevice / cuCtxSetCurrent for the calling thread (both are per thread).
    pub fn make_current(&self) -> Result<(), Error> {
        todo!()
    }
    /// Device memory (hipMalloc / cuMemAlloc_v2), freed on drop.
    pub fn alloc(&self, _len: usize) -> Result<DeviceBuffer, Error> {
        todo!()
    }
    /// Pinned host memory (hipHostMalloc / cuMemHostAlloc) for the bounce path, freed on drop.
    pub fn alloc_pinned(&self, _len: usize) -> Result<PinnedBuffer, Error> {
        todo!()
    }
    /// Registers a borrowed fd; deregistered on drop, which the borrow forces before the fd
    /// can close.
    pub fn register_file<'fd>(&self, _fd: BorrowedFd<'fd>) -> Result<FileHandle<'fd>, Error> {
        todo!()
    }
    /// A non-blocking stream registered with `flags` (sys::STREAM_FIXED_* bits).
    pub fn create_stream(&self, _flags: u32) -> Result<Stream, Error> {
        todo!()
    }
}

/// Device memory. `Send`. Freed on drop.
pub struct DeviceBuffer {
    _private: (),
}

impl DeviceBuffer {
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Registers the buffer for I/O; the returned guard deregisters before the memory is freed.
    pub fn register(self) -> Result<RegisteredBuffer, (DeviceBuffer, Error)> {
        todo!()
    }
    /// hipMemcpy host to device at `offset`.
    pub fn copy_from_host(&mut self, _offset: usize, _src: &[u8]) -> Result<(), Error> {
        todo!()
    }
    /// hipMemcpy device to host from `offset`.
    pub fn copy_to_host(&self, _offset: usize, _dst: &mut [u8]) -> Result<(), Error> {
        todo!()
    }
}

/// A registered device buffer: owns the [`DeviceBuffer`]; on drop deregisters, then frees.
pub struct RegisteredBuffer {
    _private: (),
}

impl RegisteredBuffer {
    pub fn buffer(&self) -> &DeviceBuffer {
        todo!()
    }
    pub fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        todo!()
    }
    pub fn len(&self) -> usize {
        self.buffer().len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Pinned host memory, usable as a byte slice.
pub struct PinnedBuffer {
    _private: (),
}

impl PinnedBuffer {
    pub fn as_slice(&self) -> &[u8] {
        todo!()
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        todo!()
    }
}

/// A file registered with hipFile/cuFile. `Sync`: workers on several threads share one.
pub struct FileHandle<'fd> {
    _fd: std::marker::PhantomData<BorrowedFd<'fd>>,
}

impl FileHandle<'_> {
    /// hipFileRead: up to `len` bytes at `file_offset` into `buf` at `buf_offset`.
    /// May return a short count (EOF, the 0x7ffff000 per-call cap).
    pub fn read(
        &self,
        _buf: &mut RegisteredBuffer,
        _len: usize,
        _file_offset: u64,
        _buf_offset: usize,
    ) -> Result<usize, Error> {
        todo!()
    }
    /// hipFileWrite: up to `len` bytes from `buf` at `buf_offset` to `file_offset`.
    pub fn write(
        &self,
        _buf: &RegisteredBuffer,
        _len: usize,
        _file_offset: u64,
        _buf_offset: usize,
    ) -> Result<usize, Error> {
        todo!()
    }
}

/// A registered non-blocking stream. Async ops keep their parameter blocks alive inside the
/// stream until [`Stream::synchronize`]; dropping synchronizes before deregistering.
pub struct Stream {
    _private: (),
}
