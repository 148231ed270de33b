#!/bin/bash
# Does splitting one copy over MPI ranks cost anything? On the H200 machine (one GPU), from
# one RAM-backed ext4 to another: a 4 GiB file (cut into 512 MiB parts), a tree of 32 x 128
# MiB files (each handed whole to a rank, which copies it through its slots in turn), a tree
# of 32 x 64 MiB files (whole, several in flight on each rank) and a tree of 4000 x 64 KiB
# files (rank 0's walk against the ranks' copies: the cost per file), copied by one process
# (default --streams 4), by one process with the same total depth as the ranks (--streams 8
# and 16), and by mpirun -n 2 and -n 4 (4 streams each, all ranks on GPU 0). Caches dropped
# before each run; every copy compared with cmp or diff -r. About 8 minutes.
#
#   bench/mpi-ranks.sh BIN_DIR [ROUNDS]
#
# BIN_DIR holds aiscp built with --features mpi (cargo build --release --features mpi) and,
# where the machine has no Open MPI, openmpi-bundle/ made by bench/mpi-bundle.sh. Results in
# $OUT (or ./mpi-ranks-out): results.tsv (one row per run), summary.tsv (medians), debug.log.
# For a trial elsewhere: BACKEND=host BIG=64M TREE_FILE=8M MID_FILE=4M SMALL_FILES=200
# ROOT=/tmp/x (no RAM disks made).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/mpi-ranks.sh BIN_DIR [ROUNDS]}" && pwd)
rounds=${2:-3}
out=${OUT:-$PWD/mpi-ranks-out}
mkdir -p "$out"
aiscp=$B/aiscp
[[ -f $B/openmpi-bundle/env.sh ]] && source "$B/openmpi-bundle/env.sh"
command -v mpirun >/dev/null || { echo "no mpirun (make BIN_DIR/openmpi-bundle)"; exit 1; }
mpirun --version | head -1
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)

backend=${BACKEND:-gpu}
if [[ -n ${ROOT:-} ]]; then
    S=$ROOT/src D=$ROOT/dst
else
    for m in fast fast2; do
        bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'
    done
    S=/mnt/fast/ranks D=/mnt/fast2/ranks
fi
rm -rf "$S" "$D"
mkdir -p "$S/tree" "$S/tree64" "$S/small" "$D"
head -c "${BIG:-4G}" /dev/urandom > "$S/big"
for i in $(seq 32); do head -c "${TREE_FILE:-128M}" /dev/urandom > "$S/tree/f$i"; done
for i in $(seq 32); do head -c "${MID_FILE:-64M}" /dev/urandom > "$S/tree64/f$i"; done
head -c 64K /dev/urandom > "$S/small.one"
for d in $(seq 0 $(( (${SMALL_FILES:-4000} - 1) / 100 ))); do
    mkdir -p "$S/small/d$d"
    for i in $(seq 100); do cp "$S/small.one" "$S/small/d$d/f$i"; done
done
rm "$S/small.one"
sync

printf 'case\tmethod\tround\tseconds\tGB_per_s\n' > "$out/results.tsv"
run() { # CASE METHOD BYTES SRC -- command...
    local case=$1 method=$2 bytes=$3 src=$4
    shift 5
    for r in $(seq "$rounds"); do
        rm -rf "$D/out"
        sync
        echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
        local s e
        s=$(date +%s.%N)
        if ! "$@" "$src" "$D/out" 2>>"$out/debug.log"; then
            echo "FAILED: $case $method: $*" | tee -a "$out/debug.log"
            continue
        fi
        e=$(date +%s.%N)
        if [[ -d $src ]]; then
            diff -rq "$src" "$D/out" >/dev/null || echo "MISMATCH: $case $method"
        else
            cmp -s "$src" "$D/out" || echo "MISMATCH: $case $method"
        fi
        awk -v c="$case" -v m="$method" -v r="$r" -v s="$s" -v e="$e" -v b="$bytes" \
            'BEGIN { printf "%s\t%s\t%d\t%.3f\t%.3f\n", c, m, r, e - s, b / (e - s) / 1e9 }' |
            tee -a "$out/results.tsv"
    done
}

for case in big tree tree64 small; do
    src=$S/$case bytes=$(du -sb "$S/$case" | cut -f1)
    run "$case" one_s4 "$bytes" "$src" -- "$aiscp" -r --no-progress --backend "$backend"
    run "$case" one_s8 "$bytes" "$src" -- "$aiscp" -r --no-progress --backend "$backend" --streams 8
    run "$case" one_s16 "$bytes" "$src" -- "$aiscp" -r --no-progress --backend "$backend" --streams 16
    run "$case" ranks2 "$bytes" "$src" -- "${mpi[@]}" -n 2 "$aiscp" -r --no-progress --backend "$backend"
    run "$case" ranks4 "$bytes" "$src" -- "${mpi[@]}" -n 4 "$aiscp" -r --no-progress --backend "$backend"
done
# One --debug run of each split, for where the parts and whole files went.
for n in 2 4; do
    rm -rf "$D/out"
    echo "=== -n $n --debug" >> "$out/debug.log"
    "${mpi[@]}" -n $n "$aiscp" --no-progress --backend "$backend" --debug "$S/big" "$D/out" \
        2>&1 | grep -E "parts of|^aiscp: debug: \+[0-9.]+s backend" >> "$out/debug.log"
    rm -rf "$D/out"
    echo "=== -n $n --debug, tree64: whole files per rank" >> "$out/debug.log"
    "${mpi[@]}" -n $n "$aiscp" -r --no-progress --backend "$backend" --debug "$S/tree64" \
        "$D/out" 2>&1 | grep -o "whole, to rank [0-9]*" | sort | uniq -c >> "$out/debug.log"
done

python3 - "$out/results.tsv" > "$out/summary.tsv" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]).read().splitlines()[1:]:
    case, method, _, _, rate = line.split("\t")
    rows[(case, method)].append(float(rate))
print("case\tmethod\truns\tmedian_GB_per_s")
for (case, method), rates in rows.items():
    print(f"{case}\t{method}\t{len(rates)}\t{statistics.median(rates):.3f}")
PY
cat "$out/summary.tsv"
rm -rf "$S" "$D"
