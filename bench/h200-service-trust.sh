#!/bin/bash
# A client of the staging service stopped mid-file, then its DEST written anew at once, on
# the H200 with real cuFile (two RAM ext4s): for each build in BIN_DIR (aiscp, and
# aiscp-base when there) a service of that build on cuFile, and ROUNDS rounds of each way of
# stopping its client while it copies a 1.5 GB file: `kill -9`, two SIGINTs 10 ms apart, one
# SIGINT. After the client's death the script does what a user's script does next,
# `cp NEW D`, waits a second, and compares. Rows go to $OUT/service-trust.tsv: build, way,
# round, the client's exit status, whether D equals NEW afterwards, D's size.
#
#   ROUNDS=20 bench/h200-service-trust.sh BIN_DIR
set -uo pipefail
# Job control: a background job of a script without it has SIGINT ignored, and aiscp (as
# cp) keeps a signal ignored that it inherited so.
set -m
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-service-trust.sh BIN_DIR}" && pwd)
out=${OUT:?set OUT}
rounds=${ROUNDS:-20}
for m in fast fast2; do
    mountpoint -q /mnt/$m || bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 4G --mnt /mnt/$m | grep -v '^env'
done
S=/mnt/fast/trust D=/mnt/fast2/trust
rm -rf "$S" "$D" && mkdir -p "$S" "$D"
head -c 1500000000 /dev/urandom > "$S/a"
head -c 1000000000 /dev/zero | tr '\0' 'N' > "$S/new"
tsv=$out/service-trust.tsv
printf 'build\tway\tround\tclient_exit\tequal\td_bytes\n' > "$tsv"

builds=(aiscp)
[[ -x $B/aiscp-base ]] && builds+=(aiscp-base)
for build in "${builds[@]}"; do
    svc_dir=$S/svc-$build
    mkdir -m 700 "$svc_dir"
    "$B/$build" --serve --socket "$svc_dir/sock" --backend cufile --debug \
        2> "$out/trust-service-$build.log" &
    svc=$!
    for _ in $(seq 300); do [[ -S $svc_dir/sock ]] && break; sleep 0.1; done
    for way in kill9 sigint2 sigint1; do
        for round in $(seq "$rounds"); do
            rm -f "$D/d"
            AISCP_SERVICE=$svc_dir/sock "$B/$build" --no-progress "$S/a" "$D/d" 2> "$S/err" &
            c=$!
            # Somewhere in the copy's first 0.1-0.4 s (it takes about 0.55 s).
            sleep "0.$(( 1 + RANDOM % 4 ))"
            case $way in
                kill9) kill -KILL "$c" ;;
                sigint2) kill -INT "$c"; sleep 0.01; kill -INT "$c" ;;
                sigint1) kill -INT "$c" ;;
            esac
            wait "$c" 2>/dev/null; rc=$?
            cp "$S/new" "$D/d"
            sleep 1
            cmp -s "$S/new" "$D/d" && eq=yes || eq=no
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$build" "$way" "$round" "$rc" "$eq" \
                "$(stat -c %s "$D/d")" >> "$tsv"
        done
    done
    kill -TERM "$svc"; wait "$svc"
done
# Corrupted rounds per build and way, of the rounds whose client the signal stopped (a
# client that had finished first exits 0 and tests nothing).
awk -F'\t' 'NR > 1 && $4 != 0 { n[$1 " " $2]++; if ($5 == "no") bad[$1 " " $2]++ }
    END { for (k in n) printf "%s: %d of %d stopped clients corrupted\n", k, bad[k] + 0, n[k] }' "$tsv" | sort
rm -rf "$S" "$D"
