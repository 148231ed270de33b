#!/bin/bash
# Small-file trees on the H200 machine, two builds side by side, in one device command of
# about 6 minutes: two RAM-backed ext4s (SRC on one, DST on the other), then 20,000 x 8 KiB,
# 40,000 x 110 KiB and 4,000 x 256 KiB with cp, xcp, and each build in-process on the GPU and
# on host memory (`--backend host`), and the build under test through a warm staging service
# (`svc`), methods rotated each round (bench/tree.sh: caches dropped, whole process plus
# syncfs of DEST's filesystem).
#
#   bench/h200-small-files.sh BIN_DIR      (BIN_DIR: aiscp, aiscp-base, xcp)
#
# ROUNDS (default 3) rounds per tree, BUDGET (default 80) seconds per tree at most, SHAPES
# (default all three, "FILES SIZE,...") the trees. Everything lands in $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-small-files.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
S=/mnt/fast D=/mnt/fast2
export AISCP_SERVICE=off AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp TREE_METHODS="cp aiscp aiscp_host"
# The service: a warm one on a socket of its own, reached through a wrapper whose name tells
# bench/tree.sh it is an aiscp.
export XDG_RUNTIME_DIR=/tmp/xdg-small
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
sock=$XDG_RUNTIME_DIR/service.sock
"$B/aiscp" --serve --backend gpu --socket "$sock" > /dev/null 2> "$out/service.log" &
for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
printf '#!/bin/sh\nAISCP_SERVICE=%s exec %s "$@"\n' "$sock" "$B/aiscp" > /tmp/aiscp-svc
chmod +x /tmp/aiscp-svc
extra=(--extra "base=$B/aiscp-base" --extra "base_host=$B/aiscp-base --backend host"
    --extra "svc=/tmp/aiscp-svc --stats=json")
IFS=, read -ra shapes <<< "${SHAPES:-20000 8K,40000 110K,4000 256K}"
for shape in "${shapes[@]}"; do
    read -r files size <<< "$shape"
    bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files "$files" --size "$size" \
        --rounds "${ROUNDS:-3}" --budget "${BUDGET:-80}" --out "$out/tree" "${extra[@]}" | grep -E '^\| '
    rm -rf "$S/t" "$D/t"
done
