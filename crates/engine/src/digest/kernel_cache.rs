//! Compiled digest kernels kept between runs, so that a run pays NVRTC's or hiprtc's compile
//! (most of a second; BENCHMARKS.md, "Digests on the GPU") once per machine rather than once
//! per process: an in-process copy of a small tree would otherwise hash most of its files on
//! the CPU while the kernels compile.
//!
//! An image is found by a key over what decides whether it suits the GPU (the kernels'
//! source, the flavor, the compiler's file where the environment chose one, the options and
//! the GPU architecture; not the compiler's version, which would mean loading the compiler
//! first), in the user's cache directory (`$XDG_CACHE_HOME/aiscp`, else `~/.cache/aiscp`).
//! What runs on the GPU comes from there, so the directory and each file must be the user's
//! own and writable by no one else, and a file must hold the hash of its image: anything
//! else is not read, and the kernels are compiled as if there were no cache.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The first line of every file: the format, for a later aiscp that changes it.
const MAGIC: &[u8] = b"aiscp digest kernels 1\n";

/// The directory the images live in.
pub struct KernelCache {
    dir: PathBuf,
}

/// An image found in the cache.
pub struct Cached {
    pub image: Vec<u8>,
    /// The compiler that made it ("NVRTC 13.0").
    pub compiler: String,
    pub path: PathBuf,
}

impl KernelCache {
    /// The user's cache directory for aiscp, created (mode 0700) where missing; Err says why
    /// there is no cache to use.
    pub fn open() -> Result<KernelCache, String> {
        let base = dirs::cache_dir().ok_or("no home directory")?;
        let dir = base.join("aiscp");
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let meta = fs::symlink_metadata(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if !meta.is_dir() || !ours(&meta) {
            return Err(format!(
                "{} is not a directory of this user's that only they can write",
                dir.display()
            ));
        }
        Ok(KernelCache { dir })
    }

    /// The file name of the image that `parts` (the source, the flavor, the compiler's file
    /// where the environment chose one, the options) make.
    pub fn key(parts: &[&[u8]]) -> String {
        let mut hasher = blake3::Hasher::new();
        for part in parts {
            hasher.update(&(part.len() as u64).to_le_bytes());
            hasher.update(part);
        }
        format!("kernels-{}.bin", &hasher.finalize().to_hex()[..32])
    }

    /// Whether this user may write here (an image compiled now could be kept).
    pub fn writable(&self) -> bool {
        nix::unistd::access(&self.dir, nix::unistd::AccessFlags::W_OK).is_ok()
    }

    /// The image stored under `key`, when there is one this user wrote and it is whole.
    pub fn load(&self, key: &str) -> Option<Cached> {
        read(&self.dir.join(key))
    }

    /// Keeps `image` under `key`: written to a temporary of a name of its own (mode 0600),
    /// then renamed into place, so that a concurrent run reads the old file or the new,
    /// never half of one, and two runs storing at once never touch each other's temporary.
    pub fn store(&self, key: &str, image: &[u8], compiler: &str) -> io::Result<()> {
        let mut temp = tempfile::Builder::new()
            .prefix(&format!("{key}."))
            .suffix(".partial")
            .tempfile_in(&self.dir)?;
        write_image(temp.as_file_mut(), image, compiler)?;
        temp.persist(self.dir.join(key)).map_err(|e| e.error)?;
        Ok(())
    }
}

/// The image in the cache file at `path`, when this user wrote it and it is whole.
fn read(path: &Path) -> Option<Cached> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || !ours(&meta) {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).ok()?;
    let rest = bytes.strip_prefix(MAGIC)?;
    let (compiler, rest) = line(rest)?;
    let (hash, image) = line(rest)?;
    (blake3::hash(image).to_hex().as_bytes() == hash).then(|| Cached {
        image: image.to_vec(),
        compiler: String::from_utf8_lossy(compiler).into_owned(),
        path: path.to_owned(),
    })
}

/// Removes the cache file at `path` if it still holds `refused`, an image the GPU would not
/// load, so that the next run compiles afresh. A file holding anything else is left: it may
/// be the image a compile after the refusal just stored (several workers find the refusal).
pub fn forget(path: &Path, refused: &[u8]) {
    if read(path).is_some_and(|cached| cached.image == refused) {
        let _ = fs::remove_file(path);
    }
}

fn write_image(file: &mut File, image: &[u8], compiler: &str) -> io::Result<()> {
    file.write_all(MAGIC)?;
    file.write_all(compiler.replace('\n', " ").as_bytes())?;
    file.write_all(b"\n")?;
    file.write_all(blake3::hash(image).to_hex().as_bytes())?;
    file.write_all(b"\n")?;
    file.write_all(image)
}

/// Owned by this user, and writable by no one else.
fn ours(meta: &fs::Metadata) -> bool {
    meta.uid() == nix::unistd::geteuid().as_raw() && meta.mode() & 0o022 == 0
}

/// The bytes before the first newline, and those after it.
fn line(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    Some((&bytes[..end], &bytes[end + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, KernelCache) {
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache {
            dir: dir.path().to_owned(),
        };
        (dir, cache)
    }

    #[test]
    fn an_image_comes_back_as_stored() {
        let (_dir, cache) = cache();
        let key = KernelCache::key(&[b"source", b"NVRTC 13.0", b"sm_90"]);
        assert!(cache.load(&key).is_none());
        cache.store(&key, b"\x7fELF\ncubin", "NVRTC 13.0").unwrap();
        let found = cache.load(&key).unwrap();
        assert_eq!(found.image, b"\x7fELF\ncubin");
        assert_eq!(found.compiler, "NVRTC 13.0");
    }

    #[test]
    fn keys_differ_in_any_part_and_in_where_parts_split() {
        let a = KernelCache::key(&[b"source", b"sm_90"]);
        assert_ne!(a, KernelCache::key(&[b"source", b"sm_80"]));
        assert_ne!(a, KernelCache::key(&[b"sourc", b"esm_90"]));
        assert_eq!(a, KernelCache::key(&[b"source", b"sm_90"]));
    }

    #[test]
    fn a_damaged_or_foreign_file_is_not_read() {
        let (dir, cache) = cache();
        let key = KernelCache::key(&[b"x"]);
        cache.store(&key, b"image", "NVRTC").unwrap();
        let path = dir.path().join(&key);
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(cache.load(&key).is_none(), "a flipped bit");

        cache.store(&key, b"image", "NVRTC").unwrap();
        fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();
        assert!(cache.load(&key).is_none(), "writable by others");

        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), &path).unwrap();
        cache.store(&key, b"image", "NVRTC").unwrap();
        assert!(
            fs::symlink_metadata(&path).unwrap().is_file(),
            "replaced by rename"
        );
    }
}
