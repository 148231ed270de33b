#!/bin/bash
# Start-up and teardown on the H200 machine, in one device command (about 8 minutes): what
# bringing the GPU up on its own thread (and reading the first file meanwhile) buys on the
# 4 GiB copy between two RAM-backed ext4s, with the build before beside it, the start-up and
# teardown steps one by one (hipfile-rs's `startup` example), a 2-byte file's cost, and a
# tree of 64 x 32 MiB with more workers or the page cache.
#
#   bench/h200-startup.sh BIN_DIR
#
# BIN_DIR holds aiscp (the build under test), aiscp-base (the build before, optional),
# startup (`cargo build --release -p hipfile-rs --examples`, optional) and rawbw.c (from
# ../shared/bench, for the host O_DIRECT copy beside them). Everything lands in
# $OUT: results.tsv, medians.tsv, summary.md, bench.log (4 GiB runs), debug.log (--debug of
# each build), teardown.tsv (whole-process seconds of `startup --exit=drop|exit|_exit`),
# startup.tsv (a 2-byte file, 20 copies).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-startup.sh BIN_DIR}" && pwd)
export AISCP_BIN=$B/aiscp BENCH_SHARED=$B
out=${OUT:?set OUT}
t0=$SECONDS
step() { echo "# [$((SECONDS - t0)) s] $*"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,persistence_mode --format=csv,noheader
S=/mnt/fast D=/mnt/fast2
builds=(aiscp)
extra=(--extra 'host=--backend host')
if [[ -x $B/aiscp-base ]]; then
    builds+=(aiscp-base)
    extra+=(--extra "base=$B/aiscp-base --backend gpu")
fi

step "4 GiB, two RAM filesystems (5 rounds)"
bash "$HERE/run.sh" --size 4G --dir "$S/b" --dst-dir "$D/b" --rounds 5 --keep --budget 200 \
    --methods aiscp,hostcopy_qd8 "${extra[@]}" | grep -v '^  '

step "--debug of each build, 4 GiB (cold cache)"
src=$S/b/bench-src-4G.bin
for b in "${builds[@]}"; do
    for i in 1 2; do
        rm -f "$D/b/dbg"; drop
        echo "=== $b --backend gpu --debug ($i)" >> "$out/debug.log"
        s=$(date +%s.%N)
        "$B/$b" --no-progress --debug --backend gpu "$src" "$D/b/dbg" >> "$out/debug.log" 2>&1
        e=$(date +%s.%N)
        awk -v s="$s" -v e="$e" 'BEGIN { printf "=== whole process %.3f s\n", e - s }' >> "$out/debug.log"
    done
done
rm -f "$D/b/dbg"
grep -E '===|loaded|backend cuFile|first slot|brought up|read while|bytes in' "$out/debug.log" | cut -c1-160

step "teardown: startup --exit=drop|exit|_exit, 5 each, whole process"
if [[ -x $B/startup ]]; then
    printf 'ending\trun\tseconds\n' > "$out/teardown.tsv"
    for i in 1 2 3 4 5; do
        for how in drop exit _exit; do
            s=$(date +%s.%N)
            "$B/startup" cufile "--exit=$how" >> "$out/debug.log" 2>&1
            e=$(date +%s.%N)
            awk -v h="$how" -v i="$i" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t%d\t%.3f\n", h, i, e - s }' >> "$out/teardown.tsv"
        done
    done
    cat "$out/teardown.tsv"
    grep -E 'teardown|context|windows|allocation|init' "$out/debug.log" | tail -14
fi

step "start-up: a 2-byte file, 20 copies each"
printf 'method\tcopies\tseconds_total\tms_each\n' > "$out/startup.tsv"
printf 'hi' > "$S/two"
for m in cp "${builds[@]}" host; do
    case $m in
        cp) cmd=(cp) ;; host) cmd=("$AISCP_BIN" --backend host) ;; *) cmd=("$B/$m") ;;
    esac
    s=$(date +%s.%N)
    for i in $(seq 20); do "${cmd[@]}" "$S/two" "$D/two$i" || echo "failed: ${cmd[*]}"; done
    e=$(date +%s.%N)
    awk -v m="$m" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t20\t%.3f\t%.1f\n", m, e - s, (e - s) * 50 }' >> "$out/startup.tsv"
    rm -f "$D"/two*
done
cat "$out/startup.tsv"
rm -rf "$S/b" "$D/b"

# Mid-size files in flight: each of the four workers reads a whole 32 MiB file, then writes
# it, so a file's read and write never overlap. Variants with existing knobs: eight workers
# on 32 MiB slots (the same GPU memory), and the page cache for files under 64 MiB, as cp.
step "trees, 64 x 32 MiB: workers and the page cache"
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 64 --size 32M --rounds 3 \
    --budget 100 --extra "s8c32=$AISCP_BIN --streams 8 --chunk-size 32M" \
    --extra "buffered=env AISCP_IN_FLIGHT=64,268435456,67108864 $AISCP_BIN --no-progress -r" \
    | grep -v '^  '
rm -rf "$S/t" "$D/t"
step done
