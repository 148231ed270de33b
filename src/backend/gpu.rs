//! GPU staging through hipFile (AMD) or cuFile (NVIDIA), both via hipfile-rs: every slot is
//! a registered device buffer; the bounce window is pinned host memory allocated on first use.

use super::Staging;
use crate::engine::RouteChoice;
use hipfile::{
    Device, DeviceBuffer, Driver, Error, FileHandle, Flavor, PinnedBuffer, RegisteredBuffer,
};
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
const BOUNCE_CODES: [i32; 3] = [5027, 5008, 5030];

pub fn flavor_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::HipFile => "hipFile",
        Flavor::CuFile => "cuFile",
    }
}

pub struct GpuStaging {
    // Field order is drop order: the device (holding the driver) goes after everything else
    // the engine drops first (its slots).
    device: Device,
    _driver: Driver,
    flavor: Flavor,
    /// Whether registered files go through the library (else through the bounce route).
    library_route: bool,
}

impl GpuStaging {
    /// Loads `flavor`'s libraries, opens the driver and selects GPU `index`.
    pub fn open(
        flavor: Flavor,
        index: u32,
        route: RouteChoice,
        diag: &mut dyn FnMut(&str),
    ) -> Result<GpuStaging, Error> {
        let library = hipfile::Library::load(flavor)?;
        let count = library.device_count()?;
        if count == 0 {
            return Err(Error::Os(std::io::Error::other(
                "library loaded, no GPU found",
            )));
        }
        if index >= count {
            return Err(Error::NoSuchDevice { index, count });
        }
        let driver = library.open_driver()?;
        let device = driver.device(index)?;
        device.make_current()?;
        diag(&format!(
            "backend {} ({}{}), runtime {}, GPU {index} of {count}",
            flavor_name(flavor),
            library.io_library_path().display(),
            library
                .version()
                .map(|v| format!(", {v}"))
                .unwrap_or_default(),
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
        diag(&format!(
            "route: {} ({why})",
            if library_route {
                "library I/O on registered files"
            } else {
                "own bounce: O_DIRECT into pinned memory, copied through the GPU buffer"
            }
        ));
        Ok(GpuStaging {
            device,
            _driver: driver,
            flavor,
            library_route,
        })
    }
}

/// A worker's device memory: registered when files may take the library route; left
/// unregistered for the bounce route, where registration would only cost (cuFile's
/// compatibility mode shadows every registered buffer in host memory).
enum SlotMemory {
    Registered(RegisteredBuffer),
    Plain(DeviceBuffer),
}

pub struct GpuSlot {
    memory: SlotMemory,
    window: Option<PinnedBuffer>,
}

impl GpuSlot {
    fn buffer(&self) -> &DeviceBuffer {
        match &self.memory {
            SlotMemory::Registered(r) => r.buffer(),
            SlotMemory::Plain(b) => b,
        }
    }
    fn registered(&mut self) -> Result<&mut RegisteredBuffer, Error> {
        match &mut self.memory {
            SlotMemory::Registered(r) => Ok(r),
            // open_side only registers files when the backend prefers the library route, and
            // then every slot is registered.
            SlotMemory::Plain(_) => Err(Error::Os(std::io::Error::other(
                "library I/O on an unregistered staging buffer",
            ))),
        }
    }
    fn window_len(&self) -> usize {
        self.buffer().len().min(WINDOW)
    }
}

impl Staging for GpuStaging {
    type Slot = GpuSlot;
    type Handle<'fd> = FileHandle<'fd>;

    fn name(&self) -> &'static str {
        flavor_name(self.flavor)
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
        let memory = if self.library_route {
            SlotMemory::Registered(buffer.register().map_err(|(_buffer, e)| e)?)
        } else {
            SlotMemory::Plain(buffer)
        };
        Ok(GpuSlot {
            memory,
            window: None,
        })
    }
    fn register<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<Option<FileHandle<'fd>>, Error> {
        match self.device.register_file(fd) {
            Ok(handle) => Ok(Some(handle)),
            Err(Error::Library { code, .. }) if BOUNCE_CODES.contains(&code.abs()) => Ok(None),
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
        file.read(slot.registered()?, len, file_off, slot_off)
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
    fn window<'s>(&self, slot: &'s mut GpuSlot) -> Result<&'s mut [u8], Error> {
        if slot.window.is_none() {
            slot.window = Some(self.device.alloc_pinned(slot.window_len())?);
        }
        let window = slot.window.as_mut().expect("allocated above");
        Ok(window.as_mut_slice())
    }
    fn upload(&self, slot: &mut GpuSlot, slot_off: usize, len: usize) -> Result<(), Error> {
        let GpuSlot { memory, window } = slot;
        let window = window.as_ref().expect("upload after window()");
        let device = match memory {
            SlotMemory::Registered(r) => r.buffer_mut(),
            SlotMemory::Plain(b) => b,
        };
        device.copy_from_host(slot_off, &window.as_slice()[..len])
    }
    fn download(&self, slot: &mut GpuSlot, slot_off: usize, len: usize) -> Result<(), Error> {
        if slot.window.is_none() {
            self.window(slot)?;
        }
        let window = slot.window.as_mut().expect("allocated above");
        let device = match &slot.memory {
            SlotMemory::Registered(r) => r.buffer(),
            SlotMemory::Plain(b) => b,
        };
        device.copy_to_host(slot_off, &mut window.as_mut_slice()[..len])
    }
}
