//! Whether copying SOURCE onto an existing DEST could destroy SOURCE: GNU cp's same_file_ok,
//! case for case, so `cp a a`, a symlink copied onto its own target, two symlinks to one file,
//! hard links and backups give cp's answer in every combination of -d, -f,
//! --remove-destination, -b, -l and -s (GNU's tests/cp/same-file.sh table).
//!
//! The two stats it starts from are what cp looked at: SOURCE followed or not as the options
//! say, DEST followed only when a regular file will be written through it. Whichever of the
//! other views (the link itself, what it names) a case needs is looked up then.

use crate::cp::options::Options;
use crate::sys::open_dir::At;
use crate::sys::stat::{FileId, Stat};
use std::ffi::OsStr;
use std::ops::ControlFlow;
use std::os::unix::ffi::OsStrExt;

/// What the same-file check decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go on with the copy.
    Proceed,
    /// Refuse: "'SOURCE' and 'DEST' are the same file".
    Refuse,
    /// Nothing to do, and nothing wrong (a hard link asked for where one already is).
    Done,
}

/// GNU's same_file_ok for cp (never mv): `src_sb` and `dst_sb` are the stats cp made of
/// SOURCE and DEST; `backups` says whether DEST is backed up (off for `cp -fb a a`, which
/// copies to the backup's name instead); `follows` whether symlinks are followed at this
/// level (-H follows none below the command line: GNU's DEREF_NEVER there).
pub fn check(
    src: At<'_>,
    src_sb: &Stat,
    dst: At<'_>,
    dst_sb: &Stat,
    opts: &Options,
    backups: bool,
    follows: bool,
) -> Verdict {
    if src_sb.id() == dst_sb.id() && opts.hard_link {
        return Verdict::Done;
    }
    let deref_never = !follows;
    match link_views(src, src_sb, dst, dst_sb, opts, backups, deref_never) {
        ControlFlow::Break(verdict) => verdict,
        ControlFlow::Continue(views) => compare_views(src, dst, &views, opts, backups, deref_never),
    }
}

/// SOURCE and DEST as links (not followed), which the rest of the check compares.
struct LinkViews {
    src_l: Stat,
    dst_l: Stat,
    /// The two are one directory entry's inode, or one inode as links.
    same_link: bool,
}

/// The link views of SOURCE and DEST: under DEREF_NEVER the stats cp made, else looked up
/// without following. Two symlinks, and two different files followed, are decided here
/// (`Break`).
fn link_views(
    src: At<'_>,
    src_sb: &Stat,
    dst: At<'_>,
    dst_sb: &Stat,
    opts: &Options,
    backups: bool,
    deref_never: bool,
) -> ControlFlow<Verdict, LinkViews> {
    use Verdict::*;
    let same = src_sb.id() == dst_sb.id();
    if deref_never {
        let same_link = same;
        // Two symlinks: fine unless they are one directory entry.
        if src_sb.is_symlink() && dst_sb.is_symlink() {
            let sn = same_name(src, dst);
            if !sn {
                if backups {
                    return ControlFlow::Break(Proceed);
                }
                if same_link {
                    return ControlFlow::Break(Done);
                }
            }
            return ControlFlow::Break(if sn { Refuse } else { Proceed });
        }
        return ControlFlow::Continue(LinkViews {
            src_l: *src_sb,
            dst_l: *dst_sb,
            same_link,
        });
    }
    if !same {
        return ControlFlow::Break(Proceed);
    }
    let (Ok(d), Ok(s)) = (dst.dir.stat(dst.name, false), src.dir.stat(src.name, false)) else {
        return ControlFlow::Break(Proceed);
    };
    let (src_l, dst_l) = (s, d);
    let same_link = src_l.id() == dst_l.id();
    // Two symlinks to one file: fine when DEST is unlinked before it is opened.
    if src_l.is_symlink() && dst_l.is_symlink() && opts.remove_destination {
        return ControlFlow::Break(Proceed);
    }
    ControlFlow::Continue(LinkViews {
        src_l,
        dst_l,
        same_link,
    })
}

/// The rest of same_file_ok, on the link views: backups, --remove-destination, hard and
/// symbolic links, and what two symlinks resolve to.
fn compare_views(
    src: At<'_>,
    dst: At<'_>,
    views: &LinkViews,
    opts: &Options,
    backups: bool,
    deref_never: bool,
) -> Verdict {
    use Verdict::*;
    let LinkViews {
        src_l,
        dst_l,
        same_link,
    } = *views;
    // A backup moves DEST aside, so SOURCE survives, unless they are one directory entry.
    if backups {
        if !same_link {
            // Backing up the file a followed SOURCE symlink names would leave it dangling.
            if !deref_never && src_l.is_symlink() && !dst_l.is_symlink() {
                return Refuse;
            }
            return Proceed;
        }
        return if same_name(src, dst) { Refuse } else { Proceed };
    }

    if opts.remove_destination {
        if dst_l.is_symlink() {
            return Proceed;
        }
        // Another hard link of SOURCE: unlinking it loses nothing.
        if same_link && dst_l.nlink() > 1 && !same_name(src, dst) {
            return Proceed;
        }
    }

    if !src_l.is_symlink() && !dst_l.is_symlink() {
        if src_l.id() != dst_l.id() {
            return Proceed;
        }
        if opts.hard_link {
            return Done;
        }
    }

    // A DEST symlink is replaced by the new one, not written through.
    if opts.symbolic_link && dst_l.is_symlink() {
        return Proceed;
    }

    if deref_never {
        let resolved = |at: At<'_>, l: &Stat| -> Option<FileId> {
            if l.is_symlink() {
                at.dir.stat(at.name, true).ok().map(|m| m.id())
            } else {
                Some(l.id())
            }
        };
        let (Some(s), Some(d)) = (resolved(src, &src_l), resolved(dst, &dst_l)) else {
            return Proceed;
        };
        if s != d {
            return Proceed;
        }
        if opts.hard_link {
            return if dst_l.is_symlink() { Proceed } else { Done };
        }
    }
    Refuse
}

/// The last component of a name inside its directory (trailing slashes ignored).
pub fn last_component(name: &OsStr) -> &OsStr {
    let b = name.as_bytes();
    let end = b.len() - b.iter().rev().take_while(|&&c| c == b'/').count();
    let b = &b[..end];
    match b.iter().rposition(|&c| c == b'/') {
        Some(i) => OsStr::from_bytes(&b[i + 1..]),
        None => OsStr::from_bytes(b),
    }
}

/// The directory part of a name inside its directory, if it has one.
fn dir_part(name: &OsStr) -> Option<&OsStr> {
    let b = name.as_bytes();
    let end = b.len() - b.iter().rev().take_while(|&&c| c == b'/').count();
    b[..end].iter().rposition(|&c| c == b'/').map(|i| {
        if i == 0 {
            OsStr::new("/")
        } else {
            OsStr::from_bytes(&b[..i])
        }
    })
}

/// Whether two names are one directory entry: the same last component in the same
/// directory (GNU's same_nameat).
pub fn same_name(a: At<'_>, b: At<'_>) -> bool {
    if last_component(a.name) != last_component(b.name) {
        return false;
    }
    let dir_id = |at: At<'_>| match dir_part(at.name) {
        Some(d) => at.dir.stat(d, true).map(|m| m.id()),
        None => at.dir.stat_self().map(|m| m.id()),
    };
    match (dir_id(a), dir_id(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_parts() {
        assert_eq!(last_component(OsStr::new("a/b//")), "b");
        assert_eq!(last_component(OsStr::new("b")), "b");
        assert_eq!(dir_part(OsStr::new("a/b")), Some(OsStr::new("a")));
        assert_eq!(dir_part(OsStr::new("/b")), Some(OsStr::new("/")));
        assert_eq!(dir_part(OsStr::new("b/")), None);
    }
}
