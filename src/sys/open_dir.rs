//! Directories held open by descriptor, and every call cp makes on a name inside one.
//!
//! cp checks a name, then uses it; in between, someone who can write to SOURCE or DEST could
//! swap a directory on the way for a symlink and redirect reads or writes outside the trees.
//! So trees are walked and built through directory descriptors: each subdirectory is opened
//! from its parent's descriptor with O_NOFOLLOW (unless cp dereferences it), and every
//! create, link, rename, unlink and attribute change is made relative to the descriptor of
//! the directory it belongs in. A component, once checked, stays the directory it was.
//! Only the directories named on the command line are opened by path, as the user spelled them.

use crate::sys::stat::Stat;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::rc::Rc;

/// An open directory. Held O_PATH: enough to look names up and create entries (and it needs
/// no read permission, as path lookup needs none); [`OpenDir::readable`] opens it for
/// listing, fsync or attribute changes.
#[derive(Debug)]
pub struct OpenDir {
    /// None: the current directory (AT_FDCWD), for operands without a directory part.
    fd: Option<OwnedFd>,
}

/// A file named `name` inside the open directory `dir`; `path` is how messages name it.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    /// Shared, so the first copy of a hard-linked file can be linked to later.
    pub dir: &'a Rc<OpenDir>,
    pub name: &'a OsStr,
    pub path: &'a Path,
}

fn to_io(e: nix::Error) -> io::Error {
    io::Error::from(e)
}

fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl OpenDir {
    /// The current directory.
    pub fn cwd() -> OpenDir {
        OpenDir { fd: None }
    }

    /// Opens a directory named on the command line, following symlinks as the user meant.
    pub fn open(path: &Path) -> io::Result<OpenDir> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(to_io)?;
        Ok(OpenDir {
            // SAFETY: `fd` was just returned by open and is owned by nothing else.
            fd: Some(unsafe { OwnedFd::from_raw_fd(fd) }),
        })
    }

    /// A directory already opened O_PATH by the caller (and checked through `fd`).
    pub fn held(fd: OwnedFd) -> OpenDir {
        OpenDir { fd: Some(fd) }
    }

    /// Opens the subdirectory `name`; a symlink there is followed only when `follow` says so
    /// (otherwise the open fails with ENOTDIR).
    pub fn open_child(&self, name: &OsStr, follow: bool) -> io::Result<OpenDir> {
        let mut flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        if !follow {
            flags |= OFlag::O_NOFOLLOW;
        }
        let fd = nix::fcntl::openat(self.raw(), name, flags, Mode::empty()).map_err(to_io)?;
        Ok(OpenDir {
            // SAFETY: as in `open`.
            fd: Some(unsafe { OwnedFd::from_raw_fd(fd) }),
        })
    }

    /// A second handle on the same directory.
    pub fn try_clone(&self) -> io::Result<OpenDir> {
        let fd = match &self.fd {
            Some(fd) => Some(fd.try_clone()?),
            None => None,
        };
        Ok(OpenDir { fd })
    }

    fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// The descriptor for an `*at` call: this directory's, or AT_FDCWD.
    pub fn raw_at(&self) -> RawFd {
        self.raw().unwrap_or(libc::AT_FDCWD)
    }

    /// The directory itself, opened for reading: for listing, fsync, fchmod, futimens and
    /// xattrs. Opening "." of the descriptor reaches the same directory, whatever its path
    /// names now.
    pub fn readable(&self) -> io::Result<File> {
        self.open_file(
            OsStr::new("."),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOCTTY,
            0,
        )
    }

    /// fstat of the directory itself.
    pub fn stat_self(&self) -> io::Result<Stat> {
        match &self.fd {
            Some(fd) => nix::sys::stat::fstat(fd.as_raw_fd())
                .map(Stat::from)
                .map_err(to_io),
            None => self.stat(OsStr::new("."), true),
        }
    }

    /// fstatat of `name`; `follow` says whether a final symlink is followed.
    pub fn stat(&self, name: &OsStr, follow: bool) -> io::Result<Stat> {
        let flags = if follow {
            AtFlags::empty()
        } else {
            AtFlags::AT_SYMLINK_NOFOLLOW
        };
        nix::sys::stat::fstatat(self.raw(), name, flags)
            .map(Stat::from)
            .map_err(to_io)
    }

    /// openat; O_CLOEXEC is always added.
    pub fn open_file(&self, name: &OsStr, flags: OFlag, mode: u32) -> io::Result<File> {
        let fd = nix::fcntl::openat(
            self.raw(),
            name,
            flags | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .map_err(to_io)?;
        // SAFETY: `fd` was just returned by openat and is owned by nothing else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The names in the directory (without "." and ".."), each with its inode number.
    pub fn entries(&self) -> io::Result<Vec<(u64, OsString)>> {
        let mut dir = nix::dir::Dir::from(self.readable()?).map_err(to_io)?;
        let mut out = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(to_io)?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                out.push((entry.ino(), OsStr::from_bytes(name).to_os_string()));
            }
        }
        Ok(out)
    }

    pub fn mkdir(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        nix::sys::stat::mkdirat(self.raw(), name, Mode::from_bits_truncate(mode)).map_err(to_io)
    }

    /// Creates the symlink `name` holding `target`.
    pub fn symlink(&self, target: &OsStr, name: &OsStr) -> io::Result<()> {
        nix::unistd::symlinkat(target, self.raw(), name).map_err(to_io)
    }

    /// Creates `name` as a hard link to `from`; `follow` links what a symlink `from` names.
    pub fn hard_link(&self, name: &OsStr, from: At<'_>, follow: bool) -> io::Result<()> {
        let flags = if follow {
            AtFlags::AT_SYMLINK_FOLLOW
        } else {
            AtFlags::empty()
        };
        nix::unistd::linkat(from.dir.raw(), from.name, self.raw(), name, flags).map_err(to_io)
    }

    pub fn mkfifo(&self, name: &OsStr, perm: u32) -> io::Result<()> {
        nix::unistd::mkfifoat(self.raw(), name, Mode::from_bits_truncate(perm)).map_err(to_io)
    }

    pub fn mknod(&self, name: &OsStr, kind: SFlag, perm: u32, dev: u64) -> io::Result<()> {
        nix::sys::stat::mknodat(self.raw(), name, kind, Mode::from_bits_truncate(perm), dev)
            .map_err(to_io)
    }

    /// Renames `from` to `to`, both in this directory.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        nix::fcntl::renameat(self.raw(), from, self.raw(), to).map_err(to_io)
    }

    /// Removes the non-directory `name`.
    pub fn unlink(&self, name: &OsStr) -> io::Result<()> {
        nix::unistd::unlinkat(self.raw(), name, nix::unistd::UnlinkatFlags::NoRemoveDir)
            .map_err(to_io)
    }

    pub fn read_link(&self, name: &OsStr) -> io::Result<OsString> {
        nix::fcntl::readlinkat(self.raw(), name).map_err(to_io)
    }

    /// Whether the effective user may write `name` (faccessat with AT_EACCESS).
    pub fn writable(&self, name: &OsStr) -> bool {
        nix::unistd::faccessat(
            self.raw(),
            name,
            nix::unistd::AccessFlags::W_OK,
            AtFlags::AT_EACCESS,
        )
        .is_ok()
    }

    /// lchown of `name` (never following a symlink).
    pub fn chown_nofollow(&self, name: &OsStr, uid: u32, gid: u32) -> io::Result<()> {
        nix::unistd::fchownat(
            self.raw(),
            name,
            Some(uid.into()),
            Some(gid.into()),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .map_err(to_io)
    }

    /// chmod of `name`, refusing (EOPNOTSUPP) if it is a symlink: glibc pins the file with an
    /// O_PATH|O_NOFOLLOW descriptor first, so a swapped-in symlink is never followed.
    pub fn chmod_nofollow(&self, name: &OsStr, mode: u32) -> io::Result<()> {
        let c = cstr(name)?;
        // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
        check(unsafe {
            libc::fchmodat(
                self.raw().unwrap_or(libc::AT_FDCWD),
                c.as_ptr(),
                mode as libc::mode_t,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    }

    /// Sets access and modification times of `name` itself (a final symlink not followed).
    pub fn set_times_nofollow(&self, name: &OsStr, times: &[libc::timespec; 2]) -> io::Result<()> {
        let c = cstr(name)?;
        // SAFETY: valid string and a two-element timespec array.
        check(unsafe {
            libc::utimensat(
                self.raw().unwrap_or(libc::AT_FDCWD),
                c.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })
    }
}

/// The directory holding `path` and the name to use inside it. The directory part is
/// opened as the user spelled it; the name keeps any trailing slashes (they mean "follow").
/// Where the directory part can't be opened, the whole path is used from the current
/// directory, so the operation itself fails with the error (and message) cp would give.
pub fn open_parent(path: &Path) -> (OpenDir, OsString) {
    let bytes = path.as_os_str().as_bytes();
    let stripped = bytes.len() - bytes.iter().rev().take_while(|&&b| b == b'/').count();
    let whole = || (OpenDir::cwd(), path.as_os_str().to_os_string());
    let Some(slash) = bytes[..stripped].iter().rposition(|&b| b == b'/') else {
        return whole();
    };
    let parent = if slash == 0 {
        &bytes[..1]
    } else {
        &bytes[..slash]
    };
    let name = OsStr::from_bytes(&bytes[slash + 1..]).to_os_string();
    match OpenDir::open(Path::new(OsStr::from_bytes(parent))) {
        Ok(dir) => (dir, name),
        Err(_) => whole(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;
    use std::path::PathBuf;

    /// A directory opened, then its path moved away and a symlink to an outside directory put
    /// in its place: every operation must still land in the directory that was opened.
    struct Swapped {
        _tmp: tempfile::TempDir,
        dir: Rc<OpenDir>,
        /// Where the opened directory lives now.
        moved: PathBuf,
        /// Where the symlink put at the old path points.
        outside: PathBuf,
    }

    fn swapped() -> Swapped {
        let tmp = tempfile::tempdir().unwrap();
        let orig = tmp.path().join("d");
        let moved = tmp.path().join("moved");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&orig).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(orig.join("f"), b"inside").unwrap();
        std::os::unix::fs::symlink("ln-target", orig.join("l")).unwrap();
        std::fs::write(outside.join("f"), b"outside").unwrap();
        let dir = Rc::new(OpenDir::open(&orig).unwrap());
        std::fs::rename(&orig, &moved).unwrap();
        std::os::unix::fs::symlink(&outside, &orig).unwrap();
        Swapped {
            _tmp: tmp,
            dir,
            moved,
            outside,
        }
    }

    fn os(s: &str) -> &OsStr {
        OsStr::new(s)
    }

    fn assert_only_in_moved(s: &Swapped, name: &str) {
        assert!(
            std::fs::symlink_metadata(s.moved.join(name)).is_ok(),
            "{name} not in the opened directory"
        );
        assert!(
            std::fs::symlink_metadata(s.outside.join(name)).is_err(),
            "{name} landed in the symlink's target"
        );
    }

    #[test]
    fn creates_land_in_the_opened_directory() {
        let s = swapped();
        s.dir.mkdir(os("sub"), 0o700).unwrap();
        s.dir.symlink(os("t"), os("sym")).unwrap();
        s.dir.mkfifo(os("fifo"), 0o600).unwrap();
        s.dir
            .open_file(
                os("new"),
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
                0o600,
            )
            .unwrap();
        let from = At {
            dir: &s.dir,
            name: os("f"),
            path: Path::new("f"),
        };
        s.dir.hard_link(os("hard"), from, false).unwrap();
        for n in ["sub", "sym", "fifo", "new", "hard"] {
            assert_only_in_moved(&s, n);
        }
        assert_eq!(std::fs::read(s.moved.join("hard")).unwrap(), b"inside");
    }

    #[test]
    fn rename_and_unlink_act_on_the_opened_directory() {
        let s = swapped();
        s.dir.rename(os("f"), os("f~")).unwrap();
        assert_only_in_moved(&s, "f~");
        assert_eq!(std::fs::read(s.outside.join("f")).unwrap(), b"outside");
        s.dir.unlink(os("f~")).unwrap();
        assert!(!s.moved.join("f~").exists());
        assert!(s.outside.join("f").exists());
    }

    #[test]
    fn reads_and_attributes_act_on_the_opened_directory() {
        let s = swapped();
        let names: Vec<_> = s.dir.entries().unwrap().into_iter().map(|e| e.1).collect();
        assert!(names.contains(&OsString::from("f")), "{names:?}");
        assert_eq!(s.dir.read_link(os("l")).unwrap(), "ln-target");
        let mut data = String::new();
        use std::io::Read;
        s.dir
            .open_file(os("f"), OFlag::O_RDONLY, 0)
            .unwrap()
            .read_to_string(&mut data)
            .unwrap();
        assert_eq!(data, "inside");
        let inside_ino = std::fs::metadata(s.moved.join("f")).unwrap().ino();
        assert_eq!(s.dir.stat(os("f"), false).unwrap().ino(), inside_ino);

        s.dir.chmod_nofollow(os("f"), 0o604).unwrap();
        let ts = [libc::timespec {
            tv_sec: 12345,
            tv_nsec: 0,
        }; 2];
        s.dir.set_times_nofollow(os("f"), &ts).unwrap();
        let m = std::fs::metadata(s.moved.join("f")).unwrap();
        assert_eq!((m.mode() & 0o7777, m.mtime()), (0o604, 12345));
        let o = std::fs::metadata(s.outside.join("f")).unwrap();
        assert_ne!(o.mtime(), 12345);
        let dir_ino = std::fs::metadata(&s.moved).unwrap().ino();
        assert_eq!(Stat::of(&s.dir.readable().unwrap()).unwrap().ino(), dir_ino);
    }

    #[test]
    fn children_are_not_followed_through_symlinks() {
        let s = swapped();
        std::os::unix::fs::symlink(&s.outside, s.moved.join("to-outside")).unwrap();
        let err = s.dir.open_child(os("to-outside"), false).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTDIR));
        assert!(s.dir.open_child(os("to-outside"), true).is_ok());
        // chmod never follows a symlink either.
        std::os::unix::fs::symlink(s.outside.join("f"), s.moved.join("lf")).unwrap();
        assert!(s.dir.chmod_nofollow(os("lf"), 0o600).is_err());
    }

    #[test]
    fn parent_split_keeps_what_the_name_means() {
        let tmp = tempfile::tempdir().unwrap();
        let sub = tmp.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let sub_ino = std::fs::metadata(&sub).unwrap().ino();
        let root_ino = std::fs::metadata("/").unwrap().ino();
        let cwd_ino = std::fs::metadata(".").unwrap().ino();
        let with_sub = |n: &str| format!("{}/{n}", sub.display());
        let cases = [
            ("a".to_owned(), cwd_ino, "a"),
            ("d/".to_owned(), cwd_ino, "d/"),
            ("/".to_owned(), cwd_ino, "/"),
            ("/tmp".to_owned(), root_ino, "tmp"),
            ("/tmp/".to_owned(), root_ino, "tmp/"),
            (with_sub("x"), sub_ino, "x"),
            (with_sub("x//"), sub_ino, "x//"),
            // An unopenable directory part: the whole path, from the current directory.
            ("no/such/dir/x".to_owned(), cwd_ino, "no/such/dir/x"),
        ];
        for (path, dir_ino, name) in cases {
            let (d, n) = open_parent(Path::new(&path));
            assert_eq!(d.stat_self().unwrap().ino(), dir_ino, "{path}");
            assert_eq!(n, os(name), "{path}");
        }
    }
}
