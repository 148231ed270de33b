//! Copies a file through GPU memory with whichever library loads: the proof run for real
//! hardware (and, against the fake library, for CI).
//!
//! ```text
//! roundtrip [--flavor hipfile|cufile] [--chunk BYTES] [--io-library PATH]
//!           [--runtime-library PATH] SRC DST
//! ```
//!
//! `--io-library` and `--runtime-library` name the exact files to load instead of searching.
//!
//! Both files are opened with O_DIRECT where the filesystem allows it, registered, and moved in
//! chunks through one registered device buffer: every read and write is 4096-aligned in file
//! offset, size and buffer offset, the last chunk is written rounded up and the destination is
//! truncated to the source size at the end. A chunk larger than 0x7ffff000 bytes makes each
//! chunk take several calls (the per-call cap), which the loop handles. When the library
//! refuses to register a file or the buffer (tmpfs, for instance), the copy bounces through
//! pinned host memory and still passes through the device buffer.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use hipfile::{Device, DeviceBuffer, FileHandle, Flavor, Library, LibraryPaths, RegisteredBuffer};

/// Alignment of every O_DIRECT transfer (the kernel driver wants 4 KiB even where statx says
/// 512).
const ALIGN: u64 = 4096;

struct Args {
    flavor: Option<Flavor>,
    chunk: u64,
    paths: LibraryPaths,
    src: PathBuf,
    dst: PathBuf,
}

const USAGE: &str = "usage: roundtrip [--flavor hipfile|cufile] [--chunk BYTES] \
                     [--io-library PATH] [--runtime-library PATH] SRC DST";

fn parse_args() -> Result<Args, String> {
    let mut flavor = None;
    let mut chunk = 64 << 20;
    let mut libraries = LibraryPaths::default();
    let mut paths = Vec::new();
    let mut it = std::env::args_os().skip(1);
    while let Some(arg) = it.next() {
        match arg.to_str() {
            Some("--flavor") => {
                let v = it.next().unwrap_or_default();
                flavor = Some(v.to_string_lossy().parse::<Flavor>()?);
            }
            Some("--chunk") => {
                let v = it.next().and_then(|v| v.to_str()?.parse::<u64>().ok());
                chunk = v
                    .filter(|&c| c > 0)
                    .ok_or("--chunk: expected a positive byte count")?;
            }
            Some("--io-library") => libraries.io = it.next().map(PathBuf::from),
            Some("--runtime-library") => libraries.runtime = it.next().map(PathBuf::from),
            Some("-h" | "--help") => return Err(USAGE.into()),
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    let [src, dst]: [PathBuf; 2] = paths.try_into().map_err(|_| USAGE.to_owned())?;
    Ok(Args {
        flavor,
        chunk: chunk.div_ceil(ALIGN) * ALIGN,
        paths: libraries,
        src,
        dst,
    })
}

fn load(flavor: Option<Flavor>, paths: &LibraryPaths) -> Result<Library, String> {
    let order = match flavor {
        Some(f) => vec![f],
        None => vec![Flavor::HipFile, Flavor::CuFile],
    };
    let mut errors = Vec::new();
    for f in order {
        match Library::load_from(f, paths) {
            Ok(lib) => return Ok(lib),
            Err(e) => errors.push(format!("{f}: {e}")),
        }
    }
    Err(errors.join("\n"))
}

/// Opens with O_DIRECT, or without it where the filesystem refuses (EINVAL).
fn open(path: &Path, write: bool) -> Result<(File, bool), String> {
    let mut opts = OpenOptions::new();
    opts.read(true);
    if write {
        // Read-write: the library may reopen the fd through /proc with the same flags.
        opts.write(true).create(true).truncate(true);
    }
    match opts.clone().custom_flags(libc::O_DIRECT).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => opts
            .open(path)
            .map(|f| (f, false))
            .map_err(|e| format!("cannot open '{}': {e}", path.display())),
        Err(e) => Err(format!("cannot open '{}': {e}", path.display())),
    }
}

fn round_up(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

/// The GPU-direct path: registered files, one registered buffer.
fn copy_direct(
    src: &FileHandle<'_>,
    dst: &FileHandle<'_>,
    buf: &mut RegisteredBuffer,
    size: u64,
    names: (&Path, &Path),
) -> Result<u64, String> {
    let chunk = buf.len() as u64;
    let mut off = 0u64;
    while off < size {
        let want = round_up(chunk.min(size - off));
        // Fill the chunk: short counts come from the per-call cap or from EOF.
        let mut got = 0u64;
        while got < want && off + got < size {
            let n = src
                .read(buf, (want - got) as usize, off + got, got as usize)
                .map_err(|e| format!("error reading '{}': {e}", names.0.display()))?
                as u64;
            got += n;
            if n == 0 || got % ALIGN != 0 {
                break; // EOF (an unaligned count can only be the file's end)
            }
        }
        if got == 0 {
            break; // the source shrank under us
        }
        let wlen = round_up(got);
        let mut put = 0u64;
        while put < wlen {
            let n = dst
                .write(buf, (wlen - put) as usize, off + put, put as usize)
                .map_err(|e| format!("error writing '{}': {e}", names.1.display()))?
                as u64;
            if n == 0 {
                return Err(format!(
                    "error writing '{}': wrote 0 bytes",
                    names.1.display()
                ));
            }
            put += n;
        }
        off += got;
    }
    Ok(off.min(size))
}

/// The bounce path: pread into pinned memory, through the device buffer, pwrite.
fn copy_bounce(
    device: &Device,
    src: &File,
    dst: &File,
    buf: &mut DeviceBuffer,
    size: u64,
    names: (&Path, &Path),
) -> Result<u64, String> {
    let chunk = buf.len();
    let mut pinned = device
        .alloc_pinned(chunk)
        .map_err(|e| format!("cannot allocate {chunk} pinned bytes: {e}"))?;
    let mut off = 0u64;
    while off < size {
        let want = round_up((chunk as u64).min(size - off)) as usize;
        let mut got = 0usize;
        while got < want {
            let n = src
                .read_at(&mut pinned.as_mut_slice()[got..want], off + got as u64)
                .map_err(|e| format!("error reading '{}': {e}", names.0.display()))?;
            got += n;
            if n == 0 || got as u64 % ALIGN != 0 {
                break;
            }
        }
        if got == 0 {
            break;
        }
        let wlen = round_up(got as u64) as usize;
        buf.copy_from_host(0, &pinned.as_slice()[..wlen])
            .map_err(|e| format!("host to device copy: {e}"))?;
        pinned.as_mut_slice()[..wlen].fill(0);
        buf.copy_to_host(0, &mut pinned.as_mut_slice()[..wlen])
            .map_err(|e| format!("device to host copy: {e}"))?;
        dst.write_all_at(&pinned.as_slice()[..wlen], off)
            .map_err(|e| format!("error writing '{}': {e}", names.1.display()))?;
        off += got as u64;
    }
    Ok(off.min(size))
}

fn run(args: Args) -> Result<(), String> {
    let lib = load(args.flavor, &args.paths)?;
    println!(
        "io library: {} ({})",
        lib.io_library_path().display(),
        lib.version().unwrap_or_else(|| "version unknown".into())
    );
    println!(
        "runtime: {} ({})",
        lib.runtime_library_path().display(),
        lib.runtime()
            .version()
            .unwrap_or_else(|| "version unknown".into())
    );
    let driver = lib
        .open_driver()
        .map_err(|e| format!("cannot open the GPU I/O driver: {e}"))?;
    let device = driver.device(0).map_err(|e| format!("GPU 0: {e}"))?;

    let (src, src_direct) = open(&args.src, false)?;
    let size = src
        .metadata()
        .map_err(|e| format!("cannot stat '{}': {e}", args.src.display()))?
        .len();
    let (dst, dst_direct) = open(&args.dst, true)?;
    println!("O_DIRECT: src {src_direct}, dst {dst_direct}");
    let names = (args.src.as_path(), args.dst.as_path());

    let chunk = args.chunk.min(round_up(size.max(1)));
    let buf = device
        .alloc(chunk as usize)
        .map_err(|e| format!("cannot allocate {chunk} device bytes: {e}"))?;

    let started = Instant::now();
    let registered = (
        device.register_file(src.as_fd()),
        device.register_file(dst.as_fd()),
    );
    let moved = match (registered, buf.register()) {
        ((Ok(s), Ok(d)), Ok(mut rbuf)) => {
            println!("path: registered (hipFileRead/Write), chunk {chunk}");
            copy_direct(&s, &d, &mut rbuf, size, names)?
        }
        (handles, buf_result) => {
            let mut buf = match buf_result {
                Ok(rbuf) => rbuf.deregister().map_err(|e| format!("deregister: {e}"))?,
                Err((buf, e)) => {
                    println!("buffer registration refused: {e}");
                    buf
                }
            };
            for (which, h) in [("src", &handles.0), ("dst", &handles.1)] {
                if let Err(e) = h {
                    println!("{which} registration refused: {e}");
                }
            }
            drop(handles);
            println!("path: pinned bounce, chunk {chunk}");
            copy_bounce(&device, &src, &dst, &mut buf, size, names)?
        }
    };
    dst.set_len(size)
        .map_err(|e| format!("cannot truncate '{}': {e}", args.dst.display()))?;
    dst.sync_all()
        .map_err(|e| format!("error syncing '{}': {e}", args.dst.display()))?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "moved {moved} bytes in {secs:.3} s ({:.2} GB/s)",
        moved as f64 / secs.max(1e-9) / 1e9
    );
    if moved != size {
        return Err(format!(
            "'{}' changed size during the copy: {moved} of {size} bytes",
            args.src.display()
        ));
    }
    Ok(())
}

fn main() -> ExitCode {
    let result = parse_args().and_then(run);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roundtrip: {e}");
            ExitCode::FAILURE
        }
    }
}
