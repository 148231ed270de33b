#!/bin/bash
# The staging service's remaining targets on the H200, in one device command (about 7
# minutes): eight concurrent 1 GiB clients through a warm service of the build under test and
# of the build before, beside eight in-process host-engine copies and the 8-thread O_DIRECT
# host copy; the 16 GiB file; the 64 x 32 MiB tree; and the 4 GiB file's stage times (the
# profile of the steady state: through the service, in-process on the GPU, host engine).
#
#   bench/h200-service-targets.sh BIN_DIR
#
# BIN_DIR holds aiscp (the build under test), aiscp-base (the build before), xcp and rawbw.c.
# Two RAM-backed ext4s (scripts/gpu-setup.sh --fastdisk), SRC on one and DST on the other.
# Everything lands in $OUT: eight.tsv, profile.tsv, the tree and file harnesses' rows.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-service-targets.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
ROUNDS=${ROUNDS:-3}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
now() { date +%s%N; }

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 40G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
gcc -O2 -o "$B/rawbw" "$B/rawbw.c" -lpthread || exit 1
export XDG_RUNTIME_DIR=/tmp/xdg-bench
mkdir -p -m 700 "$XDG_RUNTIME_DIR"

# serve NAME: a warm `BIN_DIR/NAME --serve --backend gpu` on its own socket, and
# BIN_DIR/NAME-svc, a wrapper pointing AISCP_SERVICE at it.
declare -A pids
serve() {
    local sock=$XDG_RUNTIME_DIR/$1/service.sock
    "$B/$1" --serve --backend gpu --socket "$sock" 2> "$out/service-$1.log" &
    pids[$1]=$!
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    printf '#!/bin/sh\nAISCP_SERVICE=%s exec %s "$@"\n' "$sock" "$B/$1" > "$B/$1-svc"
    chmod +x "$B/$1-svc"
}
serve aiscp
serve aiscp-base
export AISCP_SERVICE=off

step "eight concurrent 1 GiB copies, $ROUNDS rounds"
gen_random "$S/big" $((1 << 30))
tsv=$out/eight.tsv
echo "method	round	ms	gpu_peak_mib	exact" > "$tsv"
eight() { # method round
    rm -f "$D"/big*; drop
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$out/smi.txt" &
    local smi=$! a pids8=(); a=$(now)
    for c in 1 2 3 4 5 6 7 8; do
        case $1 in
            svc) "$B/aiscp-svc" --backend gpu "$S/big" "$D/big$c" & ;;
            svc_base) "$B/aiscp-base-svc" --backend gpu "$S/big" "$D/big$c" & ;;
            inproc_host) "$B/aiscp" --backend host "$S/big" "$D/big$c" & ;;
            hostcopy8) "$B/rawbw" copy "$S/big" "$D/big$c" $((1 << 30)) $((16 << 20)) 8 > /dev/null & ;;
        esac
        pids8+=($!)
    done
    wait "${pids8[@]}"
    sync
    local ms=$(( ($(now) - a) / 1000000 ))
    kill $smi 2> /dev/null; wait $smi 2> /dev/null
    local peak; peak=$(sort -n "$out/smi.txt" | tail -1)
    # Byte-exactness in the first round (cmp of 8 GiB costs as much as the copy).
    local ok=-
    if (($2 == 1)); then
        ok=0
        for c in 1 2 3 4 5 6 7 8; do cmp -s "$S/big" "$D/big$c" && ok=$((ok + 1)); done
    fi
    echo "$1	$2	$ms	$peak	$ok" >> "$tsv"
}
for r in $(seq "$ROUNDS"); do
    for m in svc svc_base inproc_host hostcopy8; do eight $m "$r"; done
done
# One 1 GiB file, 8 threads: the single-copy ceiling the issue names.
one() { rm -f "$D/one"; drop; local a; a=$(now); "$B/rawbw" copy "$S/big" "$D/one" $((1 << 30)) $((16 << 20)) 8 > /dev/null; sync; echo "hostcopy_qd8_one	$1	$(( ($(now) - a) / 1000000 ))	-	-" >> "$tsv"; }
for r in $(seq "$ROUNDS"); do one "$r"; done
python3 - "$tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
for m in dict.fromkeys(r["method"] for r in rows):
    ms = [int(r["ms"]) for r in rows if r["method"] == m]
    gib = 1 if m.endswith("_one") else 8
    med = statistics.median(ms)
    peaks = [r["gpu_peak_mib"] for r in rows if r["method"] == m]
    print(f"{m}: median {med:.0f} ms = {gib * 1.073741824 / (med / 1000):.3f} GB/s "
          f"(rounds {ms}); GPU peak {peaks}")
PY
rm -f "$S/big" "$D"/big* "$D/one"

step "64 x 32 MiB tree, 5 rounds"
mkdir -p "$out/tree"
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 64 --size 32M --rounds 5 \
    --budget 120 --out "$out/tree" --extra "svc=$B/aiscp-svc" --extra "svc_base=$B/aiscp-base-svc" |
    grep -E '^\| '
rm -rf "$S/t" "$D/t"

step "4 GiB: the steady state's stage times (profile), 3 rounds"
gen_random "$S/four" $((4 << 30))
ptsv=$out/profile.tsv
echo "method	round	wall_ms	engine_s	read_s	copy_queue_s	copy_wait_s	write_s	startup_s" > "$ptsv"
for r in $(seq 3); do
    for m in svc inproc_gpu host; do
        rm -f "$D/four"; drop
        case $m in
            svc) cmd=("$B/aiscp-svc" --backend gpu) ;;
            inproc_gpu) cmd=("$B/aiscp" --backend gpu) ;;
            host) cmd=("$B/aiscp" --backend host) ;;
        esac
        a=$(now)
        "${cmd[@]}" --stats=json "$S/four" "$D/four" > "$out/p.json"
        sync
        wall=$(( ($(now) - a) / 1000000 ))
        python3 - "$out/p.json" "$m" "$r" "$wall" >> "$ptsv" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); s = j.get("stages") or {}
f = lambda k: f"{s.get(k, 0):.3f}"
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], f"{j['seconds']:.3f}", f("read"),
                 f("copy_queue"), f("copy_wait"), f("write"), str(j.get("startup_seconds"))]))
PY
        ((r > 1)) || cmp -s "$S/four" "$D/four" || echo "MISMATCH $m"
    done
done
cat "$ptsv"
rm -f "$S/four" "$D/four"

step "16 GiB, 2 rounds"
bash "$HERE/run.sh" --size 16G --dir "$S/b" --dst-dir "$D/b" --rounds 2 --budget 200 --out "$out/file16" \
    --methods hostcopy_qd8 --extra "svc=$B/aiscp-svc --backend gpu" --extra 'host=--backend host' |
    grep -E '^\| '
for n in "${!pids[@]}"; do kill -TERM "${pids[$n]}"; done
wait
step done
