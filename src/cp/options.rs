//! cp's decisions, resolved from the command line: the flags applied left to right as GNU cp
//! applies them (so `-a --no-preserve=mode` and `-L -P` mean what they mean there), option
//! values checked with GNU's argmatch rules (unique abbreviations, its error text), and the
//! combinations cp refuses refused with its words.

use crate::cli::{self, ids, BackupChoice, ChoiceGroups, Cli, PreserveItem, Reflink, UpdateWhich};
use aiscp_engine::digest::Algorithm;
use aiscp_engine::quote::{locale_quote, quote_os};
use aiscp_engine::SparseMode;
use clap::ArgMatches;
use std::path::PathBuf;

/// When symlinks in SOURCE are followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deref {
    Always,
    Never,
    CommandLine,
}

/// What to do with an existing destination (-i, -n, --update=none, --update=none-fail).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clobber {
    Overwrite,
    Ask,
    SkipSilently,
    SkipAndFail,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupKind {
    Simple,
    Numbered,
    Existing,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Preserve {
    pub mode: bool,
    pub ownership: bool,
    pub timestamps: bool,
    pub links: bool,
    pub xattr: bool,
    /// Whether failing to copy xattrs is reported (only when named explicitly).
    pub xattr_required: bool,
    /// --no-preserve=mode given: new files get the default 0666/0777 less the umask.
    pub default_mode: bool,
    /// `context` named in --preserve (not through `all`): cp refuses to run when it can't.
    pub context_required: bool,
}

#[derive(Debug)]
pub struct Options {
    pub recursive: bool,
    pub deref: Deref,
    pub preserve: Preserve,
    pub clobber: Clobber,
    pub update_older: bool,
    pub force: bool,
    pub remove_destination: bool,
    pub backup: Option<BackupKind>,
    pub suffix: String,
    pub verbose: bool,
    pub one_file_system: bool,
    pub parents: bool,
    pub strip_trailing_slashes: bool,
    pub target_directory: Option<PathBuf>,
    pub no_target_directory: bool,
    pub hard_link: bool,
    pub symbolic_link: bool,
    pub attributes_only: bool,
    pub copy_contents: bool,
    pub sparse: SparseMode,
    pub reflink_always: bool,
    pub atomic: bool,
    pub fsync: bool,
    /// --sums: the digest taken of every regular file copied.
    pub sums: Option<Algorithm>,
    /// --sums-file: where the digests go (None: stdout).
    pub sums_file: Option<PathBuf>,
}

/// A usage error: the message, printed with the program name and, when `hint`, the
/// "Try --help" line (GNU omits it for a few fatal combinations).
#[derive(Debug)]
pub struct UsageError {
    pub msg: String,
    pub hint: bool,
}

impl UsageError {
    /// A usage error followed by the "Try --help" line.
    pub fn new(msg: impl Into<String>) -> UsageError {
        UsageError {
            msg: msg.into(),
            hint: true,
        }
    }
}

enum Event<'a> {
    Archive,
    NoDerefLinks,
    Deref(Deref),
    PreserveDefault,
    Preserve(&'a str),
    NoPreserve(&'a str),
    Interactive,
    NoClobber,
    Update(&'a str),
    UpdateShort,
}

/// GNU argmatch: an exact match, else a unique prefix (or prefixes that all mean the same).
/// Returns what the group matched stands for.
pub fn argmatch<T: Copy>(
    context: &str,
    value: &str,
    groups: ChoiceGroups<T>,
) -> Result<T, UsageError> {
    let mut found: Option<usize> = None;
    let mut ambiguous = false;
    for (gi, (group, meaning)) in groups.iter().enumerate() {
        for name in group.iter() {
            if *name == value {
                return Ok(*meaning);
            }
            // An empty value is a prefix of every choice: ambiguous, as GNU's argmatch says.
            if name.starts_with(value) {
                match found {
                    None => found = Some(gi),
                    Some(f) if f != gi => ambiguous = true,
                    Some(_) => {}
                }
            }
        }
    }
    match found {
        Some(gi) if !ambiguous => Ok(groups[gi].1),
        _ => {
            let what = if ambiguous { "ambiguous" } else { "invalid" };
            let mut msg = format!(
                "{what} argument {} for {}\nValid arguments are:",
                locale_quote(value),
                locale_quote(context)
            );
            for (g, _) in groups {
                let names: Vec<String> = g.iter().map(|n| locale_quote(n)).collect();
                msg.push_str(&format!("\n  - {}", names.join(", ")));
            }
            Err(UsageError::new(msg))
        }
    }
}

fn apply_preserve(p: &mut Preserve, list: &str, on: bool, ctx: &str) -> Result<(), UsageError> {
    for item in list.split(',') {
        match argmatch(ctx, item, cli::PRESERVE_CHOICES)? {
            PreserveItem::Mode => {
                p.mode = on;
                p.default_mode = !on;
            }
            PreserveItem::Timestamps => p.timestamps = on,
            PreserveItem::Ownership => p.ownership = on,
            PreserveItem::Links => p.links = on,
            // SELinux context: aiscp never copies it; named explicitly, it is an error
            // (checked once all options are read), as in cp without an SELinux kernel.
            PreserveItem::Context => p.context_required = on,
            PreserveItem::Xattr => {
                p.xattr = on;
                p.xattr_required = on;
            }
            PreserveItem::All => {
                p.mode = on;
                p.timestamps = on;
                p.ownership = on;
                p.links = on;
                p.xattr = on;
                if !on {
                    p.xattr_required = false;
                    p.default_mode = true;
                }
            }
        }
    }
    Ok(())
}

/// Whether the kernel runs SELinux (libselinux's test: selinuxfs is mounted).
pub fn selinux_enabled() -> bool {
    std::path::Path::new("/sys/fs/selinux/enforce").exists()
}

fn backup_kind(context: &str, value: &str) -> Result<Option<BackupKind>, UsageError> {
    if value.is_empty() {
        return Ok(Some(BackupKind::Existing));
    }
    Ok(match argmatch(context, value, cli::BACKUP_CHOICES)? {
        BackupChoice::None => None,
        BackupChoice::Simple => Some(BackupKind::Simple),
        BackupChoice::Existing => Some(BackupKind::Existing),
        BackupChoice::Numbered => Some(BackupKind::Numbered),
    })
}

/// GNU ignores an empty suffix or one containing '/', falling back to "~".
fn usable_suffix(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty() && !s.contains('/'))
}

/// What the order-dependent flags (-a, -d, -H/-L/-P, --preserve, --no-preserve, -i, -n,
/// -u, --update) decide, applied left to right.
struct InOrder {
    recursive: bool,
    /// None: no -H/-L/-P/-a/-d given; the default depends on -R and --link.
    deref: Option<Deref>,
    preserve: Preserve,
    clobber: Clobber,
    /// -n was given (it wins over a later --update, and clashes with --backup).
    no_clobber_given: bool,
    update_older: bool,
}

/// The order-dependent flags given on the command line, in the order given.
fn events_in_order<'m>(cli: &'m Cli, m: &'m ArgMatches) -> Vec<(usize, Event<'m>)> {
    let mut events: Vec<(usize, Event<'_>)> = Vec::new();
    let flag = |id: &str| -> Option<usize> {
        if m.value_source(id) == Some(clap::parser::ValueSource::CommandLine) {
            m.indices_of(id).and_then(|mut i| i.next_back())
        } else {
            None
        }
    };
    let simple = [
        (ids::ARCHIVE, Event::Archive),
        (ids::D, Event::NoDerefLinks),
        (ids::H, Event::Deref(Deref::CommandLine)),
        (ids::L, Event::Deref(Deref::Always)),
        (ids::P, Event::Deref(Deref::Never)),
        (ids::PRESERVE_DEFAULT, Event::PreserveDefault),
        (ids::INTERACTIVE, Event::Interactive),
        (ids::NO_CLOBBER, Event::NoClobber),
        (ids::UPDATE_SHORT, Event::UpdateShort),
    ];
    for (id, ev) in simple {
        if let Some(i) = flag(id) {
            events.push((i, ev));
        }
    }
    if let (Some(idx), Some(vals)) = (
        m.indices_of(ids::PRESERVE),
        m.get_many::<String>(ids::PRESERVE),
    ) {
        for (i, v) in idx.zip(vals) {
            events.push((i, Event::Preserve(v)));
        }
    }
    if let (Some(idx), Some(vals)) = (
        m.indices_of(ids::NO_PRESERVE),
        m.get_many::<String>(ids::NO_PRESERVE),
    ) {
        for (i, v) in idx.zip(vals) {
            events.push((i, Event::NoPreserve(v)));
        }
    }
    if let (Some(i), Some(v)) = (flag(ids::UPDATE), cli.update.as_deref()) {
        events.push((i, Event::Update(v)));
    }
    events.sort_by_key(|(i, _)| *i);
    events
}

/// Applies the order-dependent flags left to right, as GNU cp does.
fn apply_in_order(recursive: bool, events: Vec<(usize, Event<'_>)>) -> Result<InOrder, UsageError> {
    let mut r = InOrder {
        recursive,
        deref: None,
        preserve: Preserve::default(),
        clobber: Clobber::Overwrite,
        no_clobber_given: false,
        update_older: false,
    };
    for (_, ev) in events {
        match ev {
            Event::Archive => {
                r.recursive = true;
                r.deref = Some(Deref::Never);
                apply_preserve(&mut r.preserve, "all", true, "--preserve")?;
            }
            Event::NoDerefLinks => {
                r.deref = Some(Deref::Never);
                r.preserve.links = true;
            }
            Event::Deref(d) => r.deref = Some(d),
            Event::PreserveDefault => {
                r.preserve.mode = true;
                r.preserve.ownership = true;
                r.preserve.timestamps = true;
            }
            Event::Preserve(list) => apply_preserve(&mut r.preserve, list, true, "--preserve")?,
            Event::NoPreserve(list) => {
                apply_preserve(&mut r.preserve, list, false, "--no-preserve")?
            }
            Event::Interactive => r.clobber = Clobber::Ask,
            Event::NoClobber => {
                r.clobber = Clobber::SkipSilently;
                r.no_clobber_given = true;
            }
            Event::UpdateShort => r.update_older = true,
            Event::Update(v) => {
                let which = argmatch("--update", v, cli::UPDATE_CHOICES)?;
                if !r.no_clobber_given {
                    (r.update_older, r.clobber) = match which {
                        UpdateWhich::All => (false, Clobber::Overwrite),
                        UpdateWhich::None => (false, Clobber::SkipSilently),
                        UpdateWhich::NoneFail => (false, Clobber::SkipAndFail),
                        UpdateWhich::Older => (true, Clobber::Overwrite),
                    };
                }
            }
        }
    }
    Ok(r)
}

/// Reads an environment variable (None: unset or not UTF-8); tests pass their own.
type Env<'e> = &'e dyn Fn(&str) -> Option<String>;

/// The backup kind (--backup, -b, --suffix; else $VERSION_CONTROL) and suffix (--suffix,
/// else $SIMPLE_BACKUP_SUFFIX, else "~"). The kind is None when no backups are made.
fn backups(cli: &Cli, env: Env<'_>) -> Result<(Option<BackupKind>, String), UsageError> {
    let mut backup = None;
    if makes_backups(cli) {
        backup = match cli.backup.as_deref() {
            Some(v) if !v.is_empty() => backup_kind("backup type", v)?,
            _ => match env("VERSION_CONTROL") {
                Some(v) => backup_kind("$VERSION_CONTROL", &v)?,
                None => Some(BackupKind::Existing),
            },
        };
    }
    let suffix = usable_suffix(cli.suffix.clone())
        .or_else(|| usable_suffix(env("SIMPLE_BACKUP_SUFFIX")))
        .unwrap_or_else(|| "~".to_owned());
    Ok((backup, suffix))
}

/// Whether backups are asked for (--backup, -b or --suffix).
fn makes_backups(cli: &Cli) -> bool {
    cli.backup.is_some() || cli.backup_short || cli.suffix.is_some()
}

/// The combinations cp refuses, in the order cp checks them.
fn refuse_combinations(
    cli: &Cli,
    in_order: &InOrder,
    reflink_always: bool,
    sparse: SparseMode,
) -> Result<(), UsageError> {
    if makes_backups(cli) && in_order.clobber == Clobber::SkipSilently && in_order.no_clobber_given
    {
        return Err(UsageError::new(
            "options --backup and --no-clobber are mutually exclusive",
        ));
    }
    if reflink_always && sparse != SparseMode::Auto {
        return Err(UsageError::new(
            "--reflink can be used only with --sparse=auto",
        ));
    }
    if cli.link && cli.symbolic_link {
        return Err(UsageError::new("cannot make both hard and symbolic links"));
    }
    if in_order.preserve.context_required {
        return Err(UsageError {
            msg: if selinux_enabled() {
                "cannot preserve security context: aiscp does not copy SELinux contexts"
            } else {
                "cannot preserve security context without an SELinux-enabled kernel"
            }
            .into(),
            hint: false,
        });
    }
    Ok(())
}

/// -t's directory: at most one, and not with -T.
fn target_directory(cli: &Cli) -> Result<Option<PathBuf>, UsageError> {
    let target_directory = match cli.target_directory.as_slice() {
        [] => None,
        [t] => Some(t.clone()),
        _ => {
            return Err(UsageError {
                msg: "multiple target directories specified".into(),
                hint: false,
            })
        }
    };
    if target_directory.is_some() && cli.no_target_directory {
        return Err(UsageError {
            msg: "cannot combine --target-directory (-t) and --no-target-directory (-T)".into(),
            hint: false,
        });
    }
    Ok(target_directory)
}

impl Options {
    /// cp's decisions from the parsed command line: the order-dependent flags applied left
    /// to right, option values matched, refused combinations refused with cp's words.
    pub fn resolve(cli: &Cli, m: &ArgMatches) -> Result<Options, UsageError> {
        Options::resolve_in(cli, m, &|name| std::env::var(name).ok())
    }

    /// [`Options::resolve`] with the environment read through `env`.
    fn resolve_in(cli: &Cli, m: &ArgMatches, env: Env<'_>) -> Result<Options, UsageError> {
        let in_order = apply_in_order(cli.recursive, events_in_order(cli, m))?;
        let (backup, suffix) = backups(cli, env)?;
        let sparse = match cli.sparse.as_deref() {
            None => SparseMode::Auto,
            Some(v) => argmatch("--sparse", v, cli::SPARSE_CHOICES)?,
        };
        let reflink_always = match cli.reflink.as_deref() {
            None => false,
            Some(v) => argmatch("--reflink", v, cli::REFLINK_CHOICES)? == Reflink::Always,
        };
        refuse_combinations(cli, &in_order, reflink_always, sparse)?;
        let sums = match cli.sums.as_deref() {
            Some(v) => Some(argmatch("--sums", v, cli::SUMS_CHOICES)?),
            None => cli.sums_file.as_ref().map(|_| Algorithm::Blake3),
        };
        let target_directory = target_directory(cli)?;
        let InOrder {
            recursive,
            deref,
            preserve,
            clobber,
            update_older,
            ..
        } = in_order;
        let deref = deref.unwrap_or(if recursive && !cli.link {
            Deref::Never
        } else {
            Deref::Always
        });
        Ok(Options {
            recursive,
            deref,
            preserve,
            clobber,
            update_older,
            force: cli.force,
            remove_destination: cli.remove_destination,
            backup,
            suffix,
            verbose: cli.verbose,
            one_file_system: cli.one_file_system,
            parents: cli.parents,
            strip_trailing_slashes: cli.strip_trailing_slashes,
            target_directory,
            no_target_directory: cli.no_target_directory,
            hard_link: cli.link,
            symbolic_link: cli.symbolic_link,
            attributes_only: cli.attributes_only,
            copy_contents: cli.copy_contents,
            sparse,
            reflink_always,
            atomic: cli.atomic,
            fsync: cli.fsync,
            sums,
            sums_file: cli.sums_file.clone(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;

/// The message for an operand GNU names in a usage error, e.g. "extra operand 'c'".
pub fn extra_operand(op: &std::ffi::OsStr) -> UsageError {
    UsageError::new(format!("extra operand {}", quote_os(op)))
}
