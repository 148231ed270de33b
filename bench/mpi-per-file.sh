#!/bin/bash
# What splitting a tree of small files over MPI ranks costs per file, on any machine (host
# memory, no GPU): FILES files of SIZE bytes in directories of 100, copied with -r by one
# process and by mpirun -n 2 and -n 4, ROUNDS rounds each (median reported), and the same
# launches copying one empty file (mpirun's and the ranks' start-up, to subtract). Wall
# time, and CPU time (user + system of every process, from /usr/bin/time), which a busy
# machine disturbs less.
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

# Median of each column.
medians() { python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if l.strip()]
print(" ".join(f"{statistics.median(c):.3f}" for c in zip(*rows)))'; }
time_it() { # SRC -- command...: wall and CPU (user + system, every process) seconds
    local src=$1
    shift 2
    for _ in $(seq "$rounds"); do
        rm -rf dst
        sync
        /usr/bin/time -f "%e %U %S" -o "$root/time" "$@" -r --backend host --no-progress \
            "$src" dst
        [[ -d $src ]] && diff -r "$src" dst
        awk '{ print $1, $2 + $3 }' "$root/time"
    done | medians
}
printf 'method\ttree_s\tstart_s\twall_per_file_us\ttree_cpu_s\tstart_cpu_s\tcpu_per_file_us\n'
for method in one n2 n4; do
    case $method in
        one) cmd=("$aiscp") ;;
        n2) cmd=("${mpi[@]}" -n 2 "$aiscp") ;;
        n4) cmd=("${mpi[@]}" -n 4 "$aiscp") ;;
    esac
    read -r tree tree_cpu < <(time_it src -- "${cmd[@]}")
    read -r start start_cpu < <(time_it empty -- "${cmd[@]}")
    python3 -c "
t, s, tc, sc, n = $tree, $start, $tree_cpu, $start_cpu, $files
print(f'$method\t{t:.3f}\t{s:.3f}\t{(t - s) * 1e6 / n:.0f}\t{tc:.3f}\t{sc:.3f}\t{(tc - sc) * 1e6 / n:.0f}')"
done
