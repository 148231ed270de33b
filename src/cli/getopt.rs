//! GNU getopt's long options: any unambiguous prefix names an option, and an ambiguous one is
//! refused with the possibilities listed in cp's own table order. Every prefix is spelled out
//! here, so clap sees only full names.
//!
//! aiscp's own options (GPU staging, reporting, durability) never make a prefix of one of
//! cp's ambiguous, nor join its list of possibilities: `--b` is cp's --backup even though
//! --backend starts the same way, and `--no` lists exactly what cp lists. A prefix that names
//! none of cp's options is resolved among aiscp's own. Hidden options answer only to their
//! full names.

use clap::{Arg, Command};
use std::ffi::OsString;

/// cp's long options in the order of coreutils 9.1's `long_opts` table, which is the order
/// getopt lists an ambiguous prefix's possibilities in. `path` is cp's deprecated spelling of
/// `parents`; getopt lists one name per option.
const CP_LONG_OPTIONS: &[&str] = &[
    "archive",
    "attributes-only",
    "backup",
    "copy-contents",
    "dereference",
    "force",
    "interactive",
    "link",
    "no-clobber",
    "no-dereference",
    "no-preserve",
    "no-target-directory",
    "one-file-system",
    "parents",
    "path",
    "preserve",
    "recursive",
    "remove-destination",
    "sparse",
    "reflink",
    "strip-trailing-slashes",
    "suffix",
    "symbolic-link",
    "target-directory",
    "update",
    "verbose",
    "context",
    "help",
    "version",
];

/// A prefix that names several options: getopt's message, the argument as given.
#[derive(Debug, PartialEq, Eq)]
pub struct Ambiguous {
    pub arg: String,
    pub possibilities: Vec<String>,
    /// The command line before it, expanded: getopt reports an error there first.
    pub before: Vec<OsString>,
}

impl std::fmt::Display for Ambiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "option '{}' is ambiguous; possibilities:", self.arg)?;
        for p in &self.possibilities {
            write!(f, " '--{p}'")?;
        }
        Ok(())
    }
}

/// What one `--NAME` stands for.
enum Resolved<'a> {
    /// An option, by its full name.
    Option(&'a Arg),
    Ambiguous(Vec<&'a str>),
    /// Left for clap to report as unrecognized.
    Unknown,
}

/// Every long name and alias of `arg`.
fn names(arg: &Arg) -> impl Iterator<Item = &str> {
    arg.get_long()
        .into_iter()
        .chain(arg.get_all_aliases().unwrap_or_default())
}

fn resolve<'a>(cmd: &'a Command, name: &str) -> Resolved<'a> {
    if let Some(arg) = cmd.get_arguments().find(|a| names(a).any(|n| n == name)) {
        return Resolved::Option(arg);
    }
    // (option, the name that matched), once per option, in definition order.
    let mut matches: Vec<(&Arg, &str)> = Vec::new();
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        if let Some(n) = names(arg).find(|n| n.starts_with(name)) {
            matches.push((arg, n));
        }
    }
    let cp_rank = |n: &str| CP_LONG_OPTIONS.iter().position(|c| *c == n);
    let mut cp: Vec<(usize, &Arg)> = matches
        .iter()
        .filter_map(|(arg, _)| {
            names(arg)
                .filter(|n| n.starts_with(name))
                .filter_map(cp_rank)
                .min()
                .map(|rank| (rank, *arg))
        })
        .collect();
    cp.sort_by_key(|(rank, _)| *rank);
    let listed = |rank: usize| CP_LONG_OPTIONS[rank];
    match (cp.as_slice(), matches.as_slice()) {
        ([(_, arg)], _) => Resolved::Option(arg),
        ([], [(arg, _)]) => Resolved::Option(arg),
        ([], []) => Resolved::Unknown,
        ([], many) => Resolved::Ambiguous(many.iter().map(|(_, n)| *n).collect()),
        (many, _) => Resolved::Ambiguous(many.iter().map(|(rank, _)| listed(*rank)).collect()),
    }
}

/// Whether `arg` must have a value (`--suffix X`), so the next word is that value.
fn needs_value(arg: &Arg) -> bool {
    arg.get_num_args()
        .is_some_and(|n| n.takes_values() && n.min_values() > 0)
}

/// The command line with every long-option prefix spelled out in full, or getopt's refusal
/// of an ambiguous one. `cmd` must be built (so --help and --version are among its
/// arguments). Values are skipped as getopt skips them: `--suffix --no` is a suffix.
pub fn expand_prefixes(cmd: &Command, args: Vec<OsString>) -> Result<Vec<OsString>, Ambiguous> {
    let mut out = Vec::with_capacity(args.len());
    let mut rest = args.into_iter();
    out.extend(rest.next());
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str() else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            out.push(arg);
            break; // operands follow
        }
        if let Some(body) = text.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            match resolve(cmd, name) {
                Resolved::Option(option) => {
                    let long = option.get_long().unwrap_or(name);
                    let mut full = format!("--{long}");
                    if let Some(v) = value {
                        full.push('=');
                        full.push_str(v);
                    }
                    out.push(full.into());
                    if value.is_none() && needs_value(option) {
                        out.extend(rest.next());
                    }
                }
                Resolved::Ambiguous(possibilities) => {
                    return Err(Ambiguous {
                        arg: text.to_owned(),
                        possibilities: possibilities.into_iter().map(str::to_owned).collect(),
                        before: out,
                    })
                }
                Resolved::Unknown => out.push(arg),
            }
            continue;
        }
        let cluster = text.strip_prefix('-').filter(|c| !c.is_empty());
        out.push(arg.clone());
        // `-vS X`: the first letter that takes a value ends the cluster; at its end, the
        // value is the next word.
        if let Some(cluster) = cluster {
            for (i, c) in cluster.char_indices() {
                let Some(option) = cmd.get_arguments().find(|a| a.get_short() == Some(c)) else {
                    continue;
                };
                if needs_value(option) {
                    if i + c.len_utf8() == cluster.len() {
                        out.extend(rest.next());
                    }
                    break;
                }
            }
        }
    }
    out.extend(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn expand(args: &[&str]) -> Result<Vec<String>, String> {
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let mut argv = vec![OsString::from("aiscp")];
        argv.extend(args.iter().map(OsString::from));
        expand_prefixes(&cmd, argv)
            .map(|v| {
                v.into_iter()
                    .skip(1)
                    .map(|a| a.into_string().unwrap())
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn prefixes_resolve_as_in_cp() {
        assert_eq!(expand(&["--b", "a"]).unwrap(), ["--backup", "a"]);
        assert_eq!(
            expand(&["--st", "a"]).unwrap(),
            ["--strip-trailing-slashes", "a"]
        );
        assert_eq!(expand(&["--pa", "a"]).unwrap(), ["--parents", "a"]);
        assert_eq!(expand(&["--path", "a"]).unwrap(), ["--parents", "a"]);
        assert_eq!(expand(&["--f"]).unwrap(), ["--force"]);
        assert_eq!(expand(&["--sta=json"]).unwrap(), ["--stats=json"]);
        assert_eq!(expand(&["--ch", "1M"]).unwrap(), ["--chunk-size", "1M"]);
        // Values are not options, however they look.
        assert_eq!(expand(&["--suf", "--no"]).unwrap(), ["--suffix", "--no"]);
        assert_eq!(expand(&["-vS", "--no"]).unwrap(), ["-vS", "--no"]);
        assert_eq!(
            expand(&["-S--no", "--p"]).unwrap_err().split(';').count(),
            2
        );
        assert_eq!(expand(&["--", "--no"]).unwrap(), ["--", "--no"]);
        // Hidden options only by their full names; unknown ones are left to clap.
        assert_eq!(expand(&["--gen", "man"]).unwrap(), ["--gen", "man"]);
        assert_eq!(
            expand(&["--generate", "man"]).unwrap(),
            ["--generate", "man"]
        );
        assert_eq!(expand(&["--xyz"]).unwrap(), ["--xyz"]);
    }

    #[test]
    fn ambiguous_prefixes_list_cp_possibilities_in_cp_order() {
        let no = "'--no-clobber' '--no-dereference' '--no-preserve' '--no-target-directory'";
        assert_eq!(
            expand(&["--no"]).unwrap_err(),
            format!("option '--no' is ambiguous; possibilities: {no}")
        );
        assert_eq!(
            expand(&["--re=x"]).unwrap_err(),
            "option '--re=x' is ambiguous; possibilities: '--recursive' \
             '--remove-destination' '--reflink'"
        );
        assert_eq!(
            expand(&["--p"]).unwrap_err(),
            "option '--p' is ambiguous; possibilities: '--parents' '--preserve'"
        );
        assert_eq!(
            expand(&["--ver"]).unwrap_err(),
            "option '--ver' is ambiguous; possibilities: '--verbose' '--version'"
        );
        // cp's option wins a prefix aiscp's own share; none of cp's: aiscp's own.
        assert_eq!(
            expand(&["--at", "--ato", "--as"]).unwrap(),
            ["--attributes-only", "--atomic", "--async"]
        );
    }
}
