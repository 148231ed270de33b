#!/bin/bash
# What --verify=sums costs on one large file beside the same copy unverified, for a build and
# a baseline build side by side in one run (it was written for the read-back behind the
# copy, bench/results/HISTORY.md, "--verify=sums: a read-back behind the copy"):
#
#   bench/verify-behind.sh --old BINARY [--new BINARY] [--dir PATH] [--src FILE] [--size 2G]
#       [--rounds 5] [--backend host] [--out DIR]
#
# DEST is written in --dir; SOURCE is --src (another filesystem, say), or a file of --size
# random bytes made in --dir.
# Methods: old, old_sums (--verify=sums), new, new_sums, rotated each round; every run with
# caches dropped (root), timed as the whole process plus sync; the first round's copies
# compared with SOURCE. Rows go to DIR/rows.tsv (method, round, seconds), medians to stdout.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

dir=/var/tmp/verify-behind old="" new=$HERE/../target/release/aiscp size=2G rounds=5 src=
backend=host out=""
while (($#)); do
    case $1 in
        --dir) dir=$2; shift 2 ;;
        --src) src=$2; shift 2 ;;
        --old) old=$2; shift 2 ;;
        --new) new=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ -x $old ]] || die "--old BINARY is needed"
out=${out:-$dir/results}
mkdir -p "$dir" "$out"
if [[ -z $src ]]; then
    src=$dir/src
    bytes=$(parse_size "$size") || die "bad --size: $size"
    [[ -e $src ]] || gen_random "$src" "$bytes"
fi
rows=$out/rows.tsv
echo "method	round	seconds" > "$rows"
methods=(old old_sums new new_sums)
for round in $(seq "$rounds"); do
    for i in "${!methods[@]}"; do
        m=${methods[$(((i + round) % ${#methods[@]}))]}
        bin=$old
        [[ $m == new* ]] && bin=$new
        args=(--backend "$backend")
        [[ $m == *_sums ]] && args+=(--verify=sums)
        rm -f "$dir/dst"
        sync
        echo 3 > /proc/sys/vm/drop_caches
        t=$( { TIMEFORMAT=%R; time { AISCP_SERVICE=off "$bin" "${args[@]}" "$src" "$dir/dst" && sync; }; } 2>&1 ) ||
            die "$m failed: $t"
        # Compared in the first round only: a cmp of a large file takes as long as a copy.
        ((round > 1)) || cmp -s "$src" "$dir/dst" || die "$m: DEST differs from SOURCE"
        echo "$m	$round	$t" | tee -a "$rows"
    done
done
python3 - "$rows" <<'PY'
import csv, statistics, sys
runs = {}
for row in csv.DictReader(open(sys.argv[1]), delimiter="\t"):
    runs.setdefault(row["method"], []).append(float(row["seconds"]))
med = {m: statistics.median(v) for m, v in runs.items()}
for build in ("old", "new"):
    plain, sums = med[build], med[build + "_sums"]
    print(f"{build}: plain {plain:.3f} s, --verify=sums {sums:.3f} s ({sums / plain:.2f}x)")
PY
rm -f "$dir/dst"
