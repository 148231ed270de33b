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
    /// Whether the file may hold holes, by cp's test: its blocks cover less than its size.
    pub fn may_have_holes(&self) -> bool {
        (self.0.st_blocks as u64) < self.len() / 512
    }
    /// (seconds, nanoseconds) of the last modification.
    pub fn mtime(&self) -> (i64, i64) {
        (self.0.st_mtime, self.0.st_mtime_nsec)
    }
    /// The finest timestamp resolution this file's filesystem can have, in nanoseconds, as
    /// far as its own times show: the largest power of ten (up to a second) dividing the
    /// nanoseconds of its access, change and modification times. The kernel sets ctime at
    /// full resolution, so on a nanosecond filesystem this is almost always 1.
    pub fn time_resolution_ns(&self) -> i64 {
        let ns = [
            self.0.st_atime_nsec,
            self.0.st_mtime_nsec,
            self.0.st_ctime_nsec,
        ];
        let mut res = 1_000_000_000;
        while res > 1 && ns.iter().any(|n| n % res != 0) {
            res /= 10;
        }
        res
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

/// -u's test: whether DEST's mtime is as new as SOURCE's, so the copy is skipped. With
/// timestamps preserved, SOURCE's time is first cut to DEST's resolution (as GNU's
/// utimecmp does), else a copy made with -p onto a coarser filesystem would always look older.
pub fn dst_is_current(src_mtime: (i64, i64), dst: &Stat, truncate_source: bool) -> bool {
    let (s, mut ns) = src_mtime;
    if truncate_source {
        let res = dst.time_resolution_ns();
        ns -= ns % res;
    }
    dst.mtime() >= (s, ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_with(atime_ns: i64, mtime: (i64, i64), ctime_ns: i64) -> Stat {
        // SAFETY: an all-zero struct stat is a valid value.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        st.st_atime_nsec = atime_ns;
        (st.st_mtime, st.st_mtime_nsec) = mtime;
        st.st_ctime_nsec = ctime_ns;
        Stat(st)
    }

    #[test]
    fn resolution_from_the_nanoseconds_seen() {
        assert_eq!(stat_with(0, (5, 0), 0).time_resolution_ns(), 1_000_000_000);
        assert_eq!(stat_with(0, (5, 0), 123_456_789).time_resolution_ns(), 1);
        assert_eq!(
            stat_with(500_000_000, (5, 0), 0).time_resolution_ns(),
            100_000_000
        );
        assert_eq!(stat_with(10_000, (5, 2_000), 0).time_resolution_ns(), 1_000);
    }

    #[test]
    fn update_compares_at_the_destination_resolution() {
        let whole_seconds = stat_with(0, (100, 0), 0);
        // SOURCE 100.7 s, DEST 100 s on a 1 s filesystem: current once SOURCE is cut to 1 s.
        assert!(dst_is_current((100, 700_000_000), &whole_seconds, true));
        assert!(!dst_is_current((100, 700_000_000), &whole_seconds, false));
        assert!(!dst_is_current((101, 0), &whole_seconds, true));
        let fine = stat_with(1, (100, 5), 7);
        assert!(dst_is_current((100, 5), &fine, true));
        assert!(!dst_is_current((100, 6), &fine, true));
        assert!(dst_is_current((99, 999_999_999), &fine, false));
    }
}
