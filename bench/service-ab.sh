#!/bin/bash
# A/B of staging services on this machine: for each run a fresh service of the build serves
# on host memory at a socket of its own and a client of the same build copies TREE with -r,
# builds rotated each round; per run the wall time (+ sync), the client's CPU (user + sys)
# and the service's CPU over the copy.
#
#   bench/service-ab.sh TREE DST_DIR ROUNDS BIN...
#   e.g. bench/service-ab.sh /mnt/a/tree /mnt/b 3 /tmp/aiscp-base target/release/aiscp
#
# DST_DIR/d is removed before each run; each copy is checked against TREE (file bytes in
# name order).
set -uo pipefail
tree=${1:?usage: bench/service-ab.sh TREE DST_DIR ROUNDS BIN...}
dst=${2:?}/d
rounds=${3:?}
shift 3
hz=$(getconf CLK_TCK)
digest() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 cat | sha256sum); }
want=$(digest "$tree")
for _ in $(seq "$rounds"); do
    for bin in "$@"; do
        rt=$(mktemp -d /tmp/aiscp-ab-XXXXXX)
        chmod 700 "$rt"
        AISCP_BACKEND=host XDG_RUNTIME_DIR=$rt "$bin" --serve 2> /dev/null &
        svc=$!
        for _ in $(seq 200); do [[ -S $rt/aiscp/service.sock ]] && break; sleep 0.02; done
        rm -rf "$dst"
        sync
        before=$(awk '{print $14 + $15}' "/proc/$svc/stat")
        start=$(date +%s%N)
        times=$( { XDG_RUNTIME_DIR=$rt bash -c "TIMEFORMAT='%U %S'; time '$bin' -r '$tree' '$dst'"; } 2>&1)
        sync
        end=$(date +%s%N)
        after=$(awk '{print $14 + $15}' "/proc/$svc/stat")
        kill "$svc"
        wait "$svc" 2> /dev/null
        rm -rf "$rt"
        [[ $(digest "$dst") == "$want" ]] || echo "MISMATCH: $bin"
        read -r user sys <<< "$times"
        printf '%s\twall_ms=%d\tclient_cpu_s=%.2f\tservice_cpu_s=%.2f\n' "$bin" \
            $(((end - start) / 1000000)) "$(echo "$user + $sys" | bc)" "$(echo "($after - $before) / $hz" | bc -l)"
    done
done
