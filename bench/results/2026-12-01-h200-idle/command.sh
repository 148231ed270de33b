#!/bin/bash
# Device command of the idle probe (one call, 132 s): `timeout 300 bash .probe/idle.sh`, with
# .probe carrying aiscp = release build of 9460ad0. idle.tsv: seconds the GPU sat unused before
# the copy (held-N: while another process had called cuInit), wall, start-up and shutdown (s).
# Probe: does the GPU's start-up depend on how long the GPU sat unused (persistence mode)?
set -u
B=$(cd "$(dirname "$0")" && pwd)
R=/tmp/p2; mkdir -p $R
pack() { tar czf $OUT/p2.tgz -C /tmp p2; }
nvidia-smi --query-gpu=name,driver_version,persistence_mode,pstate --format=csv | tee $R/smi.txt
nvidia-smi -q | grep -i -A2 "persistence\|Performance State" | head -20 >> $R/smi.txt
ls /var/run/nvidia-persistenced 2>&1 | head -2 >> $R/smi.txt; pgrep -a persistenced >> $R/smi.txt
printf 'hi' > /tmp/two
printf 'gap_s\ttry\twall_s\tstartup_s\tshutdown_s\n' > $R/idle.tsv
run() { s=$(date +%s.%N); j=$($B/aiscp --stats=json /tmp/two /tmp/two-out); e=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$(awk -v s=$s -v e=$e 'BEGIN{printf "%.4f", e-s}')" \
  "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%.4f\t%.4f"%(d["startup_seconds"],d["shutdown_seconds"]))' "$j")" >> $R/idle.tsv; }
run warmup 0
for t in 1 2 3 4; do for gap in 0 0.5 2 5 10; do sleep $gap; run $gap $t; done; done
pack
python3 - $R/idle.tsv <<'PY'
import sys, statistics as st
by={}
for l in list(open(sys.argv[1]))[1:]:
    g,t,w,s,d=l.split('\t'); by.setdefault(g,[]).append((float(w),float(s)))
for g,v in by.items(): print("gap", g, "wall", " ".join("%.3f"%w for w,_ in v), "| startup", " ".join("%.3f"%s for _,s in v), "| median startup %.3f"%st.median(s for _,s in v))
PY
# Same with a holder process keeping the GPU initialized (what persistence mode would do).
cat > /tmp/hold.py <<'PY'
import ctypes, time, sys
cu = ctypes.CDLL("libcuda.so.1"); cu.cuInit(0)
time.sleep(float(sys.argv[1]))
PY
python3 /tmp/hold.py 120 & H=$!
sleep 3
for t in 1 2 3 4; do for gap in 0 2 10; do sleep $gap; run held-$gap $t; done; done
kill $H
python3 - $R/idle.tsv <<'PY'
import sys, statistics as st
by={}
for l in list(open(sys.argv[1]))[1:]:
    g,t,w,s,d=l.split('\t')
    if g.startswith("held"): by.setdefault(g,[]).append((float(w),float(s)))
for g,v in by.items(): print(g, "wall", " ".join("%.3f"%w for w,_ in v), "| startup", " ".join("%.3f"%s for _,s in v), "| median startup %.3f"%st.median(s for _,s in v))
PY
pack
