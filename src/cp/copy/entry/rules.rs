//! cp's rules for an existing DEST, as functions of the options and DEST's stat alone (no
//! filesystem call), so each is tested on a described DEST: whether DEST is looked at as a
//! link, what -u/-n/-i/--update do with it, and what must happen to it first.

use crate::cp::options::{BackupKind, Clobber, Options};
use crate::sys::stat::{FileKind, Stat};

/// Whether cp looks at DEST without following a symlink: it does unless a regular file's
/// data will be written through it (a SOURCE copied as a regular file, no link made instead,
/// DEST neither backed up nor removed first).
pub(super) fn looks_at_dest_as_link(opts: &Options, backing_up: bool, src_kind: FileKind) -> bool {
    let as_regular = !opts.recursive || opts.copy_contents;
    (src_kind != FileKind::File
        && (!as_regular || matches!(src_kind, FileKind::Dir | FileKind::Symlink)))
        || opts.symbolic_link
        || opts.hard_link
        || backing_up
        || opts.remove_destination
}

/// What -u, -n, -i and --update do with an existing DEST a non-directory would replace.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Clobbering {
    Overwrite,
    /// -u found DEST up to date (`dst_current`).
    KeepCurrent,
    Skip,
    /// --update=none-fail: "not replacing".
    Refuse,
    Ask,
}

pub(super) fn clobbering(opts: &Options, dst_current: bool) -> Clobbering {
    if opts.update_older && dst_current {
        return Clobbering::KeepCurrent;
    }
    match opts.clobber {
        Clobber::Overwrite => Clobbering::Overwrite,
        Clobber::SkipSilently => Clobbering::Skip,
        Clobber::SkipAndFail => Clobbering::Refuse,
        Clobber::Ask => Clobbering::Ask,
    }
}

/// What must happen to an existing DEST (`dm`) before the new one is made.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Room {
    /// Written in place, or merged into (a directory).
    Leave,
    /// Renamed to its backup name.
    BackUp(BackupKind),
    /// Unlinked first: --remove-destination; with --preserve=links, so DEST's other names
    /// keep their data; a SOURCE that is no regular file, copied without following links.
    Unlink,
}

/// The room rule: `backup` is how DEST is backed up (None also where SOURCE is `.` or `..`),
/// `follows` whether symlinks are followed at this level.
pub(super) fn room_for(
    opts: &Options,
    backup: Option<BackupKind>,
    src_kind: FileKind,
    follows: bool,
    dm: &Stat,
) -> Room {
    if dm.is_dir() {
        return Room::Leave;
    }
    if let Some(kind) = backup {
        return Room::BackUp(kind);
    }
    let unlink = opts.remove_destination
        || (!opts.attributes_only
            && ((opts.preserve.links && dm.nlink() > 1)
                || (!follows && src_kind != FileKind::File)));
    if unlink {
        Room::Unlink
    } else {
        Room::Leave
    }
}
