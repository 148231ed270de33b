#!/bin/bash
# The I/O library's own statistics beside aiscp's counts, on the H200 machine (genuine cuFile),
# in one device command (about 2 minutes):
#   - a 1 GiB file and a tree of 200 files (1 KiB to 8 MiB, most with a partial last block)
#     copied with --stats=json on the library route (--route library: cuFile's reads and
#     writes, in compatibility mode there, as no nvidia-fs is loaded) and on the default
#     route (auto: the bounce route there, so the counters are absent, with the reason);
#     each run printed as one table row: aiscp's files, bytes and routes beside the library's
#     calls and bytes, per GPU fast path against fallback, or why there are none;
#   - what asking cuFile to count costs: the 1 GiB copy on the library route, 3 rounds each
#     without --stats and with --stats=json (cuFileSetStatsLevel(3) + cuFileStatsStart), cold
#     cache, medians.
#
#   OUT=... bash bench/h200-library-stats.sh BIN_DIR     (BIN_DIR/aiscp: a release build)
#
# Two RAM-backed ext4s (scripts/gpu-setup.sh --fastdisk, which also writes the udev records
# cuFile needs), SRC on one and DST on the other. Everything lands in $OUT: the JSON of every
# run (stats-*.json), the table (library-stats.tsv), the log on stdout.
#
# What it shows: whether cuFile 1.15's statistics calls load and answer; whether the per-GPU
# counts read with the layout hipfile-rs picks add up to the Level 1 totals (else the JSON's
# per_gpu_absent says they do not); whether library bytes = aiscp's bytes less each file's
# partial last block (the "check" column); and the cost of the statistics in seconds.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-library-stats.sh BIN_DIR}" && pwd)/aiscp
out=${OUT:?set OUT}
tsv=$out/library-stats.tsv
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
export AISCP_SERVICE=off

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 8G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$B" --version | head -1

step "sources: 1 GiB file, tree of 200 files"
head -c 1G /dev/urandom > $S/big
mkdir -p $S/tree
python3 - "$S/tree" <<'EOF'
import os, random, sys
random.seed(26)
root = sys.argv[1]
for i in range(200):
    size = random.choice([1000, 4096, 70_000, 300_001, 1 << 20, 8 << 20]) + random.randrange(0, 4096)
    with open(os.path.join(root, f"f{i:03}"), "wb") as f:
        f.write(os.urandom(size))
EOF
# The bytes the library never sees: each file's partial last block (O_DIRECT moves whole ones).
tails() { find "$1" -type f -printf '%s\n' | awk '{t += $1 % 4096} END {print t + 0}'; }

printf 'run\tfiles\tbytes\troutes\tlib reads ok/failed\tlib read bytes\tlib writes ok/failed\tlib write bytes\tper GPU (fast/fallback reads, writes)\tcheck: lib bytes = bytes - tails\tabsent because\n' | tee "$tsv"
row() { # NAME JSON TAILS
    python3 - "$1" "$2" "$3" <<'EOF' | tee -a "$tsv"
import json, sys
name, path, tails = sys.argv[1], sys.argv[2], int(sys.argv[3])
v = json.load(open(path))
routes = ", ".join(f"{r['files']} {r['read']}/{r['write']}" for r in v["routes"])
lib = v.get("library_stats")
if lib is None:
    cells = ["-"] * 6 + [v.get("library_stats_absent") or "?"]
else:
    gpus = lib.get("per_gpu")
    per_gpu = ("; ".join(
        f"slot {g['slot']}: reads {g['fast_path_reads']}/{g['fallback_reads']}, "
        f"writes {g['fast_path_writes']}/{g['fallback_writes']}" for g in gpus)
        if gpus is not None else f"absent: {lib.get('per_gpu_absent')}")
    # Only files on a library route reach the library; the tails of the others are theirs.
    want = v["bytes"] - tails
    check = (f"read {lib['read_bytes'] == want}, write {lib['write_bytes'] == want} "
             f"(want {want})")
    cells = [f"{lib['reads']['ok']}/{lib['reads']['failed']}", str(lib["read_bytes"]),
             f"{lib['writes']['ok']}/{lib['writes']['failed']}", str(lib["write_bytes"]),
             per_gpu, check, "-"]
print("\t".join([name, str(v["files"]), str(v["bytes"]), routes] + cells))
EOF
}

step "--stats=json on each route"
for route in library auto; do
    for what in big tree; do
        rm -rf "${D:?}/$what"; drop
        json=$out/stats-$route-$what.json
        if [ $what = big ]; then
            "$B" --backend cufile --route $route --stats=json $S/big $D/big > "$json"
            t=$(( $(stat -c %s $S/big) % 4096 ))
        else
            "$B" --backend cufile --route $route -r --stats=json $S/tree $D/tree > "$json"
            t=$(tails $S/tree)
        fi
        echo "exit $? ($route, $what)"
        cmp -s $S/big $D/big 2>/dev/null || [ $what = tree ] || echo "MISMATCH big ($route)"
        [ $what = tree ] && { diff -rq $S/tree $D/tree > /dev/null || echo "MISMATCH tree ($route)"; }
        row "$route $what" "$json" "$t"
    done
done
step "the text form, library route, with --debug's library counters line"
rm -rf "${D:?}/big"; "$B" --backend cufile --route library --stats --debug $S/big $D/big 2>/dev/null | tee "$out/stats-text.txt"

step "cost of cuFile's statistics: 1 GiB, library route, 3 rounds each (cold cache)"
for stats in none json; do
    for i in 1 2 3; do
        rm -f $D/big; drop
        a=$(date +%s%N)
        if [ $stats = json ]; then
            "$B" --backend cufile --route library --stats=json $S/big $D/big > /dev/null
        else
            "$B" --backend cufile --route library $S/big $D/big
        fi
        sync
        echo $(( ($(date +%s%N) - a) / 1000000 ))
    done | median | { read -r ms; printf 'cost\t%s\t1 GiB, library route, median of 3 (ms, + sync)\t%s\n' "$([ $stats = json ] && echo --stats=json || echo 'no --stats')" "$ms" | tee -a "$tsv"; }
done
step done
