//! Parity with GNU cp: each scenario runs GNU cp (the system's, 9.1 here) and aiscp on the
//! same fresh tree and requires the same exit status, stdout, stderr and resulting tree.
//!
//! Permission-denied cases run both programs as `nobody` through setpriv, because root
//! bypasses permission checks; the temp directory is made world-writable for them.

pub(crate) mod harness;
mod tree;

use crate::support::{not_here, skip, BACKENDS};
use harness::{check, sc, Backend, Scenario};

macro_rules! scenarios {
    ($($name:ident: $s:expr;)*) => {
        /// Every scenario, for the count check.
        fn all() -> Vec<(&'static str, Scenario)> {
            vec![$((stringify!($name), $s)),*]
        }
        mod host {
            use super::*;
            $(#[test] fn $name() { check(&$s, Backend::Host) })*
        }
        mod fake_gpu {
            use super::*;
            $(#[test] fn $name() { check(&$s, Backend::FakeGpu) })*
        }
    };
}

const AB: &str = "text a new\ntext b old";

/// Files of assorted sizes, some unreadable (an error before the data).
const IN_FLIGHT: &str =
    "file a0 70000\nfile a1 1\nfile a2 300000 0000\nfile a3 5000\nfile a4 4096\n\
    file a5 123457\nfile a6 10 0000\nfile a7 65536\nfile a8 9\nfile a9 200000\n\
    file b0 3000\nfile b1 1 0000\nfile b2 80000\nfile b3 0\nfile b4 4097\nfile b5 100\n\
    file b6 250000\nfile b7 7\nfile b8 40000 0000\nfile b9 12345\n\
    dir t 0777";

/// As [`IN_FLIGHT`], with some DESTs there already (so -i asks).
const IN_FLIGHT_PROMPT: &str =
    "file a0 70000\nfile a1 1\nfile a2 300000 0000\nfile a3 5000\nfile a4 4096\n\
    file a5 123457\nfile a6 10 0000\nfile a7 65536\nfile a8 9\nfile a9 200000\n\
    dir t 0777\ntext t/a1 x\ntext t/a3 x\ntext t/a5 x\ntext t/a7 x\n\
    text t/a9 x\nsh chmod 666 t/a1 t/a3 t/a5 t/a7 t/a9";

scenarios! {
    // Operands
    two_operands: sc("file a 4097 0640", "a b");
    empty_source: sc("file a 0", "a b");
    one_byte: sc("file a 1", "a b");
    page_boundary: sc("file a 4096\nfile b 9000 0600", "a b");
    existing_dst_keeps_mode: sc("file a 100 0644\nfile b 5000 0600", "a b");
    into_directory: sc("file a 10\ndir d", "a d");
    many_into_directory: sc("file a 1\nfile b 4097\ndir d", "a b d");
    many_into_file: sc("file a 1\nfile b 1\nfile c 1", "a b c");
    many_into_missing: sc("file a 1\nfile b 1", "a b c");
    missing_operand: sc("", "");
    missing_destination: sc("file a 1", "a");
    target_directory: sc("file a 1\nfile b 2\ndir d", "-t d a b");
    target_directory_missing: sc("file a 1", "-t nonex a");
    target_directory_is_file: sc("file a 1\nfile b 1", "-t b a");
    target_directory_no_sources: sc("dir d", "-t d");
    no_target_directory: sc("file a 1\ndir d", "-T a d");
    no_target_directory_extra: sc("file a 1\nfile b 1", "-T a b c");
    target_directory_twice: sc("file a 1\ndir d\ndir e", "-t d -t e a");
    target_directory_twice_same: sc("file a 1\ndir d", "-t d a -t d");
    t_and_big_t: sc("file a 1\ndir d", "-T -t d a");
    parents: sc("dir p/q\nfile p/q/f 100\ndir t", "-v --parents p/q/f t");
    parents_needs_directory: sc("file a 1\nfile b 1", "--parents a b");
    strip_trailing_slashes: sc("dir d\nfile d/f 10\ndir t", "-r --strip-trailing-slashes d/ t");
    strip_trailing_slashes_two_operands: sc("text a x", "--strip-trailing-slashes a/ b");
    trailing_slash_new_dst: sc("file a 1", "a x/");
    missing_source: sc("", "nonexist b");
    failure_then_success: sc("file a 7\ndir d", "missing a d");
    quoted_single_quote: sc("", "").raw_args(&["it's", "x"]);
    quoted_space: sc("sh printf hi > 'a b'", "").raw_args(&["a b", "c d"]);
    quoted_newline: sc("", "").raw_args(&["nl\nx", "y"]);
    quoted_dollar: sc("", "").raw_args(&["it's $x", "y"]);
    same_file: sc("file a 1", "a a");
    same_file_through_symlink: sc("file a 1\nsym l a", "a l");
    same_file_hard_link: sc("file a 1\nhard h a", "a h");
    source_twice: sc("file a 3\ndir d", "a a d");
    just_created: sc("dir x\ndir y\ntext x/a 1\ntext y/a 2\ndir d", "x/a y/a d");

    // Usage errors
    invalid_short_option: sc("file a 1", "-j a b");
    unknown_long_option: sc("file a 1", "--foo a b");
    bad_sparse: sc("file a 1", "--sparse=bad a b");
    abbreviated_sparse: sc("file a 10", "--sparse=al a b");
    bad_backup_type: sc(AB, "--backup=foo a b");
    bad_preserve: sc(AB, "--preserve=bad a b");
    bad_no_preserve: sc(AB, "--no-preserve=bad a b");
    short_option_needs_argument: sc("", "-t");
    backup_and_no_clobber: sc(AB, "-n -b a b");
    hard_and_symbolic: sc(AB, "-l -s a b");
    reflink_always_with_sparse: sc(AB, "--reflink=always --sparse=never a b");
    abbreviated_long_option: sc("dir d\nfile d/f 5", "--recur d x");
    // getopt's messages: ambiguous prefixes listed in cp's table order (the whole word
    // quoted, value and all), missing and unwanted arguments, empty choices.
    ambiguous_long_option: sc(AB, "--no a b");
    ambiguous_long_option_with_value: sc(AB, "--co=x a b");
    ambiguous_listed_in_cp_order: sc(AB, "--s a b");
    ambiguous_listed_in_cp_order_2: sc(AB, "--re a b");
    ambiguous_listed_once_per_option: sc(AB, "--p a b");
    ambiguous_help_and_version: sc(AB, "--ver a b");
    ambiguous_before_other_errors: sc(AB, "-j --a a b");
    long_option_needs_argument: sc(AB, "a b --suffix");
    short_option_in_cluster_needs_argument: sc(AB, "a b -vS");
    long_option_takes_no_argument: sc(AB, "--archive=1 a b");
    empty_choice_is_ambiguous: sc(AB, "--sparse= a b");
    empty_preserve_is_ambiguous: sc(AB, "--preserve= a b");
    deprecated_path_option: sc("dir p/q\nfile p/q/f 100\ndir t", "-v --path p/q/f t");
    option_value_that_looks_like_an_option: sc(AB, "-b --suffix --no a b");

    // Directories
    directory_without_r: sc("dir d", "d x");
    directory_recursive: sc("dir d 0750\nfile d/f 4097 0600\ndir d/e\nfile d/e/g 0", "-r d x");
    directory_umask_077: sc("dir d 0755\nfile d/f 10 0644\ndir d/e 0775", "-R d x").umask(0o077);
    directory_into_existing: sc("dir d\nfile d/f 3\ndir x 0700", "-r d x");
    directory_merge_existing: sc("dir d\nfile d/f 3\ndir x 0700\ntext x/g keep", "-rT d x");
    directory_into_itself: sc("dir d", "-r d d/sub");
    // Only an empty d: cp lists d after making d/d, in inode order, so whether a file in d
    // is copied before d/d is met depends on inode numbers the two trees need not share.
    directory_into_itself_as_target: sc("dir d", "-r d d");
    directory_over_file: sc("dir d\nfile f 1", "-rT d f");
    file_over_directory: sc("file a 1\ndir d\ndir d/a", "a d");
    readonly_directory_copied: sc("dir d 0555\nfile d/f 1", "-r d x");
    directory_verbose: sc("dir d\nfile d/f 1\ndir d/e\nfile d/e/g 2", "-rv d x");
    directory_one_file_system: sc("dir d\nfile d/f 1", "-rx d x");
    directory_dst_unsearchable: sc("dir d\nfile d/f 1\ndir x 0700", "-rT d x").nobody();
    directory_src_sub_unreadable: sc("dir d\ndir d/e\nfile d/e/f 1\nsh chmod 0 d/e", "-r d x").nobody();
    // Under a limit that keeps only the level being copied open (aiscp's floor, one more
    // for the fake GPU library), the walk comes back up from an unlistable directory by
    // names, not through its "..", and goes on with the level's other entries.
    directory_src_subs_unreadable_few_descriptors: sc(
        "dir d\ndir d/e\nfile d/e/f 1\ndir d/k\nfile d/g 10\ndir d/h\nfile d/h/i 5\n\
         file d/j 3\nsh chmod 0 d/e d/k",
        "-r d x",
    ).nobody().descriptors(8);
    directory_src_subs_unreadable_few_descriptors_a: sc(
        "dir d\ndir d/e\nfile d/e/f 1\ndir d/k\nfile d/g 10\ndir d/h\nfile d/h/i 5\n\
         file d/j 3\nsh chmod 0 d/e d/k",
        "-a d x",
    ).nobody().descriptors(8);
    directory_via_symlink_trailing_slash: sc("dir d\nfile d/f 1\nsym dl d", "-r dl/ x");
    // cp stops a directory at the entry that turns out to be DEST's own copy, and lists
    // entries in inode order: every directory on the way to DEST holds only that one entry,
    // or what gets copied before the error would hang on inode numbers the two trees need
    // not share.
    directory_dot_dot: sc("dir d", "-r d/.. d/y");
    directory_dot_dot_elsewhere: sc("dir s\ndir s/d\nfile s/d/f 1\nfile s/g 4097\ndir x", "-r s/d/.. x/y");
    parents_preserve: sc("dir p 0750\ndir p/q 0700\nfile p/q/f 9\ndir t", "-p --parents p/q/f t");

    // Overwrite rules
    no_clobber: sc(AB, "-n a b");
    no_clobber_verbose: sc(AB, "-nv a b");
    interactive_declined: sc(AB, "-i a b").stdin("n\n");
    interactive_accepted: sc(AB, "-i a b").stdin("y\n");
    interactive_eof: sc(AB, "-i a b");
    interactive_new_file: sc("text a new", "-i a b");
    update_skips_newer_dst: sc("text a new\ntext b old\nold a", "-u a b");
    update_copies_over_older: sc("text a new\ntext b old\nold b", "-u a b");
    update_preserve_same_time: sc(AB, "-pu a b");
    update_preserve_older_dst: sc("text a new\ntext b old\nold b", "-au a b");
    update_tree: sc("dir d\ntext d/f new\ntext d/g new\ndir x\ntext x/f old\ntext x/g old\nold x/g", "-ruv d/f d/g x");
    // Two DEST names of one inode: the first copy (in flight) makes the second up to date.
    update_hard_linked_dests: sc("dir s\ndir s/a\ndir s/b\ntext s/a/f data\nhard s/b/h s/a/f\n\
        dir x\ndir x/a\ndir x/b\ntext x/a/f data\nhard x/b/h x/a/f\nold x/a/f", "-ruv s/. x");
    remove_destination: sc("text a new\ntext b old\nhard h b", "-v --remove-destination a b");
    force_unwritable: sc("text a new\ntext b old\nsh chmod 444 b", "-f a b").nobody();
    unwritable_without_force: sc("text a new\ntext b old\nsh chmod 444 b", "a b").nobody();
    unreadable_source: sc("file a 10 0000", "a b").nobody();
    unwritable_directory: sc("file a 10\ndir ro 0555", "a ro/x").nobody();
    backup_simple: sc(AB, "-b a b");
    backup_verbose: sc(AB, "-bv a b");
    backup_numbered: sc("text a new\ntext b old\ntext b.~1~ older", "--backup=numbered a b");
    backup_existing_numbered: sc("text a new\ntext b old\ntext b.~3~ older", "--backup=existing a b");
    backup_existing_simple: sc(AB, "--backup=nil a b");
    backup_none: sc(AB, "--backup=none a b");
    backup_suffix: sc(AB, "-S .bak a b");
    backup_empty_suffix: sc(AB, "-b --suffix= a b");
    backup_version_control_env: sc(AB, "-b a b").env("VERSION_CONTROL", "numbered");
    backup_suffix_env: sc(AB, "-b a b").env("SIMPLE_BACKUP_SUFFIX", ".old");
    backup_bad_version_control: sc(AB, "-b a b").env("VERSION_CONTROL", "bogus");

    // Attributes
    preserve_p: sc("file a 100 0751", "-p a b");
    preserve_mode: sc("file a 100 0604", "--preserve=mode a b");
    preserve_timestamps: sc("file a 100 0640", "--preserve=timestamps a b");
    preserve_all_then_not_mode: sc("dir d 0700\nfile d/f 10 0600", "-a --no-preserve=mode d x");
    sticky_dir_keeps_sticky_with_ownership: sc("dir d 1777\nfile d/f 1", "-r --preserve=ownership d x");
    sticky_dir_plain: sc("dir d 1777\nfile d/f 1", "-r d x");
    archive_tree: sc("dir d 0750\nfile d/f 5000 0640\nsym d/l f\nhard d/h d/f\ndir d/e 0700\nfifo d/p\nfile d/e/z 0 0444", "-a d x");
    setuid_dropped: sc("file a 10 4755", "a b");
    setuid_kept_with_p: sc("file a 10 6755", "-p a b");
    sticky_dropped: sc("file a 10 1777", "a b");
    hard_links_kept_with_d: sc("file a 5\nhard b a\ndir d", "-d a b d");
    hard_links_split_without_preserve: sc("dir d\nfile d/a 5\nhard d/b d/a", "-r d x");
    hard_links_kept_with_preserve_links: sc("dir d\nfile d/a 5\nhard d/b d/a", "-r --preserve=links d x");
    owner_kept_as_nobody_fails_silently: sc("file a 10 0644", "-p a b").nobody();

    // Symlinks
    symlink_followed: sc("file a 10\nsym l a", "l b");
    symlink_not_followed_p: sc("file a 10\nsym l a", "-P l b");
    symlink_d: sc("file a 10\nsym l a", "-d l b");
    symlink_in_tree: sc("dir d\nfile d/f 1\nsym d/l f\nsym d/abs /nonexistent", "-r d x");
    symlink_in_tree_dereferenced: sc("dir d\nfile d/f 1\nsym d/l f", "-rL d x");
    symlink_command_line_h: sc("dir d\nfile d/f 1\nsym dl d\nsym d/l f", "-rH dl x");
    dangling_source: sc("sym l nowhere", "l b");
    dangling_source_p: sc("sym l nowhere", "-P l b");
    dst_symlink_written_through: sc("text a hi\ntext t old\nsym l t", "a l");
    dst_dangling_symlink: sc("text a hi\nsym l nowhere", "a l");
    dst_dangling_symlink_forced: sc("text a hi\nsym l nowhere", "-f a l");
    dst_dangling_symlink_removed: sc("text a hi\nsym l nowhere", "--remove-destination a l");

    // Special files
    fifo_recreated: sc("fifo p", "-r p q");
    char_device_recreated: sc("", "-r /dev/null n");
    char_device_streamed: sc("", "/dev/null n");
    proc_file_streamed: sc("", "/proc/version v");
    copy_contents: sc("", "-r --copy-contents /dev/null n");

    // Sparse, reflink, links, attributes-only
    sparse_auto: sc("sparse s 1048576", "s t");
    sparse_always: sc("sparse s 65536", "--sparse=always s t");
    sparse_never: sc("sparse s 65536", "--sparse=never s t");
    reflink_auto: sc("file a 5000", "--reflink=auto a b");
    reflink_never: sc("file a 5000", "--reflink a b").raw_args(&["--reflink=never", "a", "b"]);
    hard_link_mode: sc("file a 10", "-l a b");
    hard_link_exists: sc(AB, "-l a b");
    hard_link_forced: sc(AB, "-lf a b");
    hard_link_tree: sc("dir d\nfile d/f 3\ndir d/e\nfile d/e/g 3", "-rl d x");
    symbolic_link_mode: sc("file a 10", "-s a b");
    symbolic_link_exists: sc(AB, "-s a b");
    symbolic_link_relative_elsewhere: sc("file a 10\ndir d", "-s a d/x");
    // -p gives the link made by -s SOURCE's times (the file a command-line link leads to,
    // without -a's -P), set on the link itself; `old` tells SOURCE's times from the setup's.
    symbolic_link_preserve: sc("file a 10\nold a", "-ps a b");
    symbolic_link_preserve_timestamps: sc("file a 10\nold a", "--preserve=timestamps -s a b");
    symbolic_link_preserve_forced: sc("text a new\nold a\ntext b old", "-fps a b");
    symbolic_link_preserve_of_symlink: sc("file a 10\nsym l a\nold a", "-ps l b");
    symbolic_link_archive_of_symlink: sc("file a 10\nsym l a\nold l", "-as l b");
    attributes_only_existing: sc("file a 100 0700\ntext b old", "--attributes-only -p a b");
    attributes_only_new: sc("file a 100 0640", "--attributes-only a c");

    // Same file, backups of the source, DEST's other names
    symlink_onto_its_target_p: sc("text a precious\nsym sl a", "-P sl a");
    symlink_onto_its_target_a: sc("text a precious\nsym sl a", "-a sl a");
    symlink_onto_its_target_r: sc("text a precious\nsym sl a", "-r sl a");
    force_backup_same_name: sc("text a precious", "-fbv a a");
    force_backup_numbered_same_name: sc("text a precious\ntext a.~1~ old", "--backup=numbered -f a a");
    force_backup_same_name_t: sc("text a precious", "-fbT a a");
    backup_would_destroy_source: sc("text a a\ntext a~ a-tilde", "--b=simple a~ a");
    remove_destination_hard_link: sc("text a x\nhard hl a", "--remove-destination a hl");
    dst_dangling_symlink_posixly_correct: sc("text a hi\nsym l nowhere", "a l").env("POSIXLY_CORRECT", "1");
    dst_symlink_loop_forced: sc("text f hi\nsym loop loop", "-f f loop");
    dst_symlink_loop: sc("text f hi\nsym loop loop", "f loop");
    preserve_links_keeps_other_name: sc("text a new\ntext y old\nhard y2 y", "--preserve=links a y");
    archive_keeps_other_name: sc("text a new\ntext y old\nhard y2 y", "-a a y");
    twice_numbered_backup: sc("text a new\ndir out\ntext out/a old", "--backup=numbered -v a a out");
    twice_hard_link_backup: sc("text a new\ndir out\ntext out/a old", "-lbv a a out");
    twice_directory: sc("dir d\ntext d/f x\ndir out", "-rv d d out");
    twice_just_created_symlink: sc("text a x\ndir x\ndir y\nsym x/f ../a\ntext y/f y\ndir out", "-d x/f y/f out");
    preserve_links_through_command_line_symlink: sc("text a x\nsym b a\ndir c", "--preserve=links -R -H a b c");
    preserve_links_through_followed_symlink: sc("dir d\ntext d/a x\nsym d/b a", "--preserve=links -R -L d c");
    update_links_current_names: sc("dir s\ntext s/f x\nhard s/linkm s/f\nhard s/linke s/f\nhard s/fileo s/f\nhard s/fileu s/f\ndir t\ndir t/s\ntext t/s/f y\nhard t/s/linke t/s/f\ntext t/s/fileo o\nold t/s/fileo\ntext t/s/fileu u", "-au s t");
    parents_through_symlinked_directory: sc("dir p\ntext p/f x\ndir t\ndir t/real\nsym t/p real", "--parents -v p/f t");
    fifo_recreated_over_dangling_symlink: sc("fifo p\nsym q nowhere", "-r p q");
    fifo_recreated_over_symlink: sc("fifo p\ntext t x\nsym q t", "-r p q");
    backup_put_back_when_the_copy_fails: sc("file a 10 0000\ntext b old", "-bv a b").nobody();
    update_same_file: sc("text a x", "-u a a");
    no_clobber_same_file: sc("text a x", "-n a a");

    // --atomic changes how DEST is replaced, never what cp decides: aiscp --atomic ends
    // exactly as plain GNU cp does. (DEST's directory is kept out of the compared tree: a
    // rename into it changes its mtime, where cp's write in place does not.)
    atomic_through_symlink: sc("text a new\ntext t old\nsym l t", "a l").ours(&["--atomic"]);
    atomic_through_symlink_chain: sc("text a new\nsym l1 l2\nsym l2 t\ntext t old", "a l1").ours(&["--atomic"]);
    atomic_backup_of_symlink: sc("text a new\ntext t old\nsym l t", "-b a l").ours(&["--atomic"]);
    atomic_remove_destination_symlink: sc("text a new\ntext t old\nsym l t", "--remove-destination -v a l").ours(&["--atomic"]);
    atomic_dangling_symlink: sc("text a new\nsym l nowhere", "a l").ours(&["--atomic"]);
    atomic_dangling_symlink_forced: sc("text a new\nsym l nowhere", "-f a l").ours(&["--atomic"]);
    atomic_dangling_symlink_posixly_correct: sc("text a new\nsym l nowhere", "a l").env("POSIXLY_CORRECT", "1").ours(&["--atomic"]);
    atomic_dangling_symlink_into_directory: sc("text a new\nsym l d/nowhere\ndir d", "a l").env("POSIXLY_CORRECT", "1").ours(&["--atomic"]);
    atomic_symlink_loop_forced: sc("text f hi\nsym loop loop", "-fv f loop").ours(&["--atomic"]);
    atomic_device_written_in_place: sc("text a new\nsh mknod n c 1 3", "a n").ours(&["--atomic"]);
    atomic_device_backed_up: sc("text a new\nsh mknod n c 1 3", "-b a n").ours(&["--atomic"]);
    atomic_unwritable_refused: sc("text a new\ntext b old\nsh chmod 444 b", "a b").nobody().ours(&["--atomic"]);
    atomic_unwritable_forced: sc("text a new\ntext b old\nsh chmod 444 b", "-fv a b").nobody().ours(&["--atomic"]);
    atomic_other_owners_file_refused: sc("text a new\ntext b old", "a b").nobody().ours(&["--atomic"]);
    atomic_setuid_dropped: sc("text a new\ntext b old\nsh chown nobody:nogroup b && chmod 4755 b", "a b").nobody().ours(&["--atomic"]);
    atomic_setgid_dropped: sc("text a new\ntext b old\nsh chown nobody:nogroup b && chmod 2775 b", "a b").nobody().ours(&["--atomic"]);
    atomic_setgid_kept_without_group_exec: sc("text a new\ntext b old\nsh chown nobody:nogroup b && chmod 2664 b", "a b").nobody().ours(&["--atomic"]);
    atomic_owner_kept: sc("text a new\ntext b old\nsh chown nobody:nogroup b && chmod 640 b", "a b").ours(&["--atomic"]);
    atomic_mode_kept: sc("file a 5000 0600\nfile b 10 0751", "a b").ours(&["--atomic"]);
    // -p over the user's own file of a group the user is not in: cp writes in place and
    // gives it SOURCE's group, which the new file can have too.
    atomic_preserve_over_a_foreign_group: sc("text a new\ntext b old\nsh chown nobody:nogroup a && chown nobody:root b", "-p a b").nobody().ours(&["--atomic"]);
    atomic_mode_preserved: sc("file a 5000 0600\nfile b 10 0751", "-p a b").ours(&["--atomic"]);
    atomic_backup_simple: sc("text a new\ntext b old\ntext b~ older", "-bv a b").ours(&["--atomic"]);
    atomic_backup_numbered: sc("text a new\ntext b old\ntext b.~1~ older", "--backup=numbered a b").ours(&["--atomic"]);
    atomic_remove_destination_hard_link: sc("text a x\nhard hl a", "--remove-destination a hl").ours(&["--atomic"]);
    atomic_preserve_links_keeps_other_name: sc("text a new\ntext y old\nhard y2 y", "--preserve=links a y").ours(&["--atomic"]);
    atomic_archive_keeps_other_name: sc("text a new\ntext y old\nhard y2 y", "-a a y").ours(&["--atomic"]);
    atomic_symlink_onto_its_target: sc("text a precious\nsym sl a", "-P sl a").ours(&["--atomic"]);
    atomic_force_backup_same_name: sc("text a precious", "-fbv a a").ours(&["--atomic"]);
    atomic_same_file: sc("text a precious", "a a").ours(&["--atomic"]);
    atomic_same_file_through_symlink: sc("text a x\nsym l a", "a l").ours(&["--atomic"]);
    atomic_long_name: sc("text a new\ntext LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL old", "a LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL").ours(&["--atomic"]);
    atomic_no_clobber: sc("text a new\ntext b old", "-n a b").ours(&["--atomic"]);
    atomic_attributes_only: sc("text a new\ntext b old", "--attributes-only a b").ours(&["--atomic"]);

    // Behaviours coreutils' own tests pin (tests/cp, tests/mv; the test named in each line)
    // cp/cp-i: -i asks before finding DEST a directory; declining is no error.
    interactive_over_directory_declined: sc("text f x\ndir d\ndir d/f", "-i f d").stdin("n\n");
    interactive_over_directory_accepted: sc("text f x\ndir d\ndir d/f", "-i f d").stdin("y\n");
    // mv/i-2: the question names an unwritable DEST's mode.
    interactive_unwritable_forced: sc("text e e\ntext f f\nsh chmod 0 f", "-if e f").stdin("y\n").nobody();
    interactive_unwritable: sc("text e e\ntext f f\nsh chmod 4710 f", "-i e f").stdin("y\n").nobody();
    interactive_hard_link_replaces: sc(AB, "-li a b").stdin("y\n");
    interactive_symlink_refused: sc(AB, "-si a b").stdin("y\n");
    // cp/abuse: no write through a symlink an earlier operand made.
    through_just_created_dangling_symlink: sc("dir a\ndir b\ndir c\nsym a/1 ../t\ntext b/1 payload", "-dR a/1 b/1 c");
    through_just_created_symlink: sc("dir a\ndir b\ndir c\nsym a/1 ../t\ntext b/1 payload\ntext t i", "-dR a/1 b/1 c");
    // mv/childproof, mv/dup-source: numbered backups let a second source replace the first.
    just_created_numbered_backup: sc("dir a\ndir b\ndir c\ntext a/f a\ntext b/f b", "--backup=numbered a/f b/f c");
    just_created_hard_link: sc("dir a\ndir b\ndir c\ntext a/f a\ntext b/f b", "-l a/f b/f c");
    source_twice_numbered_backup: sc("text a x\ndir d", "--backup=numbered a a d/");
    source_twice_backup: sc("text a x\ndir d", "--backup a a d/");
    source_directory_twice: sc("dir b\ndir d", "-a ./b b d/");
    source_directory_twice_into_itself: sc("dir b", "-a ./b b b/");
    // cp/attr-existing: --attributes-only never removes DEST, and a symlink can't be made
    // over a file without -f or --remove-destination.
    attributes_only_symlink_over_file: sc("text file1 1\ntext file2 2\nsym sym1 file1", "-a --attributes-only sym1 file2");
    attributes_only_symlink_removed: sc("text file1 1\ntext file2 2\nsym sym1 file1", "-a --remove-destination --attributes-only sym1 file2");
    attributes_only_hard_linked_dst: sc("text file1 1\ntext file2 2\nhard link2 file2", "-a --attributes-only file1 file2");
    // cp/special-f: a special file copied with -R replaces a file.
    fifo_over_file: sc("fifo fifo\ntext e x", "-R fifo e");
    fifo_over_file_forced: sc("fifo fifo\ntext e x", "-Rf fifo e");
    symlink_over_file_verbose: sc("text f x\nsym s f\ntext d y", "-av s d");
    hard_linked_dst_replaced_with_links: sc("text a new\ntext b old\nhard h b", "-a a b");
    // cp/cross-dev-symlink: -sf may replace a symlink to SOURCE.
    symlink_over_symlink_to_source: sc("text f x\nsym l f", "-dsf f l");
    symlink_forced_over_symlink: sc("text f x\nsym l f", "-sf f l");
    // cp/fail-perm: a DEST symlink that can't be followed is an error, not dangling.
    dst_symlink_unreachable: sc("dir D\ndir D/D\nsh chmod 0 D\nsym symlink D/D\ntext F x", "F symlink").nobody();
    // cp/link-preserve: -H and -L keep links made by following symlinks.
    links_through_command_line_symlink: sc("text a x\nsym b a\ndir c", "--preserve=links -R -H a b c");
    links_through_symlink_in_tree: sc("dir d\ntext d/a x\nsym d/b a", "--preserve=links -R -L d c");
    // cp/preserve-link: -u links later names to an up-to-date first one.
    update_keeps_hard_links: sc("dir s\ntext s/f x\nhard s/g s/f\ndir t/s\ntext t/s/f y\ntext t/s/g y", "-au s t");
    // cp/preserve-gid: an owner that can't be kept still leaves the group.
    group_kept_without_owner: sc("text a x\nsh chgrp 65534 a\ndir g 2777", "-p a g/b").nobody();
    // cp/cp-parents, cp/parent-perm: --parents modes.
    parents_no_preserve_mode: sc("dir np/b\nsh chmod 0700 np\ntext np/b/file x\nsh chmod 775 np/b/file\ndir np_dest", "--parents --no-preserve=mode np/b/file np_dest/");
    parents_preserve_existing_ancestors: sc("dir a/b/c\ndir a/b/d\ndir e\ntext a/b/c/foo x\ntext a/b/d/foo y\nsh cp -p --parents a/b/c/foo e && chmod g-rx e/a e/a/b", "-p --parents a/b/d/foo e");
    parents_unwritable_source_dir: sc("dir u/v\ntext u/v/f x\nsh chmod 0555 u u/v\ndir t 0777", "--parents u/v/f t").nobody();
    // cp/existing-perm-race: data from a stream reaches DEST while the writer pauses.
    stream_written_as_it_arrives: sc("fifo p\nsh (i=0; echo foo; while test ! -s q && test $i -lt 50; do sleep 0.1; i=$((i+1)); done; if test -s q; then echo streamed; else echo held; fi > seen; echo bar) > p &", "p q");

    // Verbose
    verbose: sc("file a 3", "-v a b");
    verbose_many: sc("file a 3\nfile b 4\ndir d", "-v a b d");

    // Many files in flight: -v lines, errors found while opening (on the walk, for the
    // unreadable files) and errors found in the data (reading /proc/self/mem fails with EIO,
    // in a worker) must come out in cp's order, on one stream; the second mem is refused or
    // not as the first one's failure decides; a prompt follows every earlier file's messages.
    in_flight_verbose_errors: sc(IN_FLIGHT, "-v a0 a1 /proc/self/mem a2 a3 a4 a5 a6 a7 /proc/thread-self/mem a8 a9 b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 t").nobody().merged();
    in_flight_errors: sc(IN_FLIGHT, "a0 /proc/self/mem a1 a2 a3 a4 a5 a6 a7 a8 a9 b0 b1 b2 b3 b4 b5 b6 b7 b8 /proc/thread-self/mem b9 t").nobody().merged();
    in_flight_prompts: sc(IN_FLIGHT_PROMPT, "-iv a0 /proc/self/mem a1 a2 a3 a4 a5 a6 a7 a8 a9 t").nobody().stdin("y\nn\ny\nn\ny\n");
    // The same on the GPU's bounce route (the library route copies files in turn).
    in_flight_verbose_errors_bounce: sc(IN_FLIGHT, "-v a0 a1 /proc/self/mem a2 a3 a4 a5 a6 a7 /proc/thread-self/mem a8 a9 b0 b1 b2 b3 b4 b5 b6 b7 b8 b9 t").nobody().merged().env("AISCP_ROUTE", "bounce");
    in_flight_tree_bounce: sc("dir s\nfile s/a 70000\nfile s/b 1\nfile s/c 0\ndir s/d\nfile s/d/e 300000\nsparse s/d/h 200000\nfile s/g 9000 0750", "-a s t").env("AISCP_ROUTE", "bounce");
    // Files in flight that share data wait for each other, as cp's order would have it: two
    // DESTs that are one inode, and a DEST that is a later SOURCE.
    in_flight_same_dest_inode: sc("file a 70000\nfile b 50000\nfile c 3000\ndir t\ntext t/a x\nhard t/b t/a", "-v a b c t");
    in_flight_dest_is_a_later_source: sc("file x 70000\nfile y 50000\nfile z 9000\ndir d\nhard d/x y", "-v x y z d");
    in_flight_tree: sc("dir s\nfile s/a 70000\nfile s/b 1\nfile s/c 0\ndir s/d\nfile s/d/e 300000\nfile s/d/f 5000 0600\nfile s/g 9000 0750", "-rv s t").merged();
    // Walk order: a directory's entries sorted stably by inode, so two names of one inode
    // come in readdir order (on ext4 here "b" before "a"), in -v and in which DEST is
    // written in place and which is unlinked and linked to it; a second inode beside them.
    walk_order_names_of_one_inode: sc("dir s\ntext s/a x\nhard s/b s/a\nhard s/c s/a\ntext s/d y", "-rv s o");
    walk_order_links_over_existing_dests: sc("dir s\ntext s/a x\nhard s/b s/a\ndir o\ndir o/s\ntext o/s/a old\ntext o/s/b old\nhard o/s/keep o/s/a", "-rv --preserve=links s o");
    // -H follows symlinks on the command line only: below it a DEST in the way of a symlink
    // or FIFO is unlinked first, as under -P.
    h_is_p_below_the_command_line: sc("dir src\nsym src/l target\nfifo src/p\ndir dst\ndir dst/src\ntext dst/src/l hi\ntext dst/src/p hi", "-rHv src dst");
    h_follows_command_line_symlinks: sc("dir d\ntext d/f x\nsym dl d\ndir dst\ndir dst/dl\nsym dst/dl/f nowhere", "-rHv dl dst");
    // --preserve=links: a directory reached a second time where no symlink was followed to
    // it (here h is a symlink to "." followed on the command line, and h/f is f again).
    preserve_links_directory_reached_twice: sc("dir s\ndir s/f\ntext s/f/x x\nsym s/h .\ndir out", "-rH --preserve=links s/f s/h out");
    preserve_links_directory_reached_twice_a: sc("dir s\ndir s/f\ntext s/f/x x\nsym s/h .\ndir out", "-aH s/f s/h out");
    preserve_links_directory_reached_again_through_l: sc("dir s\ndir s/f\ntext s/f/x x\ndir s/g\nsym s/g/f ../f\ndir out", "-rL --preserve=links s/f s/g out");
}

/// Files and a directory carrying user xattrs.
fn with_xattrs(args: &str) -> Scenario {
    sc(
        "file a 100 0640\nxattr a user.color blue\nxattr a user.empty-ish x\n\
         dir d\nxattr d user.dir yes\nfile d/f 5000\nxattr d/f user.k v\nsym d/l f",
        args,
    )
}

/// -a and --preserve=xattr copy user xattrs (files and directories, not the ancestors
/// --parents makes); -p and --no-preserve=xattr don't. Needs a temp filesystem that takes user xattrs.
#[test]
fn xattrs_like_gnu() {
    if let Err(why) = tree::user_xattrs_supported() {
        skip("TMPDIR takes no user xattrs", &why);
        return;
    }
    let cases = [
        "-a a b",
        "--preserve=xattr a b",
        "-p a b",
        "a b",
        "-a d x",
        "-r --preserve=xattr d x",
        "-rp d x",
        "-a --no-preserve=xattr d x",
        // The directories --parents makes get no xattrs (cp/parent-perm's re_protect).
        "-a --parents d/f d",
        "--preserve=xattr --parents d/f d",
    ];
    for args in cases {
        for backend in BACKENDS {
            check(&with_xattrs(args), backend);
        }
    }
}

/// --atomic replaces DEST with a new file that keeps what the old one had, as cp's in-place
/// write keeps it: an ACL denying a user (who must still be denied), user xattrs, and no
/// ACL inherited from the directory's default where DEST had none. Run as a user (nobody).
#[test]
fn atomic_keeps_acls_and_xattrs_like_gnu() {
    if let Err(why) = tree::acls_supported() {
        skip("TMPDIR takes no POSIX ACLs", &why);
        return;
    }
    if let Err(why) = tree::user_xattrs_supported() {
        skip("TMPDIR takes no user xattrs", &why);
        return;
    }
    let cases = [
        // u:daemon:--- on a 0644 file: daemon may not read it, before or after.
        "text a new\ntext b old\nacl b 1 0\nsh chown nobody:nogroup b",
        "text a new\ntext b old\nxattr b user.k v\nxattr b user.other w\nsh chown nobody:nogroup b",
        // The directory's default ACL came after DEST: DEST has none, nor may its replacement.
        "text a new\ntext b old\nsh chown nobody:nogroup b\ndacl . 1 0",
    ];
    for setup in cases {
        for args in ["a b", "-p a b"] {
            for backend in BACKENDS {
                check(&sc(setup, args).nobody().ours(&["--atomic"]), backend);
            }
        }
    }
}

/// POSIX ACLs: -p, -a and --preserve=mode carry a file's (or a recreated FIFO's) access ACL
/// and a directory's default ACL (GNU's copy_acl), and drop one DEST inherited where SOURCE
/// has none; --preserve=xattr alone and no flag don't copy them. Needs a temp filesystem
/// with ACLs.
#[test]
fn acls_like_gnu() {
    if let Err(why) = tree::acls_supported() {
        skip("TMPDIR takes no POSIX ACLs", &why);
        return;
    }
    let with_acls = |args| {
        sc(
            "file a 100 0640\nacl a 65534 6\nfile plain 10 0644\n\
             dir d 0750\ndacl d 65534 7\nacl d 65534 5\nfile d/f 10 0600\nacl d/f 65534 4\n\
             dir t\ndacl t 65534 6\nfifo p\nacl p 65534 6",
            args,
        )
    };
    let cases = [
        "-p a b",
        "--preserve=mode a b",
        "-a a b",
        "--preserve=xattr a b",
        "a b",
        "-p a plain",
        "-a d x",
        "-rp d x",
        "-r d x",
        "-p plain t/",
        "plain t/",
        "-p a t/",
        "-a --no-preserve=mode a b",
        "--preserve=all d/f t/",
        "-a --no-preserve=xattr d x",
        "-a p q",
        "-r p q",
        "-a p t/",
    ];
    for args in cases {
        for backend in BACKENDS {
            check(&with_acls(args), backend);
        }
    }
}

/// SELinux options on a kernel without SELinux (the machines here): -Z and --context are
/// ignored (--context=CTX with a warning), --preserve=context named explicitly stops cp
/// before anything is copied, `all` does not insist on it. With SELinux the messages differ
/// on purpose (aiscp copies no contexts), so the test skips there.
#[test]
fn selinux_options_like_gnu_without_selinux() {
    if std::path::Path::new("/sys/fs/selinux/enforce").exists() {
        not_here("SELinux is enabled here");
        return;
    }
    let cases = [
        "-Z a b",
        "--context a b",
        "--context=system_u:object_r:tmp_t:s0 a b",
        "--preserve=context a b",
        "-a --preserve=context a b",
        "--preserve=all a b",
        "--preserve=context --no-preserve=all a b",
        "--preserve=context --no-preserve=context a b",
        "-Z --preserve=context a b",
    ];
    for args in cases {
        for backend in BACKENDS {
            check(&sc(AB, args), backend);
        }
    }
}

/// A tmpfs mounted at d/m inside the source tree, for -x.
fn with_mount(args: &str) -> Scenario {
    sc(
        "dir d\nfile d/f 10\ndir d/m\nsh mount -t tmpfs -o size=1m,mode=0750 tmpfs d/m\n\
         file d/m/inner 100\ndir d/m/sub\nfile d/m/sub/g 5\ndir d/e\nfile d/e/h 3",
        args,
    )
    .cleanup("umount d/m")
}

/// -x with a real mount point: cp makes the mount point's directory but copies nothing from
/// the other filesystem (and without -x it descends). Needs permission to mount.
#[test]
fn one_file_system_at_a_real_mount() {
    if let Err(why) = harness::can_mount_tmpfs() {
        skip("no mount rights", &why);
        return;
    }
    for args in ["-rxv d x", "-ax d x", "-rv d x", "-Rx --preserve=mode d x"] {
        for backend in BACKENDS {
            check(&with_mount(args), backend);
        }
    }
}

#[test]
fn at_least_sixty_scenarios() {
    let all = all();
    assert!(all.len() >= 60, "only {} scenarios", all.len());
}

/// GNU's tests/cp/same-file.sh table, row for row: every pair of names for one file (a
/// symlink and its target either way round, a file and itself, two symlinks to one file, a
/// file and a hard link of it, a symlink and a hard link of a symlink) under every mix of
/// -d, -f, --remove-destination, -b, -l and -s the GNU test runs, with numbered backups.
#[test]
fn same_file_table_like_gnu() {
    let pairs: [(&str, &'static str); 6] = [
        ("foo symlink", "text foo XYZ\nsym symlink foo"),
        ("symlink foo", "text foo XYZ\nsym symlink foo"),
        ("foo foo", "text foo XYZ"),
        ("sl1 sl2", "text foo XYZ\nsym sl1 foo\nsym sl2 foo"),
        ("foo hardlink", "text foo XYZ\nhard hardlink foo"),
        ("hlsl sl2", "text foo XYZ\nsym sl2 foo\nhard hlsl sl2"),
    ];
    let options = [
        "", "-d", "-f", "-df", "--rem", "-b", "-bd", "-bf", "-bdf", "-l", "-dl", "-fl", "-dfl",
        "-bl", "-bdl", "-bfl", "-bdfl", "-s", "-sf",
    ];
    // The rows GNU's test leaves out as not portable (hard links to symlinks).
    let skipped = [
        ("symlink foo", "-dfl"),
        ("symlink foo", "-bdl"),
        ("symlink foo", "-bdfl"),
        ("sl1 sl2", "-dfl"),
        ("sl1 sl2", "-bdl"),
        ("sl1 sl2", "-bdfl"),
        ("sl1 sl2", "-dl"),
    ];
    for (args, setup) in pairs {
        for opt in options {
            if skipped.contains(&(args, opt)) {
                continue;
            }
            let s = sc(setup, &format!("{opt} {args}")).env("VERSION_CONTROL", "numbered");
            for backend in BACKENDS {
                check(&s, backend);
            }
        }
    }
}
