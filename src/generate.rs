//! The man page and shell completions, generated from the same clap definition that parses
//! the command line (`aiscp --generate man|bash|zsh|fish|elvish|powershell`), so they can't
//! drift from the real flags. `generated_files_are_current` (tests/it/cli.rs) fails when the committed files are stale.

use clap::{Command, CommandFactory};
use clap_complete::Shell;
use std::io::{self, Write};

/// The synopsis as cp(1) writes it: clap's would list every flag and miss DEST.
const SYNOPSIS: &str = r#".SH SYNOPSIS
\fBaiscp\fR [\fIOPTION\fR]... [\fB\-T\fR] \fISOURCE\fR \fIDEST\fR
.br
\fBaiscp\fR [\fIOPTION\fR]... \fISOURCE\fR... \fIDIRECTORY\fR
.br
\fBaiscp\fR [\fIOPTION\fR]... \fB\-t\fR \fIDIRECTORY\fR \fISOURCE\fR...
.br
\fBaiscp\fR \fB\-\-doctor\fR [\fIPATH\fR]...
.br
\fBaiscp\fR \fB\-\-serve\fR [\fB\-\-socket\fR \fIPATH\fR] [\fB\-\-idle\-exit\fR \fIDURATION\fR] [\fIGPU STAGING OPTION\fR]...
"#;

/// Sections clap does not know about, in roff.
const EXTRA_SECTIONS: &str = r#".SH "THE STAGING SERVICE"
Bringing a GPU up (libraries, context, staging memory) costs a quarter of a second or more,
paid by every run. \fBaiscp \-\-serve\fR pays it once: it runs in the foreground, keeps the
backend warm and copies the file data of every aiscp run of the same user that finds its
socket. Only the data crosses: the client walks, decides, creates files, prints every message,
sets attributes and exits as it would alone; SOURCE and DEST are passed as open descriptors
(SCM_RIGHTS), and the service never opens a path, so it reads and writes only what the client
could. All clients share one GPU context and one pool of staging buffers (GPU memory is one
context plus \fB\-\-streams\fR x \fB\-\-chunk\-size\fR, however many clients), files in flight
shared fairly between them.
.PP
The socket is \fI$XDG_RUNTIME_DIR/aiscp/service.sock\fR (else \fI/tmp/aiscp\-UID/service.sock\fR),
mode 0600 in a directory of the user's own with mode 0700; the service serves only its own uid
(SO_PEERCRED).
.PP
Under systemd the service can be socket-activated (LISTEN_FDS). A user socket unit,
\fI~/.config/systemd/user/aiscp.socket\fR, holds
.RS
.nf
[Socket]
ListenSequentialPacket=%t/aiscp/service.sock
SocketMode=0600
DirectoryMode=0700
.fi
.RE
.PP
and \fIaiscp.service\fR beside it runs \fBExecStart=\fR\fIPATH\fR\fB \-\-serve \-\-idle\-exit 10m\fR,
where \fIPATH\fR is where aiscp is installed (for example %h/.cargo/bin/aiscp). After
\fBsystemctl \-\-user enable \-\-now aiscp.socket\fR the first copy starts the service, and it
exits after ten minutes without a client.
.PP
A system-wide service for several users is opt-in: \fB\-\-allow\-users\fR all (or a list of
names and uids) serves them too, its socket 0666 in a directory no one else may write (0755 or
tighter). It still reads and writes only the descriptors each client passes, and a client
passes its descriptors only to a service of its own uid or root's.
.PP
A client copies in-process, with one warning, when the service is unreachable, of another
version, refuses, or dies mid-run (kill \-9): files it had are cut back and copied again from
their start, and the exit status is what it would have been. SIGINT at a client stops its files
within a second; the service serves on. \fB\-\-stats\fR and \fB\-\-debug\fR say "through the
staging service (pid N)", with the time to connect in place of the start-up; \fB\-\-doctor\fR
reports the service a copy would use (socket, pid, uptime, GPUs, clients, files copied, staging
memory).
.SH "EXIT STATUS"
.TP
.B 0
Every SOURCE was copied (with \fB\-\-doctor\fR: a GPU route is possible).
.TP
.B 1
An operand failed (each failure is reported on standard error and the other operands are
still copied), a usage error, or the staging backend could not start.
.TP
.B 130
Killed by SIGINT, as a shell shows it: aiscp first finishes the in-flight I/O, gives back the
GPU resources and removes \fB\-\-atomic\fR's temporary file, then dies of the signal, as cp
does, so a calling script or loop stops too. Nothing is printed.
.TP
.B 143
Killed by SIGTERM, after the same clean-up.
.TP
.B 129
Killed by SIGHUP, after the same clean-up.
.SH ENVIRONMENT
.TP
.B AISCP_BACKEND
Default for \fB\-\-backend\fR: auto, gpu, hipfile, cufile or host.
.TP
.B AISCP_ROUTE
Default for \fB\-\-route\fR: auto, library or bounce.
.TP
.B AISCP_HIPFILE_LIB
Path of the hipFile library to load instead of searching for libhipfile.so.0.
.TP
.B AISCP_HIP_LIB
Path of the HIP runtime library (libamdhip64.so) to load instead of searching for it.
.TP
.B AISCP_CUFILE_LIB
Path of the cuFile library to load instead of searching for libcufile.so.0.
.TP
.B AISCP_CUDA_LIB
Path of the CUDA driver library (libcuda.so.1, the driver API cuFile runs on) to load
instead of searching for it.
.TP
.B ROCM_PATH
A ROCm installation searched for libhipfile before /opt/rocm.
.TP
.B CUDA_DEVICE_MAX_CONNECTIONS
Hardware work queues per CUDA context. Unset, aiscp sets 1 for itself when its own bounce
route does the copying (not with \fB\-\-route library\fR or \fB\-\-async\fR): each queue costs
time when the context is created and released, and that route gains nothing from more (with
1, the context is made and released in half the time, and a copy runs as fast). A value you
set is kept.
.TP
.B VERSION_CONTROL
Backup method when \fB\-\-backup\fR or \fB\-b\fR gives none: none/off, simple/never,
existing/nil (the default), numbered/t.
.TP
.B SIMPLE_BACKUP_SUFFIX
Backup suffix when \fB\-S\fR is not given (default ~).
.TP
.B AISCP_SERVICE
Which staging service a copy uses: unset (the default), the per-user socket when it is
there, and none otherwise; a PATH, that socket (a warning when it cannot be used); off, never;
auto, the per-user socket, first starting \fBaiscp \-\-serve \-\-idle\-exit 30s\fR in the
background when none answers. The default starts nothing: holding a GPU context after the
copy is over is the user's choice to make, once (systemd, or auto).
.TP
.B AISCP_IN_FLIGHT
FILES[,BYTES[,DIRECT_FROM]]: how many files (and bytes) a tree copy keeps in flight at once,
and the size from which a file in flight is read and written with O_DIRECT (below it, through
the page cache); 0 files copies one file at a time. For measuring; the defaults (64 files,
256 MiB, 64 KiB) were chosen by measurement. Any other value is refused, exit 1.
.TP
.B AISCP_TEST_PAUSE
For aiscp's own test suite only: POINT:PATH makes the copy create PATH on reaching POINT and
wait until it is removed. Leave it unset.
.TP
.B LC_ALL, LC_CTYPE, LANG
Whether names and quotes in messages are printed as UTF-8, as cp decides.
.SH TROUBLESHOOTING
.TP
.B Why no GPU staging?
\fBaiscp \-\-doctor\fR [\fIPATH\fR]... checks what a copy would: the kernel drivers and
nvidia\-fs, each library (path, version), each GPU, whether a context and the I/O driver open
on \fB\-\-gpu\fR, and for each PATH its filesystem, cuFile's udev record, O_DIRECT, whether
the library registers a file there, and so the route \fB\-\-route auto\fR takes. It exits 0
when a GPU route is possible.
.TP
.B "warning: no usable GPU I/O library ...; copying through host memory"
No GPU library loaded (or no GPU driver is present), so data is copied through host memory.
To silence it on a machine meant to have no GPU, give \fB\-q\fR or set
\fBAISCP_BACKEND=host\fR; to insist on a GPU, \fB\-\-backend gpu\fR makes it an error.
The error comes at the first file with data to copy; the run ends there, and the
directories it made before are finished (their modes set) as at the end of any run.
.TP
.B Which library did it load?
\fBaiscp \-\-debug\fR prints the backend, the library paths and versions, the GPU, the chunk
size and slices, and for each file the route it took (library DMA, or bounce through pinned
host memory), each line stamped with the seconds since the engine started.
.TP
.B Library search
hipFile: libhipfile.so.0, then libhipfile.so, on the loader path, in $ROCM_PATH/lib,
/opt/rocm/lib and /opt/rocm/core\-*/lib, with libamdhip64.so.7, .6 or .5. cuFile:
libcufile.so.0 on the loader path, in /usr/local/cuda/lib64 and
/usr/local/cuda/targets/x86_64\-linux/lib, with libcuda.so.1. \fBAISCP_HIPFILE_LIB\fR,
\fBAISCP_HIP_LIB\fR, \fBAISCP_CUFILE_LIB\fR and \fBAISCP_CUDA_LIB\fR name exact paths
instead; when nothing loads, the message lists every path tried. \fB\-\-backend auto\fR
skips a vendor whose kernel driver (/dev/kfd, /dev/nvidiactl) is absent unless one of its
overrides is set.
.TP
.B "cannot register 'x' with cuFile: ... (5027)"
cuFile reads the block device's udev record (ID_FS_USAGE) before it registers a file; where no
udev runs (many VMs and containers) it refuses. aiscp then stages the file through its bounce
route (still through GPU memory) and goes on. To give cuFile its record, once, as root:
.RS
.nf
mkdir \-p /run/udev/data
printf 'E:ID_FS_USAGE=filesystem\\nE:ID_FS_TYPE=ext4\\n' > /run/udev/data/b$(mountpoint \-d /)
.fi
.RE
.IP
(\fB\-\-doctor PATH\fR prints the same line for PATH's device.)
.TP
.B cuFile compatibility mode
Without the nvidia\-fs kernel module cuFile moves data with POSIX I/O inside the library;
aiscp's \fB\-\-route auto\fR then takes its own bounce route. \fBCUFILE_LOGGING_LEVEL=INFO\fR
makes cuFile log its path to ./cufile.log.
.TP
.B Filesystems without direct I/O
A file whose filesystem refuses O_DIRECT, or that the library will not register (some FUSE,
overlay and network filesystems; tmpfs before Linux 6.6), takes the bounce route
automatically. \fBaiscp \-\-doctor PATH\fR says whether O_DIRECT opens there;
\fB\-\-debug\fR names each file's route.
.SH EXAMPLES
.TP
.B aiscp big.img /mnt/nvme/big.img
Copy one file; its data passes through GPU memory.
.TP
.B aiscp \-a \-\-stats photos/ /backup/
Copy a tree, keeping modes, owners, timestamps, hard links and extended attributes, then
print a summary on stdout in labelled lines (\fB\-\-stats=json\fR: one JSON object), such as
.RS
.nf
Files copied:   13
Files skipped:  2
Files failed:   1
Data copied:    5.03 MiB (5274320 bytes)
Time:           0.02 s
Rate:           251.72 MiB/s
Staged through: hipFile 0.5.0 on GPU 0
.fi
.RE
.IP
Skipped files are those \fB\-n\fR, \fB\-u\fR or \fB\-i\fR left alone; with \fB\-\-debug\fR the summary
adds the routes, each stage's thread time, the start-up and shutdown, and the library's own
counters.
.TP
.B aiscp \-\-backend host \-v a b dir/
Copy through host memory, printing each copy.
.TP
.B aiscp \-\-atomic \-\-fsync model.bin /data/model.bin
Replace a file so readers never see a partial copy, durable on return.
.TP
.B aiscp \-\-serve \-\-idle\-exit 10m &
Keep the GPU warm for every copy of this user until ten minutes pass without one.
.TP
.B AISCP_SERVICE=auto find . \-name '*.bin' \-exec aiscp {} /data/ \e;
One copy per file, all through one service started by the first (exiting 30 s after the last).
.TP
.B aiscp \-\-doctor /data /mnt/nvme
Report the GPU libraries and GPUs, and the route files under each path would take and why.
.SH "SEE ALSO"
.BR cp (1)
"#;

/// Roff for one option letter, as clap_mangen writes it.
fn roff_short(c: char) -> String {
    format!("\\fB\\-{c}\\fR")
}

/// The man page: clap's generated sections, then ours before VERSION.
pub fn man(out: &mut dyn Write) -> io::Result<()> {
    let cmd = crate::cli::Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    out.write_all(SYNOPSIS.as_bytes())?;
    man.render_description_section(out)?;
    writeln!(
        out,
        ".PP\nFile data is staged through GPU memory with AMD hipFile or NVIDIA cuFile \
(loaded at run time); with no GPU library, through host memory after a warning. \
Directories, links, special files and attributes are handled on the host exactly as \
cp does. Messages, exit status and option semantics follow GNU cp."
    )?;
    // clap_mangen leaves visible short aliases out (-r for -R): add them to each header.
    let mut options = Vec::new();
    man.render_options_section(&mut options)?;
    let mut options = String::from_utf8(options).expect("roff is UTF-8");
    for arg in cmd.get_arguments() {
        let (Some(short), Some(aliases)) = (arg.get_short(), arg.get_visible_short_aliases())
        else {
            continue;
        };
        let head = format!("{}, ", roff_short(short));
        let extra: String = aliases
            .iter()
            .map(|&c| format!("{}, ", roff_short(c)))
            .collect();
        options = options.replacen(&format!(".TP\n{head}"), &format!(".TP\n{head}{extra}"), 1);
    }
    out.write_all(options.as_bytes())?;
    out.write_all(EXTRA_SECTIONS.as_bytes())?;
    man.render_version_section(out)?;
    Ok(())
}

/// A completion script for `shell`: clap_complete's, from the options a user may give (the
/// hidden ones left out), with the options whose value is optional completed only as
/// `--opt=VALUE`. getopt reads `--stats json` as `--stats` and an operand `json`, so a value
/// offered after a space would lead into "cannot stat 'json'".
///
/// clap_complete's static scripts are edited for two more things cp's users meet at once,
/// where GNU getopt takes options anywhere and every other word is a file: bash offered every
/// option on an empty word (putting a lone '-' on the line) and offered no values right after
/// `--opt=`; zsh completed nothing after the first operand. clap_complete's own answer to
/// both is its dynamic completer (`CompleteEnv`), which is behind an unstable feature and
/// runs the binary on every TAB; so the few lines are rewritten here, each edit asserting the
/// text it replaces, so a clap_complete that changes them fails `--generate` loudly.
pub fn completion(shell: Shell, out: &mut dyn Write) {
    let mut cmd = visible_command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "aiscp", &mut script);
    let script = String::from_utf8(script).expect("clap_complete writes UTF-8");
    let longs = ValueLongs::of(&cmd);
    let script = match shell {
        Shell::Bash => bash_files(&bash_equals(&script, &longs)),
        Shell::Zsh => zsh_options_after_operands(&zsh_equals(&script, &longs)),
        Shell::Fish => fish_equals(&script, &longs),
        _ => script,
    };
    // Written to memory by the caller: a failed write is reported there.
    let _ = out.write_all(script.as_bytes());
}

/// `text` with `from` replaced by `to` exactly once; `from` must be there.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert!(
        text.matches(from).count() == 1,
        "clap_complete's script changed: {from:?}"
    );
    text.replacen(from, to, 1)
}

/// The command line as completions should offer it: every argument but the hidden ones
/// (clap_complete lists those too).
fn visible_command() -> Command {
    let mut full = crate::cli::Cli::command();
    full.build();
    let mut cmd = Command::new("aiscp")
        .disable_help_flag(true)
        .disable_version_flag(true);
    if let Some(about) = full.get_about() {
        cmd = cmd.about(about.clone());
    }
    if full.get_version().is_some() {
        cmd = cmd.version(env!("CARGO_PKG_VERSION"));
    }
    cmd.args(full.get_arguments().filter(|a| !a.is_hide_set()).cloned())
}

/// The long options that take a value, split by whether the value may be left out.
struct ValueLongs {
    optional: Vec<String>,
    required: Vec<String>,
}

impl ValueLongs {
    fn of(cmd: &Command) -> ValueLongs {
        let mut longs = ValueLongs {
            optional: Vec::new(),
            required: Vec::new(),
        };
        for arg in cmd.get_arguments().filter(|a| !a.is_positional()) {
            let (Some(long), Some(n)) = (arg.get_long(), arg.get_num_args()) else {
                continue;
            };
            match (n.takes_values(), n.min_values()) {
                (false, _) => {}
                (true, 0) => longs.optional.push(long.to_owned()),
                (true, _) => longs.required.push(long.to_owned()),
            }
        }
        longs
    }
}

/// bash splits `--opt=VALUE` at the `=` (COMP_WORDBREAKS), so the option is not the word
/// before the value: right after the `=` the word being completed is `=` itself (bash passes
/// an empty one as `$2`) and the option is `$3`; with part of a value typed, the word before
/// is `=` and the option two back. The script looks there, an optional value is completed
/// only after `=`, and a required one after `=` or a space.
fn bash_equals(script: &str, longs: &ValueLongs) -> String {
    const PREV: &str = "    prev=\"$3\"\n";
    let script = replace_once(
        script,
        PREV,
        &format!(
            "{PREV}    if [[ ${{COMP_WORDS[COMP_CWORD]}} == \"=\" ]]; then\n        \
             cur=\"\"\n        prev=\"${{prev}}=\"\n    \
             elif [[ ${{prev}} == \"=\" && ${{COMP_CWORD}} -ge 2 ]]; then\n        \
             prev=\"${{COMP_WORDS[COMP_CWORD-2]}}=\"\n    fi\n"
        ),
    );
    let mut out = String::with_capacity(script.len() + 1024);
    for line in script.split_inclusive('\n') {
        let label = line.trim_start();
        let indent = &line[..line.len() - label.len()];
        let long = label.strip_prefix("--").and_then(|l| l.strip_suffix(")\n"));
        match long {
            Some(l) if longs.optional.iter().any(|o| o == l) => {
                out.push_str(&format!("{indent}--{l}=)\n"));
            }
            Some(l) if longs.required.iter().any(|o| o == l) => {
                out.push_str(&format!("{indent}--{l}|--{l}=)\n"));
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// Options only on a word that starts with '-', file names (bash's `-o default`, which needs
/// an empty reply) on any other. clap's script offers every option on the command's first word
/// (meant for a subcommand, which aiscp has none of) and, where no case matched, every option
/// that starts with the word: on an empty word, all of them.
fn bash_files(script: &str) -> String {
    let script = replace_once(
        script,
        "if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then",
        "if [[ ${cur} == -* ]] ; then",
    );
    replace_once(
        &script,
        "            esac\n            COMPREPLY=( $(compgen -W \"${opts}\" -- \"${cur}\") )\n",
        "            esac\n",
    )
}

/// `*::` hands the operands' action only the operands (words after the first one included),
/// and zsh's _arguments then completes no option after the first operand; getopt permutes,
/// so `aiscp -r src --stats=<TAB>` must still complete. `*:` keeps every word in view.
fn zsh_options_after_operands(script: &str) -> String {
    replace_once(script, "'*::operands -- ", "'*:operands -- ")
}

/// zsh's `--opt=` spec also takes the value as the next word; `--opt=-` only after `=`.
/// A spec starts `'--opt=[`, or `'*--opt=[` for an option that may repeat.
fn zsh_equals(script: &str, longs: &ValueLongs) -> String {
    longs.optional.iter().fold(script.to_owned(), |s, l| {
        let (once, many) = (format!("'--{l}=["), format!("'*--{l}=["));
        assert!(
            s.contains(&once) || s.contains(&many),
            "no zsh spec for --{l}"
        );
        s.replace(&once, &format!("'--{l}=-["))
            .replace(&many, &format!("'*--{l}=-["))
    })
}

/// fish completes an option's values as the next word only when it "requires" one (`-r`);
/// without it, only as `--opt=VALUE`.
fn fish_equals(script: &str, longs: &ValueLongs) -> String {
    script
        .lines()
        .map(|line| {
            let optional = longs
                .optional
                .iter()
                .any(|l| line.starts_with(&format!("complete -c aiscp -l {l} ")));
            if optional {
                let line = line.strip_suffix(" -r").unwrap_or(line);
                line.replacen(" -r -f -a ", " -f -a ", 1)
                    .replacen(" -r -F", " -F", 1)
            } else {
                line.to_owned()
            }
        })
        .map(|l| l + "\n")
        .collect()
}

/// Writes what `--generate WHAT` names to `out` (argmatch's answer from
/// [`crate::cli::GENERATE_CHOICES`], so abbreviations work).
pub fn run(what: crate::cli::Generated, out: &mut dyn Write) -> io::Result<()> {
    match what {
        crate::cli::Generated::Man => man(out),
        crate::cli::Generated::Completions(shell) => {
            completion(shell, out);
            Ok(())
        }
    }
}
