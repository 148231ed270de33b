//! Message text as GNU prints it: strerror's words without Rust's " (os error N)" suffix,
//! and the program name as invoked (argv[0]), so `cp -> aiscp` prints `cp:` like cp.

use std::sync::OnceLock;

/// strerror(errno) for an I/O error, e.g. "No such file or directory" (the engine's messages
/// use the same function).
pub use aiscp::engine::os_text;

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

/// Prints `PROGRAM: MSG` on stderr (with the progress line wiped while it prints).
pub fn error(msg: &str) {
    crate::progress::suspend(|| eprintln!("{}: {msg}", program()));
}

/// println! for -v lines, with the progress line wiped while it prints (stdout may be the
/// same terminal).
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::progress::suspend(|| println!($($arg)*))
    };
}
pub(crate) use say;
