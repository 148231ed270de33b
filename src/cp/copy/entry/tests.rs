//! Entry's decisions on a described DEST, one rule per test: whether DEST is looked at as a
//! link, what -u/-n/-i/--update do with it, and what must happen to it before the new DEST
//! is made. DEST is described by a `struct stat`, never made.

use super::rules::*;
use super::*;
use crate::cp::options::tests::resolve;

/// A DEST of `kind` with `nlink` names.
fn dest(kind: FileKind, nlink: u64) -> Stat {
    // SAFETY: a zeroed `struct stat` is a valid value (all integers).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_mode = match kind {
        FileKind::File => libc::S_IFREG,
        FileKind::Dir => libc::S_IFDIR,
        FileKind::Symlink => libc::S_IFLNK,
        FileKind::Fifo => libc::S_IFIFO,
        FileKind::CharDevice => libc::S_IFCHR,
        FileKind::BlockDevice => libc::S_IFBLK,
        FileKind::Socket => libc::S_IFSOCK,
    } | 0o644;
    st.st_nlink = nlink as _;
    Stat::from(st)
}

fn as_link(flags: &[&str], src_kind: FileKind) -> bool {
    let opts = resolve(flags);
    looks_at_dest_as_link(&opts, opts.backup.is_some(), src_kind)
}

#[test]
fn dest_is_followed_only_where_a_regular_file_is_written_through_it() {
    assert!(!as_link(&[], FileKind::File));
    assert!(!as_link(&["-R"], FileKind::File));
    // Without -R a special file's data is read and written through DEST.
    assert!(!as_link(&[], FileKind::Fifo));
    assert!(as_link(&["-R"], FileKind::Fifo));
    assert!(!as_link(&["-R", "--copy-contents"], FileKind::Fifo));
    // A directory or a symlink is never written through DEST.
    assert!(as_link(&["-R", "--copy-contents"], FileKind::Dir));
    assert!(as_link(&["-P", "--copy-contents"], FileKind::Symlink));
}

#[test]
fn dest_replaced_rather_than_written_is_looked_at_as_a_link() {
    for flags in [&["-s"][..], &["-l"], &["-b"], &["--remove-destination"]] {
        assert!(as_link(flags, FileKind::File), "{flags:?}");
    }
}

fn clobber(flags: &[&str], dst_current: bool) -> Clobbering {
    clobbering(&resolve(flags), dst_current)
}

#[test]
fn an_existing_dest_is_overwritten_by_default() {
    assert_eq!(clobber(&[], true), Clobbering::Overwrite);
    assert_eq!(clobber(&["-f"], false), Clobbering::Overwrite);
}

#[test]
fn update_keeps_a_dest_that_is_current() {
    assert_eq!(clobber(&["-u"], true), Clobbering::KeepCurrent);
    assert_eq!(clobber(&["-u"], false), Clobbering::Overwrite);
    assert_eq!(clobber(&["--update=older"], true), Clobbering::KeepCurrent);
    // -u's keeping wins over asking.
    assert_eq!(clobber(&["-i", "-u"], true), Clobbering::KeepCurrent);
    assert_eq!(clobber(&["-i", "-u"], false), Clobbering::Ask);
}

#[test]
fn no_clobber_skips_none_fail_refuses_interactive_asks() {
    assert_eq!(clobber(&["-n"], false), Clobbering::Skip);
    assert_eq!(clobber(&["--update=none"], false), Clobbering::Skip);
    assert_eq!(clobber(&["--update=none-fail"], false), Clobbering::Refuse);
    assert_eq!(clobber(&["-i"], false), Clobbering::Ask);
}

/// The room rule for `flags`, a SOURCE of `src_kind` and DEST `dm`; `dot` when SOURCE is
/// `.` or `..`.
fn room(flags: &[&str], src_kind: FileKind, dm: &Stat, dot: bool) -> Room {
    let opts = resolve(flags);
    let follows = opts.deref == Deref::Always;
    room_for(&opts, opts.backup.filter(|_| !dot), src_kind, follows, dm)
}

#[test]
fn a_regular_dest_is_written_in_place() {
    let file = dest(FileKind::File, 1);
    assert_eq!(room(&[], FileKind::File, &file, false), Room::Leave);
    // -f removes DEST only once opening it fails, not before.
    assert_eq!(room(&["-f"], FileKind::File, &file, false), Room::Leave);
}

#[test]
fn a_backup_moves_dest_aside_unless_it_is_a_directory_or_source_is_dot() {
    let file = dest(FileKind::File, 1);
    assert_eq!(
        room(&["--backup=numbered"], FileKind::File, &file, false),
        Room::BackUp(BackupKind::Numbered)
    );
    assert_eq!(
        room(&["-b"], FileKind::Dir, &dest(FileKind::Dir, 2), false),
        Room::Leave
    );
    assert_eq!(room(&["-b"], FileKind::File, &file, true), Room::Leave);
}

#[test]
fn remove_destination_unlinks_any_non_directory() {
    let flags = &["--remove-destination"];
    assert_eq!(
        room(flags, FileKind::File, &dest(FileKind::File, 1), false),
        Room::Unlink
    );
    assert_eq!(
        room(flags, FileKind::File, &dest(FileKind::Symlink, 1), false),
        Room::Unlink
    );
    assert_eq!(
        room(flags, FileKind::Dir, &dest(FileKind::Dir, 2), false),
        Room::Leave
    );
}

#[test]
fn preserve_links_unlinks_a_dest_with_other_names() {
    let flags = &["--preserve=links"];
    assert_eq!(
        room(flags, FileKind::File, &dest(FileKind::File, 2), false),
        Room::Unlink
    );
    assert_eq!(
        room(flags, FileKind::File, &dest(FileKind::File, 1), false),
        Room::Leave
    );
    // --attributes-only changes DEST's attributes, not its names.
    assert_eq!(
        room(
            &["--preserve=links", "--attributes-only"],
            FileKind::File,
            &dest(FileKind::File, 2),
            false
        ),
        Room::Leave
    );
}

#[test]
fn a_special_source_not_followed_unlinks_dest() {
    let file = dest(FileKind::File, 1);
    assert_eq!(room(&["-R"], FileKind::Symlink, &file, false), Room::Unlink);
    assert_eq!(room(&["-R"], FileKind::Fifo, &file, false), Room::Unlink);
    // Followed (-L), the symlink's target is copied as a regular file, in place.
    assert_eq!(room(&["-L"], FileKind::Symlink, &file, false), Room::Leave);
}
