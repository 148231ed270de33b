#!/bin/bash
# What --verify costs beside the same copy unverified, for this build and a baseline build,
# side by side in one run (bench/results/HISTORY.md, "--verify at copy speed"):
#
#   bench/verify-cost.sh --dir PATH [--old BINARY] [--new BINARY] [--rounds 3] [--out DIR]
#
# 1. A tree of 20,000 files of 1-64 KiB (bench/tree.sh: cp, aiscp and aiscp_host as always,
#    plus the four methods below, `-r`).
# 2. A 2 GiB file (bench/run.sh --cpu-only --methods cp, plus the four methods below).
# Methods, all --backend host: old, old_verify (--old, default /work/old/target/release/aiscp)
# and new, new_verify (--new, default target/release/aiscp). As in both scripts: every run
# with caches dropped (root) and SOURCE evicted, timed as the whole process plus a sync of
# DEST's filesystem, methods rotated each round, medians of the rounds; each copy checked.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

dir="" old=/work/old/target/release/aiscp new=$HERE/../target/release/aiscp rounds=3 out=""
while (($#)); do
    case $1 in
        --dir) dir=$2; shift 2 ;;
        --old) old=$2; shift 2 ;;
        --new) new=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ -n $dir ]] || die "--dir is required"
[[ -x $old && -x $new ]] || die "missing build: $old or $new"
new=$(realpath "$new") old=$(realpath "$old")
out=${out:-$dir/verify-cost}
mkdir -p "$out/tree" "$out/file"
extras=(--extra "old=$old --backend host" --extra "old_verify=$old --backend host --verify"
    --extra "new=$new --backend host" --extra "new_verify=$new --backend host --verify")
say "old $old ($("$old" --version | head -1)), new $new ($("$new" --version | head -1))"
AISCP_BIN=$new "$HERE/tree.sh" --src-dir "$dir/src" --dst-dir "$dir/dst" --files 20000 \
    --size 1K-64K --rounds "$rounds" --out "$out/tree" --label verify-tree "${extras[@]}" ||
    die "tree benchmark failed"
AISCP_BIN=$new "$HERE/run.sh" --cpu-only --size 2G --dir "$dir/file" --rounds "$rounds" \
    --methods cp --out "$out/file" --label verify-2G "${extras[@]}" ||
    die "file benchmark failed"
