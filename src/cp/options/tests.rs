//! cp's decisions from argv, one rule per test: the command line goes through the same
//! getopt prefixes and clap definition as a run, with the environment given explicitly.

use super::*;
use clap::{CommandFactory, FromArgMatches};
use std::ffi::OsString;

/// The options cp would run with for `args` (after the program name) and `env`.
pub(crate) fn resolve_with_env(args: &[&str], env: &[(&str, &str)]) -> Result<Options, UsageError> {
    let mut command = Cli::command();
    command.build();
    let argv: Vec<OsString> = std::iter::once("aiscp")
        .chain(args.iter().copied())
        .map(OsString::from)
        .collect();
    let argv = cli::getopt::expand_prefixes(&command, argv).expect("no ambiguous prefix");
    let m = command.try_get_matches_from(argv).expect("clap accepts it");
    let cli = Cli::from_arg_matches(&m).expect("clap accepts it");
    let lookup = |name: &str| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    };
    Options::resolve_in(&cli, &m, &lookup)
}

/// The options for `args` with an empty environment.
pub(crate) fn resolve(args: &[&str]) -> Options {
    resolve_with_env(args, &[]).unwrap_or_else(|e| panic!("{args:?} refused: {}", e.msg))
}

/// The usage error `args` get.
fn refused(args: &[&str]) -> UsageError {
    match resolve_with_env(args, &[]) {
        Ok(o) => panic!("{args:?} accepted: {o:?}"),
        Err(e) => e,
    }
}

#[test]
fn the_last_of_h_l_p_wins() {
    assert_eq!(resolve(&["-L", "-P"]).deref, Deref::Never);
    assert_eq!(resolve(&["-P", "-L"]).deref, Deref::Always);
    assert_eq!(resolve(&["-L", "-H"]).deref, Deref::CommandLine);
}

#[test]
fn without_h_l_p_a_recursive_copy_does_not_follow_symlinks() {
    assert_eq!(resolve(&[]).deref, Deref::Always);
    assert_eq!(resolve(&["-R"]).deref, Deref::Never);
    // ... except with --link, which links to what a symlink names.
    assert_eq!(resolve(&["-R", "--link"]).deref, Deref::Always);
}

#[test]
fn archive_is_recursive_no_dereference_and_preserves_all() {
    let o = resolve(&["-a"]);
    assert!(o.recursive);
    assert_eq!(o.deref, Deref::Never);
    let p = o.preserve;
    assert!(p.mode && p.ownership && p.timestamps && p.links && p.xattr);
    // Through `all`, failing to copy xattrs is not reported.
    assert!(!p.xattr_required);
}

#[test]
fn no_preserve_after_archive_takes_the_item_back() {
    let p = resolve(&["-a", "--no-preserve=mode"]).preserve;
    assert!(!p.mode && p.default_mode);
    assert!(p.ownership && p.timestamps && p.links);
}

#[test]
fn archive_after_no_preserve_puts_it_back() {
    // (GNU keeps its explicit_no_preserve_mode flag set; it only counts where mode is not
    // preserved.)
    assert!(resolve(&["--no-preserve=mode", "-a"]).preserve.mode);
}

#[test]
fn a_later_dereference_flag_overrides_archive() {
    assert_eq!(resolve(&["-a", "-L"]).deref, Deref::Always);
    assert_eq!(resolve(&["-L", "-a"]).deref, Deref::Never);
}

#[test]
fn xattr_named_explicitly_must_be_copied() {
    let p = resolve(&["--preserve=xattr"]).preserve;
    assert!(p.xattr && p.xattr_required);
}

#[test]
fn preserve_values_match_unique_prefixes() {
    let p = resolve(&["--preserve=time,own"]).preserve;
    assert!(p.timestamps && p.ownership && !p.mode);
}

#[test]
fn an_unknown_preserve_item_lists_the_valid_ones() {
    let e = refused(&["--preserve=bogus"]);
    assert!(e.msg.starts_with("invalid argument"), "{}", e.msg);
    assert!(e.msg.contains("--preserve") && e.msg.contains("Valid arguments are:"));
    assert!(e.hint);
}

#[test]
fn the_last_of_interactive_and_no_clobber_wins() {
    assert_eq!(resolve(&["-i", "-n"]).clobber, Clobber::SkipSilently);
    assert_eq!(resolve(&["-n", "-i"]).clobber, Clobber::Ask);
}

#[test]
fn no_clobber_wins_over_any_update() {
    let o = resolve(&["-n", "--update=all"]);
    assert_eq!(o.clobber, Clobber::SkipSilently);
    assert!(!resolve(&["-n", "--update=older"]).update_older);
}

#[test]
fn update_values_set_clobber_and_age() {
    let o = |v: &str| {
        let o = resolve(&[&format!("--update={v}")]);
        (o.clobber, o.update_older)
    };
    assert_eq!(o("all"), (Clobber::Overwrite, false));
    assert_eq!(o("none"), (Clobber::SkipSilently, false));
    assert_eq!(o("none-fail"), (Clobber::SkipAndFail, false));
    assert_eq!(o("older"), (Clobber::Overwrite, true));
    assert!(resolve(&["-u"]).update_older);
}

#[test]
fn an_update_after_interactive_replaces_it() {
    assert_eq!(
        resolve(&["-i", "--update=none"]).clobber,
        Clobber::SkipSilently
    );
    assert_eq!(resolve(&["--update=none", "-i"]).clobber, Clobber::Ask);
}

#[test]
fn backups_are_off_unless_asked_for() {
    let o = resolve_with_env(&[], &[("VERSION_CONTROL", "numbered")]).unwrap();
    assert_eq!(o.backup, None);
}

#[test]
fn b_takes_the_kind_from_version_control_else_existing() {
    assert_eq!(resolve(&["-b"]).backup, Some(BackupKind::Existing));
    let env = [("VERSION_CONTROL", "numbered")];
    assert_eq!(
        resolve_with_env(&["-b"], &env).unwrap().backup,
        Some(BackupKind::Numbered)
    );
    // --backup=TYPE beats the variable; TYPE `none`/`off` makes none.
    assert_eq!(
        resolve_with_env(&["--backup=simple"], &env).unwrap().backup,
        Some(BackupKind::Simple)
    );
    assert_eq!(resolve(&["--backup=off"]).backup, None);
}

#[test]
fn a_suffix_alone_asks_for_backups() {
    let o = resolve(&["--suffix=.bak"]);
    assert_eq!(o.backup, Some(BackupKind::Existing));
    assert_eq!(o.suffix, ".bak");
}

#[test]
fn an_empty_suffix_or_one_with_a_slash_falls_back() {
    assert_eq!(resolve(&["-b"]).suffix, "~");
    assert_eq!(resolve(&["-b", "--suffix=a/b"]).suffix, "~");
    let env = [("SIMPLE_BACKUP_SUFFIX", ".old")];
    assert_eq!(resolve_with_env(&["-b"], &env).unwrap().suffix, ".old");
    assert_eq!(
        resolve_with_env(&["-b", "--suffix=.new"], &env)
            .unwrap()
            .suffix,
        ".new"
    );
}

#[test]
fn a_bad_version_control_value_is_named_as_the_variable() {
    let e = resolve_with_env(&["-b"], &[("VERSION_CONTROL", "bogus")]).unwrap_err();
    assert!(e.msg.contains("$VERSION_CONTROL"), "{}", e.msg);
}

#[test]
fn backup_and_no_clobber_are_refused_together() {
    let e = refused(&["-b", "-n"]);
    assert_eq!(
        e.msg,
        "options --backup and --no-clobber are mutually exclusive"
    );
    // --update=none is not -n: it goes with backups.
    assert_eq!(
        resolve(&["-b", "--update=none"]).clobber,
        Clobber::SkipSilently
    );
}

#[test]
fn reflink_always_needs_sparse_auto() {
    let e = refused(&["--reflink=always", "--sparse=never"]);
    assert_eq!(e.msg, "--reflink can be used only with --sparse=auto");
    assert!(resolve(&["--reflink=always"]).reflink_always);
    assert!(!resolve(&["--reflink=auto", "--sparse=never"]).reflink_always);
}

#[test]
fn an_empty_choice_is_ambiguous() {
    let e = refused(&["--sparse="]);
    assert!(e.msg.starts_with("ambiguous argument"), "{}", e.msg);
}

#[test]
fn hard_and_symbolic_links_are_refused_together() {
    assert_eq!(
        refused(&["-l", "-s"]).msg,
        "cannot make both hard and symbolic links"
    );
}

#[test]
fn preserving_a_security_context_is_refused_without_the_hint() {
    let e = refused(&["--preserve=context"]);
    assert!(
        e.msg.starts_with("cannot preserve security context"),
        "{}",
        e.msg
    );
    assert!(!e.hint);
    // Through `all` it is not required.
    assert!(!resolve(&["--preserve=all"]).preserve.context_required);
}

#[test]
fn one_target_directory_and_not_with_no_target_directory() {
    let e = refused(&["-t", "a", "-t", "b"]);
    assert_eq!(e.msg, "multiple target directories specified");
    assert!(!e.hint);
    let e = refused(&["-t", "a", "-T"]);
    assert_eq!(
        e.msg,
        "cannot combine --target-directory (-t) and --no-target-directory (-T)"
    );
    assert_eq!(
        resolve(&["-t", "a"]).target_directory,
        Some(PathBuf::from("a"))
    );
}
