#!/bin/bash
# Small-file trees on the H200 machine, two builds side by side, in one device command of
# about 3 minutes: two RAM-backed ext4s (SRC on one, DST on the other), then 20,000 x 8 KiB
# and 4,000 x 256 KiB with cp, xcp, and each build in-process on the GPU and on host memory
# (`--backend host`), methods rotated each round (bench/tree.sh: caches dropped, whole process
# plus syncfs of DEST's filesystem).
#
#   bench/h200-small-files.sh BIN_DIR      (BIN_DIR: aiscp, aiscp-base, xcp)
#
# ROUNDS (default 3) rounds per tree, BUDGET (default 80) seconds per tree at most. No
# staging service. Everything lands in $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-small-files.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 6G --mnt /mnt/$m | grep -v '^env'; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=/mnt/fast D=/mnt/fast2
export AISCP_SERVICE=off AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp TREE_METHODS="cp aiscp aiscp_host"
extra=(--extra "base=$B/aiscp-base" --extra "base_host=$B/aiscp-base --backend host")
for shape in "20000 8K" "4000 256K"; do
    read -r files size <<< "$shape"
    bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files "$files" --size "$size" \
        --rounds "${ROUNDS:-3}" --budget "${BUDGET:-80}" --out "$out/tree" "${extra[@]}" | grep -E '^\| '
    rm -rf "$S/t" "$D/t"
done
