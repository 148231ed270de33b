//! What `fstat`/`fstatat` report about a file, read through descriptors (see `open_dir`), with
//! the few questions cp asks of it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// (device, inode): what identifies a file across names.
pub type FileId = (u64, u64);

/// The kind of a file, from its mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
}

/// One `struct stat`.
#[derive(Clone, Copy)]
pub struct Stat(libc::stat);

impl From<libc::stat> for Stat {
    fn from(s: libc::stat) -> Self {
        Stat(s)
    }
}

impl Stat {
    /// fstat of an open file: what was opened is what gets checked.
    pub fn of(f: &File) -> io::Result<Stat> {
        nix::sys::stat::fstat(f.as_raw_fd())
            .map(Stat)
            .map_err(io::Error::from)
    }

    pub fn id(&self) -> FileId {
        (self.dev(), self.ino())
    }
    pub fn dev(&self) -> u64 {
        self.0.st_dev
    }
    pub fn ino(&self) -> u64 {
        self.0.st_ino
    }
    /// The whole st_mode, type bits included.
    pub fn mode(&self) -> u32 {
        self.0.st_mode
    }
    pub fn nlink(&self) -> u64 {
        self.0.st_nlink
    }
    pub fn uid(&self) -> u32 {
        self.0.st_uid
    }
    pub fn gid(&self) -> u32 {
        self.0.st_gid
    }
    pub fn rdev(&self) -> u64 {
        self.0.st_rdev
    }
    pub fn len(&self) -> u64 {
        self.0.st_size as u64
    }
    /// (seconds, nanoseconds) of the last modification.
    pub fn mtime(&self) -> (i64, i64) {
        (self.0.st_mtime, self.0.st_mtime_nsec)
    }
    /// Access and modification times, in the form utimensat/futimens take.
    pub fn times(&self) -> [libc::timespec; 2] {
        [
            libc::timespec {
                tv_sec: self.0.st_atime,
                tv_nsec: self.0.st_atime_nsec,
            },
            libc::timespec {
                tv_sec: self.0.st_mtime,
                tv_nsec: self.0.st_mtime_nsec,
            },
        ]
    }

    pub fn kind(&self) -> FileKind {
        match self.0.st_mode & libc::S_IFMT {
            libc::S_IFDIR => FileKind::Dir,
            libc::S_IFLNK => FileKind::Symlink,
            libc::S_IFIFO => FileKind::Fifo,
            libc::S_IFCHR => FileKind::CharDevice,
            libc::S_IFBLK => FileKind::BlockDevice,
            libc::S_IFSOCK => FileKind::Socket,
            _ => FileKind::File,
        }
    }
    pub fn is_dir(&self) -> bool {
        self.kind() == FileKind::Dir
    }
    pub fn is_file(&self) -> bool {
        self.kind() == FileKind::File
    }
    pub fn is_symlink(&self) -> bool {
        self.kind() == FileKind::Symlink
    }
}
