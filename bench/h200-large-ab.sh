#!/bin/bash
# A large file through two builds' warm services, in-process on the GPU and on the host
# engine, rounds rotated, on the two RAM ext4s of an earlier command (about 2 minutes):
#   bench/h200-large-ab.sh OLD_DIR NEW_DIR [SIZE_GIB]      (each DIR: aiscp)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
A=$(cd "$1" && pwd)/aiscp B=$(cd "$2" && pwd)/aiscp gib=${3:-4}
out=${OUT:?set OUT}
S=/mnt/fast D=/mnt/fast2
now() { date +%s%N; }
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
export XDG_RUNTIME_DIR=/tmp/xdg-ab
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
"$A" --serve --backend gpu --socket "$XDG_RUNTIME_DIR/old.sock" 2> /dev/null & p1=$!
"$B" --serve --backend gpu --socket "$XDG_RUNTIME_DIR/new.sock" 2> /dev/null & p2=$!
sleep 2
gen_random "$S/ab" $((gib << 30))
echo "method	round	ms	read_s	write_s" > "$out/ab.tsv"
for r in 1 2 3; do
    for m in old_svc new_svc new_inproc old_inproc host; do
        case $m in
            old_svc) cmd=(env AISCP_SERVICE=$XDG_RUNTIME_DIR/old.sock "$A" --backend gpu) ;;
            new_svc) cmd=(env AISCP_SERVICE=$XDG_RUNTIME_DIR/new.sock "$B" --backend gpu) ;;
            new_inproc) cmd=(env AISCP_SERVICE=off "$B" --backend gpu) ;;
            old_inproc) cmd=(env AISCP_SERVICE=off "$A" --backend gpu) ;;
            host) cmd=(env AISCP_SERVICE=off "$B" --backend host) ;;
        esac
        rm -f "$D/ab"; drop; a=$(now)
        "${cmd[@]}" --stats=json "$S/ab" "$D/ab" > "$out/j.json"; sync
        ms=$(( ($(now) - a) / 1000000 ))
        python3 -c "import json,sys; s=json.load(open(sys.argv[1])).get('stages') or {}; print(sys.argv[2], sys.argv[3], sys.argv[4], s.get('read'), s.get('write'), sep='\t')" "$out/j.json" $m $r $ms >> "$out/ab.tsv"
    done
done
kill $p1 $p2; wait
cat "$out/ab.tsv"
python3 - "$out/ab.tsv" "$gib" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t")); gib = int(sys.argv[2])
for m in dict.fromkeys(r["method"] for r in rows):
    ms = statistics.median(int(r["ms"]) for r in rows if r["method"] == m)
    print(f"{m}: median {ms:.0f} ms = {gib * 1.073741824 / (ms / 1000):.3f} GB/s")
PY
