//! Which files the loader will most likely map for a library name: the loader's own order
//! (LD_LIBRARY_PATH, then /etc/ld.so.cache), then the directories this crate tries after it,
//! keeping only ELF objects this process could load.

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::open_regular;
use crate::load::{self, Wanted};
use crate::Flavor;

/// The dynamic loader's cache of library names to files.
const LOADER_CACHE: &str = "/etc/ld.so.cache";
/// Only this much of the loader's cache is searched (real ones are well under 1 MiB).
const CACHE_LIMIT: u64 = 16 << 20;

/// Where the loader looks, in its order: LD_LIBRARY_PATH, its cache, then the directories
/// this crate tries after the loader (the same candidate list `load` walks).
pub(super) struct Search {
    ld_library_path: Option<std::ffi::OsString>,
    cache: Vec<u8>,
    dirs: Vec<PathBuf>,
}

impl Search {
    /// The search as the loader would run it in this process, for `flavor`'s directories.
    pub(super) fn for_this_process(flavor: Flavor) -> Search {
        Search {
            ld_library_path: std::env::var_os("LD_LIBRARY_PATH"),
            cache: read_loader_cache(),
            dirs: load::extra_dirs(flavor),
        }
    }

    /// The file the loader will most likely map for `wanted`, opened.
    pub(super) fn likely_file(
        &self,
        wanted: &Wanted,
        exact: Option<&Path>,
    ) -> Option<(PathBuf, File)> {
        load::candidates(wanted, exact, &self.dirs)
            .into_iter()
            .find_map(|candidate| {
                match candidate.components().count() {
                    // A bare name: the loader's own search.
                    1 => self.resolve_name(candidate.as_os_str()),
                    _ => open_native_elf(&candidate).map(|file| (candidate, file)),
                }
            })
    }

    /// Where the loader finds a bare `name`: LD_LIBRARY_PATH (an empty entry is the current
    /// directory, as for glibc), then its cache.
    fn resolve_name(&self, name: &OsStr) -> Option<(PathBuf, File)> {
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
            .find_map(|p| open_native_elf(&p).map(|file| (p, file)))
            .or_else(|| in_cache(&self.cache, name))
    }
}

/// The first absolute path in the loader's cache that ends in `/name` and is a library
/// this process could load (the cache also lists other architectures' copies).
fn in_cache(cache: &[u8], name: &OsStr) -> Option<(PathBuf, File)> {
    let needle = [b"/", name.as_bytes(), b"\0"].concat();
    let mut from = 0;
    while let Some(at) = find(&cache[from..], &needle).map(|i| from + i) {
        let start = cache[..at]
            .iter()
            .rposition(|&b| b == 0)
            .map_or(0, |i| i + 1);
        let path = Path::new(OsStr::from_bytes(&cache[start..at + needle.len() - 1]));
        if let Some(file) = path.is_absolute().then(|| open_native_elf(path)).flatten() {
            return Some((path.to_path_buf(), file));
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

fn read_loader_cache() -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(file) = open_regular(Path::new(LOADER_CACHE)) {
        let _ = file.take(CACHE_LIMIT).read_to_end(&mut bytes);
    }
    bytes
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
            test_support::skip::skip("no loader cache", LOADER_CACHE);
            return;
        }
        let (found, _) = in_cache(&cache, OsStr::new("libc.so.6")).expect("libc.so.6 in the cache");
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
        let found = |name: &str| in_cache(&cache, OsStr::new(name)).map(|(path, _)| path);
        assert_eq!(found("libcuda.so.1"), Some(native));
        assert_eq!(found("libcufile.so.0"), None);
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
}
