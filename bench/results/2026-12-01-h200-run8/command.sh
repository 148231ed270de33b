#!/bin/bash
# Device command of run 8 (one call, 122 s): `timeout 400 bash .probe/q.sh`, .probe carried with
# aiscp = 3814978 (the engine of 5ae65cd), xcp 0.24.9. q2 / q8: CUDA_DEVICE_MAX_CONNECTIONS set
# to 2 / 8 by the caller (aiscp keeps a value it is given); s8c32: eight slots of 32 MiB.
set -u
B=$(cd "$(dirname "$0")" && pwd)
HERE=$PWD/bench
R=/tmp/r8; mkdir -p $R
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env' | tail -1; done
S=/mnt/fast D=/mnt/fast2
export AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
ex=(--extra "q2=env CUDA_DEVICE_MAX_CONNECTIONS=2 $B/aiscp --no-progress -r"
    --extra "q8=env CUDA_DEVICE_MAX_CONNECTIONS=8 $B/aiscp --no-progress -r"
    --extra "s8c32=$B/aiscp --streams 8 --chunk-size 32M")
bash $HERE/tree.sh --src-dir $S/t --dst-dir $D/t --files 4000 --size 256K --rounds 5 --budget 150 --out $R/small "${ex[@]}" | grep '^|'
tar czf $OUT/run8.tgz -C /tmp r8
bash $HERE/tree.sh --src-dir $S/t2 --dst-dir $D/t2 --files 64 --size 32M --rounds 3 --budget 90 --out $R/mid "${ex[@]}" | grep '^|'
tar czf $OUT/run8.tgz -C /tmp r8
