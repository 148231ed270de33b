//! The scenario trees: built the same in both temp directories, then read back for comparison.
//!
//! Scenario setup is a tiny line language:
//! ```text
//! file NAME SIZE [MODE]     random bytes (same seed in both trees)
//! text NAME CONTENT...      a file holding CONTENT and a newline
//! dir NAME [MODE]
//! sym NAME TARGET           symlink
//! hard NAME EXISTING        hard link
//! fifo NAME
//! sparse NAME SIZE          a hole of SIZE with 1 byte of data at the end
//! old NAME                  mtime set 1000 s further back (for -u)
//! xattr NAME KEY VALUE      an extended attribute (lsetxattr; user.* needs a filesystem
//!                           that takes them, see `user_xattrs_supported`)
//! acl NAME UID PERM         an access ACL: NAME's mode plus user UID with PERM (0-7)
//! dacl NAME UID PERM        the same as a directory's default ACL (see `acls_supported`)
//! sh COMMAND...             anything else, through sh -c
//! ```
//! After setup every entry gets the same fixed timestamps, so "was the mtime preserved"
//! compares equal across the trees.

use rand::{RngCore, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const FIXED_TIME: i64 = 1_000_000_000;

pub fn set_times(p: &Path, t: i64) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let ts = [
        libc::timespec {
            tv_sec: t,
            tv_nsec: 0,
        },
        libc::timespec {
            tv_sec: t,
            tv_nsec: 0,
        },
    ];
    // SAFETY: valid path and times array.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            ts.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    assert_eq!(rc, 0, "utimensat {}", p.display());
}

fn set_xattr(p: &Path, key: &str, value: &[u8]) -> std::io::Result<()> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let k = CString::new(key).unwrap();
    // SAFETY: valid strings and a value buffer of the given length.
    let rc = unsafe {
        libc::lsetxattr(
            c.as_ptr(),
            k.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The user.* extended attributes and POSIX ACLs of `p` itself, sorted (others, like
/// security.*, depend on the system, not on cp).
fn user_xattrs(p: &Path) -> Vec<(String, Vec<u8>)> {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut names = vec![0u8; 65536];
    // SAFETY: the buffer is valid for its length.
    let n = unsafe { libc::llistxattr(c.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if n <= 0 {
        return Vec::new();
    }
    names.truncate(n as usize);
    let mut out: Vec<_> = names
        .split(|&b| b == 0)
        .filter(|n| n.starts_with(b"user.") || n.starts_with(b"system.posix_acl_"))
        .map(|n| {
            let k = CString::new(n).unwrap();
            let mut v = vec![0u8; 65536];
            // SAFETY: as above.
            let len =
                unsafe { libc::lgetxattr(c.as_ptr(), k.as_ptr(), v.as_mut_ptr().cast(), v.len()) };
            v.truncate(len.max(0) as usize);
            (String::from_utf8_lossy(n).into_owned(), v)
        })
        .collect();
    out.sort();
    out
}

/// A POSIX ACL in the kernel's xattr form (version 2, then tag/perm/id entries in tag
/// order): the owner, group and other classes from `mode`, plus user `uid` with `perm` and
/// the mask that admits it.
fn acl_blob(mode: u32, uid: u32, perm: u16) -> Vec<u8> {
    const OBJ: u32 = u32::MAX; // ACL_UNDEFINED_ID
    let class = |shift: u32| ((mode >> shift) & 7) as u16;
    let entries: [(u16, u16, u32); 5] = [
        (0x01, class(6), OBJ),        // ACL_USER_OBJ
        (0x02, perm, uid),            // ACL_USER
        (0x04, class(3), OBJ),        // ACL_GROUP_OBJ
        (0x10, perm | class(3), OBJ), // ACL_MASK
        (0x20, class(0), OBJ),        // ACL_OTHER
    ];
    let mut out = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        out.extend(tag.to_le_bytes());
        out.extend(perm.to_le_bytes());
        out.extend(id.to_le_bytes());
    }
    out
}

fn set_acl(p: &Path, default: bool, uid: u32, perm: u16) -> std::io::Result<()> {
    let mode = std::fs::metadata(p)?.mode();
    let key = if default {
        "system.posix_acl_default"
    } else {
        "system.posix_acl_access"
    };
    set_xattr(p, key, &acl_blob(mode, uid, perm))
}

/// Whether the temp filesystem takes POSIX ACLs; the reason why not otherwise.
pub fn acls_supported() -> Result<(), String> {
    let f = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    set_acl(f.path(), false, 65534, 6)
        .map_err(|e| format!("the temp filesystem refuses POSIX ACLs: {e}"))
}

/// Whether the temp filesystem takes user.* xattrs; the reason why not otherwise.
pub fn user_xattrs_supported() -> Result<(), String> {
    let f = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    set_xattr(f.path(), "user.aiscp-probe", b"1")
        .map_err(|e| format!("the temp filesystem refuses user xattrs: {e}"))
}

pub fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for p in names {
        out.push(p.strip_prefix(root).unwrap().to_path_buf());
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            walk(root, &p, out);
        }
    }
}

pub fn build(dir: &Path, setup: &str) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut old = Vec::new();
    for line in setup.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        let w: Vec<&str> = rest.split_whitespace().collect();
        let p = |i: usize| dir.join(w[i]);
        let mode = |i: usize| w.get(i).map(|m| u32::from_str_radix(m, 8).unwrap());
        match cmd {
            "file" => {
                let mut data = vec![0u8; w[1].parse().unwrap()];
                rng.fill_bytes(&mut data);
                std::fs::write(p(0), &data).unwrap();
                if let Some(m) = mode(2) {
                    std::fs::set_permissions(p(0), std::fs::Permissions::from_mode(m)).unwrap();
                }
            }
            "text" => std::fs::write(p(0), format!("{}\n", w[1..].join(" "))).unwrap(),
            "dir" => {
                std::fs::create_dir_all(p(0)).unwrap();
                if let Some(m) = mode(1) {
                    std::fs::set_permissions(p(0), std::fs::Permissions::from_mode(m)).unwrap();
                }
            }
            "sym" => std::os::unix::fs::symlink(w[1], p(0)).unwrap(),
            "hard" => std::fs::hard_link(p(1), p(0)).unwrap(),
            "fifo" => {
                nix::unistd::mkfifo(&p(0), nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap()
            }
            "sparse" => {
                let f = std::fs::File::create(p(0)).unwrap();
                let n: u64 = w[1].parse().unwrap();
                use std::os::unix::fs::FileExt;
                f.write_all_at(b"x", n).unwrap();
            }
            "old" => old.push(p(0)),
            "xattr" => set_xattr(&p(0), w[1], w[2].as_bytes()).unwrap(),
            "acl" | "dacl" => set_acl(
                &p(0),
                cmd == "dacl",
                w[1].parse().unwrap(),
                w[2].parse().unwrap(),
            )
            .unwrap(),
            "sh" => {
                let st = Command::new("sh")
                    .arg("-c")
                    .arg(rest)
                    .current_dir(dir)
                    .status()
                    .unwrap();
                assert!(st.success(), "setup failed: {line}");
            }
            _ => panic!("unknown setup command {cmd}"),
        }
    }
    let mut all = Vec::new();
    walk(dir, dir, &mut all);
    for rel in all.iter().rev() {
        set_times(&dir.join(rel), FIXED_TIME);
    }
    for p in old {
        set_times(&p, FIXED_TIME - 1000);
    }
}

/// One entry of a tree as compared: kind, mode, owner, data, link target, whether its
/// mtime is still a setup time, and which earlier entry it is hard-linked to.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    kind: String,
    mode: u32,
    owner: (u32, u32),
    data: Option<Vec<u8>>,
    target: Option<PathBuf>,
    mtime: Option<i64>,
    same_inode_as: Option<PathBuf>,
    xattrs: Vec<(String, Vec<u8>)>,
}

pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut all = Vec::new();
    walk(root, root, &mut all);
    let mut inodes: HashMap<u64, PathBuf> = HashMap::new();
    let mut out = BTreeMap::new();
    for rel in all {
        let p = root.join(&rel);
        let m = std::fs::symlink_metadata(&p).unwrap();
        let ft = m.file_type();
        let kind = if ft.is_dir() {
            "dir"
        } else if ft.is_symlink() {
            "symlink"
        } else if ft.is_fifo() {
            "fifo"
        } else if ft.is_char_device() {
            "char"
        } else if ft.is_file() {
            "file"
        } else {
            "other"
        };
        let same_inode_as = if ft.is_dir() {
            None
        } else {
            match inodes.get(&m.ino()) {
                Some(first) => Some(first.clone()),
                None => {
                    inodes.insert(m.ino(), rel.clone());
                    None
                }
            }
        };
        let mtime = m.mtime();
        out.insert(
            rel,
            Entry {
                kind: kind.into(),
                mode: if ft.is_symlink() {
                    0
                } else {
                    m.mode() & 0o7777
                },
                owner: (m.uid(), m.gid()),
                data: ft.is_file().then(|| std::fs::read(&p).unwrap()),
                target: ft.is_symlink().then(|| std::fs::read_link(&p).unwrap()),
                mtime: (mtime <= FIXED_TIME).then_some(mtime),
                same_inode_as,
                xattrs: user_xattrs(&p),
            },
        );
    }
    out
}
