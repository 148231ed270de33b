//! GPU staging through hipFile (AMD) or cuFile (NVIDIA), both via hipfile-rs: every slot is
//! a registered device buffer; the bounce window is pinned host memory allocated on first use.

use super::Staging;
use crate::engine::RouteChoice;
use hipfile::{Device, DeviceBuffer, Error, FileHandle, Flavor, PinnedBuffer, RegisteredBuffer};
use std::os::fd::BorrowedFd;
use std::path::Path;

/// Size of a bounce window: large enough for full-speed POSIX I/O, small enough that host
/// memory stays bounded with several workers.
const WINDOW: usize = 16 << 20;

/// Where the nvidia-fs kernel module shows itself; without it cuFile runs in compatibility
/// mode (POSIX I/O plus copies inside the library, no DMA).
const NVIDIA_FS: &str = "/proc/driver/nvidia-fs";

/// hipFile/cuFile codes meaning "this file cannot take direct I/O", served by the bounce
/// route: 5027 handle not registered (tmpfs, no udev record), 5008 I/O not supported,
/// 5030 internal error (seen on FUSE and overlay filesystems).
const BOUNCE_CODES: [i32; 3] = [
    hipfile::sys::HANDLE_NOT_REGISTERED,
    hipfile::sys::IO_NOT_SUPPORTED,
    hipfile::sys::INTERNAL_ERROR,
];

/// Why a GPU backend did not come up, by step: messages differ, and only a missing
/// library is a reason to try the next flavor quietly.
#[derive(Debug)]
pub enum OpenError {
    /// The libraries are missing or unusable, or there is no GPU.
    Library(Error),
    /// hipFileDriverOpen / cuFileDriverOpen failed.
    Driver(Error),
    /// The GPU asked for does not exist or cannot be selected.
    Device(Error),
}

impl OpenError {
    /// The message for `flavor`, e.g. "cannot open the hipFile driver: ...".
    pub fn describe(&self, flavor: Flavor) -> String {
        let name = flavor.name();
        match self {
            OpenError::Library(e) => format!("{name}: {e}"),
            OpenError::Driver(e) => format!("cannot open the {name} driver: {e}"),
            OpenError::Device(e @ Error::NoSuchDevice { .. }) => e.to_string(),
            // The library is fine: the GPU is full, often held by another process.
            OpenError::Device(
                e @ Error::Runtime {
                    code: hipfile::sys::RUNTIME_OUT_OF_MEMORY,
                    ..
                },
            ) => format!(
                "{name} loaded, but the GPU has no free memory for a context ({e}); another \
                 process may be holding it"
            ),
            OpenError::Device(e) => format!("{name}: cannot select the GPU: {e}"),
        }
    }
}

pub struct GpuStaging {
    // Field order is drop order: the device (holding the driver) goes after everything else
    // the engine drops first (its slots).
    /// Holds the driver (when open) and the library alive for every slot and handle.
    device: Device,
    flavor: Flavor,
    /// Whether registered files go through the library (else through the bounce route).
    library_route: bool,
    /// The library's own version text ("hipFile 0.2.0"), for the run's summary.
    version: Option<String>,
}

impl GpuStaging {
    /// Loads `flavor`'s libraries, selects GPU `index`, and opens the I/O driver when files
    /// are to take the library route.
    /// Whether the library does async I/O (`--async`): creates one stream and drops it.
    pub fn check_async(&self) -> Result<(), Error> {
        self.device.create_stream(STREAM_FLAGS).map(drop)
    }

    pub fn open(
        flavor: Flavor,
        index: u32,
        route: RouteChoice,
        diag: &mut dyn FnMut(&str),
    ) -> Result<GpuStaging, OpenError> {
        let library = hipfile::Library::load(flavor).map_err(|e| OpenError::Library(e.into()))?;
        let count = library.device_count().map_err(OpenError::Library)?;
        if count == 0 {
            return Err(OpenError::Library(Error::Os(std::io::Error::other(
                "library loaded, no GPU found",
            ))));
        }
        if index >= count {
            return Err(OpenError::Device(Error::NoSuchDevice { index, count }));
        }
        diag(&format!(
            "loaded {} and {}: {count} GPU(s)",
            library.io_library_path().display(),
            library.runtime_library_path().display(),
        ));
        let (library_route, why) = match route {
            RouteChoice::Library => (true, "as asked"),
            RouteChoice::Bounce => (false, "as asked"),
            // hipFile decides per request between its DMA fastpath and its own fallback.
            RouteChoice::Auto if flavor == Flavor::HipFile => {
                (true, "hipFile picks DMA or fallback")
            }
            RouteChoice::Auto if Path::new(NVIDIA_FS).exists() => (true, "nvidia-fs present"),
            RouteChoice::Auto => (false, "cuFile in compatibility mode: no nvidia-fs"),
        };
        // The bounce route registers nothing, so it leaves the I/O driver closed: opening it
        // costs start-up time and (cuFile) host memory for buffers it would never use.
        let device = if library_route {
            let driver = library.open_driver().map_err(OpenError::Driver)?;
            driver.device(index)
        } else {
            library.staging_device(index)
        }
        .map_err(OpenError::Device)?;
        let version = library.version();
        diag(&format!(
            "backend {} ({}{}), runtime {}, GPU {index} of {count}",
            flavor.name(),
            library.io_library_path().display(),
            version
                .as_ref()
                .map(|v| format!(", {v}"))
                .unwrap_or_default(),
            library.runtime_library_path().display(),
        ));
        diag(&format!(
            "route: {} ({why})",
            if library_route {
                "library I/O on registered files"
            } else {
                "own bounce: O_DIRECT into pinned memory, copied through the GPU buffer; \
                 I/O driver not opened"
            }
        ));
        Ok(GpuStaging {
            device,
            flavor,
            library_route,
            version,
        })
    }

    /// The library's version text, when it tells ("hipFile 0.2.0").
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }
}

/// Stream registration flags for `--async`. All four hold for the engine's ops: each op's
/// size and offsets are written into its parameter block at submission and never changed
/// before the stream is synchronized (the FIXED_* flags), and the engine only issues
/// requests whose size, file offset and buffer offset are multiples of 4096 (direct I/O
/// demands it anyway), so the library may read them at submission and skip its alignment
/// checks.
pub const STREAM_FLAGS: u32 = hipfile::sys::STREAM_FIXED_BUF_OFFSET
    | hipfile::sys::STREAM_FIXED_FILE_OFFSET
    | hipfile::sys::STREAM_FIXED_FILE_SIZE
    | hipfile::sys::STREAM_PAGE_ALIGNED_INPUTS;

/// A registered stream whose ops use one slot's registered buffer.
pub struct GpuStream<'s> {
    stream: hipfile::Stream<'s>,
    buffer: &'s RegisteredBuffer,
}

pub struct GpuSlot {
    device: SlotMemory,
    window: Option<PinnedBuffer>,
}

/// A slot's device memory: registered for library I/O, or (when hipFile refused the
/// registration) plain, served by the bounce route only, which needs no registration.
enum SlotMemory {
    Registered(RegisteredBuffer),
    Unregistered {
        buffer: DeviceBuffer,
        /// The registration error, for --debug.
        why: String,
    },
}

impl GpuSlot {
    fn buffer(&self) -> &DeviceBuffer {
        match &self.device {
            SlotMemory::Registered(r) => r.buffer(),
            SlotMemory::Unregistered { buffer, .. } => buffer,
        }
    }
    fn window_len(&self) -> usize {
        self.buffer().len().min(WINDOW)
    }
    fn registered(&self) -> Result<&RegisteredBuffer, Error> {
        match &self.device {
            SlotMemory::Registered(r) => Ok(r),
            SlotMemory::Unregistered { why, .. } => Err(unregistered(why)),
        }
    }
    fn registered_mut(&mut self) -> Result<&mut RegisteredBuffer, Error> {
        match &mut self.device {
            SlotMemory::Registered(r) => Ok(r),
            SlotMemory::Unregistered { why, .. } => Err(unregistered(why)),
        }
    }
}

/// The engine asks [`Staging::slot_refusal`] first; reaching this is a bug, reported as an
/// error rather than a panic.
fn unregistered(why: &str) -> Error {
    Error::Os(std::io::Error::other(format!(
        "library I/O on an unregistered GPU buffer ({why})"
    )))
}

impl Staging for GpuStaging {
    type Slot = GpuSlot;
    type Handle<'fd> = FileHandle<'fd>;

    fn name(&self) -> &'static str {
        self.flavor.name()
    }
    fn has_direct_route(&self) -> bool {
        true
    }
    fn prefers_direct_route(&self) -> bool {
        self.library_route
    }
    fn slot_alignment(&self) -> u64 {
        4096
    }
    fn enter_worker(&self) -> Result<(), Error> {
        self.device.make_current()
    }
    fn alloc_slot(&self, len: usize) -> Result<GpuSlot, Error> {
        let buffer = self.device.alloc(len)?;
        if !self.library_route {
            // Registration would only cost here: cuFile's compatibility mode shadows every
            // registered buffer in host memory.
            return Ok(GpuSlot {
                device: SlotMemory::Unregistered {
                    buffer,
                    why: "the own bounce route needs no registration".to_owned(),
                },
                window: None,
            });
        }
        let device = match buffer.register() {
            Ok(registered) => SlotMemory::Registered(registered),
            Err((buffer, e)) => SlotMemory::Unregistered {
                buffer,
                why: e.to_string(),
            },
        };
        Ok(GpuSlot {
            device,
            window: None,
        })
    }
    fn slot_refusal<'s>(&self, slot: &'s GpuSlot) -> Option<&'s str> {
        match &slot.device {
            SlotMemory::Registered(_) => None,
            SlotMemory::Unregistered { why, .. } => Some(why),
        }
    }
    fn register<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<Option<FileHandle<'fd>>, Error> {
        match self.device.register_file(fd) {
            Ok(handle) => Ok(Some(handle)),
            Err(Error::Library { code, .. }) if BOUNCE_CODES.contains(&code) => Ok(None),
            Err(e) => Err(e),
        }
    }
    fn read(
        &self,
        file: &FileHandle<'_>,
        slot: &mut GpuSlot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error> {
        file.read(slot.registered_mut()?, len, file_off, slot_off)
    }
    fn write(
        &self,
        file: &FileHandle<'_>,
        slot: &mut GpuSlot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error> {
        file.write(slot.registered()?, len, file_off, slot_off)
    }
    type Stream<'s> = GpuStream<'s>;
    fn open_stream<'s>(&'s self, slot: &'s mut GpuSlot) -> Result<Option<GpuStream<'s>>, Error> {
        let slot: &'s GpuSlot = slot;
        match &slot.device {
            SlotMemory::Registered(buffer) => Ok(Some(GpuStream {
                stream: self.device.create_stream(STREAM_FLAGS)?,
                buffer,
            })),
            SlotMemory::Unregistered { .. } => Ok(None),
        }
    }
    fn submit_read<'s>(
        &self,
        stream: &mut GpuStream<'s>,
        file: &'s FileHandle<'_>,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<(), Error> {
        let buffer = stream.buffer;
        stream
            .stream
            .read_async(file, buffer, len, file_off, slot_off)
            .map(drop)
    }
    fn submit_write<'s>(
        &self,
        stream: &mut GpuStream<'s>,
        file: &'s FileHandle<'_>,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<(), Error> {
        let buffer = stream.buffer;
        stream
            .stream
            .write_async(file, buffer, len, file_off, slot_off)
            .map(drop)
    }
    fn sync_stream(&self, stream: &mut GpuStream<'_>) -> Result<Vec<Result<usize, Error>>, Error> {
        stream.stream.synchronize_each()
    }
    fn window_len(&self, slot: &GpuSlot) -> usize {
        slot.window_len()
    }
    fn window<'s>(&self, slot: &'s mut GpuSlot) -> Result<&'s mut [u8], Error> {
        if slot.window.is_none() {
            slot.window = Some(self.device.alloc_pinned(slot.window_len())?);
        }
        let window = slot.window.as_mut().expect("allocated above");
        Ok(window.as_mut_slice())
    }
    fn upload(&self, slot: &mut GpuSlot, slot_off: usize, len: usize) -> Result<(), Error> {
        let GpuSlot { device, window } = slot;
        let window = window.as_ref().expect("upload after window()");
        let buffer = match device {
            SlotMemory::Registered(r) => r.buffer_mut(),
            SlotMemory::Unregistered { buffer, .. } => buffer,
        };
        buffer.copy_from_host(slot_off, &window.as_slice()[..len])
    }
    fn download(&self, slot: &mut GpuSlot, slot_off: usize, len: usize) -> Result<(), Error> {
        if slot.window.is_none() {
            self.window(slot)?;
        }
        let window = slot.window.as_mut().expect("allocated above");
        let buffer = match &slot.device {
            SlotMemory::Registered(r) => r.buffer(),
            SlotMemory::Unregistered { buffer, .. } => buffer,
        };
        buffer.copy_to_host(slot_off, &mut window.as_mut_slice()[..len])
    }
}

#[cfg(test)]
mod open_error_tests {
    use super::OpenError;
    use hipfile::{Error, Flavor};

    #[test]
    fn a_full_gpu_is_named_as_such() {
        let e = OpenError::Device(Error::Runtime {
            call: "cuDevicePrimaryCtxRetain",
            code: hipfile::sys::RUNTIME_OUT_OF_MEMORY,
            text: "out of memory".into(),
        });
        assert_eq!(
            e.describe(Flavor::CuFile),
            "cuFile loaded, but the GPU has no free memory for a context \
             (cuDevicePrimaryCtxRetain: out of memory (error 2)); another process may be holding it"
        );
    }
}
