#!/bin/bash
# The staging service on the H200 machine, in one device command (about 2 minutes): per-run
# cost of a 2-byte copy (cp, aiscp in-process on the GPU, aiscp through a warm service), a
# bash loop of single-file copies of 64 KiB files, and eight concurrent 1 GiB copies' GPU
# memory (nvidia-smi sampled every 100 ms) and time, with and without a service.
#
#   bench/h200-service.sh BIN_DIR        (BIN_DIR/aiscp: a release build)
#
# Two RAM-backed ext4s (scripts/gpu-setup.sh --fastdisk), SRC on one and DST on the other.
# Rows go to $OUT/service.tsv, the log to stdout. LOOP_FILES (default 200) sets the loop's files;
# the in-process GPU loop copies LOOP_GPU (default 40) of them (each run pays the start-up).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-service.sh BIN_DIR}" && pwd)/aiscp
out=${OUT:?set OUT}
LOOP_FILES=${LOOP_FILES:-200}
LOOP_GPU=${LOOP_GPU:-40}
tsv=$out/service.tsv
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
row() { printf '%s\n' "$*" | tee -a "$tsv"; }
now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
export XDG_RUNTIME_DIR=/run/user/0
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
row "what	method	n	value	unit"
gpu_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
base=$(gpu_used)
row "gpu memory idle	-	1	$base	MiB"

serve() {
    "$B" --serve --backend gpu --debug 2> "$out/service.log" &
    svc=$!
    for _ in $(seq 400); do [ -S $XDG_RUNTIME_DIR/aiscp/service.sock ] && return; sleep 0.025; done
    echo "service did not start"; cat "$out/service.log"
}
unserve() { kill -TERM "$svc"; wait "$svc"; }

step "2-byte copy, 20 runs each"
printf 'hi' > $S/two
for method in cp inproc service; do
    [ $method = service ] && serve
    for i in $(seq 20); do
        rm -f $D/two
        a=$(now)
        case $method in
            cp) cp $S/two $D/two ;;
            inproc) AISCP_SERVICE=off "$B" --backend gpu $S/two $D/two ;;
            service) "$B" --backend gpu $S/two $D/two ;;
        esac
        echo $(( ($(now) - a) / 1000 ))
        cmp -s $S/two $D/two || echo "MISMATCH $method" >&2
    done | median | { read -r us; row "2-byte copy per run (median of 20)	$method	20	$us	us"; }
    [ $method = service ] && { "$B" --backend gpu --stats $S/two $D/two2 | tee -a "$out/stats.txt"; unserve; }
done

step "bash loop of single-file copies, 64 KiB files"
mkdir -p $S/loop
for i in $(seq "$LOOP_FILES"); do head -c 65536 /dev/urandom > $S/loop/f$i; done
loop() { # method files
    rm -rf $D/loop; mkdir -p $D/loop; drop
    local a; a=$(now)
    for i in $(seq "$2"); do
        case $1 in
            cp) cp $S/loop/f$i $D/loop/f$i ;;
            inproc) AISCP_SERVICE=off "$B" --backend gpu $S/loop/f$i $D/loop/f$i ;;
            service) "$B" --backend gpu $S/loop/f$i $D/loop/f$i ;;
        esac
    done
    sync
    local ms=$(( ($(now) - a) / 1000000 ))
    for i in $(seq "$2"); do cmp -s $S/loop/f$i $D/loop/f$i || echo "MISMATCH $1 f$i" >&2; done
    row "loop of single-file copies (64 KiB, cold cache, + sync)	$1	$2	$ms	ms"
}
loop cp "$LOOP_FILES"
loop inproc "$LOOP_GPU"
serve
loop service "$LOOP_FILES"
unserve

step "eight concurrent 1 GiB copies"
head -c 1G /dev/urandom > $S/big
eight() { # method
    rm -f $D/big*; drop
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$out/smi-$1.txt" &
    local smi=$! a pids=(); a=$(now)
    for c in 1 2 3 4 5 6 7 8; do
        case $1 in
            inproc) AISCP_SERVICE=off "$B" --backend gpu $S/big $D/big$c & ;;
            service) "$B" --backend gpu $S/big $D/big$c & ;;
        esac
        pids+=($!)
    done
    wait "${pids[@]}"
    sync
    local ms=$(( ($(now) - a) / 1000000 ))
    sleep 0.3; kill $smi
    local peak; peak=$(sort -n "$out/smi-$1.txt" | tail -1)
    local ok=0
    for c in 1 2 3 4 5 6 7 8; do cmp -s $S/big $D/big$c && ok=$((ok + 1)); done
    row "8 x 1 GiB concurrent: whole time (+ sync)	$1	8	$ms	ms"
    row "8 x 1 GiB concurrent: GPU memory peak (idle $base)	$1	8	$peak	MiB"
    row "8 x 1 GiB concurrent: byte-exact copies	$1	8	$ok	of 8"
}
eight inproc
serve
warm=$(gpu_used)
row "gpu memory with the service idle	service	1	$warm	MiB"
eight service
unserve
grep -c 'connected$' "$out/service.log" | sed 's/^/clients in the last service: /'
step done
