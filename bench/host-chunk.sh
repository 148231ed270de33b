#!/bin/bash
# The host backend's chunk size against its memory, on the GPU machine's two RAM-backed
# ext4s (O_DIRECT), a 4 GiB file, cold cache, whole process + sync, ROUNDS rounds per size
# interleaved. Rows to $OUT/host-chunk.tsv: chunk, round, seconds, max RSS KiB.
#
#   ROUNDS=5 bench/host-chunk.sh BIN
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(realpath "${1:?usage: bench/host-chunk.sh BIN}")
out=${OUT:?set OUT}
for m in fast fast2; do
    mountpoint -q /mnt/$m || bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 6G --mnt /mnt/$m | grep -v '^env'
done
head -c 4G /dev/urandom > /mnt/fast/a
printf 'chunk\tround\tseconds\tmax_rss_kib\n' > "$out/host-chunk.tsv"
for round in $(seq "${ROUNDS:-5}"); do
    for chunk in 64M 32M 16M 8M 4M; do
        rm -f /mnt/fast2/b; sync; echo 3 > /proc/sys/vm/drop_caches
        t0=$(date +%s.%N)
        /usr/bin/time -o /tmp/rss -f %M env AISCP_SERVICE=off "$B" --backend host \
            --chunk-size "$chunk" /mnt/fast/a /mnt/fast2/b
        sync
        t1=$(date +%s.%N)
        printf '%s\t%s\t%s\t%s\n' "$chunk" "$round" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" "$(cat /tmp/rss)" >> "$out/host-chunk.tsv"
    done
done
cmp /mnt/fast/a /mnt/fast2/b && echo "last copy equal"
awk -F'\t' 'NR > 1 { t[$1] = t[$1] " " $3; r[$1] = $4 } END { for (c in t) print c, "s:" t[c], "rss KiB:", r[c] }' "$out/host-chunk.tsv" | sort -h
