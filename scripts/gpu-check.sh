#!/bin/bash
# On real hardware: the release aiscp, cuFile backend, on the H200 machine.
#
#   scripts/gpu-check.sh [--dir DIR] [--shm DIR] [--backend cufile] [--gpu SPEC] [--deadline SECS]
#                        [--no-roundtrip] [--keep] [--small]
#
# Cases: sizes 0, 1, 4097, 1 GiB, 3 GiB of random data; an existing larger DST and an existing
# DST under an empty SRC (truncated in place: same inode); SRC and DST on /dev/shm (cuFile
# refuses tmpfs, so aiscp must take its own bounce path, still through GPU memory: --debug must
# show "bounce" or O_DIRECT for that side, not the library's "direct"); --gpu N on a machine of
# N GPUs (exit 1, a message naming the GPU/device); --async, --streams 1 and --verify (when
# --help offers it) variants; hipfile-rs's roundtrip example on the 3 GiB file.
# Every case prints ONE line:  PASS|FAIL|SKIP <case> <size> <verdict> <seconds> [# detail]
# then a SUMMARY line. Exit 0 only if every case passed.
#
# AISCP_BIN / ROUNDTRIP_BIN override the binaries (defaults target/release/aiscp and
# target/release/examples/roundtrip). Each case's command and output go to gpu-check.log in $OUT
# (when set) or in DIR. Cases are time-bounded; after --deadline seconds (default 480) the rest
# are skipped, so the whole script fits one 10-minute device command. --small uses 1 MiB and
# 3 MiB instead of 1 GiB and 3 GiB: a quick test of this script, not of aiscp. --gpu SPEC passes
# `--gpu SPEC` (an index, a list, all, auto) to every copy, for machines of several GPUs.
set -uo pipefail
# shellcheck source=scripts/lib.sh
source "$(dirname "$0")/lib.sh"

dir=${W:-/var/tmp/aiscp-check}
shm=/dev/shm/aiscp-check
backend=cufile
deadline=480
gpu=""
roundtrip=1
keep=0
G1=$((1 << 30)) G3=$((3 << 30))
while (($#)); do
    case $1 in
        --dir) dir=$2; shift 2 ;;
        --shm) shm=$2; shift 2 ;;
        --backend) backend=$2; shift 2 ;;
        --gpu) gpu=$2; shift 2 ;;
        --deadline) deadline=$2; shift 2 ;;
        --no-roundtrip) roundtrip=0; shift ;;
        --keep) keep=1; shift ;;
        --small) G1=$((1 << 20)) G3=$((3 << 20)); shift ;; # smoke test of the script itself
        -h | --help) usage ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
mkdir -p "$dir" "$shm" || die "cannot create $dir or $shm"
log=${OUT:+$OUT/gpu-check.log}
log=${log:-$dir/gpu-check.log}
: > "$log"
start=$SECONDS
npass=0 nfail=0 nskip=0

if ((EUID == 0)) && [[ $backend == cufile ]]; then
    bash "$REPO_ROOT/scripts/gpu-setup.sh" --udev "$dir" | sed 's/^/# /'
fi
say "aiscp: $AISCP_BIN ($("$AISCP_BIN" --version 2>&1 | head -1)); backend $backend; digest $DIGEST; dir $dir ($(findmnt -no FSTYPE --target "$dir")); shm $shm"
if [[ $backend == cufile ]]; then
    aiscp_preflight "$dir" "$dir/preflight.log" | sed 's/^/# /'
    { echo "=== preflight"; cat "$dir/preflight.log"; } >> "$log"
    [[ -n ${AISCP_CUFILE_LIB:-} ]] && say "using AISCP_CUFILE_LIB=$AISCP_CUFILE_LIB"
fi

# Sources, generated once (outside any timing) with their digests.
declare -A SRC SUM
for s in 0 1 4097 $G1 $G3; do
    SRC[$s]=$dir/src-$(human_size "$s").bin
    gen_random "${SRC[$s]}" "$s"
    SUM[$s]=$(digest "${SRC[$s]}")
done
say "sources ready after $((SECONDS - start)) s"

# result STATUS CASE SIZE VERDICT SECONDS [DETAIL]
result() {
    local st=$1
    case $st in PASS) ((npass++)) ;; FAIL) ((nfail++)) ;; *) ((nskip++)) ;; esac
    echo "$st $2 $(human_size "$3") $4 $5${6:+  # $6}"
}

# aiscp_run CASE DST_FOR_LOG ARGS... -> sets RC, SECS; output in $dir/case.log, appended to $log.
aiscp_run() {
    local name=$1 bytes=$2 t0 t1
    shift 2
    local cmd=("$AISCP_BIN" --backend "$backend" --no-progress ${gpu:+--gpu "$gpu"} "$@")
    t0=$(date +%s.%N)
    timeout -k 5 $((30 + bytes / 50000000)) "${cmd[@]}" > "$dir/case.log" 2>&1
    RC=$?
    t1=$(date +%s.%N)
    SECS=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
    { echo "=== $name (rc=$RC, $SECS s)"; echo "\$ ${cmd[*]}"; cat "$dir/case.log"; } >> "$log"
}

# route_of LOG: how each side went, from aiscp --debug: "read=<how>,write=<how>", where <how> is
# direct (the GPU library's own I/O), or bounce / O_DIRECT (aiscp's own POSIX path through
# pinned host memory and the device buffer). Falls back to any "bounce"/"direct" word.
route_of() {
    local rd wr
    rd=$(grep -oE 'read (direct|O_DIRECT|bounce)' "$1" | head -1 | cut -d' ' -f2)
    wr=$(grep -oE 'write (direct|O_DIRECT|bounce)' "$1" | head -1 | cut -d' ' -f2)
    if [[ -n $rd || -n $wr ]]; then
        echo "read=${rd:-?},write=${wr:-?}"
    elif grep -qi bounce "$1"; then
        echo bounce
    elif grep -qi direct "$1"; then
        echo direct
    else
        echo "?"
    fi
}

# copy_case CASE SRC_SIZE SRC DST [--own-path read|write] [--same-inode] -- AISCP_ARGS...
# Copies SRC to DST with --debug and checks DST's digest against SRC's. --own-path SIDE: that
# side must not be the library's direct path (cuFile refuses tmpfs: aiscp's bounce path).
copy_case() {
    local name=$1 bytes=$2 src=$3 dst=$4 own="" same_inode=0 ino_before="" detail=""
    shift 4
    while [[ $1 != -- ]]; do
        case $1 in
            --own-path) own=$2; shift 2 ;;
            --same-inode) same_inode=1; shift ;;
        esac
    done
    shift
    if ((SECONDS - start > deadline)); then result SKIP "$name" "$bytes" deadline 0; return; fi
    ((same_inode)) && ino_before=$(stat -c %i "$dst")
    aiscp_run "$name" "$bytes" --debug "$@" "$src" "$dst"
    local verdict ok=1 route
    route=$(route_of "$dir/case.log")
    if ((RC != 0)); then
        verdict="rc=$RC" ok=0 detail=$(tail -1 "$dir/case.log")
    elif [[ ! -f $dst ]]; then
        verdict="no-dst" ok=0
    elif [[ $(digest "$dst") == "${SUM[$bytes]}" ]]; then
        verdict="$DIGEST_NAME:match"
    else
        verdict="$DIGEST_NAME:MISMATCH" ok=0 detail="dst size $(stat -c %s "$dst")"
    fi
    verdict+=",$route"
    if [[ -n $own ]]; then
        if [[ $route == bounce || $route == *$own=bounce* || $route == *$own=O_DIRECT* ]]; then
            :
        else
            ok=0 detail+="${detail:+; }--debug does not show aiscp's own (bounce) path for the $own side"
        fi
    fi
    if ((same_inode)) && [[ -f $dst && $(stat -c %i "$dst") != "$ino_before" ]]; then
        ok=0 detail+="${detail:+; }DST was replaced, not truncated in place (inode changed)"
    fi
    if ((ok)); then
        result PASS "$name" "$bytes" "$verdict" "$SECS" "$detail"
    else
        result FAIL "$name" "$bytes" "$verdict" "$SECS" "$detail"
    fi
    ((keep)) || rm -f "$dst"
}

for s in 0 1 4097 $G1 $G3; do
    rm -f "$dir/dst.bin"
    copy_case "size-$(human_size "$s")" "$s" "${SRC[$s]}" "$dir/dst.bin" -- 
done

gen_random "$dir/dst.bin" $((G1 + (1 << 20)))
copy_case existing-larger-dst $G1 "${SRC[$G1]}" "$dir/dst.bin" --same-inode --
gen_random "$dir/dst.bin" 4097
copy_case empty-src-existing-dst 0 "${SRC[0]}" "$dir/dst.bin" --same-inode --

cp "${SRC[$G1]}" "$shm/src.bin"
rm -f "$dir/dst.bin"
copy_case shm-src $G1 "$shm/src.bin" "$dir/dst.bin" --own-path read --
rm -f "$shm/src.bin" "$shm/dst.bin"
copy_case shm-dst $G1 "${SRC[$G1]}" "$shm/dst.bin" --own-path write --
rm -f "$shm/dst.bin"

rm -f "$dir/dst.bin"
copy_case async $G1 "${SRC[$G1]}" "$dir/dst.bin" -- --async
copy_case async 4097 "${SRC[4097]}" "$dir/dst.bin" -- --async
copy_case streams-1 $G1 "${SRC[$G1]}" "$dir/dst.bin" -- --streams 1
if "$AISCP_BIN" --help 2>&1 | grep -q -- --verify; then
    copy_case verify $G1 "${SRC[$G1]}" "$dir/dst.bin" -- --verify
else
    echo "SKIP verify $(human_size $G1) no-flag 0  # aiscp --help offers no --verify (not counted)"
fi

# --gpu N on a machine of N GPUs (one past the last): a usage error (exit 1) naming the GPU/device.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
((ngpu > 0)) || ngpu=1
case_name=gpu-$ngpu
if ((SECONDS - start > deadline)); then
    result SKIP "$case_name" 4097 deadline 0
else
    rm -f "$dir/dst.bin"
    aiscp_run "$case_name" 4097 --gpu "$ngpu" "${SRC[4097]}" "$dir/dst.bin"
    msg=$(grep -v '^\s*$' "$dir/case.log" | tail -1)
    dst_state=$([[ -e $dir/dst.bin ]] && echo dst-created || echo no-dst)
    if ((RC == 1)) && grep -qiE 'gpu|device' "$dir/case.log"; then
        result PASS "$case_name" 4097 "rc=1,$dst_state" "$SECS" "$msg"
    else
        result FAIL "$case_name" 4097 "rc=$RC,$dst_state" "$SECS" "want exit 1 and a message naming the GPU/device: $msg"
    fi
    rm -f "$dir/dst.bin"
fi

if ((roundtrip)); then
    if ((SECONDS - start > deadline)); then
        result SKIP roundtrip-cufile $G3 deadline 0
    else
        bash "$REPO_ROOT/scripts/gpu-roundtrip.sh" --src "${SRC[$G3]}" --dir "$dir" > "$dir/rt.out" 2>&1
        cat "$dir/rt.out" >> "$log"
        lines=$(grep -E '^(PASS|FAIL) ' "$dir/rt.out")
        [[ -n $lines ]] || result FAIL roundtrip-cufile $G3 "no-result" 0 "$(tail -1 "$dir/rt.out")"
        while read -r line; do
            [[ -z $line ]] && continue
            case $line in PASS*) ((npass++)) ;; *) ((nfail++)) ;; esac
            echo "$line"
        done <<< "$lines"
    fi
fi

((keep)) || rm -rf "${SRC[@]}" "$dir/dst.bin" "$dir/rt.out" "$dir/case.log" "$shm"
echo "SUMMARY pass=$npass fail=$nfail skip=$nskip in $((SECONDS - start)) s (backend $backend, digest $DIGEST_NAME; log $log)"
((nfail == 0 && nskip == 0))
