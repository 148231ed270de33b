#!/bin/bash
# How many slots a staging service should keep for many clients, on the H200 in one device
# command (about 3 minutes): for --streams 4 (the default), 8 and 16, eight concurrent 1 GiB
# clients (3 rounds) and one 4 GiB client alone (2 rounds), beside the 8-thread O_DIRECT host
# copy of the 1 GiB file and eight in-process host-engine copies.
#
#   bench/h200-service-slots.sh BIN_DIR        (BIN_DIR: aiscp, rawbw.c)
#
# Two RAM-backed ext4s (scripts/gpu-setup.sh --fastdisk). Rows go to $OUT/slots.tsv.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-service-slots.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
now() { date +%s%N; }

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 20G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
gcc -O2 -o "$B/rawbw" "$B/rawbw.c" -lpthread || exit 1
export XDG_RUNTIME_DIR=/tmp/xdg-slots AISCP_SERVICE=off
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
sock=$XDG_RUNTIME_DIR/aiscp/service.sock
gen_random "$S/big" $((1 << 30))
gen_random "$S/four" $((4 << 30))
tsv=$out/slots.tsv
echo "method	streams	round	ms	gpu_mib" > "$tsv"
gpu() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }

eight() { # method streams round
    rm -f "$D"/big*; drop
    local a p=(); a=$(now)
    for c in 1 2 3 4 5 6 7 8; do
        case $1 in
            svc8) AISCP_SERVICE=$sock "$B/aiscp" --backend gpu "$S/big" "$D/big$c" & ;;
            inproc_host8) "$B/aiscp" --backend host "$S/big" "$D/big$c" & ;;
        esac
        p+=($!)
    done
    wait "${p[@]}"; sync
    echo "$1	$2	$3	$(( ($(now) - a) / 1000000 ))	$(gpu)" >> "$tsv"
    (($3 > 1)) || for c in 1 2 3 4 5 6 7 8; do cmp -s "$S/big" "$D/big$c" || echo "MISMATCH $1 $2 big$c"; done
}
four() { # streams round
    rm -f "$D/four"; drop
    local a; a=$(now)
    AISCP_SERVICE=$sock "$B/aiscp" --backend gpu "$S/four" "$D/four"; sync
    echo "svc_4g	$1	$2	$(( ($(now) - a) / 1000000 ))	$(gpu)" >> "$tsv"
}

for n in 4 8 16; do
    step "service with --streams $n"
    "$B/aiscp" --serve --backend gpu --streams "$n" 2> "$out/service-$n.log" &
    svc=$!
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    for r in 1 2 3; do eight svc8 "$n" "$r"; done
    for r in 1 2; do four "$n" "$r"; done
    kill -TERM $svc; wait $svc
done
step references
for r in 1 2 3; do eight inproc_host8 - "$r"; done
for r in 1 2 3; do
    rm -f "$D/one"; drop; a=$(now)
    "$B/rawbw" copy "$S/big" "$D/one" $((1 << 30)) $((16 << 20)) 8 > /dev/null; sync
    echo "hostcopy_qd8_1g	-	$r	$(( ($(now) - a) / 1000000 ))	-" >> "$tsv"
done
python3 - "$tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = dict.fromkeys((r["method"], r["streams"]) for r in rows)
for m, n in keys:
    ms = [int(r["ms"]) for r in rows if (r["method"], r["streams"]) == (m, n)]
    gib = {"svc8": 8, "inproc_host8": 8, "svc_4g": 4}.get(m, 1)
    med = statistics.median(ms)
    print(f"{m} streams={n}: median {med:.0f} ms = {gib * 1.073741824 / (med / 1000):.3f} GB/s {ms}")
PY
step done
