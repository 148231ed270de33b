#!/bin/bash
# Device command of run 16 (one call, 32 s, right after run 15 on the same machine), with
# .bench/r15 carried (aiscp = release build of 37379a9):
mkdir -p .bench/stats && cp .bench/r15/aiscp .bench/stats/aiscp && OUT=$OUT timeout 300 bash bench/h200-library-stats.sh .bench/stats > $OUT/stats.log 2>&1
