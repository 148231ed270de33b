#!/bin/bash
# Small files on the CPU dev VM, a build against a baseline build, xcp and cp, one run:
# 20,000 files of 1-8 KiB on tmpfs, then 20,000 files of 1-64 KiB on the root ext4 (virtio
# disk), each with bench/tree.sh (methods rotated each round, caches dropped, whole process
# plus syncfs of DEST's filesystem, medians).
#
#   bench/devvm-small-files.sh NEW_AISCP BASE_AISCP [XCP]    (OUT: where rows go)
#
# ROUNDS (default 7) rounds on tmpfs, EXT4_ROUNDS (default 5) on ext4. Every aiscp run is
# `--backend host`. MID_AISCP, when set, is a third build run beside them (aiscp_mid).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
new=$(realpath "${1:?usage: bench/devvm-small-files.sh NEW_AISCP BASE_AISCP [XCP]}")
base=$(realpath "${2:?usage: bench/devvm-small-files.sh NEW_AISCP BASE_AISCP [XCP]}")
export XCP_BIN=${3:-${XCP_BIN:-$(command -v xcp || true)}}
out=${OUT:?set OUT}
mkdir -p "$out"
export AISCP_SERVICE=off AISCP_BIN=$new TREE_METHODS="cp aiscp_host"
# tree.sh knows an aiscp build by its name.
mkdir -p "$out/bin"
ln -sf "$base" "$out/bin/aiscp-base"
extra=(--extra "aiscp_base=$out/bin/aiscp-base --backend host")
if [[ -n ${MID_AISCP:-} ]]; then
    ln -sf "$(realpath "$MID_AISCP")" "$out/bin/aiscp-mid"
    extra+=(--extra "aiscp_mid=$out/bin/aiscp-mid --backend host")
fi
bash "$HERE/tree.sh" --src-dir /dev/shm/small-bench/src --dst-dir /dev/shm/small-bench/dst \
    --files 20000 --size 1K-8K --rounds "${ROUNDS:-7}" --out "$out/tmpfs" "${extra[@]}"
rm -rf /dev/shm/small-bench
bash "$HERE/tree.sh" --src-dir /var/tmp/small-bench/src --dst-dir /var/tmp/small-bench/dst \
    --files 20000 --size 1K-64K --rounds "${EXT4_ROUNDS:-5}" --out "$out/ext4" "${extra[@]}"
rm -rf /var/tmp/small-bench
rm -rf "$out/bin"
