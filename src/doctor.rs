//! `aiscp --doctor [PATH]...`: what an operator needs when GPU staging does not happen, in
//! the spirit of NVIDIA's `gdscheck -p`. It reads the machine and the libraries as a copy
//! would (same search, same AISCP_* overrides, through hipfile-rs), leaves nothing on disk
//! (a directory is probed with an empty file that is removed at once), and exits 0 when a
//! GPU route is possible.

mod path;

use crate::cli::staging::{BackendArg, StagingArgs};
use crate::service::Choice;
use aiscp_engine::probe::library_paths;
use aiscp_engine::quote::quote;
use aiscp_engine::units;
use aiscp_engine::GpuChoice;
use hipfile::{Device, Flavor, Library};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use aiscp_engine::probe::NVIDIA_FS;

/// A flavor that came up far enough to stage through its GPU.
struct Ready {
    flavor: Flavor,
    /// Opened for registration checks; None when the driver would not open.
    device: Option<Device>,
}

/// Runs the checks, prints the report on stdout, and returns the exit status.
pub fn run(paths: &[PathBuf], staging: &StagingArgs, service: &Choice) -> i32 {
    let mut out = String::new();
    drivers_section(&mut out);
    let flavors: &[Flavor] = match staging.backend {
        BackendArg::Host => &[],
        BackendArg::Hipfile => &[Flavor::HipFile],
        BackendArg::Cufile => &[Flavor::CuFile],
        BackendArg::Auto | BackendArg::Gpu => &[Flavor::HipFile, Flavor::CuFile],
    };
    let _ = writeln!(out, "libraries and GPUs:");
    if flavors.is_empty() {
        let _ = writeln!(out, "  none tried: --backend host");
    }
    // The first GPU a copy would use; with `all` or `auto`, GPU 0.
    let gpu = match &staging.gpu {
        GpuChoice::List(v) => v.first().copied().unwrap_or(0),
        GpuChoice::All | GpuChoice::Auto | GpuChoice::Local(_) => 0,
    };
    let ready: Vec<Ready> = flavors
        .iter()
        .filter_map(|&flavor| check_flavor(flavor, gpu, &mut out))
        .collect();
    for path in paths {
        path::check_path(path, &ready, &mut out);
    }
    service_section(service, &mut out);
    let possible = ready.first();
    let _ = match possible {
        Some(r) => writeln!(
            out,
            "verdict: a GPU route is possible through {} on GPU {}",
            r.flavor.name(),
            gpu
        ),
        None => writeln!(
            out,
            "verdict: no GPU route: copies would go through host memory (--backend auto) or \
             fail (--backend gpu)"
        ),
    };
    crate::sys::messages::write_stdout(out.as_bytes());
    i32::from(possible.is_none())
}

/// The kernel drivers: each flavor's device node, and whether nvidia-fs is loaded.
fn drivers_section(out: &mut String) {
    let _ = writeln!(out, "kernel drivers:");
    for flavor in [Flavor::HipFile, Flavor::CuFile] {
        let node = flavor.device_node();
        let _ = writeln!(
            out,
            "  {}: {} {}",
            flavor.name(),
            node.display(),
            if flavor.driver_present() {
                "present"
            } else {
                "absent"
            }
        );
    }
    let _ = writeln!(
        out,
        "  nvidia-fs: {}",
        match nvidia_fs_version() {
            Some(v) => format!("loaded ({v}): cuFile can DMA between storage and GPU memory"),
            None => format!(
                "not loaded ({NVIDIA_FS} absent): cuFile would run in compatibility mode, so \
                 aiscp's auto route bounces through pinned memory instead"
            ),
        }
    );
}

/// The staging service this user's copies would use (AISCP_SERVICE), and how it is doing.
fn service_section(choice: &Choice, out: &mut String) {
    use crate::data::service_client as client;
    let _ = writeln!(out, "staging service:");
    let Some(socket) = choice.socket() else {
        let _ = writeln!(out, "  AISCP_SERVICE=off: copies run in-process");
        return;
    };
    let how = match &choice {
        Choice::WhenThere(_) => "AISCP_SERVICE unset: used when it is there",
        Choice::Auto(_) => "AISCP_SERVICE=auto: used, started when none answers",
        _ => "AISCP_SERVICE",
    };
    let _ = writeln!(out, "  socket: {} ({how})", quote(socket));
    if std::fs::symlink_metadata(socket).is_err() {
        let _ = writeln!(out, "  none there: copies run in-process");
        return;
    }
    let _ = match client::status(socket) {
        Ok(s) => writeln!(
            out,
            "  serving: pid {}, up {:.1} s, {}{}; {} client(s) connected (this check \
             included); {} file(s), {} copied; staging memory up to {}, {} held now",
            s.welcome.pid,
            s.uptime_secs,
            s.welcome
                .library
                .as_deref()
                .unwrap_or(s.welcome.backend.name()),
            client::gpus_text(&s.welcome.gpus),
            s.clients,
            s.files,
            units::size(s.bytes),
            units::size(s.staging_bytes),
            units::size(s.staging_held)
        ),
        Err(client::NoStatus::Foreign(why)) => writeln!(
            out,
            "  not a place of this user's ({why}): copies run in-process"
        ),
        Err(client::NoStatus::NotAnswering(why)) => writeln!(
            out,
            "  not answering ({why}): copies run in-process, with a warning"
        ),
    };
}

/// The nvidia-fs module's version line, when it is loaded.
fn nvidia_fs_version() -> Option<String> {
    if !Path::new(NVIDIA_FS).exists() {
        return None;
    }
    let text = std::fs::read_to_string(Path::new(NVIDIA_FS).join("version")).unwrap_or_default();
    Some(
        text.lines()
            .next()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .unwrap_or("version unknown")
            .to_owned(),
    )
}

/// Loads `flavor` as a copy would and reports each step; Some when GPU `gpu` can be used.
fn check_flavor(flavor: Flavor, gpu: u32, out: &mut String) -> Option<Ready> {
    let name = flavor.name();
    let library = load_library(flavor, out)?;
    let count = list_gpus(&library, out)?;
    if gpu >= count {
        let _ = writeln!(
            out,
            "    GPU {gpu} (--gpu) does not exist: {count} device(s) found"
        );
        return None;
    }
    make_context(&library, gpu, out)?;
    let device = match library.open_driver().and_then(|d| d.device(gpu)) {
        Ok(d) => {
            let _ = writeln!(
                out,
                "    {name} driver: opened (use count {})",
                library
                    .use_count()
                    .map_or("not reported".to_owned(), |n| n.to_string())
            );
            Some(d)
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "    {name} driver: cannot open: {e} (the bounce route needs no driver)"
            );
            None
        }
    };
    Some(Ready { flavor, device })
}

/// `flavor`'s libraries loaded as a copy loads them (not tried without its driver unless
/// an override names them), with where they came from and their version.
fn load_library(flavor: Flavor, out: &mut String) -> Option<Library> {
    let name = flavor.name();
    let paths = library_paths(flavor);
    if !flavor.driver_present() && !paths.any() {
        let _ = writeln!(
            out,
            "  {name}: not tried: no GPU driver ({} not found; set an AISCP_* library override \
             to try anyway)",
            flavor.device_node().display()
        );
        return None;
    }
    let library = match Library::load_from(flavor, &paths) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(out, "  {name}: not loaded: {e}");
            return None;
        }
    };
    let _ = writeln!(
        out,
        "  {name}: {} ({}), runtime {}",
        library.io_library_path().display(),
        library
            .version()
            .as_deref()
            .unwrap_or("version not reported"),
        library.runtime_library_path().display(),
    );
    Some(library)
}

/// The GPUs the runtime sees, each with its PCI address and memory; their count, None when
/// there are none.
fn list_gpus(library: &Library, out: &mut String) -> Option<u32> {
    let count = match library.device_count() {
        Ok(n) => n,
        Err(e) => {
            let _ = writeln!(out, "    no GPU: {e}");
            return None;
        }
    };
    let _ = writeln!(out, "    {count} GPU(s)");
    for i in 0..count {
        let bus = match library.runtime().pci_bus_id(i) {
            Ok(Some(id)) => format!("PCI {id}"),
            Ok(None) => "PCI address not reported".to_owned(),
            Err(e) => format!("PCI address: {e}"),
        };
        let memory = match library.runtime().total_memory(i) {
            Ok(Some(bytes)) => format!("{} of memory", units::size(bytes)),
            Ok(None) => "memory size not reported".to_owned(),
            Err(e) => format!("memory size: {e}"),
        };
        let _ = writeln!(out, "    GPU {i}: {bus}, {memory}");
    }
    Some(count)
}

/// A context on GPU `gpu`: what fails when another process holds all its memory.
fn make_context(library: &Library, gpu: u32, out: &mut String) -> Option<()> {
    match library.staging_device(gpu) {
        Ok(_) => {
            let _ = writeln!(out, "    GPU {gpu}: context ok");
            Some(())
        }
        Err(e) => {
            let full = matches!(
                e,
                hipfile::Error::Runtime {
                    code: hipfile::sys::RUNTIME_OUT_OF_MEMORY,
                    ..
                }
            );
            let _ = writeln!(
                out,
                "    GPU {gpu}: cannot make a context: {e}{}",
                if full {
                    " (the GPU has no free memory: another process may be holding it)"
                } else {
                    ""
                }
            );
            None
        }
    }
}
