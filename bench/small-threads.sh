#!/bin/bash
# Where a small-file tree copy's threads spend their time, aiscp beside xcp and cp: each
# method's copy of FILES x SIZE (100 files to a directory) under bench/thread-times.py,
# caches dropped before each (root), ROUNDS rounds, the methods' order rotated each round;
# the process's wall time, then sync's.
#
#   OUT=DIR S=SRC_FS D=DST_FS bench/small-threads.sh BIN_DIR   (BIN_DIR: aiscp, xcp)
#
# FILES (default 20000), SIZE in bytes (default 8192), ROUNDS (default 3), METHODS (default
# "host gpu xcp cp"). Thread tables go to $OUT/threads.txt, rows (method, round, wall, sync) to
# $OUT/rows.tsv; a copy that fails is named in $OUT/failed.txt and has no row.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/small-threads.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT} S=${S:?set S} D=${D:?set D}
FILES=${FILES:-20000} SIZE=${SIZE:-8192} ROUNDS=${ROUNDS:-3}
read -ra methods <<< "${METHODS:-host gpu xcp cp}"
for method in "${methods[@]}"; do
    case $method in
        host | gpu | xcp | cp) ;;
        *) echo "unknown method $method (host, gpu, xcp, cp)" >&2; exit 2 ;;
    esac
done
mkdir -p "$out"
tree=$S/small-$FILES-$SIZE
if [[ ! -d $tree ]]; then
    python3 - "$tree" "$FILES" "$SIZE" << 'PY'
import os, sys
tree, files, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(files):
    d = os.path.join(tree, f"d{i // 100:04}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i % 100:02}"), "wb") as f:
        f.write(os.urandom(size))
PY
    sync
fi
rows=$out/rows.tsv
[[ -e $rows ]] || echo "method	round	wall	sync" > "$rows"
n=${#methods[@]}
for round in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do
        method=${methods[$(((i + round - 1) % n))]}
        case $method in
            host | gpu) cmd=("$B/aiscp" -r --backend "$method") ;;
            xcp) cmd=("$B/xcp" -r) ;;
            cp) cmd=(cp -r) ;;
        esac
        rm -rf "${D:?}/copy"
        sync
        echo 3 > /proc/sys/vm/drop_caches || { echo "cannot drop caches (root?)" >&2; exit 1; }
        table=$(AISCP_SERVICE=off python3 "$HERE/thread-times.py" -- "${cmd[@]}" "$tree" "$D/copy" 2>&1)
        status=$?
        synced=$( { TIMEFORMAT=%R; time sync; } 2>&1 )
        printf '## %s round %s\n%s\n' "$method" "$round" "$table" >> "$out/threads.txt"
        if ((status != 0)); then
            echo "$method $round: exit $status" | tee -a "$out/failed.txt"
            continue
        fi
        wall=$(sed -n 's/^# wall \([0-9.]*\) s.*/\1/p' <<< "$table")
        echo "$method	$round	$wall	$synced" | tee -a "$rows"
    done
done
