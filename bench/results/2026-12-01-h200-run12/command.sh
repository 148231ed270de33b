#!/bin/bash
# Device commands of run 12, right after run 11 on the same machine and carry (.bench/c23):
# 1. the one-file-copy reproductions on real cuFile and the tree rewritten during -r, then the
#    20,000 x 8 KiB tree beside the build before (52 s):
mkdir -p /tmp/r12; OUT=/tmp/r12 timeout 300 bash bench/h200-source-changes.sh .bench/c23 > /tmp/r12/source-changes.log 2>&1
export AISCP_BIN=$PWD/.bench/c23/aiscp XCP_BIN=$PWD/.bench/c23/xcp
timeout 250 bash bench/tree.sh --src-dir /mnt/fast/t3 --dst-dir /mnt/fast2/t3 --files 20000 --size 8K --rounds 3 --budget 150 --out /tmp/r12/tree --label tiny --extra "base=$PWD/.bench/c23/aiscp-base" > /tmp/r12/tree.log 2>&1
# 2. why every -r run on --route library exited 1 (library-race-debug-head.log): the same
#    tree rewritten, `aiscp --backend cufile --route library --debug -r` twice: every file
#    "cannot register ... with cuFile: unsupported file open flags (InvalidFileOpenFlag 5019)".
