#!/bin/bash
# Screens of one copy (200 files, 801.50 MiB, on this CPU machine's disk, caches dropped before
# each), captured from a pseudo-terminal of 100 and 40 columns mid-copy and at the end by
# bench/screens.py (pyte), with aiscp at 37379a9 (release), xcp 0.24.9 and rsync 3.5.0:
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
for cols in 100 40; do rm -rf dst; drop; bench/screens.py $cols 1.0 -- target/release/aiscp --progress -r src dst; done > aiscp.txt
for cols in 40; do rm -rf dst; drop; AISCP_BACKEND=host bench/screens.py $cols 1.0 -- target/release/aiscp --progress -r src dst; done > aiscp40.txt
for cols in 100 40; do rm -rf dst; drop; bench/screens.py $cols 0.4 -- xcp -r src dst; done > xcp.txt
for cols in 100 40; do rm -rf dst; drop; bench/screens.py $cols 1.0 -- rsync -a --info=progress2 src/ dst/; done > rsync.txt
