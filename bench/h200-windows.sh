#!/bin/bash
# Files in flight (--streams), slot size (--chunk-size) and bounce-window size on the GPU route,
# on two RAM-backed ext4s (SRC on one loop device, DST on another), in one device command:
#
#   bench/h200-windows.sh BIN_DIR streams   trees with 4/8/16 streams (one build)
#   bench/h200-windows.sh BIN_DIR windows   trees and the 4 GiB file with 16/8/4 MiB windows
#
# BIN_DIR holds aiscp, xcp, and for `windows` aiscp-w8 and aiscp-w4: the same commit built with
# `const WINDOW` in crates/engine/src/backend/gpu.rs set to 8 << 20 and 4 << 20. Tables go to
# stdout, rows to $OUT/{small,mid,big}. Results of 2026-12-01: bench/results/2026-12-01-h200-windows/
# (windows) and bench/results/2026-12-01-h200-startup-probe/trees-streams/ (streams).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-windows.sh BIN_DIR streams|windows}" && pwd)
mode=${2:?mode: streams|windows}
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
case $mode in
streams)
    ex=(--extra "s8=$B/aiscp --streams 8" --extra "s8c32=$B/aiscp --streams 8 --chunk-size 32M"
        --extra "s16c16=$B/aiscp --streams 16 --chunk-size 16M"
        --extra "h8=$B/aiscp --backend host --streams 8"
        --extra "h16c16=$B/aiscp --backend host --streams 16 --chunk-size 16M") ;;
windows)
    ex=(--extra "s8c32=$B/aiscp --streams 8 --chunk-size 32M" --extra "w8=$B/aiscp-w8"
        --extra "w8s8=$B/aiscp-w8 --streams 8 --chunk-size 32M"
        --extra "w4s8=$B/aiscp-w4 --streams 8 --chunk-size 32M"
        --extra "h8=$B/aiscp --backend host --streams 8") ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
bash "$HERE/tree.sh" --src-dir $S/t --dst-dir $D/t --files 4000 --size 256K --rounds 3 --budget 100 \
    --out "$OUT/small" "${ex[@]}" | grep '^|'
rm -rf $S/t $D/t
bash "$HERE/tree.sh" --src-dir $S/t2 --dst-dir $D/t2 --files 64 --size 32M --rounds 3 --budget 130 \
    --out "$OUT/mid" "${ex[@]}" | grep '^|'
rm -rf $S/t2 $D/t2
[[ $mode == windows ]] || exit 0
bash "$HERE/run.sh" --size 4G --dir $S/b --dst-dir $D/b --rounds 3 --budget 130 --out "$OUT/big" --methods aiscp \
    --extra "host=--backend host" --extra "w8s8=$B/aiscp-w8 --backend gpu --streams 8 --chunk-size 32M" \
    --extra "w4s8=$B/aiscp-w4 --backend gpu --streams 8 --chunk-size 32M" \
    --extra "s8c32=$B/aiscp --backend gpu --streams 8 --chunk-size 32M" | grep '^|'
