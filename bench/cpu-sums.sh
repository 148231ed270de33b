#!/bin/bash
# What --sums costs on the CPU machine (host backend; tmpfs, so no cache to drop; whole
# process + sync): a 2 GiB file and 20,000 files of 1-8 KiB, each copied without digests,
# with --sums=blake3 / crc64nvme / crc32c, and the user's alternative (the copy, then b3sum
# over DEST), plus --verify=sums beside --verify. ROUNDS rounds, interleaved. Rows to
# $OUT/cpu-sums.tsv: case, round, seconds.
#
#   OUT=dir ROUNDS=5 bench/cpu-sums.sh BIN
set -uo pipefail
B=$(realpath "${1:?usage: bench/cpu-sums.sh BIN}")
out=${OUT:?set OUT}
w=$(mktemp -d /dev/shm/aiscp-sums.XXXXXX)
trap 'rm -rf "$w"' EXIT
head -c 2G /dev/urandom > "$w/big"
mkdir "$w/tree"
python3 - "$w/tree" <<'PY'
import os, random, sys
random.seed(1)
root = sys.argv[1]
for d in range(20):
    os.mkdir(f"{root}/d{d}")
    for i in range(1000):
        with open(f"{root}/d{d}/f{i}", "wb") as f:
            f.write(os.urandom(random.randint(1024, 8192)))
PY
run() { # case, then the command
    local name=$1; shift
    rm -rf "$w/dst" "$w/dst.b3"; sync
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null || echo "$name failed" >&2
    sync
    t1=$(date +%s.%N)
    printf '%s\t%s\t%s\n' "$name" "$round" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >> "$out/cpu-sums.tsv"
}
copy_then_b3sum() { "$B" --backend host -r "$1" "$w/dst" && (cd "$w" && find dst -type f -print0 | xargs -0 b3sum > dst.b3); }
printf 'case\tround\tseconds\n' > "$out/cpu-sums.tsv"
export AISCP_SERVICE=off
for round in $(seq "${ROUNDS:-5}"); do
    for src in big tree; do
        run "$src plain" "$B" --backend host -r "$w/$src" "$w/dst"
        for a in blake3 crc64nvme crc32c; do
            run "$src sums=$a" "$B" --backend host -r --sums=$a --sums-file="$w/dst.b3" "$w/$src" "$w/dst"
        done
        run "$src copy then b3sum" copy_then_b3sum "$w/$src"
        run "$src verify" "$B" --backend host -r --verify "$w/$src" "$w/dst"
        run "$src verify=sums" "$B" --backend host -r --verify=sums "$w/$src" "$w/dst"
    done
done
awk -F'\t' 'NR > 1 { t[$1] = t[$1] " " $3 } END { for (c in t) print c ":" t[c] }' "$out/cpu-sums.tsv" | sort
