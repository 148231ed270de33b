#!/bin/sh
# Regenerates man/aiscp.1 and completions/ from the clap definition (tests/it/cli.rs checks them).
set -eu
cd "$(dirname "$0")/.."
cargo build --quiet --bin aiscp
b=target/debug/aiscp
$b --generate man > man/aiscp.1
$b --generate bash > completions/aiscp.bash
$b --generate zsh > completions/_aiscp
$b --generate fish > completions/aiscp.fish
$b --generate elvish > completions/aiscp.elv
$b --generate powershell > completions/_aiscp.ps1
