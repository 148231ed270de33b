#!/bin/bash
# Device command of run 20 (70 s), with .bench/r20 carried: aiscp = release build of 5ad5e70
# (main after every merge of the eighth session):
bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/fast > /dev/null
AISCP_BIN=.bench/r20/aiscp OUT= W=/mnt/fast/check timeout 100 bash scripts/gpu-check.sh --dir /mnt/fast/check --deadline 45 --no-roundtrip > $OUT/check.log 2>&1
rm -rf /mnt/fast/check; mkdir -p /tmp/v
TREE_FILES=4000 FILE_SIZE=1G ROUNDS=1 OUT=/tmp/v timeout 300 bash bench/h200-verify.sh .bench/r20 > $OUT/verify.log 2>&1
