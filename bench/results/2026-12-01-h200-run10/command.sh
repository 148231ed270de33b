#!/bin/bash
# Device command of run 10 (one call, 486 s), from the repository root, .final-carry2 carried
# with aiscp = release build of 9460ad0 (the code of f3046f4: --stats reports the engine's
# start-up and shutdown, which bench/tree.sh records per round in fixed.tsv), aiscp-base =
# 5ae65cd (run 6's build), xcp 0.24.9, rawbw.c and refloop_cufile.c:
mkdir -p /tmp/r10 && OUT=/tmp/r10 TREE_ROUNDS=5 timeout 570 bash bench/h200-speed.sh .final-carry2 > /tmp/r10/speed.log 2>&1
tar czf $OUT/run10.tgz -C /tmp r10
# check-9460ad0.log: a later device command on the same carry, with no deadline pressure:
#   bash scripts/gpu-setup.sh --fastdisk 8G --mnt /mnt/fast
#   AISCP_BIN=$PWD/.final-carry2/aiscp OUT= W=/mnt/fast/check bash scripts/gpu-check.sh --dir /mnt/fast/check --deadline 200 --no-roundtrip
