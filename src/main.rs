//! aiscp: parse, run, map errors to exit status (0 or 1, as cp).

mod cli;
mod cp;
mod data;
mod doctor;
mod generate;
mod progress;
#[cfg(feature = "mpi")]
mod ranks;
mod service;
mod settings;
mod sys;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches};
use cp::options::{self, Options, UsageError};
use cp::plan::{self, PlanError};
use cp::{copy, sums};
use settings::Settings;
use sys::messages::{self, error, program};
use sys::signals;

/// Prints a usage error GNU's way and exits 1.
fn usage_exit(e: &UsageError) -> ! {
    error(&e.msg);
    if e.hint {
        messages::to_stderr_raw(&format!(
            "Try '{} --help' for more information.\n",
            program()
        ));
    }
    messages::exit(1);
}

/// Maps clap's parse errors onto GNU getopt's wording (exit 1, not clap's 2).
fn clap_exit(e: clap::Error) -> ! {
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            messages::to_stdout(|_| e.print());
            messages::exit(0);
        }
        _ => {}
    }
    let ctx = |k: ContextKind| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let last_arg = std::env::args().next_back().unwrap_or_default();
    let msg = match e.kind() {
        ErrorKind::UnknownArgument => {
            let arg = ctx(ContextKind::InvalidArg).unwrap_or_default();
            if arg.starts_with("--") {
                format!("unrecognized option '{arg}'")
            } else {
                let c = arg.trim_start_matches('-').chars().next().unwrap_or('?');
                format!("invalid option -- '{c}'")
            }
        }
        ErrorKind::InvalidValue if last_arg.starts_with('-') => {
            if let Some(long) = last_arg.strip_prefix("--") {
                format!("option '--{long}' requires an argument")
            } else {
                let c = last_arg.chars().last().unwrap_or('?');
                format!("option requires an argument -- '{c}'")
            }
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            // GNU's argmatch shape: "invalid argument 'X' for '--opt'", then why or the
            // valid choices.
            let arg = ctx(ContextKind::InvalidArg).unwrap_or_default();
            let name = arg.split_whitespace().next().unwrap_or("").to_owned();
            let value = ctx(ContextKind::InvalidValue).unwrap_or_default();
            let mut msg = format!("invalid argument '{value}' for '{name}'");
            if let Some(why) = std::error::Error::source(&e) {
                msg.push_str(&format!(": {why}"));
            } else if let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) {
                msg.push_str("\nValid arguments are:");
                for v in valid {
                    msg.push_str(&format!("\n  - '{v}'"));
                }
            }
            msg
        }
        ErrorKind::NoEquals | ErrorKind::TooManyValues => {
            let arg = ctx(ContextKind::InvalidArg).unwrap_or_default();
            let name = arg.split_whitespace().next().unwrap_or("").to_owned();
            format!("option '{name}' doesn't allow an argument")
        }
        _ => e.kind().as_str().unwrap_or("invalid arguments").to_owned(),
    };
    usage_exit(&UsageError::new(msg))
}

/// Trees are walked through directory descriptors, and --preserve=links keeps the directory
/// of each first copy open to link to: lift the soft descriptor limit to the hard one so deep
/// or link-rich trees don't run out.
fn raise_open_file_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid rlimit for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

fn main() {
    let (cli, matches) = parse_command_line();
    if let Some(what) = &cli.generate {
        generate_and_exit(what);
    }
    if cli.doctor {
        let service = service::Choice::from_env();
        messages::exit(doctor::run(&cli.operands, &cli.staging, &service));
    }
    if cli.serve {
        serve_and_exit(&cli);
    }
    warn_of_ignored_flags(&cli, &matches);
    let opts = match Options::resolve(&cli, &matches) {
        Ok(o) => o,
        Err(e) => usage_exit(&e),
    };
    raise_open_file_limit();
    let settings = match Settings::for_copy() {
        Ok(s) => s,
        Err(msg) => {
            error(&msg);
            messages::exit(1);
        }
    };
    let jobs = match plan::plan(&cli.operands, &opts) {
        Ok(j) => j,
        Err(PlanError::Usage(e)) => usage_exit(&e),
        Err(PlanError::Fatal(msg)) => {
            error(&msg);
            messages::exit(1);
        }
    };
    copy_and_exit(&cli, &matches, &opts, &jobs, &settings)
}

/// The command line as clap reads it, long-option prefixes spelled out first as getopt
/// would; a bad one exits with getopt's words.
fn parse_command_line() -> (cli::Cli, clap::ArgMatches) {
    let mut command = cli::Cli::command();
    command.build();
    let args = match cli::getopt::expand_prefixes(&command, std::env::args_os().collect()) {
        Ok(args) => args,
        Err(ambiguous) => {
            // getopt stops at the first bad option: one before this prefix is reported instead.
            if let Err(e) = command.clone().try_get_matches_from(&ambiguous.before) {
                clap_exit(e);
            }
            usage_exit(&UsageError::new(ambiguous.to_string()))
        }
    };
    let matches = match command.try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => clap_exit(e),
    };
    match cli::Cli::from_arg_matches(&matches) {
        Ok(c) => (c, matches),
        Err(e) => clap_exit(e),
    }
}

/// `--generate WHAT`: the man page or a completion script, on stdout.
fn generate_and_exit(what: &str) -> ! {
    let choice = match options::argmatch("--generate", what, cli::GENERATE_CHOICES) {
        Ok(what) => what,
        Err(e) => usage_exit(&e),
    };
    // Rendered into memory first: clap_complete panics on a failed write.
    let mut text = Vec::new();
    match generate::run(choice, &mut text) {
        Ok(()) => messages::write_stdout(&text),
        Err(e) => messages::stdout_failed(&e),
    }
    messages::exit(0);
}

/// `--serve`: the staging service, until it is stopped or idle.
fn serve_and_exit(cli: &cli::Cli) -> ! {
    if let Some(op) = cli.operands.first() {
        usage_exit(&UsageError::new(format!(
            "--serve takes no operands (got {})",
            aiscp_engine::quote::quote(op)
        )));
    }
    raise_open_file_limit();
    let config = aiscp_engine::Config::from(&cli.staging);
    // SAFETY: no thread has started yet; the service starts its own below.
    unsafe { aiscp_engine::prepare_process(&config) };
    let args = service::server::ServeArgs {
        socket: cli.socket.clone(),
        users: match cli.allow_users.as_deref() {
            None => service::users::Users::Own,
            Some(text) => service::users::Users::parse(text).unwrap_or_else(|e| {
                usage_exit(&UsageError::new(format!(
                    "invalid argument {} for '--allow-users': {e}",
                    aiscp_engine::quote::quote(text)
                )))
            }),
        },
        idle_exit: cli.idle_exit,
        idle_release: cli.idle_release,
        queue_limits: Settings::service_queue_limits(),
    };
    messages::exit(service::server::run(config, args));
}

/// Warns of flags given that change nothing here: SELinux contexts, and staging flags the
/// chosen backend ignores.
fn warn_of_ignored_flags(cli: &cli::Cli, matches: &clap::ArgMatches) {
    // aiscp sets no SELinux contexts. Without SELinux that is what cp does too: -Z is ignored
    // silently, --context=CTX with a warning; with SELinux, any -Z/--context gets the warning.
    let context_given = cli.context_short || cli.context.is_some();
    let context_named = cli.context.as_deref().is_some_and(|c| !c.is_empty());
    if options::selinux_enabled() && context_given {
        error("warning: ignoring --context; aiscp does not set SELinux contexts");
    } else if context_named {
        error("warning: ignoring --context; it requires an SELinux-enabled kernel");
    }
    if !cli.staging.quiet {
        for w in cli.staging.ignored_flags(matches) {
            error(&format!("warning: {w}"));
        }
    }
}

/// Copies every operand, then reports (--stats) and exits as cp does, or dies of the
/// signal that stopped the copy.
fn copy_and_exit(
    cli: &cli::Cli,
    #[cfg_attr(not(feature = "mpi"), allow(unused_variables))] matches: &clap::ArgMatches,
    opts: &Options,
    jobs: &[plan::CopyJob],
    settings: &Settings,
) -> ! {
    let mut config = aiscp_engine::Config::from(&cli.staging);
    // SAFETY: no thread has started yet: the signal thread, progress, MPI and the engine's
    // workers all start below.
    unsafe { aiscp_engine::prepare_process(&config) };
    // Under mpirun/srun: ranks other than 0 copy what rank 0 hands them and exit inside `join`.
    #[cfg(feature = "mpi")]
    let ranks = {
        let gpu_given = matches.value_source("gpu") == Some(clap::parser::ValueSource::CommandLine);
        ranks::join(opts, gpu_given, &mut config, settings.queue_limits)
            .map(|rank0| data::mpi_coordinator::Coordinator::new(rank0.world, rank0.piece, &config))
    };
    let signals = install_signals(&config);
    let stats = stats_format(cli);
    // The library counts (at some cost) only where its counts are shown: in the JSON, or in
    // the text under --debug.
    config.library_stats = match stats {
        Some(cli::StatsFormat::Json) => true,
        Some(cli::StatsFormat::Text) => cli.staging.debug,
        None => false,
    };
    let progress = progress::Progress::start(
        cli.staging.progress_view_here(),
        jobs.iter().map(|j| j.src.clone()).collect(),
        progress::Walk::from(opts),
    );
    let service = data::service_client::ServiceClient::new(settings.service.clone(), &config);
    let mut copier = copy::Copier::new(opts, config, progress.sink(), jobs.len() > 1, settings);
    if let Some(client) = service {
        copier.mover = Some(Box::new(client));
    }
    #[cfg(feature = "mpi")]
    if let Some(coordinator) = ranks {
        copier.mover = Some(Box::new(coordinator));
    }
    for job in jobs {
        if signals.cancelled() || copier.backend_failed {
            break;
        }
        copier.copy_top(job);
    }
    copier.settle();
    // The digests of what was copied, unless a signal stopped the run (it dies of it).
    if opts.sums.is_some() && signals.received().is_none() && !write_sums(opts) {
        copier.failed = true;
    }
    finish_and_exit(copier, progress, &signals, stats, cli.staging.debug)
}

/// The handlers that stop the run on a signal, setting `config`'s cancel flag; a run that
/// cannot have them does not start.
fn install_signals(config: &aiscp_engine::Config) -> signals::Signals {
    match signals::Signals::install(std::sync::Arc::clone(&config.cancel)) {
        Ok(s) => s,
        Err(e) => {
            error(&format!(
                "cannot install signal handlers: {}",
                messages::os_text(&e)
            ));
            messages::exit(1);
        }
    }
}

/// --stats' format, if asked for; a bad one ends the run with cp's usage error.
fn stats_format(cli: &cli::Cli) -> Option<cli::StatsFormat> {
    match cli
        .stats
        .as_deref()
        .map(|s| options::argmatch("--stats", s, cli::STATS_CHOICES))
    {
        None => None,
        Some(Ok(format)) => Some(format),
        Some(Err(e)) => usage_exit(&e),
    }
}

/// Writes the digests of what was copied: on stdout after every -v line, or into the
/// --sums-file whole. False when the file could not be written (said already).
fn write_sums(opts: &Options) -> bool {
    let text = sums::text();
    match opts.sums_file.as_deref() {
        None => {
            messages::write_stdout(text.as_bytes());
            true
        }
        Some(file) => match sums::write_file(file, text.as_bytes()) {
            Ok(()) => true,
            Err((what, e)) => {
                messages::fail_os(what, file, &e);
                false
            }
        },
    }
}

/// Ends the run: the engine shut down, the progress view closed, --stats printed, then the
/// exit status (0, or 1 if any operand failed) or death by the signal that stopped it.
fn finish_and_exit(
    mut copier: copy::Copier<'_>,
    progress: progress::Progress,
    signals: &signals::Signals,
    stats: Option<cli::StatsFormat>,
    debug: bool,
) -> ! {
    copier.wait_for_digest_compile();
    let failed = copier.failed;
    let files = copier.files();
    let staged = copier.staged();
    // Dropping the copier shuts the engine down (GPU buffers freed, files deregistered,
    // driver closed); process::exit would skip that.
    let stopping = std::time::Instant::now();
    drop(copier);
    let shutdown = stopping.elapsed();
    let summary = progress.finish(files.bytes);
    if let Some(format) = stats {
        let stopped = failed || signals.received().is_some();
        let report = progress::StatsReport::new(summary, files, &staged, shutdown, stopped);
        let text = match format {
            cli::StatsFormat::Json => report.json(),
            cli::StatsFormat::Text => report.text(debug),
        };
        // A failed write is reported at exit, as for -v lines.
        messages::say(format_args!("{text}"));
    }
    match signals.received() {
        // cp dies of SIGPIPE silently; so does aiscp, once the copy has stopped cleanly.
        Some(libc::SIGPIPE) => signals::die_of_sigpipe(),
        // Dies of the signal, silently, as cp does: a calling shell then stops its loop or
        // script as it would for cp, and shows 128 + the signal as the status.
        Some(sig) => signals::die_by(sig),
        None => messages::exit(i32::from(failed)),
    }
}
