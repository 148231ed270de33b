//! `--doctor PATH`: the route files at PATH would take, and why: the filesystem, its udev
//! record, O_DIRECT, the library's registration answer and the engine's decision with it.

use super::Ready;
use aiscp_engine::probe::refusal_bounces;
use aiscp_engine::quote::quote;
use hipfile::Flavor;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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
pub(super) fn check_path(path: &Path, ready: &[Ready], out: &mut String) {
    let _ = writeln!(out, "path {}:", quote(path));
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            let _ = writeln!(out, "  cannot stat: {}", crate::sys::messages::os_text(&e));
            return;
        }
    };
    let dir = meta.is_dir();
    // By name, not through an opened file: opening a FIFO waits for a writer.
    let fs = match nix::sys::statfs::statfs(path) {
        Ok(s) => fs_name(s.filesystem_type().0),
        Err(e) => format!("unknown ({})", crate::sys::messages::os_text(&e.into())),
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
                crate::sys::messages::os_text(&e)
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
    let bounce = "bounce: O_DIRECT into pinned memory, copied through the GPU buffer";
    let (library, why) = aiscp_engine::probe::auto_route(first.flavor);
    // Where auto takes the library, files under 1 MiB copied many at once bounce all the same.
    let small = format!(
        "; files under {} in flight: {bounce}",
        aiscp_engine::units::size(aiscp_engine::probe::LIBRARY_FROM)
    );
    let route = match (library, registration) {
        (false, _) => format!("{bounce} ({why})"),
        (true, Ok(())) => match first.flavor {
            Flavor::HipFile => {
                format!("library: hipFileRead/hipFileWrite on the registered file{small}")
            }
            Flavor::CuFile => {
                format!("library: cuFileRead/cuFileWrite, DMA through nvidia-fs{small}")
            }
        },
        (true, Err(Some(e))) if !refusal_bounces(&e) => format!(
            "none: a copy here fails (cannot register with {}: {e})",
            first.flavor.name()
        ),
        (true, Err(_)) => format!("{bounce} (the library refused the file)"),
    };
    let _ = writeln!(out, "  route (--route auto): {route}");
}
