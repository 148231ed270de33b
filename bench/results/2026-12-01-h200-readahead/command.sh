#!/bin/bash
# Device command of the read-ahead run (one call, 142 s): `bash .probe/ra.sh`, .probe carried
# with aiscp-none = ea12796 (no read-ahead), aiscp-advise = ea12796 with fec2736's readahead.rs
# (posix_fadvise(WILLNEED) in 2 MiB pieces on a thread), aiscp-read = the same with the thread
# reading the files in 2 MiB pieces (the form committed in 5ae65cd), xcp 0.24.9.
# small/results.tsv and small/summary.md did not come back (at most 8 files per call); the
# small tree's medians and ranges are in ra.log.
set -u
B=$(cd "$(dirname "$0")" && pwd)
HERE=$PWD/bench
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env' | tail -1; done
S=/mnt/fast D=/mnt/fast2
printf 'hi' > $S/two
ls -la /usr/local/nvidia/lib64/libcuda.so.1; readlink -f /usr/local/nvidia/lib64/libcuda.so.1; cat /sys/block/vda/queue/read_ahead_kb 2>/dev/null; lsblk -d -o NAME,RA,ROTA,SIZE 2>/dev/null
printf 'method\tround\tms\n' > $OUT/startup-cold.tsv
for r in 1 2 3 4 5 6 7; do
  for m in none advise read; do
    sync; echo 3 > /proc/sys/vm/drop_caches
    s=$(date +%s.%N); $B/aiscp-$m $S/two $D/two-cold || echo "failed $m"; e=$(date +%s.%N)
    awk -v m="$m" -v r="$r" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t%d\t%.1f\n", m, r, (e - s) * 1000 }' >> $OUT/startup-cold.tsv
  done
done
awk -F'\t' 'NR > 1 { v[$1] = v[$1] " " $3 } END { for (m in v) print m ":" v[m] " ms" }' $OUT/startup-cold.tsv
for m in none advise read; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  echo "=== cold --debug $m"; $B/aiscp-$m --debug $S/two $D/two-cold 2>&1 | grep -E 'loaded|backend cuFile|bytes in'
done
printf 'method\tround\tms\n' > $OUT/startup-warm.tsv
for m in none advise read; do
  s=$(date +%s.%N); for i in $(seq 10); do $B/aiscp-$m $S/two $D/two-w; done; e=$(date +%s.%N)
  awk -v m="$m" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t10\t%.1f\n", m, (e - s) * 100 }' | tee -a $OUT/startup-warm.tsv
done
export AISCP_BIN=$B/aiscp-none XCP_BIN=$B/xcp BENCH_SHARED=$B
ex=(--extra "advise=$B/aiscp-advise" --extra "read=$B/aiscp-read")
bash $HERE/tree.sh --src-dir $S/t --dst-dir $D/t --files 4000 --size 256K --rounds 5 --budget 150 --out $OUT/small "${ex[@]}" | grep '^|'
rm -rf $S/t $D/t
bash $HERE/tree.sh --src-dir $S/t2 --dst-dir $D/t2 --files 64 --size 32M --rounds 5 --budget 150 --out $OUT/mid "${ex[@]}" | grep '^|'
