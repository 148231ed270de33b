#!/bin/bash
# A SOURCE changed after aiscp opened it, on the H200 with real cuFile (two RAM ext4s, SRC
# on one and DST on the other), for each build in BIN_DIR (aiscp, and aiscp-base when
# there): the pause hook at DEST's open widens the window, the change is made, the copy goes
# on. Rows go to $OUT/source-changes.tsv: build, route, case, exit, DEST size, SOURCE size
# after the change, whether DEST equals SOURCE. Then a tree rewritten, cut and grown by
# another process during -r, without any hook, on each route and through a staging service
# of the build: rows in $OUT/rewrite-race.tsv (files with a NUL byte must be 0).
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

# No hook: scripts/change-tree.py rewrites, cuts and grows 300 files of 40,000 bytes in a
# loop (every byte it writes nonzero, no file extended with a hole) while -r copies them; a
# NUL byte in DEST was never in SOURCE. Each route in-process, then through a staging
# service of the same build (its default route; --debug log kept in $OUT).
printf 'build\tway\tround\texit\tfiles_with_nul\tfailures\n' > "$out/rewrite-race.tsv"
nul_files() {
    python3 -c "
import os, sys
d = sys.argv[1]
print(sum(1 for n in os.listdir(d) if b'\0' in open(os.path.join(d, n), 'rb').read()))" "$1"
}
for build in "${builds[@]}"; do
    svc_dir=$S/svc-$build
    mkdir -m 700 "$svc_dir"
    "$B/$build" --serve --socket "$svc_dir/sock" --backend cufile --debug \
        2> "$out/race-service-$build.log" &
    svc=$!
    for _ in $(seq 300); do [[ -S $svc_dir/sock ]] && break; sleep 0.1; done
    for way in "bounce" "library" "library --async" "bounce --sparse=always" "service" \
        "service --verify"; do
        rm -rf "$S/tree" "$S/stop"
        mkdir -p "$S/tree"
        for i in $(seq 0 299); do head -c 40000 /dev/zero | tr '\0' 'a' > "$S/tree/$(printf f%03d "$i")"; done
        python3 "$HERE/../scripts/change-tree.py" "$S/tree" 300 40000 &
        changer=$!
        for round in 1 2 3 4; do
            rm -rf "$D/tree"
            case $way in
                service*) AISCP_SERVICE=$svc_dir/sock "$B/$build" ${way#service} --no-progress \
                              -r "$S/tree" "$D/tree" 2> "$S/err" ;;
                *) read -ra args <<< "$way"
                   AISCP_SERVICE=off "$B/$build" --backend cufile --route "${args[@]}" --no-progress \
                       -r "$S/tree" "$D/tree" 2> "$S/err" ;;
            esac
            rc=$?
            # --verify may fail a file that changed after it was read, and nothing else.
            failures=$(grep -vc ': verification failed: ' "$S/err")
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$build" "$way" "$round" "$rc" \
                "$(nul_files "$D/tree")" "$failures" >> "$out/rewrite-race.tsv"
        done
        touch "$S/stop"; wait "$changer"
    done
    kill -TERM "$svc"; wait "$svc"
    # The service's rows count only if its eight runs went through it.
    served=$(grep -c ' connected$' "$out/race-service-$build.log")
    [[ $served == 8 ]] && echo "$build service: served all 8 runs" ||
        echo "$build service: served $served of 8 runs (its rows do not count)"
done
cat "$tsv"
cat "$out/rewrite-race.tsv"
rm -rf "$S" "$D"
