#!/bin/bash
# Device command of the slot-size run (one call, 188 s): `bash .probe/exp.sh`, .probe carried
# with aiscp = 5ae65cd, xcp 0.24.9. big.tsv: variant, round, whole command + sync (s), the
# engine's own --debug time and stage times. small/results.tsv and small/summary.md did not
# come back (8 files per call); the small tree's medians and ranges are in exp.log.
set -u
B=$(cd "$(dirname "$0")" && pwd)
HERE=$PWD/bench
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env' | tail -1; done
S=/mnt/fast D=/mnt/fast2
mkdir -p $S/b $D/b
for i in 0 1 2 3; do head -c 1G /dev/urandom > $S/b/p$i & done; wait
cat $S/b/p0 $S/b/p1 $S/b/p2 $S/b/p3 > $S/b/src; rm $S/b/p?
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
vs=("--backend host" "--backend gpu" "--backend gpu --chunk-size 32M" "--backend gpu --chunk-size 16M" "--backend gpu --chunk-size 8M" "--backend gpu --streams 8 --chunk-size 16M" "--backend gpu --streams 6 --chunk-size 32M" "--backend host --chunk-size 16M")
for r in 1 2 3; do
  for v in "${vs[@]}"; do
    rm -f $D/b/dst; drop
    s=$(date +%s.%N)
    line=$($B/aiscp --debug $v $S/b/src $D/b/dst 2>&1 | grep -E "bytes in" | sed 's/.*bytes in //')
    sync; e=$(date +%s.%N)
    printf '%s\t%d\t%s\t%s\n' "$v" $r "$(awk -v s=$s -v e=$e 'BEGIN{printf "%.3f", e-s}')" "$line" | tee -a $OUT/big.tsv
  done
done
cmp $S/b/src $D/b/dst && echo cmp-ok
rm -rf $S/b $D/b
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
ex=(--extra "c16=$B/aiscp --chunk-size 16M" --extra "c8=$B/aiscp --chunk-size 8M" --extra "s8c16=$B/aiscp --streams 8 --chunk-size 16M")
bash $HERE/tree.sh --src-dir $S/t2 --dst-dir $D/t2 --files 64 --size 32M --rounds 3 --budget 150 --out $OUT/mid "${ex[@]}" | grep '^|'
bash $HERE/tree.sh --src-dir $S/t --dst-dir $D/t --files 4000 --size 256K --rounds 3 --budget 150 --out $OUT/small "${ex[@]}" | grep '^|'
