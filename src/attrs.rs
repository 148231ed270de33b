//! Attributes that -p, -a and --preserve carry over, set on the open DEST descriptor where
//! there is one (so a swapped path can't redirect them): owner, mode, xattrs, then timestamps
//! last, after every write.

use crate::copy::Reported;
use crate::messages::error;
use crate::options::Options;
use crate::quote::quote;
use std::ffi::CString;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

fn report(what: &str, dst: &Path, e: &io::Error) -> Reported {
    error(&format!(
        "{what} {}: {}",
        quote(dst),
        crate::messages::io_text(e)
    ));
    Reported
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn times(meta: &Metadata) -> [libc::timespec; 2] {
    [
        libc::timespec {
            tv_sec: meta.atime() as libc::time_t,
            tv_nsec: meta.atime_nsec() as _,
        },
        libc::timespec {
            tv_sec: meta.mtime() as libc::time_t,
            tv_nsec: meta.mtime_nsec() as _,
        },
    ]
}

/// Whether a failed chown is expected (an unprivileged user can't give files away): GNU
/// ignores EPERM and EINVAL then, and drops the set-id bits instead.
fn chown_failure_ok(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EINVAL))
}

fn cpath(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Applies the preserved attributes of `src_meta` to the open DEST `f`. `created` says DEST
/// is new (its provisional owner-only mode must then be widened when ownership is kept).
pub fn apply(
    f: &File,
    dst: &Path,
    src: &Path,
    src_meta: &Metadata,
    opts: &Options,
    created: bool,
) -> Result<(), Reported> {
    let p = opts.preserve;
    let fd = f.as_raw_fd();
    let mut mode = src_meta.mode() & 0o7777;
    if p.ownership {
        // SAFETY: fchown on a descriptor we own; no memory is passed.
        if let Err(e) = check(unsafe { libc::fchown(fd, src_meta.uid(), src_meta.gid()) }) {
            if !chown_failure_ok(&e) {
                return Err(report("failed to preserve ownership for", dst, &e));
            }
            mode &= !(libc::S_ISUID | libc::S_ISGID);
        }
    }
    if p.xattr {
        copy_xattrs(src, f, dst, p.xattr_required)?;
    }
    if p.mode {
        // SAFETY: as above.
        check(unsafe { libc::fchmod(fd, mode as libc::mode_t) })
            .map_err(|e| report("preserving permissions for", dst, &e))?;
    } else if created && p.ownership {
        let umask = current_umask();
        let base = match (p.default_mode, src_meta.is_dir()) {
            (true, true) => 0o777,
            (true, false) => 0o666,
            (false, _) => src_meta.mode() & 0o777,
        };
        let m = base & !umask;
        // SAFETY: as above.
        check(unsafe { libc::fchmod(fd, m as libc::mode_t) })
            .map_err(|e| report("setting permissions for", dst, &e))?;
    }
    if p.timestamps {
        let ts = times(src_meta);
        // SAFETY: `ts` is a valid two-element array for the call's duration.
        check(unsafe { libc::futimens(fd, ts.as_ptr()) })
            .map_err(|e| report("preserving times for", dst, &e))?;
    }
    Ok(())
}

/// For a symlink DEST: owner and timestamps of the link itself.
pub fn apply_to_symlink(dst: &Path, src_meta: &Metadata, opts: &Options) -> Result<(), Reported> {
    let c = cpath(dst).map_err(|e| report("cannot access", dst, &e))?;
    if opts.preserve.ownership {
        // SAFETY: `c` is a valid NUL-terminated path.
        if let Err(e) = check(unsafe { libc::lchown(c.as_ptr(), src_meta.uid(), src_meta.gid()) }) {
            if !chown_failure_ok(&e) {
                return Err(report("failed to preserve ownership for", dst, &e));
            }
        }
    }
    if opts.preserve.timestamps {
        set_times_nofollow(&c, dst, src_meta)?;
    }
    Ok(())
}

fn set_times_nofollow(c: &CString, dst: &Path, src_meta: &Metadata) -> Result<(), Reported> {
    let ts = times(src_meta);
    // SAFETY: valid path and a two-element timespec array.
    check(unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })
    .map_err(|e| report("preserving times for", dst, &e))
}

/// For recreated special files (opening a FIFO would block): by path, never following.
pub fn apply_path(dst: &Path, src_meta: &Metadata, opts: &Options) -> Result<(), Reported> {
    let c = cpath(dst).map_err(|e| report("cannot access", dst, &e))?;
    let mut mode = src_meta.mode() & 0o7777;
    if opts.preserve.ownership {
        // SAFETY: valid path.
        if let Err(e) = check(unsafe { libc::lchown(c.as_ptr(), src_meta.uid(), src_meta.gid()) }) {
            if !chown_failure_ok(&e) {
                return Err(report("failed to preserve ownership for", dst, &e));
            }
            mode &= !(libc::S_ISUID | libc::S_ISGID);
        }
    }
    if opts.preserve.mode {
        // SAFETY: valid path.
        check(unsafe { libc::chmod(c.as_ptr(), mode as libc::mode_t) })
            .map_err(|e| report("preserving permissions for", dst, &e))?;
    }
    if opts.preserve.timestamps {
        set_times_nofollow(&c, dst, src_meta)?;
    }
    Ok(())
}

fn current_umask() -> u32 {
    // SAFETY: umask has no memory effects; it is set back at once (single-threaded here).
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

/// Copies extended attributes from SRC (by path, not following a final symlink) to DEST's
/// descriptor. Failures are reported only when xattr was asked for by name.
fn copy_xattrs(src: &Path, f: &File, dst: &Path, required: bool) -> Result<(), Reported> {
    let res = (|| -> io::Result<()> {
        let c = cpath(src)?;
        // SAFETY: a null buffer of size 0 asks for the needed size.
        let n = unsafe { libc::llistxattr(c.as_ptr(), std::ptr::null_mut(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut names = vec![0u8; n as usize];
        // SAFETY: `names` has room for `n` bytes.
        let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        names.truncate(n as usize);
        for name in names.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let cname =
                CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
            // SAFETY: size query as above.
            let len =
                unsafe { libc::lgetxattr(c.as_ptr(), cname.as_ptr(), std::ptr::null_mut(), 0) };
            if len < 0 {
                return Err(io::Error::last_os_error());
            }
            let mut val = vec![0u8; len as usize];
            // SAFETY: `val` has room for `len` bytes.
            let len = unsafe {
                libc::lgetxattr(
                    c.as_ptr(),
                    cname.as_ptr(),
                    val.as_mut_ptr().cast(),
                    val.len(),
                )
            };
            if len < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `val[..len]` is initialised.
            check(unsafe {
                libc::fsetxattr(
                    f.as_raw_fd(),
                    cname.as_ptr(),
                    val.as_ptr().cast(),
                    len as usize,
                    0,
                )
            })?;
        }
        Ok(())
    })();
    match res {
        Err(e) if required && e.raw_os_error() != Some(libc::ENOTSUP) => {
            Err(report("setting attributes for", dst, &e))
        }
        _ => Ok(()),
    }
}
