#!/bin/bash
# A/B on the CPU machine: a tree of small files copied by two aiscp builds on the fake GPU
# with no --route (auto: the fake is hipFile, so the library route), beside the host engine.
#   OUT=… ROUNDS=9 bash ab.sh NEW_AISCP OLD_AISCP FAKE_LIB TREE
# Caches dropped, whole process + syncfs (bench/measure.py); methods rotated each round.
set -uo pipefail
new=$1 old=$2 lib=$3 tree=$4
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${OUT:?set OUT}
mkdir -p "$out"
export AISCP_SERVICE=off
methods=(new old host)
printf 'method\tround\trc\twall_s\tuser_s\tsys_s\tmaxrss_kib\n' > "$out/rows.tsv"
for ((r = 1; r <= ${ROUNDS:-9}; r++)); do
    for ((i = 0; i < 3; i++)); do
        m=${methods[(i + r) % 3]}
        case $m in
            new) cmd=(env AISCP_HIPFILE_LIB="$lib" AISCP_HIP_LIB="$lib" AISCP_HIPRTC_LIB="$lib" "$new" --no-progress -r) ;;
            old) cmd=(env AISCP_HIPFILE_LIB="$lib" AISCP_HIP_LIB="$lib" AISCP_HIPRTC_LIB="$lib" "$old" --no-progress -r) ;;
            host) cmd=("$new" --backend host --no-progress -r) ;;
        esac
        rm -rf "$tree/dst"
        line=$(python3 "$here/measure.py" --drop --sync "$tree" --log "$out/$m.log" -- "${cmd[@]}" "$tree/src" "$tree/dst")
        read -r rc wall user sys rss _ <<< "$line"
        diff -rq "$tree/src" "$tree/dst" > /dev/null || rc=bad
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$r" "$rc" "$wall" "$user" "$sys" "$rss" >> "$out/rows.tsv"
    done
done
rm -rf "$tree/dst"
