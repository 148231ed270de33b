#!/bin/bash
# Device command of run 7 (one call, 157 s): `bash .probe/trees.sh`, .probe carried with
# aiscp = dd21c72 (one wait per window on the bounce route), aiscp-base = 5ae65cd, xcp 0.24.9.
# debug.log: a 1 GiB file, --debug, two rounds each.
set -u
B=$(cd "$(dirname "$0")" && pwd)
HERE=$PWD/bench
R=/tmp/r7; mkdir -p $R
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env' | tail -1; done
S=/mnt/fast D=/mnt/fast2
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
OUT= W=$S/check bash scripts/gpu-check.sh --dir $S/check --deadline 40 --no-roundtrip > $R/check.log 2>&1; grep -E '^(FAIL|SUMMARY)' $R/check.log
rm -rf $S/check
bash $HERE/tree.sh --src-dir $S/t --dst-dir $D/t --files 4000 --size 256K --rounds 5 --budget 120 --out $R/small --extra "base=$B/aiscp-base" | grep '^|'
bash $HERE/tree.sh --src-dir $S/t2 --dst-dir $D/t2 --files 64 --size 32M --rounds 5 --budget 110 --out $R/mid --extra "base=$B/aiscp-base" | grep '^|'
rm -rf $S/t $D/t $S/t2 $D/t2
mkdir -p $S/b $D/b; head -c 1G /dev/urandom > $S/b/src
for r in 1 2; do for m in aiscp aiscp-base; do
  rm -f $D/b/dst; sync; echo 3 > /proc/sys/vm/drop_caches
  echo "$m: $($B/$m --debug $S/b/src $D/b/dst 2>&1 | grep 'bytes in' | sed 's/.*bytes in //')" | tee -a $R/debug.log
done; done
cmp $S/b/src $D/b/dst && echo cmp-ok
tar czf $OUT/run7.tgz -C /tmp r7
