#!/bin/bash
# The closing H200 run, in one device command (about 4 minutes): checksums of the build under
# test (scripts/gpu-check.sh), the trees with files in flight beside cp -r, xcp -r and the
# build before them, and MPI ranks against one process (bench/mpi-ranks.sh, one round).
#
#   bench/h200-final.sh BIN_DIR
#
# BIN_DIR holds aiscp (the build under test), aiscp-mpi (the same commit with --features mpi),
# openmpi-bundle/ (bench/mpi-bundle.sh), and optionally aiscp-base (the build before) and xcp.
# Everything lands in $OUT: check.log, tree/ and ranks/ (results.tsv and summaries).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-final.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 10G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2

step "checksums (gpu-check.sh, $(cat "$B/aiscp.commit" 2>/dev/null))"
OUT= W=$S/check bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --deadline 50 --no-roundtrip 2>&1 |
    tee "$out/check.log" | grep -E '^(PASS|FAIL|SKIP|SUMMARY)'
rm -rf "$S/check"

step "trees, two RAM filesystems"
textra=()
[[ -x $B/aiscp-base ]] && textra+=(--extra "base=$B/aiscp-base")
mkdir -p "$out/tree"
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 4000 --size 256K --rounds 2 \
    --budget 50 --out "$out/tree" --label small "${textra[@]}" | grep -v '^  '
bash "$HERE/tree.sh" --src-dir "$S/t2" --dst-dir "$D/t2" --files 64 --size 32M --rounds 2 \
    --budget 40 --out "$out/tree" --label mid "${textra[@]}" | grep -v '^  '
rm -rf "$S/t" "$D/t" "$S/t2" "$D/t2"

step "MPI ranks (one round)"
mkdir -p "$B/mpi" && ln -sf "$B/aiscp-mpi" "$B/mpi/aiscp" && ln -sfn "$B/openmpi-bundle" "$B/mpi/openmpi-bundle"
OUT=$out/ranks BIG=2G TREE_FILE=64M bash "$HERE/mpi-ranks.sh" "$B/mpi" 1 2>&1 | tail -25
step done
