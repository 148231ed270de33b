#!/bin/bash
# --verify's cost on the H200 machine, in one device command (about 8 minutes): two
# RAM-backed ext4s (SRC on one loop device, DST on the other), then 20,000 files of 1-64 KiB
# and a 4 GiB file, each with aiscp on the GPU (engine defaults, and --route bounce),
# verified and not, beside cp and, when BIN_DIR has it, the build before verified
# (bench/results/HISTORY.md, "--verify at copy speed"). The large file's default route is the
# library's, which keeps SOURCE on O_DIRECT: there --verify reads SOURCE from the device
# again, and the bounce rows show the cost without that.
#
#   bench/h200-verify.sh BIN_DIR
#
# TREE_FILES (default 20000), FILE_SIZE (default 4G) and ROUNDS (default 3) shrink it for a
# quick check of a build.
#
# BIN_DIR holds aiscp (the build under test) and optionally aiscp-base. Everything lands in
# $OUT: results.tsv, medians.tsv, summary.md, bench.log per workload.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-verify.sh BIN_DIR}" && pwd)
export AISCP_BIN=$B/aiscp
out=${OUT:?set OUT}
files=${TREE_FILES:-20000} size=${FILE_SIZE:-4G} rounds=${ROUNDS:-3}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
S=/mnt/fast D=/mnt/fast2

extra=(
    --extra "verify=$B/aiscp --backend gpu --verify"
    --extra "bounce=$B/aiscp --backend gpu --route bounce"
    --extra "bounce_verify=$B/aiscp --backend gpu --route bounce --verify"
)
[[ -x $B/aiscp-base ]] && extra+=(--extra "base_verify=$B/aiscp-base --backend gpu --verify")

step "tree, two RAM filesystems: $files x 1-64 KiB"
mkdir -p "$out/tree" "$out/file"
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files "$files" --size 1K-64K --rounds "$rounds" \
    --budget 150 --out "$out/tree" "${extra[@]}" | grep -v '^  '
rm -rf "$S/t" "$D/t"
step "one $size file, two RAM filesystems"
bash "$HERE/run.sh" --size "$size" --dir "$S/f" --dst-dir "$D/f" --methods aiscp,cp --rounds "$rounds" \
    --budget 200 --out "$out/file" "${extra[@]}" | grep -v '^  '
rm -rf "$S/f" "$D/f"
step done
