//! aiscp: parse, run, map errors to exit status.

mod cli;

use clap::Parser;

fn main() {
    let cli = cli::Cli::parse();
    let _config = aiscp::engine::Config::from(&cli.staging);
    std::process::exit(0);
}
