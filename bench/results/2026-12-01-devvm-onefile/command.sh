#!/bin/bash
# Dev VM (2 cores, ext4 on virtio, no GPU; four other engineers' builds running), release
# builds: aiscp = bf029dd, base = 1363dcf (/work/old), xcp 0.24.9 (cargo install --locked):
AISCP_BIN=$PWD/target/release/aiscp XCP_BIN=xcp bash bench/tree.sh --src-dir /var/tmp/b23/src --dst-dir /var/tmp/b23/dst --files 20000 --size 1K-64K --rounds 3 --label cpu-tree-20000x1-64K --out /var/tmp/b23/tree --extra "base=/work/old/target/release/aiscp --backend host"
AISCP_BIN=$PWD/target/release/aiscp bash bench/run.sh --cpu-only --size 1G --rounds 3 --dir /var/tmp/b23/f --out /var/tmp/b23/file --extra "base=/work/old/target/release/aiscp --backend host"
