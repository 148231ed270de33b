#!/bin/bash
# Device command of run 19 (46 s, right after run 18 on the same machine), with .bench/r15
# (aiscp = 37379a9) and .bench/r18 (aiscp = ab228b1) carried:
OUT=$OUT timeout 300 bash bench/h200-large-ab.sh .bench/r15 .bench/r18 4 > $OUT/ab.log 2>&1
