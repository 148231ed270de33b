//! The command line (clap derive). Feeds parsing, the man page and the completions.

pub mod staging;

use clap::Parser;
use std::path::PathBuf;

/// Copy files, staging every byte through GPU memory (hipFile / cuFile).
#[derive(Parser, Debug)]
#[command(name = "aiscp", version)]
pub struct Cli {
    #[command(flatten)]
    pub staging: staging::StagingArgs,
    /// SOURCE... DEST
    #[arg(value_name = "FILE")]
    pub operands: Vec<PathBuf>,
}
