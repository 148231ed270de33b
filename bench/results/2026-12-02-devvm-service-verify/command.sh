#!/bin/bash
# The run behind bench/results/HISTORY.md, "--verify through the staging service"
# (before and after the read-back threads): two 3 GiB tmpfs mounts, a host-memory
# service, bench/tree.sh with three extras.
set -euo pipefail
B=$PWD/target/release/aiscp   # before/: 223669a; after/: the read-back threads commit
mkdir -p /tmp/vb/a /tmp/vb/b /tmp/vb/run && chmod 700 /tmp/vb/run
mount -t tmpfs -o size=3G tmpfs /tmp/vb/a
mount -t tmpfs -o size=3G tmpfs /tmp/vb/b
S=/tmp/vb/run/service.sock
"$B" --serve --backend host --socket "$S" -q &
export AISCP_SERVICE=off   # every other method in-process, whatever socket this user has
AISCP_BIN=$B bench/tree.sh --src-dir /tmp/vb/a/src --dst-dir /tmp/vb/b/dst --files 20000 \
    --size 1K-64K --rounds 3 --out /tmp/vb/out --label service-verify  # after/: --label service-verify-threads \
    --extra "host_verify=$B --backend host --verify" \
    --extra "svc=env AISCP_SERVICE=$S $B --no-progress --backend host -r" \
    --extra "svc_verify=env AISCP_SERVICE=$S $B --no-progress --backend host --verify -r"
