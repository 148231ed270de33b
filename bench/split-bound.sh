#!/bin/bash
# What running the walk on several threads could gain on this machine, before building it:
# the same tree copied by one `aiscp -r` and by N aiscp processes side by side, each given
# every Nth top-level directory (the best split a walk of directories side by side could
# make, paying N start-ups), beside cp -r and xcp -r. Methods rotated each round, caches
# dropped, whole process plus syncfs of DST's filesystem (bench/measure.py), which also gives
# the CPU time of each method's processes together.
#
#   bench/split-bound.sh [AISCP]    (OUT: where rows go; default target/release/aiscp)
#
# DIR (default /dev/shm/split-bound) holds the tree: FILES (default 20000) files of 1-8 KiB,
# 100 to a directory, fixed seed. ROUNDS (default 7), SPLITS (default "2 4"), XCP_BIN
# (default xcp on PATH; skipped where none runs). Every aiscp runs `--backend host` with the
# service off. Rows: OUT/rows.tsv (method round rc wall user sys maxrss); medians on stdout.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
[[ ${1:-} == -h || ${1:-} == --help ]] && usage
aiscp=$(realpath "${1:-$AISCP_BIN}")
out=${OUT:?set OUT}
dir=${DIR:-/dev/shm/split-bound} files=${FILES:-20000} rounds=${ROUNDS:-7}
xcp=${XCP_BIN:-$(command -v xcp || true)}
mkdir -p "$out"
export AISCP_SERVICE=off

if [[ ! -f $dir/src/.made-$files ]]; then
    rm -rf "$dir/src"
    python3 - "$dir/src" "$files" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
for i in range(n):
    d = os.path.join(root, f"d{i // 100:04d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}"), "wb") as f:
        f.write(rng.randbytes(rng.randint(1024, 8192)))
open(os.path.join(root, f".made-{n}"), "w").close()
EOF
fi

# split N: N aiscp processes, the Kth copying every Nth top-level directory into DST.
split() {
    local n=$1 k
    mkdir "$dir/dst" || return 1
    for ((k = 0; k < n; k++)); do
        # shellcheck disable=SC2046 # one argument per directory, none with spaces
        "$aiscp" --backend host --no-progress -r $(find "$dir/src" -mindepth 1 -maxdepth 1 -type d |
            sort | awk -v n="$n" -v k="$k" 'NR % n == k') "$dir/dst" &
    done
    local rc=0
    for ((k = 0; k < n; k++)); do wait -n || rc=1; done
    return $rc
}
export -f split
export aiscp dir

methods=(cp one)
[[ -n $xcp ]] && "$xcp" --version >/dev/null 2>&1 && methods+=(xcp)
for n in ${SPLITS:-2 4}; do methods+=("split$n"); done
drop=()
[[ $(id -u) == 0 ]] && drop=(--drop)
printf 'method\tround\trc\twall_s\tuser_s\tsys_s\tmaxrss_kib\n' > "$out/rows.tsv"
for ((r = 1; r <= rounds; r++)); do
    # Rotated: each method goes first in turn.
    for ((i = 0; i < ${#methods[@]}; i++)); do
        m=${methods[(i + r) % ${#methods[@]}]}
        case $m in
            cp) cmd=(cp -r "$dir/src" "$dir/dst") ;;
            xcp) cmd=("$xcp" -r "$dir/src" "$dir/dst") ;;
            one) cmd=("$aiscp" --backend host --no-progress -r "$dir/src" "$dir/dst") ;;
            split*) cmd=(bash -c 'split "$1"' _ "${m#split}") ;;
        esac
        rm -rf "$dir/dst"
        line=$(python3 "$HERE/measure.py" "${drop[@]}" --sync "$dir" --timeout 300 \
            --log "$out/$m.log" -- "${cmd[@]}")
        read -r rc wall user sys rss _ <<< "$line"
        # Each copy is checked: every file's bytes, in name order.
        [[ $(cd "$dir/dst" 2>/dev/null && find . -type f ! -name '.made-*' | sort | xargs cat | b2sum) == \
            $(cd "$dir/src" && find . -type f ! -name '.made-*' | sort | xargs cat | b2sum) ]] || rc="bad"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$r" "$rc" "$wall" "$user" "$sys" "$rss" >> "$out/rows.tsv"
    done
done
rm -rf "$dir/dst"
python3 - "$out/rows.tsv" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("| method | wall s, median (min-max) | CPU s (user + sys), median | failed rounds |")
print("|---|---|---|---|")
for m in dict.fromkeys(r["method"] for r in rows):
    mine = [r for r in rows if r["method"] == m]
    wall = [float(r["wall_s"]) for r in mine]
    cpu = [float(r["user_s"]) + float(r["sys_s"]) for r in mine]
    bad = sum(r["rc"] != "0" for r in mine)
    print(f"| {m} | {statistics.median(wall):.3f} ({min(wall):.3f}-{max(wall):.3f}) "
          f"| {statistics.median(cpu):.3f} | {bad} |")
EOF
