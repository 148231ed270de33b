#!/bin/bash
# Device command of run 14 (one call, 247 s), from the repository root, with .bench/final
# carried: aiscp = release build of 10268b0 (main after every merge of the seventh session),
# aiscp-base = release build of 1363dcf, xcp 0.24.9, rawbw.c and refloop_cufile.c:
mkdir -p /tmp/r14 && OUT=/tmp/r14 timeout 560 bash bench/h200-merged.sh .bench/final > /tmp/r14/merged.log 2>&1
# (service.log, 29 MB of --debug lines, is not kept here.)
