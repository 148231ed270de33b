//! Attributes that -p, -a and --preserve carry over, set on the open DEST descriptor where
//! there is one, or relative to its directory's descriptor without following symlinks (so a
//! swapped path can't redirect them): owner, mode, xattrs, then timestamps last, after every
//! write.

use crate::cp::options::{Options, Preserve};
use crate::sys::messages::{fail_os, Reported};
use crate::sys::open_dir::At;
use crate::sys::stat::Stat;
use nix::fcntl::OFlag;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Applies the preserved attributes of `src_meta` to the open DEST `f`. `created` says DEST
/// is new (its provisional owner-only mode must then be widened when ownership is kept).
/// `src` is SOURCE opened for reading, where xattrs are read from (None: none to copy).
pub fn apply(
    f: &File,
    dst: &Path,
    src: Option<&File>,
    src_meta: &Stat,
    opts: &Options,
    created: bool,
    umask: u32,
) -> Result<(), Reported> {
    apply_these(f, dst, src, src_meta, opts.preserve, created, umask)
}

/// [`apply`] with the attributes to keep given apart from the options (--parents keeps no
/// xattrs on the directories it makes, as cp).
pub fn apply_these(
    f: &File,
    dst: &Path,
    src: Option<&File>,
    src_meta: &Stat,
    p: Preserve,
    created: bool,
    umask: u32,
) -> Result<(), Reported> {
    let fd = f.as_raw_fd();
    let mut mode = src_meta.mode() & 0o7777;
    if p.ownership {
        // SAFETY: fchown on a descriptor we own; no memory is passed.
        let chown = check(unsafe { libc::fchown(fd, src_meta.uid(), src_meta.gid()) });
        if owner_refused(&chown) {
            // The group alone may still be ours to give ((uid_t)-1 keeps the owner).
            // SAFETY: as above.
            let _ = unsafe { libc::fchown(fd, libc::uid_t::MAX, src_meta.gid()) };
        }
        owner_kept(chown, dst, &mut mode)?;
    }
    if p.xattr {
        if let Some(src) = src {
            copy_xattrs(src, f, dst, p.xattr_required)?;
        }
    }
    if p.mode {
        if let Some(src) = src {
            let (from, to) = (XattrFile::Fd(src.as_raw_fd()), XattrFile::Fd(fd));
            copy_acls(&from, &to, dst, src_meta.is_dir())?;
        }
        // After the ACL: with one, the mode's group bits are its mask, so this keeps it.
        // SAFETY: as above.
        check(unsafe { libc::fchmod(fd, mode as libc::mode_t) })
            .map_err(|e| fail_os("preserving permissions for", dst, &e))?;
    } else if created && p.ownership {
        // Created owner-only until the owner was set; now the mode a new entry gets.
        let m = new_mode(src_meta, &p, umask);
        // SAFETY: as above.
        check(unsafe { libc::fchmod(fd, m as libc::mode_t) })
            .map_err(|e| fail_os("setting permissions for", dst, &e))?;
    }
    if p.timestamps {
        let ts = src_meta.times();
        // SAFETY: `ts` is a valid two-element array for the call's duration.
        check(unsafe { libc::futimens(fd, ts.as_ptr()) })
            .map_err(|e| fail_os("preserving times for", dst, &e))?;
    }
    Ok(())
}

/// The mode of a new file or directory whose mode is not preserved: SOURCE's permission
/// bits (and a directory's sticky bit), or 0666/0777 with --no-preserve=mode, less `umask`.
pub fn new_mode(src_meta: &Stat, p: &Preserve, umask: u32) -> u32 {
    let base = match (p.default_mode, src_meta.is_dir()) {
        (true, true) => 0o777,
        (true, false) => 0o666,
        (false, true) => src_meta.mode() & 0o1777,
        (false, false) => src_meta.mode() & 0o777,
    };
    base & !umask
}

/// For entries set by name in DEST's directory, never following a symlink: a symlink DEST
/// (owner and timestamps of the link itself) and recreated special files (opening a FIFO
/// would block, a device could act on open), which also get the mode and the ACL.
pub fn apply_by_name(
    src: At<'_>,
    dst: At<'_>,
    src_meta: &Stat,
    opts: &Options,
) -> Result<(), Reported> {
    let p = opts.preserve;
    let mut mode = src_meta.mode() & 0o7777;
    if p.ownership {
        let chown = dst
            .dir
            .chown_nofollow(dst.name, src_meta.uid(), src_meta.gid());
        if owner_refused(&chown) {
            let _ = dst
                .dir
                .chown_nofollow(dst.name, libc::uid_t::MAX, src_meta.gid());
        }
        owner_kept(chown, dst.path, &mut mode)?;
    }
    if p.mode && !src_meta.is_symlink() {
        copy_special_acl(src, dst)?;
        dst.dir
            .chmod_nofollow(dst.name, mode)
            .map_err(|e| fail_os("preserving permissions for", dst.path, &e))?;
    }
    if p.timestamps {
        dst.dir
            .set_times_nofollow(dst.name, &src_meta.times())
            .map_err(|e| fail_os("preserving times for", dst.path, &e))?;
    }
    Ok(())
}

/// For the link `-s` made in place of a copy: with timestamps preserved, SOURCE's times set
/// on the link itself, as cp sets them (utimensat with AT_SYMLINK_NOFOLLOW); nothing else,
/// since cp gives such a link neither SOURCE's owner nor its mode.
pub fn apply_to_link_made(dst: At<'_>, src_meta: &Stat, opts: &Options) -> Result<(), Reported> {
    if !opts.preserve.timestamps {
        return Ok(());
    }
    dst.dir
        .set_times_nofollow(dst.name, &src_meta.times())
        .map_err(|e| fail_os("preserving times for", dst.path, &e))
}

/// Whether a chown failed only because this user may not give the file away (EPERM), or
/// the owner has no mapping here (EINVAL): cp then still sets the group it can.
fn owner_refused(chown: &io::Result<()>) -> bool {
    matches!(chown, Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EINVAL)))
}

/// A chown's outcome as cp takes it: an unprivileged user can't give files away, so a
/// refusal only drops the set-id and sticky bits from `mode`; anything else is reported.
fn owner_kept(chown: io::Result<()>, dst: &Path, mode: &mut u32) -> Result<(), Reported> {
    match chown {
        Err(_) if owner_refused(&chown) => {
            *mode &= !(libc::S_ISUID | libc::S_ISGID | libc::S_ISVTX);
            Ok(())
        }
        Err(e) => Err(fail_os("failed to preserve ownership for", dst, &e)),
        Ok(()) => Ok(()),
    }
}

/// The access ACL of a recreated special file, through O_PATH descriptors that never
/// follow a symlink (no descriptor-relative xattr calls exist before Linux 6.13). Without
/// /proc there is no way to reach them safely, and nothing is copied.
fn copy_special_acl(src: At<'_>, dst: At<'_>) -> Result<(), Reported> {
    if !Path::new("/proc/self/fd").is_dir() {
        return Ok(());
    }
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let open = |at: At<'_>| {
        at.dir
            .open_file(at.name, flags, 0)
            .map_err(|e| fail_os("preserving permissions for", dst.path, &e))
    };
    let (s, d) = (open(src)?, open(dst)?);
    copy_acls(
        &XattrFile::of_path_fd(&s),
        &XattrFile::of_path_fd(&d),
        dst.path,
        false,
    )
}

/// A size-query-then-fill call of the *xattr family: `call(buf, len)` returns the length
/// or -1.
fn sized_read(mut call: impl FnMut(*mut libc::c_void, usize) -> isize) -> io::Result<Vec<u8>> {
    loop {
        let n = call(std::ptr::null_mut(), 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut buf = vec![0u8; n as usize];
        let m = call(buf.as_mut_ptr().cast(), buf.len());
        if m >= 0 {
            buf.truncate(m as usize);
            return Ok(buf);
        }
        let e = io::Error::last_os_error();
        // The value grew between the two calls: ask again.
        if e.raw_os_error() != Some(libc::ERANGE) {
            return Err(e);
        }
    }
}

/// The access ACL, and a directory's default ACL for new entries.
const ACL_ACCESS: &CStr = c"system.posix_acl_access";
const ACL_DEFAULT: &CStr = c"system.posix_acl_default";

/// Where extended attributes are read and written: an open descriptor, or, for a special
/// file (which can't be opened for I/O without side effects), an O_PATH descriptor reached
/// through its /proc/self/fd link, which the path calls follow to that very inode.
enum XattrFile {
    Fd(RawFd),
    Proc(CString),
}

impl XattrFile {
    /// `f` must stay open while this is used.
    fn of_path_fd(f: &File) -> XattrFile {
        let link = format!("/proc/self/fd/{}", f.as_raw_fd());
        XattrFile::Proc(CString::new(link).expect("no NUL in a number"))
    }

    fn get(&self, name: &CStr) -> io::Result<Vec<u8>> {
        match self {
            XattrFile::Fd(fd) => sized_read(|buf, len| {
                // SAFETY: the buffer is valid for `len` bytes or null with len 0.
                unsafe { libc::fgetxattr(*fd, name.as_ptr(), buf, len) }
            }),
            XattrFile::Proc(p) => sized_read(|buf, len| {
                // SAFETY: as above.
                unsafe { libc::getxattr(p.as_ptr(), name.as_ptr(), buf, len) }
            }),
        }
    }

    fn set(&self, name: &CStr, val: &[u8]) -> io::Result<()> {
        let (v, n) = (val.as_ptr().cast(), val.len());
        check(match self {
            // SAFETY: `val` is initialised for its length.
            XattrFile::Fd(fd) => unsafe { libc::fsetxattr(*fd, name.as_ptr(), v, n, 0) },
            // SAFETY: as above.
            XattrFile::Proc(p) => unsafe { libc::setxattr(p.as_ptr(), name.as_ptr(), v, n, 0) },
        })
    }

    fn remove(&self, name: &CStr) -> io::Result<()> {
        check(match self {
            // SAFETY: NUL-terminated strings; no buffer.
            XattrFile::Fd(fd) => unsafe { libc::fremovexattr(*fd, name.as_ptr()) },
            // SAFETY: as above.
            XattrFile::Proc(p) => unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) },
        })
    }
}

/// Preserving the mode preserves the ACL, as GNU cp does (gnulib's copy_acl): SOURCE's
/// access ACL, and a directory's default ACL, are set on DEST; where SOURCE has none, DEST's
/// own (inherited from its directory's default ACL) is removed. A filesystem without ACLs
/// is an error only when there is an ACL to carry over.
fn copy_acls(src: &XattrFile, to: &XattrFile, dst: &Path, is_dir: bool) -> Result<(), Reported> {
    let kinds: &[&CStr] = if is_dir {
        &[ACL_ACCESS, ACL_DEFAULT]
    } else {
        &[ACL_ACCESS]
    };
    let none = |e: &io::Error| matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ENOTSUP));
    for name in kinds {
        let done = match src.get(name) {
            Ok(val) => to.set(name, &val),
            Err(e) if none(&e) => match to.remove(name) {
                Err(e) if none(&e) => Ok(()),
                other => other,
            },
            Err(e) => Err(e),
        };
        done.map_err(|e| fail_os("preserving permissions for", dst, &e))?;
    }
    Ok(())
}

/// Extended attributes a write to a file removes (file capabilities go as set-user-ID goes,
/// for root too): a replacement does not take them from the file it replaces.
const DROPPED_BY_A_WRITE: &[&[u8]] = &[b"security.capability"];

/// What an --atomic replacement takes from the file it replaces (`old`, open), so that it
/// grants what an in-place write would have left: every extended attribute this process can
/// read (the access ACL, user.*, and trusted.* as root...), less those a write removes, set
/// on `new`; an access ACL `new` inherited from its directory that `old` lacks is removed.
/// Err: one could not be read or set, before any data moved.
pub fn carry_to_replacement(old: &File, new: &File) -> io::Result<()> {
    let ofd = old.as_raw_fd();
    let (from, to) = (XattrFile::Fd(ofd), XattrFile::Fd(new.as_raw_fd()));
    // SAFETY: the buffer is valid for `len` bytes or null with len 0.
    let names = match sized_read(|buf, len| unsafe { libc::flistxattr(ofd, buf.cast(), len) }) {
        Ok(names) => names,
        Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => Vec::new(),
        Err(e) => return Err(e),
    };
    let names: Vec<&[u8]> = names
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty() && !DROPPED_BY_A_WRITE.contains(n))
        .collect();
    for name in &names {
        let cname = CString::new(*name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        match from.get(&cname) {
            Ok(val) => to.set(&cname, &val)?,
            // Removed since it was listed.
            Err(e) if e.raw_os_error() == Some(libc::ENODATA) => {}
            Err(e) => return Err(e),
        }
    }
    if !names.contains(&ACL_ACCESS.to_bytes()) {
        match to.remove(ACL_ACCESS) {
            Err(e) if !matches!(e.raw_os_error(), Some(libc::ENODATA | libc::ENOTSUP)) => {
                return Err(e)
            }
            _ => {}
        }
    }
    Ok(())
}

/// Names --preserve=xattr leaves alone, from libattr's /etc/xattr.conf that GNU cp follows:
/// ACLs travel with the mode (above), the rest are private to a filesystem or written only by
/// the kernel; and the SELinux label, which only --preserve=context copies (not supported
/// here). A trailing `*` matches any rest.
const XATTRS_NOT_COPIED: &[&str] = &[
    "system.nfs4_acl",
    "system.nfs4acl",
    "system.posix_acl_access",
    "system.posix_acl_default",
    "trusted.SGI_ACL_DEFAULT",
    "trusted.SGI_ACL_FILE",
    "trusted.SGI_CAP_FILE",
    "trusted.SGI_DMI_*",
    "trusted.SGI_MAC_FILE",
    "xfsroot.*",
    "user.Beagle.*",
    "security.evm",
    "afs.*",
    "security.selinux",
];

fn xattr_copied(name: &[u8]) -> bool {
    !XATTRS_NOT_COPIED
        .iter()
        .any(|pat| match pat.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix.as_bytes()),
            None => name == pat.as_bytes(),
        })
}

/// Copies extended attributes between two open descriptors. Failures are reported only
/// when xattr was asked for by name (-a and -p stay silent, like cp).
fn copy_xattrs(src: &File, f: &File, dst: &Path, required: bool) -> Result<(), Reported> {
    let sfd = src.as_raw_fd();
    let (from, to) = (XattrFile::Fd(sfd), XattrFile::Fd(f.as_raw_fd()));
    let res = (|| -> io::Result<()> {
        // SAFETY: the buffer is valid for `len` bytes or null with len 0.
        let names = sized_read(|buf, len| unsafe { libc::flistxattr(sfd, buf.cast(), len) })?;
        for name in names
            .split(|&b| b == 0)
            .filter(|n| !n.is_empty() && xattr_copied(n))
        {
            let cname =
                CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            to.set(&cname, &from.get(&cname)?)?;
        }
        Ok(())
    })();
    match res {
        Err(e) if required && e.raw_os_error() != Some(libc::ENOTSUP) => {
            Err(fail_os("setting attributes for", dst, &e))
        }
        _ => Ok(()),
    }
}
