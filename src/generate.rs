//! The man page and shell completions, generated from the same clap definition that parses
//! the command line (`aiscp --generate man|bash|zsh|fish|elvish|powershell`), so they can't
//! drift from the real flags. `tests/generated.rs` fails when the committed files are stale.

use clap::CommandFactory;
use clap_complete::Shell;
use std::io::{self, Write};

/// Sections clap does not know about, in roff.
const EXTRA_SECTIONS: &str = r#".SH "EXIT STATUS"
0 when every SOURCE was copied; 1 when any operand failed (each failure is reported on
standard error and the others are still copied), on a usage error, or when the staging
backend cannot start.
.SH ENVIRONMENT
.TP
.B AISCP_BACKEND
Default for \fB\-\-backend\fR: auto, gpu, hipfile, cufile or host.
.TP
.B AISCP_HIPFILE_LIB
Path of the hipFile library to load instead of searching for libhipfile.so.0.
.TP
.B AISCP_HIP_LIB
Path of the HIP runtime library (libamdhip64.so) to load.
.TP
.B AISCP_CUFILE_LIB
Path of the cuFile library to load instead of searching for libcufile.so.0.
.TP
.B AISCP_CUDA_LIB
Path of the CUDA runtime library to load.
.TP
.B VERSION_CONTROL
Backup method when \fB\-\-backup\fR or \fB\-b\fR gives none: none/off, simple/never,
existing/nil (the default), numbered/t.
.TP
.B SIMPLE_BACKUP_SUFFIX
Backup suffix when \fB\-S\fR is not given (default ~).
.SH EXAMPLES
.TP
.B aiscp big.img /mnt/nvme/big.img
Copy one file; its data passes through GPU memory.
.TP
.B aiscp \-a photos/ /backup/
Copy a tree, keeping modes, owners, timestamps, hard links and extended attributes.
.TP
.B aiscp \-\-backend host \-v a b dir/
Copy through host memory, printing each copy.
.TP
.B aiscp \-\-atomic \-\-fsync model.bin /data/model.bin
Replace a file so readers never see a partial copy, durable on return.
.SH "SEE ALSO"
.BR cp (1)
"#;

/// The man page: clap's generated sections, then ours before VERSION.
pub fn man(out: &mut dyn Write) -> io::Result<()> {
    let cmd = crate::cli::Cli::command();
    let man = clap_mangen::Man::new(cmd);
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    writeln!(
        out,
        ".PP\nFile data is staged through GPU memory with AMD hipFile or NVIDIA cuFile \
(loaded at run time); with no GPU library, through host memory after a warning. \
Directories, links, special files and attributes are handled on the host exactly as \
cp does. Messages, exit status and option semantics follow GNU cp."
    )?;
    man.render_options_section(out)?;
    out.write_all(EXTRA_SECTIONS.as_bytes())?;
    man.render_version_section(out)?;
    Ok(())
}

/// A completion script for `shell`.
pub fn completion(shell: Shell, out: &mut dyn Write) {
    let mut cmd = crate::cli::Cli::command();
    clap_complete::generate(shell, &mut cmd, "aiscp", out);
}

/// Writes what `--generate WHAT` names to `out`; `choice` indexes
/// [`crate::cli::GENERATE_CHOICES`] (argmatch's answer, so abbreviations work).
pub fn run(choice: usize, out: &mut dyn Write) -> io::Result<()> {
    let shell = match choice {
        0 => return man(out),
        1 => Shell::Bash,
        2 => Shell::Zsh,
        3 => Shell::Fish,
        4 => Shell::Elvish,
        5 => Shell::PowerShell,
        _ => unreachable!("GENERATE_CHOICES has six entries"),
    };
    completion(shell, out);
    Ok(())
}
