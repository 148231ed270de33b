//! Reading the libraries' files ahead of the loader.
//!
//! A GPU runtime is a large file (libcuda.so is ~96 MB) that the loader maps and the runtime's
//! initialisation then touches page by page. With a cold page cache each first touch is a
//! small read from disk; asking the kernel up front to read the whole file turns those into a
//! few large reads that run while the loader works. On the H200 machine, reading the files
//! beside a cold start saved ~0.05 s of its ~0.45 s (BENCHMARKS.md, "Start-up: the context's
//! work queues"). It is a hint: a wrong guess costs only a read, never the load.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::load::{self, Wanted};
use crate::{Flavor, LibraryPaths};

/// The dynamic loader's cache of library names to files.
const LOADER_CACHE: &str = "/etc/ld.so.cache";
/// Larger than any real loader cache; a bigger file is not read.
const CACHE_LIMIT: u64 = 16 << 20;

/// Starts the kernel reading the files the loader is most likely to map for `flavor`'s
/// runtime and I/O library, and returns them.
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
    let mut files: Vec<PathBuf> = wanted
        .into_iter()
        .filter_map(|(wanted, exact)| search.likely_file(wanted, exact))
        .collect();
    // One file can stand for both (a test's fake library).
    files.dedup();
    files.retain(|file| advise_will_need(file));
    files
}

fn read_loader_cache() -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Ok(file) = File::open(LOADER_CACHE) {
        let _ = file.take(CACHE_LIMIT).read_to_end(&mut bytes);
    }
    bytes
}

/// Asks the kernel to read all of `file` into the page cache, without waiting for it.
fn advise_will_need(file: &Path) -> bool {
    let Ok(f) = File::open(file) else {
        return false;
    };
    // SAFETY: plain advice on a descriptor this function owns; no memory is passed.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_WILLNEED) == 0 }
}

/// Where the loader looks, in its order: LD_LIBRARY_PATH, its cache, then the directories
/// this crate tries after the loader.
struct Search {
    ld_library_path: Option<std::ffi::OsString>,
    cache: Vec<u8>,
    dirs: Vec<PathBuf>,
}

impl Search {
    fn likely_file(&self, wanted: &Wanted, exact: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = exact {
            return Some(path.to_path_buf());
        }
        let env_dirs: Vec<PathBuf> = self
            .ld_library_path
            .as_deref()
            .map(|v| {
                std::env::split_paths(v)
                    .filter(|d| !d.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let in_dir = |dirs: &[PathBuf], name: &str| {
            dirs.iter().map(|d| d.join(name)).find(|p| is_native_elf(p))
        };
        wanted
            .names
            .iter()
            .find_map(|name| in_dir(&env_dirs, name).or_else(|| in_cache(&self.cache, name)))
            .or_else(|| {
                wanted
                    .names
                    .iter()
                    .find_map(|name| in_dir(&self.dirs, name))
            })
    }
}

/// The first absolute path in the loader's cache that ends in `/name` and is a library
/// this process could load (the cache also lists other architectures' copies).
fn in_cache(cache: &[u8], name: &str) -> Option<PathBuf> {
    let needle = [b"/", name.as_bytes(), b"\0"].concat();
    let mut from = 0;
    while let Some(at) = find(&cache[from..], &needle).map(|i| from + i) {
        let start = cache[..at]
            .iter()
            .rposition(|&b| b == 0)
            .map_or(0, |i| i + 1);
        let path = Path::new(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(
            &cache[start..at + needle.len() - 1],
        ));
        if path.is_absolute() && is_native_elf(path) {
            return Some(path.to_path_buf());
        }
        from = at + needle.len();
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Whether `file` is an ELF object of this process's class, byte order and machine.
fn is_native_elf(file: &Path) -> bool {
    let mut head = [0u8; 20];
    let read = File::open(file).and_then(|mut f| f.read_exact(&mut head));
    read.is_ok() && elf_header_is_native(&head)
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

    /// The file the loader mapped for `name` in this process, from /proc/self/maps.
    fn mapped(name: &str) -> Option<PathBuf> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.ends_with(&format!("/{name}")) || p.contains(&format!("/{name}.")))
            .map(PathBuf::from)
    }

    #[test]
    fn the_cache_names_the_libc_this_process_mapped() {
        let cache = read_loader_cache();
        if cache.is_empty() {
            eprintln!("skipped: no {LOADER_CACHE}");
            return;
        }
        let found = in_cache(&cache, "libc.so.6").expect("libc.so.6 in the loader cache");
        let mapped = mapped("libc.so.6").expect("libc mapped");
        assert_eq!(
            std::fs::canonicalize(found).unwrap(),
            std::fs::canonicalize(mapped).unwrap()
        );
    }

    #[test]
    fn cache_paths_of_other_machines_and_non_paths_are_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("foreign/libx.so.1");
        let native = dir.path().join("native/libx.so.1");
        let Some(machine) = native_machine() else {
            return;
        };
        let little = cfg!(target_endian = "little");
        for (file, machine) in [(&foreign, machine ^ 1), (&native, machine)] {
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
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
            std::fs::write(file, head).unwrap();
        }
        let mut cache = b"glibc-ld.so.cache1.1\0libx.so.1\0".to_vec();
        for p in [&foreign, &native] {
            cache.extend_from_slice(p.as_os_str().as_encoded_bytes());
            cache.push(0);
        }
        assert_eq!(in_cache(&cache, "libx.so.1"), Some(native));
        assert_eq!(in_cache(&cache, "liby.so.1"), None);
    }

    #[test]
    fn ld_library_path_comes_before_the_cache_and_exact_paths_before_all() {
        let dir = tempfile::tempdir().unwrap();
        let libc = mapped("libc.so.6").expect("libc mapped");
        std::fs::copy(&libc, dir.path().join("libcuda.so.1")).unwrap();
        let search = Search {
            ld_library_path: Some(format!("::{}", dir.path().display()).into()),
            cache: read_loader_cache(),
            dirs: vec![],
        };
        assert_eq!(
            search.likely_file(&load::CUDA, None),
            Some(dir.path().join("libcuda.so.1"))
        );
        let exact = Path::new("/nowhere/libcuda.so.1");
        assert_eq!(
            search.likely_file(&load::CUDA, Some(exact)),
            Some(exact.to_path_buf())
        );
        let nothing = Search {
            ld_library_path: None,
            cache: vec![],
            dirs: vec![dir.path().join("missing")],
        };
        assert_eq!(nothing.likely_file(&load::HIPFILE, None), None);
    }

    #[test]
    fn advice_on_a_missing_file_is_no_file() {
        assert!(!advise_will_need(Path::new("/nowhere/libcuda.so.1")));
        assert!(advise_will_need(&mapped("libc.so.6").unwrap()));
    }
}
