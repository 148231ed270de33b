//! `aiscp --doctor [PATH]...`: what an operator needs when GPU staging does not happen, in
//! the spirit of NVIDIA's `gdscheck -p`. It reads the machine and the libraries as a copy
//! would (same search, same AISCP_* overrides, through hipfile-rs), leaves nothing on disk
//! (a directory is probed with an empty file that is removed at once), and exits 0 when a
//! GPU route is possible.

use crate::cli::staging::{BackendArg, StagingArgs};
use aiscp_engine::backend::library_paths::library_paths;
use aiscp_engine::quote::quote;
use aiscp_engine::GpuChoice;
use hipfile::{Device, Flavor, Library};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use aiscp_engine::backend::gpu::{refusal_bounces, NVIDIA_FS};

/// A flavor that came up far enough to stage through its GPU.
struct Ready {
    flavor: Flavor,
    /// Opened for registration checks; None when the driver would not open.
    device: Option<Device>,
}

/// Runs the checks, prints the report on stdout, and returns the exit status.
pub fn run(paths: &[PathBuf], staging: &StagingArgs) -> i32 {
    let mut out = String::new();
    let nvidia_fs = nvidia_fs_version();
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
        match &nvidia_fs {
            Some(v) => format!("loaded ({v}): cuFile can DMA between storage and GPU memory"),
            None => format!(
                "not loaded ({NVIDIA_FS} absent): cuFile would run in compatibility mode, so \
                 aiscp's auto route bounces through pinned memory instead"
            ),
        }
    );

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
    let mut ready: Vec<Ready> = Vec::new();
    for &flavor in flavors {
        if let Some(r) = check_flavor(flavor, gpu, &mut out) {
            ready.push(r);
        }
    }

    for path in paths {
        check_path(path, &ready, &mut out);
    }

    service_section(&mut out);
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
    crate::messages::write_stdout(out.as_bytes());
    i32::from(possible.is_none())
}

/// The staging service this user's copies would use (AISCP_SERVICE), and how it is doing.
fn service_section(out: &mut String) {
    use crate::service::{client, Choice};
    let choice = Choice::from_env();
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
             included); {} file(s), {} copied; staging memory up to {}",
            s.welcome.pid,
            s.uptime_secs,
            s.welcome.library.as_deref().unwrap_or(&s.welcome.backend),
            client::gpus_text(&s.welcome.gpus),
            s.clients,
            s.files,
            humansize::format_size(s.bytes, humansize::BINARY),
            humansize::format_size(s.staging_bytes, humansize::BINARY)
        ),
        Err(why) => writeln!(
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
            Ok(Some(bytes)) => format!("{} of memory", crate::progress::human(bytes)),
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

/// A filesystem's name from statfs's magic number, for the common ones.
fn fs_name(magic: i64) -> String {
    let name = match magic {
        0xEF53 => "ext2/3/4",
        0x5846_5342 => "xfs",
        0x9123_683E => "btrfs",
        0x0102_1994 => "tmpfs",
        0x8584_58f6 => "ramfs",
        0x6969 => "nfs",
        0x794c_7630 => "overlayfs",
        0x6573_5546 => "fuse",
        0x2FC1_2FC1 => "zfs",
        0xFF53_4D42 => "cifs",
        0x0BD0_0BD0 => "lustre",
        0x4750_4653 => "gpfs",
        0x5346_544e => "ntfs",
        0x4d44 => "vfat",
        _ => return format!("type {magic:#x}"),
    };
    name.to_owned()
}

/// What cuFile looks up before it registers a file on a block device: the udev record's
/// ID_FS_USAGE (without it, registration fails with 5027). Where it is missing, the fix is
/// given in full: an installed aiscp has no README to point to.
fn udev_record(dev: u64, fs: &str) -> String {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    if major == 0 {
        return "none needed (not a block device)".to_owned();
    }
    let path = format!("/run/udev/data/b{major}:{minor}");
    // udev's name for the type; ext2, ext3 and ext4 share one magic number.
    let fs = if fs == "ext2/3/4" { "ext4" } else { fs };
    match std::fs::read_to_string(&path) {
        Ok(text) if text.lines().any(|l| l.starts_with("E:ID_FS_USAGE=")) => {
            format!("{path} has ID_FS_USAGE")
        }
        Ok(_) => format!(
            "{path} lacks ID_FS_USAGE: cuFile would refuse registration (5027); to add it, as \
             root: echo E:ID_FS_USAGE=filesystem >> {path}"
        ),
        Err(_) => format!(
            "{path} missing: cuFile would refuse registration (5027); to make it, as root: \
             mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\\nE:ID_FS_TYPE={fs}\\n' \
             > {path}"
        ),
    }
}

/// A file opened with O_DIRECT for the checks: `path` itself for reading, or for a directory
/// a new empty file in it, named `.aiscp-doctor-PID` and removed again when this is dropped
/// (cuFile refuses an unnamed O_TMPFILE: it reopens files by name, 5031 on the H200).
struct Probe {
    file: File,
    _remove: Option<Remove>,
}

/// Removes the probe file when dropped.
struct Remove(PathBuf);

impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn open_direct(path: &Path, dir: bool) -> std::io::Result<Probe> {
    if !dir {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)?;
        return Ok(Probe {
            file,
            _remove: None,
        });
    }
    // Created without O_DIRECT first: a filesystem that refuses O_DIRECT may do so only
    // after creating the file, which must still be removed.
    let name = path.join(format!(".aiscp-doctor-{}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&name)?;
    let remove = Remove(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&remove.0)?;
    Ok(Probe {
        file,
        _remove: Some(remove),
    })
}

/// Reports the route files at `path` would take, and why.
fn check_path(path: &Path, ready: &[Ready], out: &mut String) {
    let _ = writeln!(out, "path {}:", quote(path));
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(out, "  cannot stat: {}", crate::messages::os_text(&e));
            return;
        }
    };
    let dir = meta.is_dir();
    // By name, not through an opened file: opening a FIFO waits for a writer.
    let fs = match nix::sys::statfs::statfs(path) {
        Ok(s) => fs_name(s.filesystem_type().0),
        Err(e) => format!("unknown ({})", crate::messages::os_text(&e.into())),
    };
    let _ = writeln!(out, "  filesystem: {fs}");
    let _ = writeln!(out, "  udev record: {}", udev_record(meta.dev(), &fs));
    if !dir && !meta.is_file() {
        describe_special(&meta, ready, out);
        return;
    }
    let direct = match open_direct(path, dir) {
        Ok(f) => {
            let _ = writeln!(out, "  O_DIRECT: supported");
            Some(f)
        }
        Err(e) => {
            let _ = writeln!(
                out,
                "  O_DIRECT: {} ({})",
                if dir {
                    "could not be tried in this directory"
                } else {
                    "refused"
                },
                crate::messages::os_text(&e)
            );
            None
        }
    };
    let Some(first) = ready.first() else {
        let _ = writeln!(out, "  route: host memory (no GPU library came up)");
        return;
    };
    let Some(probe) = direct else {
        let _ = writeln!(
            out,
            "  route: bounce through {} GPU memory with buffered POSIX I/O (no O_DIRECT)",
            first.flavor.name()
        );
        return;
    };
    report_route(first, &probe, out);
}

/// A file that is neither regular nor a directory: described, never opened (a FIFO's open()
/// would wait for a writer, a device's could have effects). A copy reads it in order until EOF.
fn describe_special(meta: &std::fs::Metadata, ready: &[Ready], out: &mut String) {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    let kind = if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else {
        "not a regular file"
    };
    let _ = writeln!(
        out,
        "  type: {kind} (not opened: a copy reads it as a stream, without O_DIRECT)"
    );
    let route = match ready.first() {
        Some(first) => format!(
            "bounce through {} GPU memory with buffered POSIX I/O (not a regular file)",
            first.flavor.name()
        ),
        None => "host memory (no GPU library came up)".to_owned(),
    };
    let _ = writeln!(out, "  route: {route}");
}

/// The library's answer to registering the probe file opened with O_DIRECT, and the route
/// the engine takes with that answer under `--route auto`.
fn report_route(first: &Ready, probe: &Probe, out: &mut String) {
    let registration = match &first.device {
        Some(device) => device
            .register_file(probe.file.as_fd())
            .map(drop)
            .map_err(Some),
        None => Err(None),
    };
    let _ = match &registration {
        Ok(()) => writeln!(out, "  {} registration: accepted", first.flavor.name()),
        Err(why) => writeln!(
            out,
            "  {} registration: refused: {}",
            first.flavor.name(),
            why.as_ref()
                .map_or("driver not open".to_owned(), ToString::to_string)
        ),
    };
    // The engine's own decisions: the route `--route auto` takes for this library, then what
    // it does with the registration's answer.
    let auto = aiscp_engine::backend::Request {
        backend: aiscp_engine::BackendChoice::Auto,
        route: aiscp_engine::RouteChoice::Auto,
        gpu: GpuChoice::default(),
        async_io: false,
    };
    let bounce = "bounce: O_DIRECT into pinned memory, copied through the GPU buffer";
    let (library, why) = aiscp_engine::backend::resolve_route(first.flavor, &auto);
    let route = match (library, registration) {
        (false, _) => format!("{bounce} ({why})"),
        (true, Ok(())) => match first.flavor {
            Flavor::HipFile => {
                "library: hipFileRead/hipFileWrite on the registered file".to_owned()
            }
            Flavor::CuFile => "library: cuFileRead/cuFileWrite, DMA through nvidia-fs".to_owned(),
        },
        (true, Err(Some(e))) if !refusal_bounces(&e) => format!(
            "none: a copy here fails (cannot register with {}: {e})",
            first.flavor.name()
        ),
        (true, Err(_)) => format!("{bounce} (the library refused the file)"),
    };
    let _ = writeln!(out, "  route (--route auto): {route}");
}
