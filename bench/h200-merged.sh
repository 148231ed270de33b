#!/bin/bash
# The merged build on the H200 in one device command (about 7 minutes): checksums of the build
# (scripts/gpu-check.sh), the SOURCE-change reproductions beside the build before
# (bench/h200-source-changes.sh), then the trees and the 4 GiB file on two RAM ext4s with a
# warm staging service (`aiscp-svc`, a wrapper that points AISCP_SERVICE at it) beside the
# same build in-process, the build before, cp and xcp.
#
#   bench/h200-merged.sh BIN_DIR
#
# BIN_DIR holds aiscp (the build under test), aiscp-base (the build before), xcp, rawbw.c and
# refloop_cufile.c. Everything lands in $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-merged.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2

step "checksums (gpu-check.sh, $(cat "$B/aiscp.commit" 2>/dev/null))"
AISCP_BIN=$B/aiscp OUT= W=$S/check bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --deadline 45 --no-roundtrip 2>&1 |
    tee "$out/check.log" | grep -E '^(FAIL|SUMMARY)'
rm -rf "$S/check"

step "SOURCE changed under the copy (real cuFile)"
OUT=$out timeout 120 bash "$HERE/h200-source-changes.sh" "$B" > "$out/source-changes.log" 2>&1
grep -E 'aiscp' "$out/source-changes.tsv" | cut -f1-7

step "the staging service"
export XDG_RUNTIME_DIR=/tmp/xdg-bench
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
sock=$XDG_RUNTIME_DIR/aiscp/service.sock
"$B/aiscp" --serve --backend gpu --debug 2> "$out/service.log" &
svc=$!
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.1; done
printf '#!/bin/sh\nAISCP_SERVICE=%s exec %s "$@"\n' "$sock" "$B/aiscp" > "$B/aiscp-svc"
chmod +x "$B/aiscp-svc"
# Every other aiscp row runs in-process.
export AISCP_SERVICE=off AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
"$B/aiscp-svc" --stats "$HERE/../README.md" /tmp/readme.copy | tee "$out/service-stats.txt"

step "trees, two RAM filesystems"
mkdir -p "$out/tree"
for shape in "4000 256K 45" "64 32M 45" "20000 8K 60"; do
    read -r files size budget <<< "$shape"
    bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files "$files" --size "$size" --rounds 3 \
        --budget "$budget" --out "$out/tree" --extra "svc=$B/aiscp-svc" --extra "base=$B/aiscp-base" |
        grep -E '^\| (cp|aiscp|svc|base|xcp|aiscp_host) '
    rm -rf "$S/t" "$D/t"
done

step "4 GiB, two RAM filesystems"
bash "$HERE/run.sh" --size 4G --dir "$S/b" --dst-dir "$D/b" --rounds 2 --budget 100 --out "$out/file" \
    --methods aiscp,hostcopy_qd8,cp --extra "svc=$B/aiscp-svc --backend gpu" \
    --extra "base=$B/aiscp-base --backend gpu" --extra 'host=--backend host' | grep -E '^\| '
kill -TERM "$svc"; wait "$svc"
step done
