//! The digests manifest (--sums): one line per regular file copied, in cp's order, in the
//! check format of the algorithm's own tools, written once the copy ends.
//!
//! A line is `DIGEST  NAME`, NAME being DEST as -v names it, escaped as b3sum escapes (a
//! name holding a backslash, newline or carriage return gets `\\`, `\n`, `\r` and a leading
//! backslash on its line), so that `b3sum --check` reads a BLAKE3 manifest unchanged. Names
//! that are not UTF-8 are written as b3sum writes them (lossily), which b3sum cannot check.
//!
//! Lines arrive through `messages::digest_line`, which holds them with the -v lines of files
//! still in flight, so the manifest keeps cp's order of files; main writes the manifest
//! once the copy ends.

use aiscp_engine::digest::Digest;
use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Mutex;

/// The manifest's lines so far.
static LINES: Mutex<String> = Mutex::new(String::new());

/// The manifest line of `digest`, the digest of DEST `name`.
pub fn line(name: &Path, digest: &Digest) -> String {
    let name = name.to_string_lossy();
    match name.contains(['\\', '\n', '\r']) {
        true => {
            let escaped = name
                .replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('\r', "\\r");
            format!("\\{digest}  {escaped}\n")
        }
        false => format!("{digest}  {name}\n"),
    }
}

/// Adds a line made by [`line()`], in order.
pub fn add(line: String) {
    LINES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_str(&line);
}

/// The manifest as it stands.
pub fn text() -> String {
    LINES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// `bytes` into `file`, whole or not at all: a temporary in its directory, flushed to disk,
/// then renamed over it. The error says what failed, in cp's words.
pub fn write_file(file: &Path, bytes: &[u8]) -> Result<(), (&'static str, io::Error)> {
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".aiscp-sums.{}", std::process::id()));
    let temp = dir.join(name);
    let written = (|| {
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&temp)?;
        out.write_all(bytes)?;
        out.sync_all()
    })();
    let renamed = written
        .map_err(|e| ("cannot create regular file", e))
        .and_then(|()| fs::rename(&temp, file).map_err(|e| ("cannot create regular file", e)));
    if renamed.is_err() {
        let _ = fs::remove_file(&temp);
        return renamed;
    }
    // The rename is durable once the directory is.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aiscp_engine::digest::Algorithm;

    #[test]
    fn names_are_escaped_as_b3sum_escapes_them() {
        let d = Algorithm::Blake3.of_bytes(b"x");
        assert_eq!(line(Path::new("a b"), &d), format!("{d}  a b\n"));
        assert_eq!(
            line(Path::new("a\\b\nc\rd"), &d),
            format!("\\{d}  a\\\\b\\nc\\rd\n")
        );
        let c = Algorithm::Crc32c.of_bytes(b"123456789");
        assert_eq!(line(Path::new("f"), &c), "4waSgw==  f\n");
    }
}
