#!/bin/bash
# A SOURCE changed after aiscp opened it, on the H200 with real cuFile (two RAM ext4s, SRC
# on one and DST on the other), for each build in BIN_DIR (aiscp, and aiscp-base when
# there): the pause hook at DEST's open widens the window, the change is made, the copy goes
# on. Then a tree rewritten by another process during -r, without any hook. Rows go to
# $OUT/source-changes.tsv: build, route, case, exit, DEST size, SOURCE size after the
# change, whether DEST equals SOURCE, and DEST's NUL bytes beyond SOURCE's.
#
#   bench/h200-source-changes.sh BIN_DIR
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-source-changes.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
for m in fast fast2; do
    mountpoint -q /mnt/$m || bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 4G --mnt /mnt/$m | grep -v '^env'
done
S=/mnt/fast/sc D=/mnt/fast2/sc
rm -rf "$S" "$D" && mkdir -p "$S" "$D"
tsv=$out/source-changes.tsv
printf 'build\troute\tcase\texit\tdst_bytes\tsrc_bytes\tequal\tstderr\n' > "$tsv"

# change CASE FILE: what the case does to SOURCE while aiscp waits.
change() {
    case $1 in
        hello) printf hello > "$2" ;;
        empty) : > "$2" ;;
        cut70001) truncate -s 70001 "$2" ;;
    esac
}

builds=(aiscp)
[[ -x $B/aiscp-base ]] && builds+=(aiscp-base)
for build in "${builds[@]}"; do
    for route in bounce library; do
        for spec in hello:30000 empty:104857600 cut70001:200000 hello:200000; do
            name=${spec%%:*} len=${spec##*:}
            head -c "$len" /dev/urandom > "$S/a"
            rm -f "$D/b" "$S/flag"
            AISCP_TEST_PAUSE="dest-open:$S/flag" "$B/$build" --backend cufile --route "$route" \
                --no-progress "$S/a" "$D/b" 2> "$S/err" &
            pid=$!
            for _ in $(seq 200); do [[ -e $S/flag ]] && break; sleep 0.05; done
            change "$name" "$S/a"
            rm -f "$S/flag"
            wait "$pid"; rc=$?
            dst=$(stat -c %s "$D/b" 2>/dev/null || echo -)
            src=$(stat -c %s "$S/a")
            cmp -s "$S/a" "$D/b" && eq=yes || eq=no
            printf '%s\t%s\t%s:%s\t%s\t%s\t%s\t%s\t%s\n' "$build" "$route" "$name" "$len" "$rc" \
                "$dst" "$src" "$eq" "$(tr '\n' ' ' < "$S/err" | cut -c1-100)" >> "$tsv"
        done
    done
done

# No hook: 300 files of 40,000 bytes rewritten in a loop (each version one byte value,
# never 0) while -r copies them; a NUL byte in DEST was never in SOURCE.
printf 'build\troute\tround\texit\tfiles_with_nul\n' > "$out/rewrite-race.tsv"
mkdir -p "$S/tree"
for i in $(seq -w 1 300); do head -c 40000 /dev/zero | tr '\0' 'a' > "$S/tree/f$i"; done
python3 - "$S/tree" > /dev/null 2>&1 <<'PY' &
import os, sys, time
d = sys.argv[1]
v = 0
end = time.time() + 120
while time.time() < end and not os.path.exists(os.path.join(d, "..", "stop")):
    for i in range(1, 301):
        v = v % 254 + 1
        with open(os.path.join(d, "f%03d" % i), "wb") as f:
            f.write(bytes([v]) * 40000)
PY
writer=$!
for build in "${builds[@]}"; do
    for route in bounce library; do
        for round in 1 2 3 4; do
            rm -rf "$D/tree"
            "$B/$build" --backend cufile --route "$route" --no-progress -r "$S/tree" "$D/tree" 2>/dev/null
            rc=$?
            nul=$(python3 -c "
import os, sys
d = sys.argv[1]
print(sum(1 for n in os.listdir(d) if b'\0' in open(os.path.join(d, n), 'rb').read()))" "$D/tree")
            printf '%s\t%s\t%s\t%s\t%s\n' "$build" "$route" "$round" "$rc" "$nul" >> "$out/rewrite-race.tsv"
        done
    done
done
touch "$S/stop"; wait "$writer" 2>/dev/null
column -t -s$'\t' "$tsv"
column -t -s$'\t' "$out/rewrite-race.tsv"
rm -rf "$S" "$D"
