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
mod gpu_open;
pub(crate) mod gpu_stream;
pub mod host;
mod kind;
pub mod library_paths;
mod pinnings;
mod request;
pub mod runtime_env;
mod staging;

use hipfile::{Error, Flavor};
pub use kind::Backend;
pub use request::LIBRARY_FROM;
pub use request::{resolve_route, BackendChoice, GpuChoice, NoBackend, Request, RouteChoice};
pub use staging::{LibraryIo, Staging, StreamIo};

/// The backend chosen at start.
pub enum Loaded {
    Host(host::HostStaging),
    Gpu(gpu::GpuStaging),
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
            Err(e @ gpu_open::OpenError::Device(Error::NoSuchDevice { .. })) => {
                return Err(NoBackend(e.describe(flavor)))
            }
            Err(e) => {
                loaded |= !matches!(e, gpu_open::OpenError::Library(_));
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
