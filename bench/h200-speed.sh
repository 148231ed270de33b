#!/bin/bash
# The speed runs on the H200 machine, in one device command (about 9 minutes): two RAM-backed
# ext4s (SRC on one loop device, DST on the other), checksums, the 4 GiB file on two and on
# one RAM filesystem and on the virtio disk, trees, start-up, and --debug stage times.
#
#   bench/h200-speed.sh BIN_DIR
#
# BIN_DIR holds aiscp (the build under test), and optionally aiscp-base (the build before,
# run beside it), aiscp-w64 (a variant build with 64 MiB bounce windows), startup (hipfile-rs's
# example), xcp, rawbw.c and refloop_cufile.c. Everything lands in $OUT: results.tsv (every run's row),
# summary.md (tables), bench.log, check.log, debug.log, startup.tsv. TREE_ROUNDS=N (default 3)
# sets the trees' rounds.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-speed.sh BIN_DIR}" && pwd)
export AISCP_BIN=$B/aiscp BENCH_SHARED=$B XCP_BIN=$B/xcp
out=${OUT:?set OUT}
# Rounds of each tree (the 4 GiB rows take 3).
TREE_ROUNDS=${TREE_ROUNDS:-3}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 12G --mnt /mnt/$m | grep -v '^env' ; done
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
S=/mnt/fast D=/mnt/fast2
extra=()
[[ -x $B/aiscp-base ]] && extra+=(--extra "base=$B/aiscp-base --backend gpu")

step "checksums (gpu-check.sh)"
OUT= W=$S/check bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --deadline 40 --no-roundtrip 2>&1 |
    tee "$out/check.log" | grep -E '^(FAIL|SUMMARY)'
rm -rf "$S/check"

step "4 GiB, two RAM filesystems"
wextra=()
[[ -x $B/aiscp-w64 ]] && wextra+=(--extra "w64=$B/aiscp-w64 --backend gpu")
bash "$HERE/run.sh" --size 4G --dir "$S/b" --dst-dir "$D/b" --rounds 3 --keep --budget 170 \
    --methods aiscp,hostcopy_qd8,dd_direct,cp,ref_2G,read_qd8,write_qd8 "${extra[@]}" \
    --extra 'host=--backend host' "${wextra[@]}" | grep -v '^  '

step "--debug stage times (4 GiB, two filesystems)"
src=$S/b/bench-src-4G.bin
for args in "--backend gpu" "--backend host"; do
    rm -f "$D/b/dbg"; sync; echo 3 > /proc/sys/vm/drop_caches
    echo "=== aiscp $args --debug" >> "$out/debug.log"
    # shellcheck disable=SC2086
    "$AISCP_BIN" --no-progress --debug $args "$src" "$D/b/dbg" >> "$out/debug.log" 2>&1
done
[[ -x $B/aiscp-base ]] && { rm -f "$D/b/dbg"; sync; echo 3 > /proc/sys/vm/drop_caches;
    echo "=== aiscp-base --backend gpu --debug" >> "$out/debug.log";
    "$B/aiscp-base" --no-progress --debug --backend gpu "$src" "$D/b/dbg" >> "$out/debug.log" 2>&1; }
rm -f "$D/b/dbg"
grep -E '===|bytes in' "$out/debug.log"

step "trees, two RAM filesystems"
textra=()
[[ -x $B/aiscp-base ]] && textra+=(--extra "base=$B/aiscp-base")
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 4000 --size 256K --rounds "$TREE_ROUNDS" \
    --budget $((TREE_ROUNDS * 18)) "${textra[@]}" | grep -v '^  '
bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 64 --size 32M --rounds "$TREE_ROUNDS" \
    --budget $((TREE_ROUNDS * 16)) "${textra[@]}" | grep -v '^  '
rm -rf "$S/t" "$D/t"

step "4 GiB, one RAM filesystem"
bash "$HERE/run.sh" --size 4G --dir "$S/b" --rounds 3 --budget 60 \
    --methods aiscp,hostcopy_qd8,dd_direct,cp "${extra[@]}" --extra 'host=--backend host' | grep -v '^  '
rm -rf "$S/b" "$D/b"

step "4 GiB, virtio disk (root ext4)"
bash "$HERE/run.sh" --size 4G --dir /var/tmp/aiscp-bench --rounds 3 --budget 100 \
    --methods aiscp,hostcopy_qd8,dd_direct,cp,write_qd8 "${extra[@]}" --extra 'host=--backend host' | grep -v '^  '

step "start-up: a 2-byte file, 20 copies each"
printf 'method\tcopies\tseconds_total\tms_each\n' > "$out/startup.tsv"
printf 'hi' > "$S/two"
for m in cp aiscp aiscp_host base; do
    case $m in
        cp) cmd=(cp) ;; aiscp) cmd=("$AISCP_BIN") ;; aiscp_host) cmd=("$AISCP_BIN" --backend host) ;;
        base) [[ -x $B/aiscp-base ]] || continue; cmd=("$B/aiscp-base") ;;
    esac
    s=$(date +%s.%N)
    for i in $(seq 20); do "${cmd[@]}" "$S/two" "$D/two$i" || echo "failed: ${cmd[*]}"; done
    e=$(date +%s.%N)
    awk -v m="$m" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t20\t%.3f\t%.1f\n", m, e - s, (e - s) * 50 }' >> "$out/startup.tsv"
done
cat "$out/startup.tsv"
step "start-up, cold: a 2-byte file, caches dropped before each copy, 5 rounds"
printf 'method\tround\tms\n' > "$out/startup-cold.tsv"
# The build a start-up row names: aiscp (the one under test) or base.
build() { if [[ $1 == base ]]; then echo "$B/aiscp-base"; else echo "$AISCP_BIN"; fi; }
for r in 1 2 3 4 5; do
    for m in aiscp base; do
        bin=$(build $m)
        [[ -x $bin ]] || continue
        sync; echo 3 > /proc/sys/vm/drop_caches
        s=$(date +%s.%N); "$bin" "$S/two" "$D/two-cold" || echo "failed: $bin"; e=$(date +%s.%N)
        awk -v m="$m" -v r="$r" -v s="$s" -v e="$e" 'BEGIN { printf "%s\t%d\t%.1f\n", m, r, (e - s) * 1000 }' >> "$out/startup-cold.tsv"
    done
done
awk -F'\t' 'NR > 1 { v[$1] = v[$1] " " $3 } END { for (m in v) print m ":" v[m] " ms" }' "$out/startup-cold.tsv"
for m in aiscp base; do
    bin=$(build $m)
    [[ -x $bin ]] || continue
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo "=== start-up --debug, cold ($m)" >> "$out/debug.log"
    "$bin" --debug "$S/two" "$D/two-cold" >> "$out/debug.log" 2>&1
done
grep -A12 '=== start-up --debug, cold' "$out/debug.log"
echo "=== start-up --debug" >> "$out/debug.log"
"$AISCP_BIN" --debug "$S/two" "$D/two-debug" >> "$out/debug.log" 2>&1
[[ -x $B/aiscp-base ]] && "$B/aiscp-base" --debug "$S/two" "$D/two-debug2" >> "$out/debug.log" 2>&1
grep -A12 '=== start-up' "$out/debug.log"
if [[ -x $B/startup ]]; then
    for i in 1 2; do
        sync; echo 3 > /proc/sys/vm/drop_caches
        echo "=== hipfile-rs startup cufile, cold cache ($i)" >> "$out/debug.log"
        "$B/startup" cufile >> "$out/debug.log" 2>&1
    done
    grep -A12 '=== hipfile-rs startup' "$out/debug.log"
fi
step done
