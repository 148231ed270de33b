//! File names in messages, quoted the way GNU cp quotes them (gnulib's
//! shell-escape-always style), so aiscp's stderr reads exactly like cp's.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `'a b'`, `"it's"`, `'nl'$'\n''x'`: the name as GNU cp prints it in a message.
pub fn quote(path: &Path) -> String {
    quote_bytes(path.as_os_str().as_bytes())
}

enum Piece {
    Printable(char),
    /// A byte (or control character) that needs a `$'...'` escape.
    Escaped(u8),
}

fn pieces(bytes: &[u8]) -> Vec<Piece> {
    let mut out = Vec::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                let mut buf = [0u8; 4];
                out.extend(c.encode_utf8(&mut buf).bytes().map(Piece::Escaped));
            } else {
                out.push(Piece::Printable(c));
            }
        }
        out.extend(chunk.invalid().iter().copied().map(Piece::Escaped));
    }
    out
}

/// Characters that mean the same inside C-style and shell double quotes; only then may a name
/// with a single quote be wrapped in double quotes.
fn double_quote_compatible(c: char, first: bool) -> bool {
    c.is_ascii_alphanumeric()
        || " %+,-./:@]_'".contains(c)
        || (first && (c == '#' || c == '~'))
        || !c.is_ascii()
}

fn quote_bytes(bytes: &[u8]) -> String {
    let pieces = pieces(bytes);
    let has_single = pieces.iter().any(|p| matches!(p, Piece::Printable('\'')));
    let all_compatible = pieces.iter().enumerate().all(|(i, p)| match p {
        Piece::Printable(c) => double_quote_compatible(*c, i == 0),
        Piece::Escaped(_) => false,
    });
    if has_single && all_compatible {
        let mut out = String::from("\"");
        out.extend(pieces.iter().map(|p| match p {
            Piece::Printable(c) => *c,
            Piece::Escaped(_) => unreachable!("checked above"),
        }));
        out.push('"');
        return out;
    }

    #[derive(PartialEq)]
    enum State {
        Quoted,
        Escaping,
    }
    let mut out = String::from("'");
    let mut state = State::Quoted;
    for p in &pieces {
        match p {
            Piece::Printable(c) => {
                if state == State::Escaping {
                    out.push_str("''");
                    state = State::Quoted;
                }
                if *c == '\'' {
                    out.push_str("'\\''");
                } else {
                    out.push(*c);
                }
            }
            Piece::Escaped(b) => {
                if state == State::Quoted {
                    out.push_str("'$'");
                    state = State::Escaping;
                }
                match b {
                    7 => out.push_str("\\a"),
                    8 => out.push_str("\\b"),
                    b'\t' => out.push_str("\\t"),
                    b'\n' => out.push_str("\\n"),
                    11 => out.push_str("\\v"),
                    12 => out.push_str("\\f"),
                    b'\r' => out.push_str("\\r"),
                    _ => out.push_str(&format!("\\{b:03o}")),
                }
            }
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::quote_bytes;

    /// Expected strings were produced by GNU cp 9.1 (`cp NAME /nonexist/x`).
    #[test]
    fn matches_gnu_cp() {
        let cases: &[(&[u8], &str)] = &[
            (b"a", "'a'"),
            (b"", "''"),
            (b"a b", "'a b'"),
            (b"it's", "\"it's\""),
            (b"it\"s", "'it\"s'"),
            (b"it's $x", "'it'\\''s $x'"),
            (b"nl\nx", "'nl'$'\\n''x'"),
            (b"\ta", "''$'\\t''a'"),
            (b"a\t", "'a'$'\\t'"),
            (b"a\t\nb", "'a'$'\\t\\n''b'"),
            ("é".as_bytes(), "'é'"),
            (b"a\xffb", "'a'$'\\377''b'"),
            (b"a\\b", "'a\\b'"),
            (b"it's!", "'it'\\''s!'"),
            (b"it's\\", "'it'\\''s\\'"),
            (b"#it's", "\"#it's\""),
            (b"it's#", "'it'\\''s#'"),
            (b"it's%+,-./:@]_", "\"it's%+,-./:@]_\""),
            (b"it's=", "'it'\\''s='"),
            (b"it's\tx", "'it'\\''s'$'\\t''x'"),
        ];
        for (name, want) in cases {
            assert_eq!(
                quote_bytes(name),
                *want,
                "{:?}",
                String::from_utf8_lossy(name)
            );
        }
    }
}
