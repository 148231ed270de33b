//! Staging backends: where a slice lives between its read and its write, split by what a
//! backend can do:
//! - [`Staging`], every backend: staging memory per worker (a slot) and the bounce route's
//!   host windows, which the engine fills with POSIX reads and drains with POSIX writes while
//!   [`Staging::upload`]/[`Staging::download`] carry the bytes to and from the slot. On the
//!   host backend a window *is* the slot and the copies are no-ops.
//! - [`LibraryIo`], GPU backends whose files take the library route: registered files read
//!   and written by hipFile/cuFile straight into device memory.
//! - [`StreamIo`], the same with the library's stream API (`--async`).
//!
//! A backend without library I/O names [`NoLibrary`] and answers `None` to
//! [`Staging::library`]; it writes no library methods of its own.

pub mod gpu;
pub mod host;
pub mod library_paths;
pub mod runtime_env;

use crate::digest::{Algorithm, Piece};
use hipfile::{Error, Flavor};
use std::convert::Infallible;
use std::marker::PhantomData;
use std::os::fd::BorrowedFd;

/// Staging memory and the bounce route. Shared by the workers of a copy, hence `Sync`.
pub trait Staging: Sync {
    /// One worker's staging memory, reused across slices and files.
    type Slot: Send;
    /// The library route, where this backend has one.
    type Library: StreamIo<Slot = Self::Slot>;

    /// "hipFile", "cuFile" or "host memory", for messages.
    fn name(&self) -> &'static str;
    /// What a slot is made of ("GPU memory", "host memory"), for allocation errors.
    fn memory(&self) -> &'static str;
    /// The library route, when registered files take it; None when every file bounces.
    fn library(&self) -> Option<&Self::Library>;
    /// The address alignment every slot and window is guaranteed to have.
    fn slot_alignment(&self) -> u64;
    /// How many GPUs the slots are spread over (1 on the host backend).
    fn devices(&self) -> usize {
        1
    }
    /// The GPU (its index) whose memory `slot` is, for --debug; None on host memory.
    fn gpu_of(&self, _slot: &Self::Slot) -> Option<u32> {
        None
    }
    /// Prepares the calling thread to work with `slot` (makes its GPU current: that is per
    /// thread).
    fn enter_worker(&self, slot: &Self::Slot) -> Result<(), Error>;
    /// Allocates a slot of `len` bytes on device `device` (< [`Staging::devices`]).
    fn alloc_slot(&self, len: usize, device: usize) -> Result<Self::Slot, Error>;
    /// Bytes the slot holds: the most one read into it may bring.
    fn slot_len(&self, slot: &Self::Slot) -> usize;
    /// Bytes one window holds: the bounce route moves a slice in pieces of this size.
    fn window_len(&self, slot: &Self::Slot) -> usize;
    /// The host bytes for the piece at `slot_off`, in window `k` (0 or 1: the bounce route
    /// alternates them so one is in flight to or from the slot while the other is read or
    /// written). Waits for window `k`'s queued copies; allocates it on first use.
    fn window<'s>(
        &self,
        slot: &'s mut Self::Slot,
        k: usize,
        slot_off: usize,
    ) -> Result<&'s mut [u8], Error>;
    /// Queues the copy of window `k`'s first `len` bytes into the slot at `slot_off`.
    fn upload(
        &self,
        slot: &mut Self::Slot,
        k: usize,
        len: usize,
        slot_off: usize,
    ) -> Result<(), Error>;
    /// Queues the copy of `len` bytes of the slot at `slot_off` into window `k`.
    fn download(
        &self,
        slot: &mut Self::Slot,
        k: usize,
        slot_off: usize,
        len: usize,
    ) -> Result<(), Error>;
    /// Waits for every queued copy of the slot's windows (before library I/O reads the slot).
    fn settle(&self, slot: &mut Self::Slot) -> Result<(), Error>;
    /// The digest piece of the slot's first `len` bytes, which DEST receives at `start`,
    /// taken where they are staged. None: this backend does not hash its slots, and the
    /// file's digest reads those bytes back from DEST ([`crate::digest::Pieces::finish`]).
    fn hash(
        &self,
        _slot: &mut Self::Slot,
        _len: usize,
        _start: u64,
        _algorithm: Algorithm,
    ) -> Result<Option<Piece>, Error> {
        Ok(None)
    }
}

/// Library I/O on registered files, straight into a slot's device memory (the direct route).
pub trait LibraryIo: Sync {
    type Slot;
    /// A registered file; the workers of a copy share it.
    type Handle<'fd>: Sync;
    /// Why library I/O cannot use `slot` (its buffer registration was refused); such a slot
    /// bounces even on registered files.
    fn slot_refusal<'s>(&self, slot: &'s Self::Slot) -> Option<&'s str>;
    /// Registers an O_DIRECT fd. `Ok(None)`: refused in a way the bounce route serves
    /// (tmpfs, FUSE: 5027, 5008, 5030).
    fn register<'fd>(&self, fd: BorrowedFd<'fd>) -> Result<Option<Self::Handle<'fd>>, Error>;
    /// One library read of up to `len` bytes at `file_off` into the slot at `slot_off`.
    fn read(
        &self,
        file: &Self::Handle<'_>,
        slot: &mut Self::Slot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error>;
    /// One library write of up to `len` bytes from the slot at `slot_off` to `file_off`.
    fn write(
        &self,
        file: &Self::Handle<'_>,
        slot: &mut Self::Slot,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<usize, Error>;
}

/// The library's stream API (`--async`): ops queued on a registered stream bound to a slot.
pub trait StreamIo: LibraryIo {
    type Stream<'s>
    where
        Self: 's;
    /// Whether the library has the stream API (checked once at start).
    fn check_async(&self) -> Result<(), Error>;
    /// A stream whose ops move bytes between files and `slot`; None when the slot cannot
    /// take library I/O (its registration was refused).
    fn open_stream<'s>(
        &'s self,
        slot: &'s mut Self::Slot,
    ) -> Result<Option<Self::Stream<'s>>, Error>;
    /// Queues a library read of `len` bytes at `file_off` into the slot at `slot_off`.
    fn submit_read<'s>(
        &self,
        stream: &mut Self::Stream<'s>,
        file: &'s Self::Handle<'_>,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<(), Error>;
    /// Queues a library write of `len` bytes from the slot at `slot_off` to `file_off`.
    fn submit_write<'s>(
        &self,
        stream: &mut Self::Stream<'s>,
        file: &'s Self::Handle<'_>,
        len: usize,
        file_off: u64,
        slot_off: usize,
    ) -> Result<(), Error>;
    /// Waits for the queued ops; each op's count or error, in submission order. The outer
    /// error is the stream failing to synchronize.
    #[allow(clippy::type_complexity)]
    fn sync_stream(
        &self,
        stream: &mut Self::Stream<'_>,
    ) -> Result<Vec<Result<usize, Error>>, Error>;
}

/// The library route of a backend that has none: no value of it exists, so
/// [`Staging::library`] can only answer `None`, and the methods below cannot be reached.
pub enum NoLibrary<Slot> {
    #[allow(dead_code)] // never built: Infallible has no values
    Never(Infallible, PhantomData<fn() -> Slot>),
}

impl<Slot> NoLibrary<Slot> {
    fn never(&self) -> ! {
        match self {
            NoLibrary::Never(never, _) => match *never {},
        }
    }
}

impl<Slot> LibraryIo for NoLibrary<Slot> {
    type Slot = Slot;
    type Handle<'fd> = Infallible;
    fn slot_refusal<'s>(&self, _: &'s Slot) -> Option<&'s str> {
        self.never()
    }
    fn register<'fd>(&self, _: BorrowedFd<'fd>) -> Result<Option<Infallible>, Error> {
        self.never()
    }
    fn read(
        &self,
        _: &Infallible,
        _: &mut Slot,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<usize, Error> {
        self.never()
    }
    fn write(
        &self,
        _: &Infallible,
        _: &mut Slot,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<usize, Error> {
        self.never()
    }
}

impl<Slot> StreamIo for NoLibrary<Slot> {
    type Stream<'s>
        = Infallible
    where
        Self: 's;
    fn check_async(&self) -> Result<(), Error> {
        self.never()
    }
    fn open_stream<'s>(&'s self, _: &'s mut Slot) -> Result<Option<Infallible>, Error> {
        self.never()
    }
    fn submit_read(
        &self,
        _: &mut Infallible,
        _: &Infallible,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<(), Error> {
        self.never()
    }
    fn submit_write(
        &self,
        _: &mut Infallible,
        _: &Infallible,
        _: usize,
        _: u64,
        _: usize,
    ) -> Result<(), Error> {
        self.never()
    }
    fn sync_stream(&self, _: &mut Infallible) -> Result<Vec<Result<usize, Error>>, Error> {
        self.never()
    }
}

/// Which staging backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// hipFile, then cuFile, then host memory (with a warning).
    #[default]
    Auto,
    /// hipFile or cuFile; an error if neither loads.
    Gpu,
    HipFile,
    CuFile,
    Host,
}

/// How data moves between the files and GPU memory on GPU backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RouteChoice {
    /// The library's route where it can DMA between storage and GPU memory (hipFile; cuFile
    /// with nvidia-fs), aiscp's own bounce route where the library would only emulate it
    /// (cuFile in compatibility mode does POSIX I/O plus copies itself, one request at a time).
    #[default]
    Auto,
    /// Always hipFileRead/hipFileWrite on registered files.
    Library,
    /// Always aiscp's own: POSIX I/O into pinned host memory, copied to and from the device
    /// buffer, pipelined over the slices in flight.
    Bounce,
}

/// Which GPUs stage the data. With several, each GPU gets its own slots (`slots_per_gpu` of them)
/// and a file's slices go to whichever of its GPUs' slots is free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuChoice {
    /// These devices, by index, in this order (no repeats; checked against the device count).
    List(Vec<u32>),
    /// Every device.
    All,
    /// Every device; each file uses the one(s) nearest its storage
    /// ([`crate::devices::Topology`]), all of them where that is unknown.
    Auto,
    /// Device `n` modulo the device count: an MPI rank's node-local rank, so the ranks of a
    /// node share its GPUs out.
    Local(u32),
}

impl std::fmt::Display for GpuChoice {
    /// As given on the command line: "3", "0,2,3", "all", "auto".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuChoice::List(v) => {
                let list: Vec<String> = v.iter().map(u32::to_string).collect();
                f.write_str(&list.join(","))
            }
            GpuChoice::All => f.write_str("all"),
            GpuChoice::Auto => f.write_str("auto"),
            GpuChoice::Local(n) => write!(f, "{n} modulo the GPUs (node-local rank)"),
        }
    }
}

impl Default for GpuChoice {
    fn default() -> GpuChoice {
        GpuChoice::List(vec![0])
    }
}

/// What the caller asks of the backend.
#[derive(Clone, Debug, Default)]
pub struct Request {
    pub backend: BackendChoice,
    pub route: RouteChoice,
    /// The GPU(s).
    pub gpu: GpuChoice,
    /// `--async`: the library's stream API, which only the library route has.
    pub async_io: bool,
    /// Start the library's own statistics (see `Config::library_stats`).
    pub library_stats: bool,
}

/// The I/O library's own statistics (`Config::library_stats`), or why there are none (the
/// host backend, the bounce route, a release without statistics, not asked for).
pub type LibraryStats = Result<hipfile::IoStats, String>;

/// No backend could be brought up as asked (fatal for the run).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NoBackend(pub String);

/// The backend chosen at start.
pub enum Loaded {
    Host(host::HostStaging),
    Gpu(gpu::GpuStaging),
}

/// Whether registered files take the library route on `flavor`, and why: every choice of
/// route is made here.
pub fn resolve_route(flavor: Flavor, request: &Request) -> (bool, &'static str) {
    match request.route {
        RouteChoice::Library => (true, "as asked"),
        RouteChoice::Bounce => (false, "as asked"),
        RouteChoice::Auto if request.async_io => (true, "--async needs the library's streams"),
        // hipFile decides per request between its DMA fastpath and its own fallback.
        RouteChoice::Auto if flavor == Flavor::HipFile => (true, "hipFile picks DMA or fallback"),
        RouteChoice::Auto if gpu::nvidia_fs_present() => (true, "nvidia-fs present"),
        RouteChoice::Auto => (false, "cuFile in compatibility mode: no nvidia-fs"),
    }
}

/// Brings up the backend `request` asks for, with the one-line warning to show when it fell
/// back to host memory. `diag` gets the --debug lines.
pub fn load(
    request: &Request,
    diag: &mut dyn FnMut(&str),
) -> Result<(Loaded, Option<String>), NoBackend> {
    let flavors: &[Flavor] = match request.backend {
        BackendChoice::Host => return Ok((Loaded::Host(host::HostStaging::new()), None)),
        BackendChoice::HipFile => &[Flavor::HipFile],
        BackendChoice::CuFile => &[Flavor::CuFile],
        BackendChoice::Auto | BackendChoice::Gpu => &[Flavor::HipFile, Flavor::CuFile],
    };
    let mut missing = Vec::new();
    // Whether a library loaded and only its driver or the GPU failed: then the messages say
    // so instead of "no usable library".
    let mut loaded = false;
    for &flavor in flavors {
        // Trying a vendor's libraries on a machine without its kernel driver only costs
        // start-up time; an explicit --backend or an AISCP_* override still tries them.
        let guessing = matches!(request.backend, BackendChoice::Auto | BackendChoice::Gpu);
        if guessing && !flavor.driver_present() && !library_paths::library_paths(flavor).any() {
            let why = format!(
                "{}: no GPU driver ({} not found)",
                flavor.name(),
                flavor.device_node().display()
            );
            diag(&format!("skipped {why}"));
            missing.push(why);
            continue;
        }
        match gpu::GpuStaging::open(flavor, request, diag) {
            Ok(staging) => return Ok((Loaded::Gpu(staging), None)),
            // A GPU index that does not exist is an error whatever the choice: the user asked
            // for that index.
            Err(e @ gpu::OpenError::Device(Error::NoSuchDevice { .. })) => {
                return Err(NoBackend(e.describe(flavor)))
            }
            Err(e) => {
                loaded |= !matches!(e, gpu::OpenError::Library(_));
                missing.push(e.describe(flavor));
            }
        }
    }
    let looked_for = missing.join("; ");
    let what = if loaded {
        "no GPU to stage through"
    } else {
        "no usable GPU I/O library"
    };
    // --gpu 0 is the default; anything else was asked for and is not honoured.
    let ignored = match &request.gpu {
        GpuChoice::List(v) if v.as_slice() == [0] => String::new(),
        other => format!("--gpu {other} ignored, "),
    };
    match request.backend {
        BackendChoice::Auto => Ok((
            Loaded::Host(host::HostStaging::new()),
            Some(format!(
                "{what} ({looked_for}); {ignored}copying through host memory (--backend auto; \
                 -q or AISCP_BACKEND=host silences this)"
            )),
        )),
        BackendChoice::Gpu => Err(NoBackend(format!("{what}: {looked_for}"))),
        _ => Err(NoBackend(looked_for)),
    }
}
