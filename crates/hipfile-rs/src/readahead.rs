//! Reading the libraries' files ahead of the loader.
//!
//! A GPU runtime is a large file (libcuda.so is ~96 MB) that the loader maps and the runtime's
//! initialisation then touches page by page. With a cold page cache each first touch is a
//! small read from disk. Reading the files on a thread of their own while the loader works
//! turns those into large reads already under way: on the H200 machine a cold start had the
//! GPU ready 26-57 ms sooner in two runs (BENCHMARKS.md, "Reading the runtime's file ahead").
//! It is a hint: a wrong guess costs only a read, never the load.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::load::{self, Wanted};
use crate::{Flavor, LibraryPaths};

/// The dynamic loader's cache of library names to files.
const LOADER_CACHE: &str = "/etc/ld.so.cache";
/// Only this much of the loader's cache is searched (real ones are well under 1 MiB).
const CACHE_LIMIT: u64 = 16 << 20;
/// Reads go in pieces of this size: large enough that the disk sees large requests, small
/// enough to be a trifle of memory.
const PIECE: usize = 2 << 20;
/// No more of a file is read ahead than this (a runtime is ~100 MB; a wrong override may not be).
const FILE_LIMIT: u64 = 512 << 20;

/// Starts reading the files the loader is most likely to map for `flavor`'s runtime and I/O
/// library into the page cache, on a thread of its own, and returns them.
pub(crate) fn start(flavor: Flavor, paths: &LibraryPaths) -> Vec<PathBuf> {
    let (runtime, io) = match flavor {
        Flavor::HipFile => (&load::HIP, &load::HIPFILE),
        Flavor::CuFile => (&load::CUDA, &load::CUFILE),
    };
    let search = Search {
        ld_library_path: std::env::var_os("LD_LIBRARY_PATH"),
        cache: read_loader_cache(),
        dirs: load::extra_dirs(flavor),
    };
    let wanted = [
        (runtime, paths.runtime.as_deref()),
        (io, paths.io.as_deref()),
    ];
    let mut files: Vec<(PathBuf, File)> = wanted
        .into_iter()
        .filter_map(|(wanted, exact)| search.likely_file(wanted, exact))
        .collect();
    // One file can stand for both (a test's fake library).
    files.dedup_by(|a, b| a.0 == b.0);
    let names = files.iter().map(|(path, _)| path.clone()).collect();
    let reader = std::thread::Builder::new()
        .name("library read-ahead".into())
        .spawn(move || files.iter().for_each(|(_, file)| read_through(file)));
    match reader {
        Ok(_) => names,
        Err(_) => Vec::new(),
    }
}

fn read_loader_cache() -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(file) = open_regular(Path::new(LOADER_CACHE)) {
        let _ = file.take(CACHE_LIMIT).read_to_end(&mut bytes);
    }
    bytes
}

/// `path` opened for reading if it is a regular file. Non-blocking, so that a FIFO left
/// where a library should be cannot stall the run here.
fn open_regular(path: &Path) -> Option<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// Reads `file` (up to [`FILE_LIMIT`]) through the page cache and drops the bytes. Plain
/// sequential reads, as `cat` beside a start was measured to help: `posix_fadvise(WILLNEED)`
/// queues the whole file's reads at once, ahead of the pages the loader is waiting for, and
/// copied trees slower on the H200 (BENCHMARKS.md, "Reading the runtime's file ahead").
fn read_through(mut file: &File) {
    let mut piece = vec![0u8; PIECE];
    let mut left = FILE_LIMIT;
    while left > 0 {
        match file.read(&mut piece) {
            Ok(0) => return,
            Ok(n) => left = left.saturating_sub(n as u64),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Where the loader looks, in its order: LD_LIBRARY_PATH, its cache, then the directories
/// this crate tries after the loader (the same candidate list `load` walks).
struct Search {
    ld_library_path: Option<std::ffi::OsString>,
    cache: Vec<u8>,
    dirs: Vec<PathBuf>,
}

impl Search {
    /// The file the loader will most likely map for `wanted`, opened.
    fn likely_file(&self, wanted: &Wanted, exact: Option<&Path>) -> Option<(PathBuf, File)> {
        load::candidates(wanted, exact, &self.dirs)
            .into_iter()
            .find_map(|candidate| {
                let path = match candidate.components().count() {
                    // A bare name: the loader's own search.
                    1 => self.resolve_name(candidate.as_os_str())?,
                    _ => candidate,
                };
                let file = open_native_elf(&path)?;
                Some((path, file))
            })
    }

    /// Where the loader finds a bare `name`: LD_LIBRARY_PATH (an empty entry is the current
    /// directory, as for glibc), then its cache.
    fn resolve_name(&self, name: &OsStr) -> Option<PathBuf> {
        let env_dirs = self
            .ld_library_path
            .as_deref()
            .map(|v| std::env::split_paths(v).collect::<Vec<_>>())
            .unwrap_or_default();
        env_dirs
            .iter()
            .map(|d| match d.as_os_str().is_empty() {
                true => Path::new(".").join(name),
                false => d.join(name),
            })
            .find(|p| open_native_elf(p).is_some())
            .or_else(|| in_cache(&self.cache, name))
    }
}

/// The first absolute path in the loader's cache that ends in `/name` and is a library
/// this process could load (the cache also lists other architectures' copies).
fn in_cache(cache: &[u8], name: &OsStr) -> Option<PathBuf> {
    let needle = [b"/", name.as_bytes(), b"\0"].concat();
    let mut from = 0;
    while let Some(at) = find(&cache[from..], &needle).map(|i| from + i) {
        let start = cache[..at]
            .iter()
            .rposition(|&b| b == 0)
            .map_or(0, |i| i + 1);
        let path = Path::new(OsStr::from_bytes(&cache[start..at + needle.len() - 1]));
        if path.is_absolute() && open_native_elf(path).is_some() {
            return Some(path.to_path_buf());
        }
        from = at + needle.len();
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `file` opened, if it is a regular file holding an ELF object of this process's class,
/// byte order and machine.
fn open_native_elf(file: &Path) -> Option<File> {
    let mut head = [0u8; 20];
    let mut f = open_regular(file)?;
    f.read_exact(&mut head).ok()?;
    elf_header_is_native(&head).then_some(f)
}

fn elf_header_is_native(head: &[u8; 20]) -> bool {
    const CLASS: u8 = if cfg!(target_pointer_width = "64") {
        2
    } else {
        1
    };
    const DATA: u8 = if cfg!(target_endian = "little") { 1 } else { 2 };
    let machine = if cfg!(target_endian = "little") {
        u16::from_le_bytes([head[18], head[19]])
    } else {
        u16::from_be_bytes([head[18], head[19]])
    };
    head.starts_with(b"\x7fELF")
        && head[4] == CLASS
        && head[5] == DATA
        && native_machine().is_none_or(|m| m == machine)
}

/// This build's ELF e_machine, where known (others accept any machine).
fn native_machine() -> Option<u16> {
    match () {
        _ if cfg!(target_arch = "x86_64") => Some(62),
        _ if cfg!(target_arch = "aarch64") => Some(183),
        _ if cfg!(target_arch = "powerpc64") => Some(21),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// The file the loader mapped for `name` in this process, from /proc/self/maps.
    fn mapped(name: &str) -> Option<PathBuf> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.ends_with(&format!("/{name}")) || p.contains(&format!("/{name}.")))
            .map(PathBuf::from)
    }

    /// Writes the first bytes of an ELF object for `machine`, of this process's class and
    /// byte order.
    fn elf_stub(path: &Path, machine: u16) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let little = cfg!(target_endian = "little");
        let mut head = [0u8; 64];
        head[..4].copy_from_slice(b"\x7fELF");
        head[4] = if cfg!(target_pointer_width = "64") {
            2
        } else {
            1
        };
        head[5] = if little { 1 } else { 2 };
        let bytes = if little {
            machine.to_le_bytes()
        } else {
            machine.to_be_bytes()
        };
        head[18..20].copy_from_slice(&bytes);
        std::fs::write(path, head).unwrap();
    }

    /// A loader cache naming `paths` (what matters to the scan: NUL-terminated strings).
    fn cache_of(paths: &[&Path]) -> Vec<u8> {
        let mut cache = b"glibc-ld.so.cache1.1\0libcuda.so.1\0".to_vec();
        for p in paths {
            cache.extend_from_slice(p.as_os_str().as_bytes());
            cache.push(0);
        }
        cache
    }

    #[test]
    fn the_cache_names_the_libc_this_process_mapped() {
        let cache = read_loader_cache();
        if cache.is_empty() {
            eprintln!("skipped: no {LOADER_CACHE}");
            return;
        }
        let found = in_cache(&cache, OsStr::new("libc.so.6")).expect("libc.so.6 in the cache");
        let mapped = mapped("libc.so.6").expect("libc mapped");
        assert_eq!(
            std::fs::canonicalize(found).unwrap(),
            std::fs::canonicalize(mapped).unwrap()
        );
    }

    #[test]
    fn cache_paths_of_other_machines_and_non_paths_are_passed_over() {
        let Some(machine) = native_machine() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("foreign/libcuda.so.1");
        let native = dir.path().join("native/libcuda.so.1");
        elf_stub(&foreign, machine ^ 1);
        elf_stub(&native, machine);
        let cache = cache_of(&[&foreign, &native]);
        assert_eq!(in_cache(&cache, OsStr::new("libcuda.so.1")), Some(native));
        assert_eq!(in_cache(&cache, OsStr::new("libcufile.so.0")), None);
    }

    #[test]
    fn ld_library_path_comes_before_the_cache_and_only_elf_files_count() {
        let Some(machine) = native_machine() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let not_elf = dir.path().join("a/libcuda.so.1");
        std::fs::create_dir_all(not_elf.parent().unwrap()).unwrap();
        std::fs::write(&not_elf, b"not a library").unwrap();
        let from_env = dir.path().join("b/libcuda.so.1");
        let from_cache = dir.path().join("c/libcuda.so.1");
        let from_dirs = dir.path().join("d/libcuda.so.1");
        for p in [&from_env, &from_cache, &from_dirs] {
            elf_stub(p, machine);
        }
        let env = std::env::join_paths([not_elf.parent().unwrap(), from_env.parent().unwrap()]);
        let mut search = Search {
            ld_library_path: Some(env.unwrap()),
            cache: cache_of(&[&from_cache]),
            dirs: vec![from_dirs.parent().unwrap().to_path_buf()],
        };
        let found = |s: &Search| s.likely_file(&load::CUDA, None).map(|(p, _)| p);
        assert_eq!(found(&search), Some(from_env));
        search.ld_library_path = None;
        assert_eq!(found(&search), Some(from_cache));
        search.cache.clear();
        assert_eq!(found(&search), Some(from_dirs.clone()));
        // An exact path is the only candidate, found or not.
        let exact = dir.path().join("e/libcuda.so.1");
        assert_eq!(
            search
                .likely_file(&load::CUDA, Some(&exact))
                .map(|(p, _)| p),
            None
        );
        elf_stub(&exact, machine);
        assert_eq!(
            search
                .likely_file(&load::CUDA, Some(&exact))
                .map(|(p, _)| p),
            Some(exact)
        );
    }

    #[test]
    fn fifos_directories_and_missing_files_are_not_opened_as_libraries() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("libcuda.so.1");
        make_fifo(&fifo);
        // Would block forever without O_NONBLOCK: no writer ever comes.
        assert!(open_regular(&fifo).is_none());
        assert!(open_regular(dir.path()).is_none());
        assert!(open_regular(&dir.path().join("missing")).is_none());
        let search = Search {
            ld_library_path: None,
            cache: vec![],
            dirs: vec![],
        };
        assert!(search.likely_file(&load::CUDA, Some(&fifo)).is_none());
    }

    fn make_fifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn the_whole_file_is_read_into_the_page_cache() {
        // A file larger than any read-ahead window, evicted, then read through: it should end
        // up (nearly) all in the page cache. Skipped where eviction or mincore do not work.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let len = 48usize << 20;
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap();
        // SAFETY: advice on an open descriptor.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let before = resident(&file, len);
        if before > len / 4 {
            eprintln!("skipped: the file stayed cached ({before} bytes)");
            return;
        }
        read_through(&file);
        let after = resident(&file, len);
        assert!(after >= len * 9 / 10, "{after} of {len} bytes read ahead");
    }

    /// Bytes of `file`'s first `len` in the page cache (mincore on a mapping).
    fn resident(file: &File, len: usize) -> usize {
        let page = 4096;
        // SAFETY: a read-only shared mapping of an open file, unmapped before returning; the
        // vector has one byte per page as mincore wants.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            let mut vec = vec![0u8; len.div_ceil(page)];
            let ok = libc::mincore(map, len, vec.as_mut_ptr()) == 0;
            libc::munmap(map, len);
            assert!(ok);
            vec.iter().filter(|&&b| b & 1 == 1).count() * page
        }
    }
}
