//! Whether the kind of host memory changes O_DIRECT throughput: reads a file and writes a
//! copy of it with O_DIRECT, in pieces, through buffers of each kind a bounce route could
//! use: the windows' own pinned memory (`Device::alloc_window`: huge pages pinned with
//! cuMemHostRegister since they measured faster here), plain 4 KiB pages, transparent huge
//! pages, and the last two pinned afterwards (cuMemHostRegister). CUDA only: HIP's
//! registration call is not looked up.
//!
//! ```text
//! pinned_io SRC DST_DIR [PIECE_MIB (8)] [THREADS (4)]
//! ```
//!
//! Each thread takes every THREADS-th piece. Prints one line per buffer kind and round, in
//! GB/s (1e9 bytes); each round starts with another kind. On the H200 machine
//! (bench/results/HISTORY.md, "Where the GPU engine's time goes") writes showed no
//! difference between the kinds, and huge-page buffers read 15-25% faster in 8 MiB pieces.

use std::ffi::{c_void, CStr};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use hipfile::{CopyWindow, Device, Flavor, Library};

type HostRegister = unsafe extern "C" fn(*mut c_void, usize, u32) -> i32;
type HostUnregister = unsafe extern "C" fn(*mut c_void) -> i32;

const HUGE_PAGE: usize = 2 << 20;
const KINDS: [&str; 5] = ["pinned", "4k", "thp", "4k-reg", "thp-reg"];

/// cuMemHostRegister_v2 / cuMemHostUnregister from the libcuda the library loaded.
struct Registration {
    register: HostRegister,
    unregister: HostUnregister,
}

impl Registration {
    fn find() -> Option<Registration> {
        // SAFETY: a NUL-terminated name; RTLD_NOLOAD only finds a library already loaded.
        let lib =
            unsafe { libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if lib.is_null() {
            return None;
        }
        let symbol = |name: &CStr| {
            // SAFETY: a handle from dlopen and a NUL-terminated name.
            let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
            (!p.is_null()).then_some(p)
        };
        let (register, unregister) = (
            symbol(c"cuMemHostRegister_v2")?,
            symbol(c"cuMemHostUnregister")?,
        );
        // SAFETY: the CUDA driver API's signatures for these two symbols.
        unsafe {
            Some(Registration {
                register: std::mem::transmute::<*mut c_void, HostRegister>(register),
                unregister: std::mem::transmute::<*mut c_void, HostUnregister>(unregister),
            })
        }
    }
}

/// One thread's buffer of `len` bytes, of one kind; gives its memory back on drop.
struct Buf<'r> {
    ptr: *mut u8,
    len: usize,
    /// The runtime's pinned memory, when that is the kind.
    window: Option<CopyWindow>,
    /// An anonymous mapping (start, length) for the other kinds.
    map: Option<(*mut c_void, usize)>,
    registered: Option<&'r Registration>,
}

// SAFETY: the buffer is owned memory, used by one thread at a time.
unsafe impl Send for Buf<'_> {}

impl<'r> Buf<'r> {
    fn new(kind: &str, len: usize, dev: &Device, reg: Option<&'r Registration>) -> Buf<'r> {
        if kind == "pinned" {
            let mut window = dev.alloc_window(len).expect("a pinned window");
            let ptr = window.host().expect("pinned window").as_mut_ptr();
            return Buf {
                ptr,
                len,
                window: Some(window),
                map: None,
                registered: None,
            };
        }
        let map_len = len + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(start, libc::MAP_FAILED, "mmap");
        // Aligned to a huge page, so that huge pages can back it.
        let ptr = (start as usize).next_multiple_of(HUGE_PAGE) as *mut u8;
        let advice = match kind.starts_with("thp") {
            true => libc::MADV_HUGEPAGE,
            false => libc::MADV_NOHUGEPAGE,
        };
        // SAFETY: [ptr, ptr + len) lies inside the mapping; the advice is a hint, and the
        // pages are touched so that no read faults them in.
        unsafe {
            libc::madvise(ptr.cast(), len, advice);
            std::ptr::write_bytes(ptr, 1, len);
        }
        let mut buf = Buf {
            ptr,
            len,
            window: None,
            map: Some((start, map_len)),
            registered: None,
        };
        if kind.ends_with("-reg") {
            let reg = reg.expect("cuMemHostRegister not found");
            dev.make_current().expect("context");
            // SAFETY: the range is mapped and ours; it is unregistered before it is unmapped.
            let status = unsafe { (reg.register)(ptr.cast(), len, 0) };
            assert_eq!(status, 0, "cuMemHostRegister: {status}");
            buf.registered = Some(reg);
        }
        buf
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes at `ptr` stay allocated while self lives, and &mut self makes
        // this the only view of them.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Buf<'_> {
    fn drop(&mut self) {
        if let Some(reg) = self.registered {
            // SAFETY: registered in new(), not yet unregistered.
            unsafe { (reg.unregister)(self.ptr.cast()) };
        }
        if let Some((start, len)) = self.map {
            // SAFETY: the mapping made in new(); no slice of it outlives self.
            unsafe { libc::munmap(start, len) };
        }
        drop(self.window.take());
    }
}

/// Reads `src` (or writes `dst`, as long as `src` rounded up to whole blocks) with O_DIRECT,
/// each buffer's thread taking every n-th piece. Returns GB/s of the bytes moved.
fn run(src: &Path, dst: &Path, bufs: &mut [Buf<'_>], write: bool) -> f64 {
    let len = std::fs::metadata(src).expect("SRC").len();
    let file: File = OpenOptions::new()
        .read(!write)
        .write(write)
        .create(write)
        .truncate(write)
        .custom_flags(libc::O_DIRECT)
        .open(if write { dst } else { src })
        .expect("open with O_DIRECT");
    let stride = bufs.iter().map(|b| b.len as u64).sum::<u64>();
    let start = Instant::now();
    let moved: u64 = std::thread::scope(|s| {
        let mut first = 0;
        let threads: Vec<_> = bufs
            .iter_mut()
            .map(|b| {
                let (file, piece) = (&file, b.len as u64);
                let mut off = first;
                first += piece;
                s.spawn(move || {
                    let buf = b.bytes();
                    let mut moved = 0;
                    while off < len {
                        // O_DIRECT wants whole blocks: the last piece is rounded up.
                        let n = ((len - off).min(piece) as usize).next_multiple_of(4096);
                        moved += match write {
                            true => file
                                .write_all_at(&buf[..n], off)
                                .map(|()| n)
                                .expect("write"),
                            false => file.read_at(&mut buf[..n], off).expect("read"),
                        } as u64;
                        off += stride;
                    }
                    moved
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("thread")).sum()
    });
    moved as f64 / start.elapsed().as_secs_f64() / 1e9
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(src), Some(dst_dir)) = (args.first(), args.get(1)) else {
        eprintln!("usage: pinned_io SRC DST_DIR [PIECE_MIB] [THREADS]");
        return ExitCode::from(2);
    };
    let number = |i: usize, default: usize| args.get(i).map_or(Some(default), |a| a.parse().ok());
    let (Some(piece_mib @ 1..), Some(threads @ 1..)) = (number(2, 8), number(3, 4)) else {
        eprintln!("pinned_io: PIECE_MIB and THREADS are whole numbers from 1");
        return ExitCode::from(2);
    };
    let (src, dst) = (PathBuf::from(src), Path::new(dst_dir).join("pinned-io.out"));
    let library = match Library::load(Flavor::CuFile) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("pinned_io: {e}");
            return ExitCode::FAILURE;
        }
    };
    let dev = library.staging_device(0).expect("GPU 0");
    let reg = Registration::find();
    for round in 0..KINDS.len() {
        // Each round starts with another kind, so no kind is always the first (the one
        // that pays for whatever the machine warms up).
        for i in 0..KINDS.len() {
            let kind = KINDS[(i + round) % KINDS.len()];
            let mut bufs: Vec<Buf<'_>> = (0..threads)
                .map(|_| Buf::new(kind, piece_mib << 20, &dev, reg.as_ref()))
                .collect();
            let r = run(&src, &dst, &mut bufs, false);
            let w = run(&src, &dst, &mut bufs, true);
            println!(
                "round {round} {kind:<8} piece {piece_mib} MiB x{threads}: read {r:.2} GB/s write {w:.2} GB/s"
            );
            let _ = std::fs::remove_file(&dst);
        }
    }
    ExitCode::SUCCESS
}
