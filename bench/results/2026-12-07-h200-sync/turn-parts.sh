#!/bin/bash
# EXP: what the service's parts of a file copied in turn cost: a BIG file through warm
# services whose parts are 16 chunks (today) or the whole file (AISCP_EXP_TURN), GPU and host,
# beside the in-process copy; two RAM ext4s, cold cache, whole process + sync.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "$1" && pwd)
out=${OUT:?}
source "$HERE/../scripts/lib.sh"
for m in fast fast2; do mountpoint -q /mnt/$m || bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 44G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
[[ -e $S/big16 ]] || gen_random "$S/big16" "${BIG:-$((16 << 30))}"
sync
export XDG_RUNTIME_DIR=/tmp/xdg-turn; mkdir -p -m 700 $XDG_RUNTIME_DIR
declare -A sock
for v in gpu-16 gpu-all host-16 host-all; do
    be=${v%-*}; t=16; [[ ${v#*-} == all ]] && t=100000
    mkdir -p -m 700 $XDG_RUNTIME_DIR/$v
    AISCP_EXP_TURN=$t "$B/aiscp-turn" --serve --backend $be --socket $XDG_RUNTIME_DIR/$v/s > /dev/null 2>&1 &
    sock[$v]=$XDG_RUNTIME_DIR/$v/s
done
sleep 2
for s in "${sock[@]}"; do head -c 100000 /dev/urandom > /tmp/w; AISCP_SERVICE=$s "$B/aiscp-turn" /tmp/w /tmp/w.out; done
for r in $(seq "${ROUNDS:-3}"); do
    for v in gpu-16 gpu-all host-16 host-all inproc-host inproc-gpu; do
        rm -f "$D/big16"; sync; echo 3 > /proc/sys/vm/drop_caches
        case $v in
            inproc-*) e=AISCP_SERVICE=off be=${v#inproc-} ;;
            *) e=AISCP_SERVICE=${sock[$v]} be=${v%-*} ;;
        esac
        t=$( { TIMEFORMAT=%R; time { env $e "$B/aiscp-turn" --backend $be "$S/big16" "$D/big16" && sync; }; } 2>&1 )
        echo "$v	$r	$t" | tee -a "$out/rows.tsv"
    done
done
kill $(jobs -p) 2>/dev/null
