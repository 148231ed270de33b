#!/bin/bash
# Device command of run 11 (one call, 497 s), from the repository root, with .bench/c23 carried:
# aiscp = release build of bf029dd (one file's data in crates/engine/src/file_copy.rs),
# aiscp-base = release build of 1363dcf (the code before), xcp 0.24.9 (cargo install --locked),
# rawbw.c and refloop_cufile.c from shared/bench:
mkdir -p /tmp/r11 && OUT=/tmp/r11 TREE_ROUNDS=5 timeout 575 bash bench/h200-speed.sh .bench/c23 > /tmp/r11/speed.log 2>&1
cp /tmp/r11/*.tsv /tmp/r11/*.md /tmp/r11/*.log $OUT/
