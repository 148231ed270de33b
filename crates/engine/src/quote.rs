//! The words of messages as GNU coreutils writes them: file names quoted as `quoteaf` does
//! (the shell-escape-always style), so that scripts and test suites written against cp's
//! messages keep matching: 'a b', "it's", 'nl'$'\n''x'; and an OS error as strerror says it.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;

/// An OS error's text as cp prints it: strerror, without std's " (os error N)".
pub fn os_text(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .map(str::to_owned)
            .unwrap_or(text),
        None => text,
    }
}

/// Quotes a path for a message.
pub fn quote(p: impl AsRef<Path>) -> String {
    quote_bytes(p.as_ref().as_os_str().as_bytes(), utf8_locale())
}

/// Quotes a path only where the shell would need it (GNU's `quotef`), e.g. `d/x` bare.
pub fn quote_if_needed(p: impl AsRef<Path>) -> String {
    let bytes = p.as_ref().as_os_str().as_bytes();
    let safe = !bytes.is_empty()
        && bytes.iter().enumerate().all(|(i, &b)| {
            b.is_ascii_alphanumeric()
                || b"%+,-./:=@_^]".contains(&b)
                || (i > 0 && (b == b'#' || b == b'~'))
        });
    if safe {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        quote(p)
    }
}

/// Quotes an arbitrary OS string (operands, option values).
pub fn quote_os(s: &OsStr) -> String {
    quote_bytes(s.as_bytes(), utf8_locale())
}

/// Whether the message locale decodes UTF-8, which decides if non-ASCII names print as
/// text or as octal escapes (GNU asks the locale the same question).
pub fn utf8_locale() -> bool {
    static UTF8: OnceLock<bool> = OnceLock::new();
    *UTF8.get_or_init(|| {
        let var = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
            .unwrap_or_default();
        let lower = var.to_ascii_lowercase();
        lower.contains("utf-8") || lower.contains("utf8")
    })
}

/// The quote characters GNU's argmatch messages use: typographic in a UTF-8 locale.
pub fn locale_quote(s: &str) -> String {
    if utf8_locale() {
        format!("\u{2018}{s}\u{2019}")
    } else {
        format!("'{s}'")
    }
}

/// One unit of the name: a printable character (possibly multibyte) or a byte to escape.
enum Unit<'a> {
    Text(&'a [u8]),
    Escape(u8),
}

fn units(bytes: &[u8], utf8: bool) -> Vec<Unit<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii() {
            if (0x20..0x7f).contains(&b) {
                out.push(Unit::Text(&bytes[i..i + 1]));
            } else {
                out.push(Unit::Escape(b));
            }
            i += 1;
            continue;
        }
        if utf8 {
            let len = match b {
                0xc2..=0xdf => 2,
                0xe0..=0xef => 3,
                0xf0..=0xf4 => 4,
                _ => 0,
            };
            if len > 0 && i + len <= bytes.len() {
                if let Ok(s) = std::str::from_utf8(&bytes[i..i + len]) {
                    let c = s.chars().next().unwrap_or('\0');
                    if !c.is_control() {
                        out.push(Unit::Text(&bytes[i..i + len]));
                        i += len;
                        continue;
                    }
                }
            }
        }
        out.push(Unit::Escape(b));
        i += 1;
    }
    out
}

/// Characters that mean the same inside C-style and shell double quotes (gnulib's
/// "c_and_shell_quote_compat"); a name with a single quote made only of these is
/// printed in double quotes instead of with '\''.
fn double_quote_safe(u: &Unit<'_>, first: bool) -> bool {
    match u {
        Unit::Escape(_) => false,
        Unit::Text(t) if t.len() > 1 => true,
        Unit::Text(t) => match t[0] {
            b' ' | b'\'' => true,
            b'#' | b'~' => first,
            b'%' | b'+' | b',' | b'-' | b'.' | b'/' | b':' | b']' | b'_' | b'@' => true,
            c => c.is_ascii_alphanumeric(),
        },
    }
}

fn quote_bytes(bytes: &[u8], utf8: bool) -> String {
    let units = units(bytes, utf8);
    let has_single = bytes.contains(&b'\'');
    if has_single
        && units
            .iter()
            .enumerate()
            .all(|(i, u)| double_quote_safe(u, i == 0))
    {
        return format!("\"{}\"", String::from_utf8_lossy(bytes));
    }
    let mut out = Vec::with_capacity(bytes.len() + 2);
    out.push(b'\'');
    let mut in_dollar = false;
    for u in &units {
        match *u {
            Unit::Escape(b) => {
                if !in_dollar {
                    out.extend_from_slice(b"'$'");
                    in_dollar = true;
                }
                let esc: &[u8] = match b {
                    0x07 => b"\\a",
                    0x08 => b"\\b",
                    0x0c => b"\\f",
                    b'\n' => b"\\n",
                    b'\r' => b"\\r",
                    b'\t' => b"\\t",
                    0x0b => b"\\v",
                    _ => {
                        out.extend_from_slice(format!("\\{b:03o}").as_bytes());
                        continue;
                    }
                };
                out.extend_from_slice(esc);
            }
            Unit::Text(b"'") => {
                out.extend_from_slice(b"'\\''");
                in_dollar = false;
            }
            Unit::Text(t) => {
                if in_dollar {
                    out.extend_from_slice(b"''");
                    in_dollar = false;
                }
                out.extend_from_slice(t);
            }
        }
    }
    out.push(b'\'');
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::quote_bytes;

    /// Expected strings were produced by GNU cp 9.1 (`cp NAME /nonexist/x`), with the
    /// locale's UTF-8-ness given.
    #[test]
    fn matches_gnu_cp_9_1() {
        let cases: &[(&[u8], bool, &str)] = &[
            (b"a", true, "'a'"),
            (b"a b", true, "'a b'"),
            (b"", true, "''"),
            (b"it's", true, "\"it's\""),
            (b"a'b'c", true, "\"a'b'c\""),
            (b"it's $x", true, "'it'\\''s $x'"),
            (b"it's *x", true, "'it'\\''s *x'"),
            (b"nl\nx", true, "'nl'$'\\n''x'"),
            (b"x'y\tz", true, "'x'\\''y'$'\\t''z'"),
            (b"a\n'", true, "'a'$'\\n'\\'''"),
            (b"\n'b", true, "''$'\\n'\\''b'"),
            ("é".as_bytes(), true, "'é'"),
            ("é".as_bytes(), false, "''$'\\303\\251'"),
            ("é'".as_bytes(), true, "\"é'\""),
            (b"\x7f", true, "''$'\\177'"),
            (b"\xff", true, "''$'\\377'"),
            (b"a", true, "'a'"),
            (b"", true, "''"),
            (b"a b", true, "'a b'"),
            (b"it's", true, "\"it's\""),
            (b"it\"s", true, "'it\"s'"),
            (b"it's $x", true, "'it'\\''s $x'"),
            (b"nl\nx", true, "'nl'$'\\n''x'"),
            (b"\ta", true, "''$'\\t''a'"),
            (b"a\t", true, "'a'$'\\t'"),
            (b"a\t\nb", true, "'a'$'\\t\\n''b'"),
            ("é".as_bytes(), true, "'é'"),
            (b"a\xffb", true, "'a'$'\\377''b'"),
            (b"a\\b", true, "'a\\b'"),
            (b"it's!", true, "'it'\\''s!'"),
            (b"it's\\", true, "'it'\\''s\\'"),
            (b"#it's", true, "\"#it's\""),
            (b"it's#", true, "'it'\\''s#'"),
            (b"it's%+,-./:@]_", true, "\"it's%+,-./:@]_\""),
            (b"it's=", true, "'it'\\''s='"),
            (b"it's\tx", true, "'it'\\''s'$'\\t''x'"),
        ];
        for (input, utf8, want) in cases {
            assert_eq!(
                quote_bytes(input, *utf8),
                *want,
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }
}
