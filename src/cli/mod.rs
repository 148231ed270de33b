//! The command line (clap derive). One definition feeds parsing, --help, the man page and the
//! shell completions. Option values that GNU cp validates with `argmatch` (abbreviations,
//! its exact error text) are taken as strings here and checked in `options`.

pub mod getopt;
pub mod staging;

use aiscp_engine::digest::Algorithm;
use aiscp_engine::SparseMode;
use clap::builder::{PossibleValue, TypedValueParser};
use clap::{ArgAction, Parser, ValueHint};
use std::ffi::OsStr;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The program name for message prefixes: `argv[0]` exactly as invoked.
pub fn program() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::env::args_os()
            .next()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_else(|| "aiscp".to_owned())
    })
}

/// The whole cp command line plus aiscp's own flags.
#[derive(Parser, Debug)]
#[command(
    name = "aiscp",
    version,
    about = "copy files and directories, staging file data through GPU memory",
    long_about = "Copy SOURCE to DEST, or multiple SOURCE(s) to DIRECTORY, like cp(1), with every \
byte of file data staged through GPU memory (AMD hipFile or NVIDIA cuFile; host memory where no \
GPU library loads).",
    args_override_self = true,
    override_usage = "aiscp [OPTION]... [-T] SOURCE DEST\n       aiscp [OPTION]... SOURCE... DIRECTORY\n       aiscp [OPTION]... -t DIRECTORY SOURCE...\n       aiscp --doctor [PATH]...\n       aiscp --serve [--socket PATH] [--idle-exit DURATION] [GPU STAGING OPTION]...",
    after_help = "Exit status: 0 when every SOURCE was copied; 1 when any operand failed, on a usage \
error, or when the staging backend cannot start. SIGINT, SIGTERM and SIGHUP stop the copy cleanly, \
then aiscp dies of the signal, as cp does: a shell shows 130 after SIGINT, 143 after SIGTERM and \
129 after SIGHUP. `aiscp --doctor` says why data does not go through a GPU; the man page's \
TROUBLESHOOTING section has the fixes."
)]
pub struct Cli {
    /// Same as -dR --preserve=all
    #[arg(short = 'a', long, action = ArgAction::SetTrue)]
    pub archive: bool,
    /// Don't copy the file data, just the attributes
    #[arg(long, action = ArgAction::SetTrue)]
    pub attributes_only: bool,
    /// Make a backup of each existing destination file
    #[arg(long, value_name = "CONTROL", num_args = 0..=1, require_equals = true,
          default_missing_value = "", value_parser = Choices(BACKUP_CHOICES))]
    pub backup: Option<String>,
    /// Like --backup but does not accept an argument
    #[arg(short = 'b', action = ArgAction::SetTrue)]
    pub backup_short: bool,
    /// Copy contents of special files when recursive
    #[arg(long, action = ArgAction::SetTrue)]
    pub copy_contents: bool,
    /// Same as --no-dereference --preserve=links
    #[arg(short = 'd', action = ArgAction::SetTrue)]
    pub no_deref_preserve_links: bool,
    /// If an existing destination file cannot be opened, remove it and try again
    #[arg(short = 'f', long, action = ArgAction::SetTrue)]
    pub force: bool,
    /// Prompt before overwrite
    #[arg(short = 'i', long, action = ArgAction::SetTrue)]
    pub interactive: bool,
    /// Follow command-line symbolic links in SOURCE
    #[arg(short = 'H', action = ArgAction::SetTrue)]
    pub deref_command_line: bool,
    /// Hard link files instead of copying
    #[arg(short = 'l', long, action = ArgAction::SetTrue)]
    pub link: bool,
    /// Always follow symbolic links in SOURCE
    #[arg(short = 'L', long, action = ArgAction::SetTrue)]
    pub dereference: bool,
    /// Do not overwrite an existing file
    #[arg(short = 'n', long, action = ArgAction::SetTrue)]
    pub no_clobber: bool,
    /// Never follow symbolic links in SOURCE
    #[arg(short = 'P', long, action = ArgAction::SetTrue)]
    pub no_dereference: bool,
    /// Same as --preserve=mode,ownership,timestamps
    #[arg(short = 'p', action = ArgAction::SetTrue)]
    pub preserve_default: bool,
    /// Preserve the specified attributes (default: mode,ownership,timestamps), if possible
    /// additional attributes: context, links, xattr, all
    #[arg(long, value_name = "ATTR_LIST", num_args = 0..=1, require_equals = true,
          default_missing_value = "mode,ownership,timestamps", action = ArgAction::Append,
          value_parser = Choices(PRESERVE_CHOICES))]
    pub preserve: Vec<String>,
    /// Don't preserve the specified attributes
    #[arg(long, value_name = "ATTR_LIST", action = ArgAction::Append,
          value_parser = Choices(PRESERVE_CHOICES))]
    pub no_preserve: Vec<String>,
    /// Use full source file name under DIRECTORY
    // --path: cp's deprecated spelling, still accepted.
    #[arg(long, alias = "path", action = ArgAction::SetTrue)]
    pub parents: bool,
    /// Copy directories recursively
    #[arg(short = 'R', visible_short_alias = 'r', long, action = ArgAction::SetTrue)]
    pub recursive: bool,
    /// Control clone/CoW copies; data always passes through the GPU, so only auto and never
    /// can be honoured
    #[arg(long, value_name = "WHEN", num_args = 0..=1, require_equals = true,
          default_missing_value = "always", value_parser = Choices(REFLINK_CHOICES))]
    pub reflink: Option<String>,
    /// Remove each existing destination file before attempting to open it
    #[arg(long, action = ArgAction::SetTrue)]
    pub remove_destination: bool,
    /// Control creation of sparse files (auto: stage only the data extents, keep holes)
    #[arg(long, value_name = "WHEN", value_parser = Choices(SPARSE_CHOICES))]
    pub sparse: Option<String>,
    /// Set the SELinux security context of each new file to the default type (accepted and
    /// ignored: aiscp sets no SELinux contexts, as cp on a kernel without SELinux)
    #[arg(short = 'Z', action = ArgAction::SetTrue)]
    pub context_short: bool,
    /// Like -Z, or with CTX set the context to CTX (ignored with a warning, like cp on a
    /// kernel without SELinux)
    #[arg(long = "context", value_name = "CTX", num_args = 0..=1, require_equals = true,
          default_missing_value = "")]
    pub context: Option<String>,
    /// Remove any trailing slashes from each SOURCE argument
    #[arg(long, action = ArgAction::SetTrue)]
    pub strip_trailing_slashes: bool,
    /// Make symbolic links instead of copying
    #[arg(short = 's', long = "symbolic-link", action = ArgAction::SetTrue)]
    pub symbolic_link: bool,
    /// Override the usual backup suffix
    #[arg(short = 'S', long, value_name = "SUFFIX", allow_hyphen_values = true)]
    pub suffix: Option<String>,
    /// Copy all SOURCE arguments into DIRECTORY
    // Every occurrence is kept: cp refuses a second one rather than taking the last.
    #[arg(short = 't', long, value_name = "DIRECTORY", value_hint = ValueHint::DirPath,
          action = ArgAction::Append)]
    pub target_directory: Vec<PathBuf>,
    /// Treat DEST as a normal file
    #[arg(short = 'T', long, action = ArgAction::SetTrue)]
    pub no_target_directory: bool,
    /// Control which existing files are updated (-u: older)
    #[arg(long, value_name = "UPDATE", num_args = 0..=1, require_equals = true,
          default_missing_value = "older", value_parser = Choices(UPDATE_CHOICES))]
    pub update: Option<String>,
    /// Equivalent to --update=older
    #[arg(short = 'u', action = ArgAction::SetTrue)]
    pub update_short: bool,
    /// Explain what is being done
    #[arg(short = 'v', long, action = ArgAction::SetTrue)]
    pub verbose: bool,
    /// Stay on this file system
    #[arg(short = 'x', long, action = ArgAction::SetTrue)]
    pub one_file_system: bool,
    /// Write each file to a temporary name in DEST's directory, fsync it and rename it over
    /// DEST, so readers never see a partial file
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Durability")]
    pub atomic: bool,
    /// Flush each copied file (and, for new files, its directory) to stable storage before
    /// reporting success
    #[arg(long, action = ArgAction::SetTrue, help_heading = "Durability")]
    pub fsync: bool,
    #[command(flatten)]
    pub staging: staging::StagingArgs,
    /// Take a digest of every regular file copied, from the bytes as they are staged (on
    /// the GPU where its kernels compile, else on the CPU), and when done print them one
    /// file a line in cp's order, each DEST named as -v names it: blake3 (the default) in
    /// the form `b3sum --check FILE` reads; crc64nvme or crc32c as the base64 value S3 shows
    /// in its x-amz-checksum-* headers, two spaces, the name (escaped as b3sum escapes).
    /// Printed on stdout once the copy ends (after any -v line), unless --sums-file names a
    /// file
    #[arg(long, value_name = "ALGORITHM", num_args = 0..=1, require_equals = true,
          default_missing_value = "blake3", value_parser = Choices(SUMS_CHOICES),
          help_heading = "Digests")]
    pub sums: Option<String>,
    /// Write the digests to FILE instead of stdout, whole or not at all (a temporary in
    /// FILE's directory renamed over it once the copy ends); implies --sums
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath,
          help_heading = "Digests")]
    pub sums_file: Option<PathBuf>,
    /// When done, print a summary on stdout: labelled lines in words (text, the default):
    /// files copied, skipped (-n, -u, -i) and failed, bytes, time, rate, and the library and
    /// GPU or host memory staged through, with --debug also the routes, each stage's thread
    /// time, start-up and shutdown and the library's own counters; or one JSON object (json)
    /// with all of these. Where the library's counters are shown (json, or text with
    /// --debug) it asks cuFile to count on the library route (hipFile always counts), which
    /// cost 3% of the time of a 1 GiB copy measured on an NVIDIA H200
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, require_equals = true,
          default_missing_value = "text", value_parser = Choices(STATS_CHOICES),
          help_heading = "Reporting")]
    pub stats: Option<String>,
    /// Write the man page or a shell completion script to stdout
    #[arg(long, hide = true, value_name = "WHAT", value_parser = Choices(GENERATE_CHOICES))]
    pub generate: Option<String>,
    /// Check what GPU staging needs on this machine: libraries and versions, GPUs and their
    /// memory, and the route files under each operand (a PATH here) would take, and why.
    /// Exit 0 when a GPU route is possible
    #[arg(long, help_heading = "Reporting")]
    pub doctor: bool,
    /// Instead of copying, run the staging service in the foreground: bring the staging
    /// backend up once (with the GPU staging options given here) and copy the file data of
    /// every aiscp run of this user that finds its socket (see AISCP_SERVICE)
    #[arg(long, help_heading = "Staging service")]
    pub serve: bool,
    /// The service's socket [default: $XDG_RUNTIME_DIR/aiscp/service.sock]; its directory
    /// must be the user's own with mode 0700 (0755 with --allow-users; made so when missing)
    #[arg(long, value_name = "PATH", requires = "serve", value_hint = ValueHint::FilePath,
          help_heading = "Staging service")]
    pub socket: Option<PathBuf>,
    /// Serve these users too (names or uids, comma-separated, or all): a system-wide service.
    /// It still reads and writes only the descriptors each client passes
    #[arg(
        long,
        value_name = "USERS",
        requires = "serve",
        help_heading = "Staging service"
    )]
    pub allow_users: Option<String>,
    /// Exit (releasing the GPU) after this long without a client: 90, 30s, 10m, 2h; 0 never
    #[arg(long, value_name = "DURATION", requires = "serve", default_value = "30m",
          value_parser = parse_duration, help_heading = "Staging service")]
    pub idle_exit: std::time::Duration,
    /// Give the staging memory back (keeping the GPU context) after this long with nothing
    /// to copy; the next file allocates it again. 0 never
    #[arg(long, value_name = "DURATION", requires = "serve", default_value = "1m",
          value_parser = parse_duration, help_heading = "Staging service")]
    pub idle_release: std::time::Duration,
    /// The SOURCE files, then DEST: a file, or the DIRECTORY that receives several SOURCEs
    /// (with -t DIRECTORY, every operand is a SOURCE)
    #[arg(value_name = "OPERAND", value_hint = ValueHint::AnyPath, allow_hyphen_values = false)]
    pub operands: Vec<PathBuf>,
}

/// A duration: seconds, or a number with s, m or h.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let (digits, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (use 90, 30s, 10m or 2h)"))?;
    let secs = match unit {
        "" | "s" => Some(n),
        "m" => n.checked_mul(60),
        "h" => n.checked_mul(3600),
        _ => None,
    };
    secs.map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("'{text}' is not a duration (use 90, 30s, 10m or 2h)"))
}

/// Clap ids of the flags whose relative order matters (GNU applies options left to right).
pub mod ids {
    pub const ARCHIVE: &str = "archive";
    pub const D: &str = "no_deref_preserve_links";
    pub const H: &str = "deref_command_line";
    pub const L: &str = "dereference";
    pub const P: &str = "no_dereference";
    pub const PRESERVE_DEFAULT: &str = "preserve_default";
    pub const PRESERVE: &str = "preserve";
    pub const NO_PRESERVE: &str = "no_preserve";
    pub const INTERACTIVE: &str = "interactive";
    pub const NO_CLOBBER: &str = "no_clobber";
    pub const UPDATE: &str = "update";
    pub const UPDATE_SHORT: &str = "update_short";
}

/// A choice list as GNU's argmatch prints it: groups of synonyms, in GNU's order, each with
/// the value it stands for (so reordering a row cannot move a meaning).
pub type ChoiceGroups<T> = &'static [(&'static [&'static str], T)];

/// `--backup=CONTROL` and `$VERSION_CONTROL`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackupChoice {
    None,
    Simple,
    Existing,
    Numbered,
}

pub const BACKUP_CHOICES: ChoiceGroups<BackupChoice> = &[
    (&["none", "off"], BackupChoice::None),
    (&["simple", "never"], BackupChoice::Simple),
    (&["existing", "nil"], BackupChoice::Existing),
    (&["numbered", "t"], BackupChoice::Numbered),
];

/// One item of `--preserve=LIST` / `--no-preserve=LIST`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreserveItem {
    Mode,
    Timestamps,
    Ownership,
    Links,
    Context,
    Xattr,
    All,
}

pub const PRESERVE_CHOICES: ChoiceGroups<PreserveItem> = &[
    (&["mode"], PreserveItem::Mode),
    (&["timestamps"], PreserveItem::Timestamps),
    (&["ownership"], PreserveItem::Ownership),
    (&["links"], PreserveItem::Links),
    (&["context"], PreserveItem::Context),
    (&["xattr"], PreserveItem::Xattr),
    (&["all"], PreserveItem::All),
];

/// `--reflink=WHEN`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reflink {
    Auto,
    Always,
    Never,
}

pub const REFLINK_CHOICES: ChoiceGroups<Reflink> = &[
    (&["auto"], Reflink::Auto),
    (&["always"], Reflink::Always),
    (&["never"], Reflink::Never),
];

pub const SPARSE_CHOICES: ChoiceGroups<SparseMode> = &[
    (&["never"], SparseMode::Never),
    (&["auto"], SparseMode::Auto),
    (&["always"], SparseMode::Always),
];

/// `--update=WHICH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateWhich {
    All,
    None,
    NoneFail,
    Older,
}

pub const UPDATE_CHOICES: ChoiceGroups<UpdateWhich> = &[
    (&["all"], UpdateWhich::All),
    (&["none"], UpdateWhich::None),
    (&["none-fail"], UpdateWhich::NoneFail),
    (&["older"], UpdateWhich::Older),
];

/// `--stats=FORMAT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsFormat {
    Text,
    Json,
}

pub const STATS_CHOICES: ChoiceGroups<StatsFormat> = &[
    (&["text"], StatsFormat::Text),
    (&["json"], StatsFormat::Json),
];

pub const SUMS_CHOICES: ChoiceGroups<Algorithm> = &[
    (&["blake3"], Algorithm::Blake3),
    (&["crc64nvme"], Algorithm::Crc64Nvme),
    (&["crc32c"], Algorithm::Crc32c),
];

/// What `--generate` writes: the man page or one shell's completions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Generated {
    Man,
    Completions(clap_complete::Shell),
}

pub const GENERATE_CHOICES: ChoiceGroups<Generated> = &[
    (&["man"], Generated::Man),
    (
        &["bash"],
        Generated::Completions(clap_complete::Shell::Bash),
    ),
    (&["zsh"], Generated::Completions(clap_complete::Shell::Zsh)),
    (
        &["fish"],
        Generated::Completions(clap_complete::Shell::Fish),
    ),
    (
        &["elvish"],
        Generated::Completions(clap_complete::Shell::Elvish),
    ),
    (
        &["powershell"],
        Generated::Completions(clap_complete::Shell::PowerShell),
    ),
];

/// Accepts any string (validated later with GNU's rules and messages) but advertises the
/// choices to --help, the man page and the completions.
pub struct Choices<T: 'static>(pub ChoiceGroups<T>);

impl<T> Clone for Choices<T> {
    fn clone(&self) -> Self {
        Choices(self.0)
    }
}

impl<T: Send + Sync + 'static> TypedValueParser for Choices<T> {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        value
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidUtf8).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            self.0
                .iter()
                .flat_map(|(g, _)| g.iter())
                .map(PossibleValue::new),
        ))
    }
}
