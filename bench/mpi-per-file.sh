#!/bin/bash
# What splitting a tree of small files over MPI ranks costs per file, on any machine (host
# memory, no GPU): FILES files of SIZE bytes in directories of 100, copied with -r by one
# process and by mpirun -n 2 and -n 4, ROUNDS rounds each (median reported), and the same
# launches copying one empty file (mpirun's and the ranks' start-up, to subtract).
#
#   bench/mpi-per-file.sh AISCP [FILES] [SIZE] [ROUNDS]
#
# AISCP is built with --features mpi. Work directory: $ROOT (default a fresh mktemp -d).
set -euo pipefail
aiscp=$(realpath "${1:?usage: bench/mpi-per-file.sh AISCP [FILES] [SIZE] [ROUNDS]}")
files=${2:-2000}
size=${3:-4096}
rounds=${4:-3}
root=${ROOT:-$(mktemp -d)}
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none)
cd "$root"
rm -rf src dst empty
head -c "$size" /dev/urandom > one
for d in $(seq 0 $(( (files - 1) / 100 ))); do
    mkdir -p "src/d$d"
    for i in $(seq 0 99); do
        (( d * 100 + i < files )) && cp one "src/d$d/f$i"
    done
done
: > empty
sync

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
time_it() { # SRC -- command...
    local src=$1
    shift 2
    for _ in $(seq "$rounds"); do
        rm -rf dst
        sync
        local s e
        s=$(date +%s.%N)
        "$@" -r --backend host --no-progress "$src" dst
        e=$(date +%s.%N)
        [[ -d $src ]] && diff -r "$src" dst
        echo "$e - $s" | bc
    done | median
}
printf 'method\ttree_s\tstart_s\tper_file_us\n'
for method in one n2 n4; do
    case $method in
        one) cmd=("$aiscp") ;;
        n2) cmd=("${mpi[@]}" -n 2 "$aiscp") ;;
        n4) cmd=("${mpi[@]}" -n 4 "$aiscp") ;;
    esac
    tree=$(time_it src -- "${cmd[@]}")
    start=$(time_it empty -- "${cmd[@]}")
    per=$(echo "($tree - $start) * 1000000 / $files" | bc)
    printf '%s\t%.3f\t%.3f\t%d\n' "$method" "$tree" "$start" "$per"
done
