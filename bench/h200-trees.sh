#!/bin/bash
# Trees on the H200 machine, in one device command (about 6 minutes): two RAM-backed ext4s
# (SRC on one loop device, DST on the other), checksums, then 4,000 x 256 KiB and 64 x 32 MiB
# with cp, xcp, aiscp (GPU, bounce route), aiscp --backend host, and the same builds with one
# file at a time (AISCP_IN_FLIGHT=0) and with O_DIRECT for every file in flight
# (AISCP_IN_FLIGHT=64,268435456,0), which is how the small-file threshold is chosen here.
#
#   bench/h200-trees.sh BIN_DIR
#
# BIN_DIR holds aiscp (the build under test), optionally aiscp-base (the build before, run
# beside it) and xcp. Everything lands in $OUT: results.tsv, medians.tsv, summary.md,
# bench.log, check.log.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-trees.sh BIN_DIR}" && pwd)
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp
out=${OUT:?set OUT}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
S=/mnt/fast D=/mnt/fast2

step "checksums (gpu-check.sh)"
OUT= W=$S/check bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --deadline 40 --no-roundtrip 2>&1 |
    tee "$out/check.log" | grep -E '^(FAIL|SUMMARY)'
rm -rf "$S/check"

extra=(
    --extra "serial=env AISCP_IN_FLIGHT=0 $B/aiscp --no-progress -r"
    --extra "direct=env AISCP_IN_FLIGHT=64,268435456,0 $B/aiscp --no-progress -r"
    --extra "host_serial=env AISCP_IN_FLIGHT=0 $B/aiscp --no-progress --backend host -r"
)
[[ -x $B/aiscp-base ]] && extra+=(--extra "base=$B/aiscp-base")

step "trees, two RAM filesystems: 4,000 x 256 KiB"
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 4000 --size 256K --rounds 3 \
    --budget 150 "${extra[@]}" | grep -v '^  '
step "--debug of one GPU tree copy (4,000 x 256 KiB)"
sync; echo 3 > /proc/sys/vm/drop_caches
"$AISCP_BIN" --no-progress --debug -r "$S/t/tree-4000x256K" "$D/t/dbg" 2> "$out/debug.log"
grep -E 'backend|worker|chunk' "$out/debug.log" | head -5
tail -1 "$out/debug.log"
rm -rf "$D/t/dbg"

step "trees, two RAM filesystems: 64 x 32 MiB"
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 64 --size 32M --rounds 3 \
    --budget 120 "${extra[@]}" | grep -v '^  '
step "trees, two RAM filesystems: 20,000 x 1-64 KiB"
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 20000 --size 1K-64K --rounds 3 \
    --budget 90 "${extra[@]}" | grep -v '^  '
rm -rf "$S/t" "$D/t"

step done
