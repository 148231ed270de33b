#!/bin/bash
# Every target of the staging service on one machine, in two device commands on the same
# machine (each under 7 minutes), for the build under test:
#   part a: checksums (scripts/gpu-check.sh), the per-run cost and the bash loop and eight
#           1 GiB copies' GPU memory (bench/h200-service.sh), the three trees through a warm
#           service beside the same build in-process, its host engine, cp and xcp;
#   part b: eight concurrent 1 GiB clients beside the 8-thread O_DIRECT host copy of one
#           1 GiB file, and the same 8 GiB of work done by eight in-process host-engine copies
#           (host8) and by eight of those host copies at once (hostcopy_qd8_x8); the 4 GiB and
#           16 GiB files through the service beside the host engine and that copy.
#
#   bench/h200-service-all.sh a|b BIN_DIR       (BIN_DIR: aiscp, xcp, rawbw.c)
#
# With BIN_DIR/aiscp-base (an earlier build), part a's trees also go through a warm service
# of that build (method svc_base), beside this build's (svc). TREE_ROUNDS (default 3) sets
# the trees' rounds; SMALL_ROUNDS (default TREE_ROUNDS) the 20,000-file tree's.
#
# Two RAM-backed ext4s of 40 GiB (scripts/gpu-setup.sh --fastdisk), SRC on one and DST on
# the other, made by part a and kept for part b. Everything lands in $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
part=${1:?usage: bench/h200-service-all.sh a|b BIN_DIR}
B=$(cd "${2:?usage: bench/h200-service-all.sh a|b BIN_DIR}" && pwd)
out=${OUT:?set OUT}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
now() { date +%s%N; }

for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 40G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2
export XDG_RUNTIME_DIR=/tmp/xdg-all
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
sock=$XDG_RUNTIME_DIR/aiscp/service.sock
serve() {
    "$B/aiscp" --serve --backend gpu 2> "$out/service-$part.log" &
    svc=$!
    for _ in $(seq 200); do [[ -S $sock ]] && break; sleep 0.05; done
    printf '#!/bin/sh\nAISCP_SERVICE=%s exec %s "$@"\n' "$sock" "$B/aiscp" > "$B/aiscp-svc"
    chmod +x "$B/aiscp-svc"
    extras=(--extra "svc=$B/aiscp-svc")
    if [[ -x $B/aiscp-base ]]; then
        local base_sock=$XDG_RUNTIME_DIR/base/service.sock
        "$B/aiscp-base" --serve --backend gpu --socket "$base_sock" 2> "$out/service-base-$part.log" &
        base_svc=$!
        for _ in $(seq 200); do [[ -S $base_sock ]] && break; sleep 0.05; done
        printf '#!/bin/sh\nAISCP_SERVICE=%s exec %s "$@"\n' "$base_sock" "$B/aiscp-base" > "$B/aiscp-svc-base"
        chmod +x "$B/aiscp-svc-base"
        extras+=(--extra "svc_base=$B/aiscp-svc-base")
    fi
}

if [[ $part == a ]]; then
    step "checksums (gpu-check.sh, $(cat "$B/aiscp.commit" 2>/dev/null))"
    AISCP_BIN=$B/aiscp OUT= W=$S/check bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --deadline 45 \
        --no-roundtrip 2>&1 | tee "$out/check.log" | grep -E '^(FAIL|SUMMARY)'
    rm -rf "$S/check"
    step "per-run cost, the bash loop, eight copies' GPU memory (h200-service.sh)"
    OUT=$out bash "$HERE/h200-service.sh" "$B" > "$out/service-steps.log" 2>&1
    cat "$out/service.tsv"
    step "trees, two RAM filesystems"
    serve
    export AISCP_SERVICE=off AISCP_BIN=$B/aiscp XCP_BIN=$B/xcp BENCH_SHARED=$B
    mkdir -p "$out/tree"
    rounds=${TREE_ROUNDS:-3}
    for shape in "20000 8K 110 ${SMALL_ROUNDS:-$rounds}" "4000 256K 60 $rounds" "64 32M 60 $rounds"; do
        read -r files size budget n <<< "$shape"
        bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files "$files" --size "$size" \
            --rounds "$n" --budget "$budget" --out "$out/tree" "${extras[@]}" |
            grep -E '^\| (cp|aiscp|svc|svc_base|xcp|aiscp_host) '
        rm -rf "$S/t" "$D/t"
    done
else
    gcc -O2 -o "$B/rawbw" "$B/rawbw.c" -lpthread || exit 1
    serve
    export AISCP_SERVICE=off
    step "eight concurrent 1 GiB clients beside the 8-thread host copy, 3 rounds"
    gen_random "$S/big" $((1 << 30))
    tsv=$out/eight.tsv
    echo "method	round	ms" > "$tsv"
    for r in 1 2 3; do
        rm -f "$D"/big*; drop; a=$(now); p=()
        for c in 1 2 3 4 5 6 7 8; do "$B/aiscp-svc" --backend gpu "$S/big" "$D/big$c" & p+=($!); done
        wait "${p[@]}"; sync
        echo "svc8	$r	$(( ($(now) - a) / 1000000 ))" >> "$tsv"
        ((r > 1)) || for c in 1 2 3 4 5 6 7 8; do cmp -s "$S/big" "$D/big$c" || echo "MISMATCH big$c"; done
        rm -f "$D/one"; drop; a=$(now)
        "$B/rawbw" copy "$S/big" "$D/one" $((1 << 30)) $((16 << 20)) 8 > /dev/null; sync
        echo "hostcopy_qd8	$r	$(( ($(now) - a) / 1000000 ))" >> "$tsv"
        # The same 8 GiB of work without a service: the ceiling of these filesystems.
        rm -f "$D"/big*; drop; a=$(now); p=()
        for c in 1 2 3 4 5 6 7 8; do "$B/aiscp" --backend host "$S/big" "$D/big$c" & p+=($!); done
        wait "${p[@]}"; sync
        echo "host8	$r	$(( ($(now) - a) / 1000000 ))" >> "$tsv"
        ((r > 1)) || for c in 1 2 3 4 5 6 7 8; do cmp -s "$S/big" "$D/big$c" || echo "MISMATCH host8 big$c"; done
        rm -f "$D"/big*; drop; a=$(now); p=()
        for c in 1 2 3 4 5 6 7 8; do
            "$B/rawbw" copy "$S/big" "$D/big$c" $((1 << 30)) $((16 << 20)) 8 > /dev/null & p+=($!)
        done
        wait "${p[@]}"; sync
        echo "hostcopy_qd8_x8	$r	$(( ($(now) - a) / 1000000 ))" >> "$tsv"
        ((r > 1)) || for c in 1 2 3 4 5 6 7 8; do cmp -s "$S/big" "$D/big$c" || echo "MISMATCH hostcopy_qd8_x8 big$c"; done
    done
    cat "$tsv"
    rm -f "$S/big" "$D"/big* "$D/one"
    export BENCH_SHARED=$B AISCP_BIN=$B/aiscp
    for size in 4G 16G; do
        step "$size file"
        bash "$HERE/run.sh" --size $size --dir "$S/b" --dst-dir "$D/b" --rounds 2 --budget 170 \
            --out "$out/file$size" --methods hostcopy_qd8 --extra "svc=$B/aiscp-svc --backend gpu" \
            --extra 'host=--backend host' | grep -E '^\| '
        rm -rf "$S/b" "$D/b"
    done
fi
kill -TERM "$svc" ${base_svc:-} 2> /dev/null; wait
step done
