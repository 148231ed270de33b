//! Staging backends: where a slice lives between its read and its write.
//!
//! A backend hands each worker a [`Staging::Slot`] (device memory on GPU backends, aligned
//! host memory on the host one) and moves bytes between files and slots two ways:
//! - through the I/O library on a registered file ([`Staging::read`]/[`Staging::write`]),
//!   the direct route; only GPU backends have it;
//! - through a host window the engine fills with POSIX reads and drains with POSIX writes,
//!   [`Staging::upload`]/[`Staging::download`] carrying the bytes to and from the slot, the
//!   bounce route. On the host backend the window *is* the slot and the copies are no-ops.

pub mod gpu;
pub mod host;

use crate::engine::{BackendChoice, Config, RouteChoice, StartError};
use hipfile::{Error, Flavor};
use std::os::fd::BorrowedFd;

/// One way of staging bytes. Shared by the workers of a copy, hence `Sync`.
pub trait Staging: Sync {
    /// One worker's staging memory, reused across slices and files.
    type Slot: Send;
    /// A file registered for direct I/O; workers share it.
    type Handle<'fd>: Sync;

    /// "hipFile", "cuFile" or "host memory", for messages.
    fn name(&self) -> &'static str;
    /// Whether files can be registered for library I/O (the direct route).
    fn has_direct_route(&self) -> bool;
    /// Whether the direct route is worth taking for files that could take it; when not,
    /// O_DIRECT files go through the bounce route with O_DIRECT kept on.
    fn prefers_direct_route(&self) -> bool {
        self.has_direct_route()
    }
    /// The address alignment every slot is guaranteed to have.
    fn slot_alignment(&self) -> u64;
    /// Prepares the calling thread (makes the GPU current: that is per thread).
    fn enter_worker(&self) -> Result<(), Error>;
    /// Allocates a slot of `len` bytes. On GPU backends a slot whose buffer registration the
    /// library refuses is still returned: the bounce route needs no registration.
    fn alloc_slot(&self, len: usize) -> Result<Self::Slot, Error>;
    /// Why library I/O cannot use `slot` (its buffer registration was refused); None when it
    /// can, or when the backend has no library I/O.
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
    /// An async stream bound to one slot, for the slices of one file (`--async`).
    type Stream<'s>
    where
        Self: 's;
    /// A stream whose ops move bytes between files and `slot`; None when the slot cannot
    /// take library I/O (its registration was refused) or the backend has none.
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
    /// The host window of the bounce route (allocated on first use).
    fn window<'s>(&self, slot: &'s mut Self::Slot) -> Result<&'s mut [u8], Error>;
    /// The length [`Staging::window`] has or will have.
    fn window_len(&self, slot: &Self::Slot) -> usize;
    /// Copies `window[..len]` into the slot at `slot_off`.
    fn upload(&self, slot: &mut Self::Slot, slot_off: usize, len: usize) -> Result<(), Error>;
    /// Copies `len` bytes of the slot at `slot_off` into `window[..len]`.
    fn download(&self, slot: &mut Self::Slot, slot_off: usize, len: usize) -> Result<(), Error>;
}

/// The backend chosen at start.
pub enum Loaded {
    Host(host::HostStaging),
    Gpu(gpu::GpuStaging),
}

/// Brings up the backend `config` asks for. `warn` gets the one-line fallback warning;
/// `diag` the --debug lines.
pub fn load(
    config: &Config,
    warn: &mut dyn FnMut(&str),
    diag: &mut dyn FnMut(&str),
) -> Result<Loaded, StartError> {
    let flavors: &[Flavor] = match config.backend {
        BackendChoice::Host => return Ok(Loaded::Host(host::HostStaging::new())),
        BackendChoice::HipFile => &[Flavor::HipFile],
        BackendChoice::CuFile => &[Flavor::CuFile],
        BackendChoice::Auto | BackendChoice::Gpu => &[Flavor::HipFile, Flavor::CuFile],
    };
    // --async is the library's stream API: it needs the library route.
    let route = match (config.route, config.async_io) {
        (RouteChoice::Auto, true) => RouteChoice::Library,
        (route, _) => route,
    };
    let mut missing = Vec::new();
    // Whether a library loaded and only its driver or the GPU failed: then the messages say
    // so instead of "no usable library".
    let mut loaded = false;
    for &flavor in flavors {
        // Trying a vendor's libraries on a machine without its kernel driver only costs
        // start-up time; an explicit --backend or an AISCP_* override still tries them.
        let guessing = matches!(config.backend, BackendChoice::Auto | BackendChoice::Gpu);
        if guessing && !flavor.driver_present() && !flavor.overridden() {
            let why = format!(
                "{}: no GPU driver ({} not found)",
                flavor.name(),
                flavor.device_node().display()
            );
            diag(&format!("skipped {why}"));
            missing.push(why);
            continue;
        }
        match gpu::GpuStaging::open(flavor, config.gpu, route, diag) {
            Ok(staging) => return Ok(Loaded::Gpu(staging)),
            // A GPU index that does not exist is an error whatever the choice: the user asked
            // for that index.
            Err(e @ gpu::OpenError::Device(Error::NoSuchDevice { .. })) => {
                return Err(StartError::Backend(e.describe(flavor)))
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
    match config.backend {
        BackendChoice::Auto => {
            // --gpu 0 is the default; any other index was asked for and is not honoured.
            let ignored = match config.gpu {
                0 => String::new(),
                n => format!("--gpu {n} ignored, "),
            };
            warn(&format!(
                "{what} ({looked_for}); {ignored}copying through host memory (--backend auto)"
            ));
            Ok(Loaded::Host(host::HostStaging::new()))
        }
        BackendChoice::Gpu => Err(StartError::Backend(format!("{what}: {looked_for}"))),
        _ => Err(StartError::Backend(looked_for)),
    }
}
