//! GPU staging through hipFile (AMD) or cuFile (NVIDIA), both via hipfile-rs: every slot is
//! a registered device buffer; the bounce window is pinned host memory allocated on first use.

use super::gpu_open::{chosen_gpus, describe_backend, describe_load, gpu_labels, OpenError};
use super::kind::Backend;
use super::pinnings::Pinnings;
use super::request::{bounce_below, resolve_route, Request};
use super::staging::{LibraryIo, Staging};
use crate::digest::launch::Scratch;
use crate::digest::on_gpu::GpuDigests;
use crate::digest::{Algorithm, Hashing, Piece, Queued};
use crate::library_stats::LibraryStats;
use hipfile::{CopyWindow, Device, DeviceBuffer, Error, FileHandle, Flavor, RegisteredBuffer};
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Size of a bounce window (each slot has two): large enough for full-speed POSIX I/O, small
/// enough that pinned host memory stays bounded with several workers. 8 MiB rather than 16:
/// pinning is paid per byte when a worker starts, and a file's last upload and first
/// download wait on a whole window; trees on the H200's RAM filesystems copied 6-9% faster
/// (bench/results/HISTORY.md, "Bounce windows of 8 MiB").
const WINDOW: usize = 8 << 20;

/// Where the nvidia-fs kernel module shows itself; without it cuFile runs in compatibility
/// mode (POSIX I/O plus copies inside the library, no DMA).
pub const NVIDIA_FS: &str = "/proc/driver/nvidia-fs";

/// Whether cuFile can DMA (nvidia-fs is loaded).
pub fn nvidia_fs_present() -> bool {
    Path::new(NVIDIA_FS).exists()
}

/// hipFile/cuFile codes meaning "this file cannot take direct I/O", served by the bounce
/// route: 5027 handle not registered (tmpfs, no udev record), 5008 I/O not supported,
/// 5030 internal error (seen on FUSE and overlay filesystems), 5019 unsupported open flags
/// (cuFile refuses the O_NOFOLLOW that `-r` opens every SOURCE with; bench/results/HISTORY.md, "One
/// file's copy in one place").
const BOUNCE_CODES: [i32; 4] = [
    hipfile::sys::HANDLE_NOT_REGISTERED,
    hipfile::sys::IO_NOT_SUPPORTED,
    hipfile::sys::INTERNAL_ERROR,
    hipfile::sys::INVALID_FILE_OPEN_FLAG,
];

/// Whether a file registration refused with `e` is served by the bounce route (else the copy
/// of that file fails with it).
pub fn refusal_bounces(e: &Error) -> bool {
    matches!(e, Error::Library { code, .. } if BOUNCE_CODES.contains(code))
}

/// Why a run on the bounce route has no library statistics.
const BOUNCE_STATS: &str = "the bounce route moves the data with aiscp's own POSIX I/O and \
                            never calls the library's reads and writes";

/// Starts the library's statistics when `--stats` asked for them (cuFile counts per GPU only
/// then; hipFile always counts): Err says why there will be none.
fn start_stats(
    driver: Option<&hipfile::Driver>,
    request: &Request,
    diag: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let driver = driver.ok_or_else(|| BOUNCE_STATS.to_owned())?;
    if !request.library_stats {
        return Err("not asked for".to_owned());
    }
    let started = driver.start_stats().map_err(|e| e.to_string());
    diag(&match &started {
        Ok(()) => "library statistics: counting per GPU".to_owned(),
        Err(why) => format!("library statistics: none: {why}"),
    });
    started
}

pub struct GpuStaging {
    // Field order is drop order: the device (holding the driver) goes after everything else
    // the engine drops first (its slots).
    /// The run's GPUs, in `--gpu` order; each holds the driver (when open) and the library
    /// alive for every slot and handle. Slot `i` lives on `devices[i % devices.len()]`.
    pub(super) devices: Vec<Device>,
    /// Each GPU's PCI address, where the runtime gives it (for `--gpu auto`).
    bus_ids: Vec<Option<String>>,
    flavor: Flavor,
    /// Whether registered files go through the library (else through the bounce route).
    library_route: bool,
    /// On the library route, the size below which files in flight bounce
    /// ([`super::request::bounce_below`]).
    bounce_below: Option<u64>,
    /// The library's own version text ("hipFile 0.2.0"), for the run's summary.
    version: Option<String>,
    /// The open I/O driver (library route only), asked for its statistics at the end.
    driver: Option<hipfile::Driver>,
    /// Whether the library's statistics were started, or why not.
    stats_started: Result<(), String>,
    /// The digest kernels (compiled when digests are first asked for); boxed, as only runs
    /// with digests use it.
    pub(super) digests: Box<GpuDigests>,
    /// How the bounce windows were pinned, for --debug.
    pinnings: Pinnings,
}

/// --debug's line for the route registered files take, and why.
fn describe_route(library_route: bool, why: &str, bounce_below: Option<u64>) -> String {
    let route = if library_route {
        "library I/O on registered files"
    } else {
        "own bounce: POSIX I/O into pinned windows, copied through the GPU buffer on one stream \
         per window; I/O driver not opened"
    };
    let small = match bounce_below {
        Some(size) => format!(
            "; files in flight (under {}) bounce",
            crate::units::size(size)
        ),
        None => String::new(),
    };
    format!("route: {route} ({why}){small}")
}

impl GpuStaging {
    /// Each GPU's PCI address, in the run's device order.
    pub fn bus_ids(&self) -> &[Option<String>] {
        &self.bus_ids
    }

    /// Each GPU's index, in the run's device order.
    pub fn indices(&self) -> Vec<u32> {
        self.devices.iter().map(Device::index).collect()
    }

    /// Loads `flavor`'s libraries, selects the GPUs asked for, and opens the I/O driver when
    /// files are to take the library route.
    pub fn open(
        flavor: Flavor,
        request: &Request,
        diag: &mut dyn FnMut(&str),
    ) -> Result<GpuStaging, OpenError> {
        let paths = super::library_paths::library_paths(flavor);
        let library = hipfile::Library::load_from(flavor, &paths)
            .map_err(|e| OpenError::Library(e.into()))?;
        let count = library.device_count().map_err(OpenError::Library)?;
        if count == 0 {
            return Err(OpenError::Library(Error::Os(std::io::Error::other(
                "library loaded, no GPU found",
            ))));
        }
        let indices = chosen_gpus(&request.gpu, count)?;
        diag(&describe_load(&library, count));
        let (library_route, why) = resolve_route(flavor, request);
        // The bounce route registers nothing, so it leaves the I/O driver closed: opening it
        // costs start-up time and (cuFile) host memory for buffers it would never use.
        let driver = match library_route {
            true => Some(library.open_driver().map_err(OpenError::Driver)?),
            false => None,
        };
        let devices = indices
            .iter()
            .map(|&index| match &driver {
                Some(driver) => driver.device(index),
                None => library.staging_device(index),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(OpenError::Device)?;
        // Only `auto` places files by locality; a runtime that cannot say leaves it blind
        // (every file then uses every GPU).
        let bus_ids: Vec<Option<String>> = indices
            .iter()
            .map(|&i| library.pci_bus_id(i).ok().flatten())
            .collect();
        let version = library.version();
        let gpus = gpu_labels(&indices, &bus_ids);
        diag(&describe_backend(
            &library,
            flavor,
            version.as_deref(),
            &gpus,
            count,
        ));
        if flavor == Flavor::CuFile {
            diag(&format!(
                "work queues per context: {}",
                super::runtime_env::describe()
            ));
        }
        let bounce_below = bounce_below(request, library_route);
        diag(&describe_route(library_route, why, bounce_below));
        let stats_started = start_stats(driver.as_ref(), request, diag);
        let digests = Box::new(GpuDigests::new(
            flavor,
            super::library_paths::compiler_path(flavor),
            devices.len(),
        ));
        Ok(GpuStaging {
            digests,
            devices,
            bus_ids,
            flavor,
            library_route,
            bounce_below,
            version,
            driver,
            stats_started,
            pinnings: Pinnings::default(),
        })
    }

    /// On the library route, the size below which files in flight bounce; None where every
    /// file takes the library.
    pub(crate) fn bounce_below(&self) -> Option<u64> {
        self.bounce_below
    }

    /// The library's own counters since [`GpuStaging::open`], or why there are none.
    pub fn library_stats(&self) -> LibraryStats {
        self.stats_started.clone()?;
        let driver = self
            .driver
            .as_ref()
            .ok_or_else(|| BOUNCE_STATS.to_owned())?;
        driver.io_stats().map(Into::into).map_err(|e| e.to_string())
    }

    /// The library's version text, when it tells ("hipFile 0.2.0").
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Makes the digest kernels ready (once): a kept image read now, else a compile started
    /// in the background, so the first slices need not hash on the CPU; the first
    /// [`Staging::hash`] does it otherwise.
    pub fn prepare_digests(&self) {
        self.digests.prepare(&self.devices[0]);
    }
}

pub struct GpuSlot {
    // Declared before `device`: a window drains its queued copies as it drops, and those
    // copies use the device memory.
    /// The bounce route's two windows, allocated on first use.
    windows: [Option<CopyWindow>; 2],
    /// The digest kernels' memory and stream, allocated on first use.
    pub(super) scratch: Option<Scratch>,
    /// The slot's GPU, by its position in the run.
    pub(super) gpu: usize,
    pub(super) device: SlotMemory,
}

/// A slot's device memory: registered for library I/O, or plain, served by the bounce route
/// only, which needs no registration (the own bounce route, or hipFile refused it).
pub(super) enum SlotMemory {
    Registered(RegisteredBuffer),
    Unregistered {
        buffer: DeviceBuffer,
        /// Why it is not registered, for --debug.
        why: String,
    },
}

impl SlotMemory {
    fn buffer(&self) -> &DeviceBuffer {
        match self {
            SlotMemory::Registered(r) => r.buffer(),
            SlotMemory::Unregistered { buffer, .. } => buffer,
        }
    }
    fn buffer_mut(&mut self) -> &mut DeviceBuffer {
        match self {
            SlotMemory::Registered(r) => r.buffer_mut(),
            SlotMemory::Unregistered { buffer, .. } => buffer,
        }
    }
    fn registered(&mut self) -> Result<&mut RegisteredBuffer, Error> {
        match self {
            SlotMemory::Registered(r) => Ok(r),
            // The engine asks slot_refusal first; reaching this is a bug, reported as an
            // error rather than a panic.
            SlotMemory::Unregistered { why, .. } => Err(Error::Os(std::io::Error::other(format!(
                "library I/O on an unregistered GPU buffer ({why})"
            )))),
        }
    }
}

impl GpuSlot {
    fn window_len(&self) -> usize {
        self.device.buffer().len().min(WINDOW)
    }
    /// Window `k`, allocated (pinned memory and its stream) on first use and counted in
    /// `pinnings`.
    fn window_mut(&mut self, k: usize, pinnings: &Pinnings) -> Result<&mut CopyWindow, Error> {
        let len = self.window_len();
        if self.windows[k].is_none() {
            // On the slot's own GPU: its copies go to and from this slot's memory.
            let window = self.device.buffer().device().alloc_window(len)?;
            pinnings.record(window.pinning());
            self.windows[k] = Some(window);
        }
        let window = &mut self.windows[k];
        Ok(window.as_mut().expect("allocated above"))
    }
}

impl Staging for GpuStaging {
    type Slot = GpuSlot;
    type Library = GpuStaging;

    fn name(&self) -> Backend {
        Backend::of(self.flavor)
    }
    fn memory(&self) -> &'static str {
        "GPU memory"
    }
    fn library(&self) -> Option<&GpuStaging> {
        self.library_route.then_some(self)
    }
    fn slot_alignment(&self) -> u64 {
        4096
    }
    fn devices(&self) -> usize {
        self.devices.len()
    }
    fn gpu_of(&self, slot: &GpuSlot) -> Option<u32> {
        Some(slot.device.buffer().device().index())
    }
    fn enter_worker(&self, slot: &GpuSlot) -> Result<(), Error> {
        slot.device.buffer().device().make_current()
    }
    fn alloc_slot(&self, len: usize, device: usize) -> Result<GpuSlot, Error> {
        let device_pos = device;
        let buffer = self.devices[device].alloc(len)?;
        let device = if !self.library_route {
            // Registration would only cost here: cuFile's compatibility mode shadows every
            // registered buffer in host memory.
            SlotMemory::Unregistered {
                buffer,
                why: "the own bounce route needs no registration".to_owned(),
            }
        } else {
            match buffer.register() {
                Ok(registered) => SlotMemory::Registered(registered),
                Err((buffer, e)) => SlotMemory::Unregistered {
                    buffer,
                    why: e.to_string(),
                },
            }
        };
        Ok(GpuSlot {
            windows: [None, None],
            scratch: None,
            gpu: device_pos,
            device,
        })
    }
    fn slot_len(&self, slot: &GpuSlot) -> usize {
        slot.device.buffer().len()
    }
    fn window_len(&self, slot: &GpuSlot) -> usize {
        slot.window_len()
    }
    fn window<'s>(
        &self,
        slot: &'s mut GpuSlot,
        k: usize,
        _slot_off: usize,
    ) -> Result<&'s mut [u8], Error> {
        slot.window_mut(k, &self.pinnings)?.host()
    }
    fn upload(
        &self,
        slot: &mut GpuSlot,
        k: usize,
        len: usize,
        slot_off: usize,
    ) -> Result<(), Error> {
        let window = slot.windows[k].as_mut().expect("window() before upload");
        window.upload(len, slot.device.buffer_mut(), slot_off)
    }
    fn download(
        &self,
        slot: &mut GpuSlot,
        k: usize,
        slot_off: usize,
        len: usize,
    ) -> Result<(), Error> {
        slot.window_mut(k, &self.pinnings)?;
        let GpuSlot {
            windows, device, ..
        } = slot;
        let window = windows[k].as_mut().expect("allocated above");
        window.download(device.buffer(), slot_off, len)
    }
    fn settle(&self, slot: &mut GpuSlot) -> Result<(), Error> {
        for window in slot.windows.iter_mut().flatten() {
            window.wait()?;
        }
        Ok(())
    }
    /// With the digest kernels on the slot's GPU, on a stream of the slot's own; on the CPU
    /// from a download of the slot while they compile or where they cannot be had
    /// ([`GpuDigests`] says why under --debug).
    fn hash(
        &self,
        slot: &mut GpuSlot,
        len: usize,
        start: u64,
        algorithm: Algorithm,
    ) -> Result<Hashing, Error> {
        // The bounce route's uploads must have landed before a kernel or a download reads.
        self.settle(slot)?;
        let GpuSlot {
            scratch,
            gpu,
            device,
            ..
        } = slot;
        self.digests
            .hash(*gpu, scratch, device.buffer(), len, start, algorithm)
    }
    fn hashed(&self, slot: &mut GpuSlot, queued: Queued) -> Result<Option<Piece>, Error> {
        self.digests.hashed(&mut slot.scratch, queued).map(Some)
    }
    fn digests_computed(&self) -> Option<String> {
        self.digests.describe()
    }
    fn windows_pinned(&self) -> Option<String> {
        self.pinnings.describe()
    }
    fn wait_for_digest_compile(&self, stop: &AtomicBool) -> Option<Duration> {
        self.digests.wait_for_compile(stop)
    }
}

impl LibraryIo for GpuStaging {
    type Slot = GpuSlot;
    type Handle<'fd> = FileHandle<'fd>;

    fn slot_refusal<'s>(&self, slot: &'s GpuSlot) -> Option<&'s str> {
        match &slot.device {
            SlotMemory::Registered(_) => None,
            SlotMemory::Unregistered { why, .. } => Some(why),
        }
    }
    fn register<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<Option<FileHandle<'fd>>, Error> {
        // A registered file serves buffers on any of the run's GPUs.
        match self.devices[0].register_file(fd) {
            Ok(handle) => Ok(Some(handle)),
            Err(e) if refusal_bounces(&e) => Ok(None),
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
        file.read(slot.device.registered()?, len, file_off, slot_off)
    }
    fn write(
        &self,
        file: &FileHandle<'_>,
        slot: &mut GpuSlot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error> {
        file.write(slot.device.registered()?, len, file_off, slot_off)
    }
}
