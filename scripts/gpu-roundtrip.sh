#!/bin/bash
# On real hardware: hipfile-rs's roundtrip example copies a random file (3 GiB by default,
# more than the 0x7ffff000-byte per-call cap) through device memory with the cuFile flavor, and
# the checksums must match. Two passes: the example's default chunk, then one chunk as large as
# the file (--chunk), so that every call asks for more than the cap and must be looped over.
#
#   scripts/gpu-roundtrip.sh [--size 3G] [--src FILE] [--dir DIR] [--flavor cufile]
#                            [--no-big-chunk] [--keep]
#
# ROUNDTRIP_BIN overrides the example's path (default target/release/examples/roundtrip).
# Prints each pass's command and output (indented), then one line per pass:
#   PASS|FAIL roundtrip-<flavor>[-chunk<N>] <size> <digest>:match|MISMATCH|rc=N <seconds>
# Exit status 0 when every pass passed, 1 otherwise.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

size=3G src="" dir=${W:-/var/tmp/aiscp-check} flavor=cufile keep=0 big=1
while (($#)); do
    case $1 in
        --size) size=$2; shift 2 ;;
        --src) src=$2; shift 2 ;;
        --dir) dir=$2; shift 2 ;;
        --flavor) flavor=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --no-big-chunk) big=0; shift ;;
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
mkdir -p "$dir"
[[ -x $ROUNDTRIP_BIN ]] || { echo "FAIL roundtrip-$flavor - missing:$ROUNDTRIP_BIN 0"; exit 1; }
if ((EUID == 0)); then udev_record "$dir" | sed 's/^/  | /'; fi

made_src=0
if [[ -z $src ]]; then
    bytes=$(parse_size "$size") || die "bad --size: $size"
    src=$dir/roundtrip-src.bin
    gen_random "$src" "$bytes"
    made_src=1
fi
bytes=$(stat -c %s "$src")
dst=$dir/roundtrip-dst.bin
want=$(digest "$src")
log=$dir/roundtrip.log
failed=0

# one_pass NAME [EXAMPLE ARGS...]
one_pass() {
    local name=$1 t0 t1 rc secs verdict status=FAIL
    shift
    local cmd=("$ROUNDTRIP_BIN" --flavor "$flavor" "$@" "$src" "$dst")
    rm -f "$dst"
    echo "  | \$ ${cmd[*]}"
    t0=$(date +%s.%N)
    timeout -k 5 $((60 + bytes / 50000000)) "${cmd[@]}" > "$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    sed 's/^/  | /' "$log" | tail -n 15
    if ((rc != 0)); then
        verdict="rc=$rc"
    elif [[ ! -f $dst ]]; then
        verdict="no-dst"
    elif [[ $(digest "$dst") == "$want" ]]; then
        verdict="$DIGEST_NAME:match" status=PASS
    else
        verdict="$DIGEST_NAME:MISMATCH(size=$(stat -c %s "$dst"))"
    fi
    [[ $status == PASS ]] || failed=1
    echo "$status $name $(human_size "$bytes") $verdict $secs"
    ((keep)) || rm -f "$dst"
}

one_pass "roundtrip-$flavor"
if ((big && bytes > 0x7ffff000)); then
    chunk=$(((bytes + 4095) / 4096 * 4096))
    one_pass "roundtrip-$flavor-chunk$(human_size "$chunk")" --chunk "$chunk"
fi
((keep || !made_src)) || rm -f "$src"
((failed == 0))
