#!/bin/bash
# Device command of run 15 (one call, 407 s), from the repository root, with .bench/r15 carried:
# aiscp = release build of 37379a9 (main with --stats in words, --allow-users, and large files
# flying beside other clients' files), aiscp-base = release build of 614c87c (the same without
# the last), xcp 0.24.9, rawbw.c:
mkdir -p /tmp/r15 && OUT=/tmp/r15 timeout 570 bash bench/h200-service-targets.sh .bench/r15 > /tmp/r15/targets.log 2>&1
