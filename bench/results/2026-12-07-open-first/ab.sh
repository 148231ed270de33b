#!/bin/bash
# alternate base/exp; wall incl. sync; prints medians
cd /dev/shm/pf
for i in $(seq 9); do for v in base exp xcp; do
  rm -rf dst; sync; echo 3 > /proc/sys/vm/drop_caches
  if [ $v = exp ]; then export EXP_OPEN_FIRST=1; else unset EXP_OPEN_FIRST; fi
  s=$(date +%s.%N)
  if [ $v = xcp ]; then /var/tmp/tools/bin/xcp -r src dst; else AISCP_SERVICE=off /var/tmp/aiscp-exp --backend host -r src dst; fi
  sync; e=$(date +%s.%N)
  echo "$v $(echo "$e - $s" | bc)"
done; done
