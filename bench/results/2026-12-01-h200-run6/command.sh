#!/bin/bash
# Device command of run 6 (one call, 427 s), from the repository root, .bench-carry carried with
# aiscp = release build of 5ae65cd (library read-ahead), aiscp-base = ea12796, xcp 0.24.9,
# rawbw.c and refloop_cufile.c:
mkdir -p /tmp/r6 && OUT=/tmp/r6 TREE_ROUNDS=5 timeout 560 bash bench/h200-speed.sh .bench-carry > /tmp/r6/speed.log 2>&1
tar czf $OUT/run6.tgz -C /tmp r6
