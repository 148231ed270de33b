//! cp's operand rules: which SOURCE goes to which DEST (two operands, SOURCE... DIRECTORY,
//! -t, -T, --parents, --strip-trailing-slashes), with GNU's messages for the cases it refuses.

use crate::cp::backup;
use crate::cp::options::{extra_operand, Options, UsageError};
use crate::sys::open_dir::open_parent;
use aiscp_engine::quote::quote;
use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// One top-level copy: SOURCE as given and the DEST name it is copied to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyJob {
    pub src: PathBuf,
    pub dst: PathBuf,
    /// With --parents: the directories between the target directory and DEST, created first.
    pub parents_of: Option<PathBuf>,
    /// DEST is not backed up: `cp -fb a a` copies `a` to its backup's name instead.
    pub no_backup: bool,
}

/// Why no job list could be made: a usage error (with the --help hint) or a fatal one.
#[derive(Debug)]
pub enum PlanError {
    Usage(UsageError),
    Fatal(String),
}

impl From<UsageError> for PlanError {
    fn from(e: UsageError) -> Self {
        PlanError::Usage(e)
    }
}

/// Removes trailing slashes (keeping a lone "/").
pub fn strip_trailing_slashes(p: &Path) -> PathBuf {
    let mut b = p.as_os_str().as_bytes().to_vec();
    while b.len() > 1 && b.last() == Some(&b'/') {
        b.pop();
    }
    PathBuf::from(OsString::from_vec(b))
}

/// The last component of a name, trailing slashes removed ("d/" -> "d").
fn base_name(p: &Path) -> PathBuf {
    let s = strip_trailing_slashes(p);
    let b = s.as_os_str().as_bytes();
    match b.iter().rposition(|&c| c == b'/') {
        Some(i) if b.len() > 1 => PathBuf::from(OsString::from_vec(b[i + 1..].to_vec())),
        _ => s,
    }
}

fn is_dir(p: &Path) -> std::io::Result<bool> {
    std::fs::metadata(p).map(|m| m.is_dir())
}

/// Turns the operands into jobs following GNU cp's do_copy.
pub fn plan(operands: &[PathBuf], opts: &Options) -> Result<Vec<CopyJob>, PlanError> {
    if operands.is_empty() {
        return Err(UsageError::new("missing file operand").into());
    }
    let mut files: Vec<PathBuf> = operands.to_vec();
    let target = target_directory(&mut files, opts)?;
    if opts.parents && target.is_none() {
        return Err(UsageError::new("with --parents, the destination must be a directory").into());
    }
    match target {
        Some(target) => Ok(into_directory(&files, &target, opts)),
        None => Ok(vec![source_to_dest(&files, opts)]),
    }
}

/// The directory the sources are copied into (-t's, or the last operand when it is a
/// directory, taken off `files`); None: `files` is SOURCE and DEST (-T, or two operands
/// and the last no directory). Refuses a missing or extra operand and a target that is
/// no directory, with cp's words.
fn target_directory(
    files: &mut Vec<PathBuf>,
    opts: &Options,
) -> Result<Option<PathBuf>, PlanError> {
    let missing_dest = |files: &[PathBuf]| -> PlanError {
        UsageError::new(format!(
            "missing destination file operand after {}",
            quote(&files[0])
        ))
        .into()
    };
    if opts.no_target_directory {
        if files.len() > 2 {
            return Err(extra_operand(files[2].as_os_str()).into());
        }
        if files.len() == 1 {
            return Err(missing_dest(files));
        }
        return Ok(None);
    }
    if let Some(t) = &opts.target_directory {
        return match is_dir(t) {
            Ok(true) => Ok(Some(t.clone())),
            Ok(false) => Err(PlanError::Fatal(format!(
                "target directory {}: Not a directory",
                quote(t)
            ))),
            Err(e) => Err(PlanError::Fatal(format!(
                "target directory {}: {}",
                quote(t),
                crate::sys::messages::os_text(&e)
            ))),
        };
    }
    if files.len() == 1 {
        return Err(missing_dest(files));
    }
    let last = files.last().cloned().unwrap_or_default();
    match is_dir(&last) {
        Ok(true) => {
            files.pop();
            Ok(Some(last))
        }
        res => {
            if files.len() > 2 {
                let why = match res {
                    Err(e) => crate::sys::messages::os_text(&e),
                    Ok(_) => "Not a directory".into(),
                };
                return Err(PlanError::Fatal(format!(
                    "target {}: {}",
                    quote(&last),
                    why
                )));
            }
            Ok(None)
        }
    }
}

/// The one job of `SOURCE DEST`. cp strips trailing slashes only from operands copied into
/// a directory, so none are stripped here.
fn source_to_dest(files: &[PathBuf], opts: &Options) -> CopyJob {
    let src = files[0].clone();
    let mut dst = files[1].clone();
    let mut no_backup = false;
    // GNU turns `cp --force --backup a a` into `cp --force a BACKUP`: backing `a` up
    // by renaming it would take SOURCE away before it is read.
    if let Some(kind) = opts.backup {
        let dst_is_file = || std::fs::metadata(&dst).is_ok_and(|m| m.is_file());
        if opts.force && src.as_os_str() == dst.as_os_str() && dst_is_file() {
            let (dir, name) = open_parent(&dst);
            let suffix = backup::suffix(&dir, &name, kind, &opts.suffix);
            dst = PathBuf::from(backup::with_suffix(dst.as_os_str(), &suffix));
            no_backup = true;
        }
    }
    CopyJob {
        src,
        dst,
        parents_of: None,
        no_backup,
    }
}

/// The jobs of `SOURCE... DIRECTORY`: each SOURCE to its last component inside `target`,
/// or with --parents to its whole name under it.
fn into_directory(files: &[PathBuf], target: &Path, opts: &Options) -> Vec<CopyJob> {
    let strip = |p: &Path| {
        if opts.strip_trailing_slashes {
            strip_trailing_slashes(p)
        } else {
            p.to_path_buf()
        }
    };
    let mut jobs = Vec::with_capacity(files.len());
    for f in files {
        let src = strip(f);
        if opts.parents {
            let rel: PathBuf = src
                .components()
                .filter(|c| !matches!(c, std::path::Component::RootDir))
                .collect();
            let dst = join(target, &rel);
            jobs.push(CopyJob {
                src,
                dst,
                parents_of: Some(target.to_path_buf()),
                no_backup: false,
            });
        } else {
            let dst = join(target, &base_name(&src));
            jobs.push(CopyJob {
                src,
                dst,
                parents_of: None,
                no_backup: false,
            });
        }
    }
    jobs
}

#[cfg(test)]
mod tests;

/// Joins like GNU's file_name_concat: one slash between, none doubled.
pub fn join(dir: &Path, name: &Path) -> PathBuf {
    let d = dir.as_os_str().as_bytes();
    let n = name.as_os_str().as_bytes();
    // One allocation of the joined length (a tree copy joins two names a file).
    let mut out = Vec::with_capacity(d.len() + 1 + n.len());
    out.extend_from_slice(d);
    if !out.ends_with(b"/") {
        out.push(b'/');
    }
    out.extend_from_slice(n);
    PathBuf::from(OsString::from_vec(out))
}
