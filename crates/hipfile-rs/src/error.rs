//! One error type for every failure of the GPU I/O stack (CONTRACT SKELETON; issue 2).

use std::path::PathBuf;

/// Loading a library or resolving a symbol failed; lists what was searched.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{library} not found (searched: {})", searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NotFound {
        library: &'static str,
        searched: Vec<PathBuf>,
    },
    #[error("{path}: missing symbol {symbol}")]
    MissingSymbol { path: PathBuf, symbol: &'static str },
}

/// A failed call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Load(#[from] LoadError),
    /// `-1` with errno set, or an errno-bearing failure.
    #[error("{0}")]
    Os(std::io::Error),
    /// A 5000-based hipFile/cuFile code.
    #[error("{text} ({name} {code})")]
    Library {
        code: i32,
        name: &'static str,
        text: String,
    },
    /// A GPU runtime error (hipError_t / CUresult) from `call`.
    #[error("{call}: {text} (error {code})")]
    Runtime {
        call: &'static str,
        code: i32,
        text: String,
    },
    #[error("GPU {index} does not exist: {count} device(s) found")]
    NoSuchDevice { index: u32, count: u32 },
}
