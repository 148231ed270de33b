#!/bin/bash
# Device command of run 9 (one call, 149 s): `timeout 320 bash .probe/final.sh`, .probe carried
# with aiscp = 73a9d97 (eight slots of 32 MiB on the bounce route, later taken out again) and
# aiscp-base = 3814978 (four of 64 MiB), xcp 0.24.9. big.tsv: build, round, whole command + sync
# (s), the engine's --debug time and stage times.
set -u
B=$(cd "$(dirname "$0")" && pwd)
HERE=$PWD/bench
R=/tmp/r9; mkdir -p $R
pack() { tar czf $OUT/run9.tgz -C /tmp r9; }
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env' | tail -1; done
S=/mnt/fast D=/mnt/fast2
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
OUT= W=$S/check bash scripts/gpu-check.sh --dir $S/check --deadline 40 --no-roundtrip > $R/check.log 2>&1; grep -E '^(FAIL|SUMMARY)' $R/check.log
rm -rf $S/check; pack
printf 'hi' > $S/two
printf 'method\tround\tms\n' > $R/startup-cold.tsv
for r in 1 2 3 4 5; do for m in aiscp aiscp-base; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  s=$(date +%s.%N); $B/$m $S/two $D/two-cold || echo "failed $m"; e=$(date +%s.%N)
  awk -v m="$m" -v r="$r" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t%d\t%.1f\n", m, r, (e - s) * 1000 }' >> $R/startup-cold.tsv
done; done
awk -F'\t' 'NR > 1 { v[$1] = v[$1] " " $3 } END { for (m in v) print m ":" v[m] " ms" }' $R/startup-cold.tsv; pack
bash $HERE/tree.sh --src-dir $S/t --dst-dir $D/t --files 4000 --size 256K --rounds 3 --budget 80 --out $R/small --extra "base=$B/aiscp-base" | grep '^|'
rm -rf $S/t $D/t; pack
bash $HERE/tree.sh --src-dir $S/t2 --dst-dir $D/t2 --files 64 --size 32M --rounds 3 --budget 80 --out $R/mid --extra "base=$B/aiscp-base" | grep '^|'
rm -rf $S/t2 $D/t2; pack
mkdir -p $S/b $D/b
for i in 0 1 2 3; do head -c 1G /dev/urandom > $S/b/p$i & done; wait
cat $S/b/p0 $S/b/p1 $S/b/p2 $S/b/p3 > $S/b/src; rm $S/b/p?
for r in 1 2 3; do for m in aiscp aiscp-base; do
  rm -f $D/b/dst; sync; echo 3 > /proc/sys/vm/drop_caches
  s=$(date +%s.%N); line=$($B/$m --debug $S/b/src $D/b/dst 2>&1 | grep 'bytes in' | sed 's/.*bytes in //'); sync; e=$(date +%s.%N)
  printf '%s\t%d\t%s\t%s\n' $m $r "$(awk -v s=$s -v e=$e 'BEGIN{printf "%.3f", e-s}')" "$line" | tee -a $R/big.tsv
done; done
cmp $S/b/src $D/b/dst && echo cmp-ok | tee -a $R/big.tsv
pack
