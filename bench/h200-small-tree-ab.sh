#!/bin/bash
# The 20,000 x 8 KiB tree, many rounds, through warm services of two builds beside the host
# engine and xcp (no cp, no in-process GPU run: they take the time the rounds need), then the
# build's checksums. One device command of about 4 minutes.
#
#   bench/h200-small-tree-ab.sh BIN_DIR     (BIN_DIR: aiscp, aiscp-base, xcp)
#
# SERVICES (default "svc=aiscp;svc_base=aiscp-base"): the services, separated by ";", each
# NAME=BUILD or NAME=BUILD:ARGS with `--serve` arguments (e.g. "svc8=aiscp:--streams 8").
# ROUNDS (default 9); CHECK=0 leaves out the checksums. Two RAM-backed ext4s
# (scripts/gpu-setup.sh --fastdisk). Everything lands in $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-small-tree-ab.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
export XDG_RUNTIME_DIR=/tmp/xdg-ab
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
extras=()
IFS=';' read -ra services <<< "${SERVICES:-svc=aiscp;svc_base=aiscp-base}"
for spec in "${services[@]}"; do
    name=${spec%%=*} build=${spec#*=} args=""
    [[ $build == *:* ]] && args=${build#*:} build=${build%%:*}
    sock=$XDG_RUNTIME_DIR/$name/service.sock
    # shellcheck disable=SC2086
    "$B/$build" --serve --backend gpu --socket "$sock" $args 2> "$out/service-$name.log" &
    pids+=($!)
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    printf '#!/bin/sh\nAISCP_SERVICE=%s exec %s "$@"\n' "$sock" "$B/$build" > "$B/aiscp-$name"
    chmod +x "$B/aiscp-$name"
    # tree.sh knows an aiscp build by its name.
    extras+=(--extra "$name=$B/aiscp-$name")
done
export AISCP_SERVICE=off AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B TREE_METHODS=aiscp_host
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 20000 --size 8K \
    --rounds "${ROUNDS:-9}" --out "$out/tree" "${extras[@]}" | grep -E '^\| '
kill -TERM "${pids[@]}"; wait
rm -rf "$S/t" "$D/t"
[[ ${CHECK:-1} == 1 ]] && AISCP_BIN=$B/aiscp OUT= W=$S/check bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --deadline 120 \
    --no-roundtrip 2>&1 | tee "$out/check.log" | grep -E '^(FAIL|SUMMARY)'
