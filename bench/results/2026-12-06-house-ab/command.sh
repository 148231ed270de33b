#!/bin/bash
# The CPU machine's speed rows, the restructured house (05652e1) beside the build the
# restructuring began from (f9314ba), same run, builds rotated each round. Dev VM, 2 cores,
# ext4 on virtio; another engineer's builds and benchmarks shared the cores.
set -u
B=/var/tmp/house-ab
TREE_METHODS="cp" bash bench/tree.sh --src-dir $B/src --dst-dir $B/dst --files 20000 --size 1K-64K \
    --rounds 5 --label cpu-tree-20000x1-64K --out $B/tree \
    --extra "head=/var/tmp/aiscp-05652e1 --backend host" --extra "f9314ba=/var/tmp/aiscp-f9314ba --backend host"
bash bench/run.sh --cpu-only --size 1G --rounds 5 --dir $B/f --out $B/file --methods cp \
    --extra "head=/var/tmp/aiscp-05652e1 --backend host" --extra "f9314ba=/var/tmp/aiscp-f9314ba --backend host"
