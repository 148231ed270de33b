#!/bin/bash
# Device command of the stages probe (one call, 51 s): `timeout 420 bash .probe/diag.sh`, with
# .probe carrying aiscp = release build of 9460ad0 and xcp 0.24.9. small.tsv: method, round,
# whole command + sync (s), and aiscp's --stats=json line (start-up, shutdown, stage times).
# Probe: where the GPU route's fixed cost goes on the small tree (start-up, shutdown, stage times).
set -u
B=$(cd "$(dirname "$0")" && pwd)
R=/tmp/p1; mkdir -p $R
pack() { tar czf $OUT/p1.tgz -C /tmp p1; }
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 8G --mnt /mnt/$m | grep -v '^env' | tail -1; done
S=/mnt/fast D=/mnt/fast2
nproc; ulimit -n; ulimit -Hn
printf 'hi' > $S/two
printf 'round\twall_s\tjson\n' > $R/cold.tsv
for r in 1 2 3 4 5; do
  sync; echo 3 > /proc/sys/vm/drop_caches
  s=$(date +%s.%N); j=$($B/aiscp --stats=json $S/two $D/two-cold); e=$(date +%s.%N)
  printf '%d\t%s\t%s\n' $r "$(awk -v s=$s -v e=$e 'BEGIN{printf "%.4f", e-s}')" "$j" >> $R/cold.tsv
done
for r in 1 2 3 4 5 6 7 8; do
  s=$(date +%s.%N); j=$($B/aiscp --stats=json $S/two $D/two-warm); e=$(date +%s.%N)
  printf 'warm%d\t%s\t%s\n' $r "$(awk -v s=$s -v e=$e 'BEGIN{printf "%.4f", e-s}')" "$j" >> $R/cold.tsv
done
sync; echo 3 > /proc/sys/vm/drop_caches
$B/aiscp --debug $S/two $D/two-dbg > $R/cold-debug.txt 2>&1
cut -f1,2 $R/cold.tsv | tr '\n' ' '; echo; pack
mkdir -p $S/t; head -c $((4000*262144)) /dev/urandom > $S/all
python3 - $S/t $S/all <<'PY'
import os, sys
root, src = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    for i in range(4000):
        d = os.path.join(root, f"d{i // 100:03d}"); os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05d}"), "wb") as o: o.write(f.read(262144))
PY
rm $S/all; sync
declare -A cmd=(
  [cp]="cp -r"
  [aiscp]="$B/aiscp --no-progress --stats=json -r"
  [host]="$B/aiscp --no-progress --stats=json --backend host -r"
  [buf]="env AISCP_IN_FLIGHT=64,268435456,1048576 $B/aiscp --no-progress --stats=json -r"
  [deep]="env AISCP_IN_FLIGHT=256,268435456 $B/aiscp --no-progress --stats=json -r"
  [xcp]="$B/xcp -r"
)
order=(cp aiscp host buf deep xcp)
printf 'method\tround\twall_s\tjson\n' > $R/small.tsv
for r in 1 2 3 4 5; do
  for k in "${!order[@]}"; do
    m=${order[$(( (k + r) % ${#order[@]} ))]}
    rm -rf $D/td; sync; echo 3 > /proc/sys/vm/drop_caches
    s=$(date +%s.%N); j=$(${cmd[$m]} $S/t $D/td); rc=$?; sync; e=$(date +%s.%N)
    printf '%s\t%d\t%s\t%s\n' $m $r "$(awk -v s=$s -v e=$e 'BEGIN{printf "%.4f", e-s}')" "rc=$rc $j" >> $R/small.tsv
  done
  pack
done
diff -r $S/t $D/td > /dev/null && echo "last dst identical" | tee $R/diff.txt
rm -rf $D/td; sync; echo 3 > /proc/sys/vm/drop_caches
$B/aiscp --no-progress --debug -r $S/t $D/td > $R/small-debug.txt 2>&1
diff -r $S/t $D/td > /dev/null && echo "debug dst identical" | tee -a $R/diff.txt
head -12 $R/small-debug.txt > $R/small-debug-head.txt; tail -4 $R/small-debug.txt >> $R/small-debug-head.txt; rm $R/small-debug.txt
python3 - $R/small.tsv <<'PY'
import sys, statistics as st
rows=[l.rstrip('\n').split('\t') for l in open(sys.argv[1])][1:]
by={}
for m,r,w,j in rows: by.setdefault(m,[]).append(float(w))
for m,v in by.items(): print(m, "median %.3f s" % st.median(v), " ".join("%.3f"%x for x in v))
PY
pack
