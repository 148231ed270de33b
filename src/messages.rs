//! Message text as GNU prints it: strerror's words without Rust's " (os error N)" suffix,
//! and the program name as invoked (argv[0]), so `cp -> aiscp` prints `cp:` like cp.

use std::sync::OnceLock;

/// strerror(errno) for an I/O error, e.g. "No such file or directory".
pub fn io_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let s = std::io::Error::from_raw_os_error(code).to_string();
            match s.rfind(" (os error ") {
                Some(i) => s[..i].to_owned(),
                None => s,
            }
        }
        None => e.to_string(),
    }
}

/// The program name for message prefixes: argv[0] exactly as invoked.
pub fn program() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        std::env::args_os()
            .next()
            .map(|a| a.to_string_lossy().into_owned())
            .unwrap_or_else(|| "aiscp".to_owned())
    })
}

/// Prints `PROGRAM: MSG` on stderr.
pub fn error(msg: &str) {
    eprintln!("{}: {msg}", program());
}
