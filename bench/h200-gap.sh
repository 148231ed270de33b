#!/bin/bash
# Where the GPU route's time goes beside the host engine, what bounds a read-back trailing
# the copy, and what a CUDA scheduling mode does to --sums on a tree; one device command.
#
#   OUT=DIR bench/h200-gap.sh BIN_DIR PHASE...
#
# BIN_DIR holds aiscp (the build under test) and, for `sched`, aiscp-exp (a build that reads
# AISCP_EXP_SCHED=spin|yield|blocking and sets the CUDA primary context's scheduling flag).
# Phases:
#   gap      4 GiB, ROUNDS rounds: the host engine and the GPU route, in-process and through
#            a warm service of each; then one run of each way under bench/thread-times.py
#            (the service's threads for a service) with --stats=json: CPU seconds and
#            sampled states per thread name, and the engine's stage times
#   ceiling  the storage alone: a 4 GiB write (the host engine's copy), a 4 GiB O_DIRECT read
#            of DEST, and both at once (what a read-back overlapping the copy can reach)
#   sched    4,000 x 256 KiB in-process with --sums=blake3 and without, under each CUDA
#            scheduling mode (unset, spin, yield, blocking), ROUNDS rounds; wall, user, sys
#   window   4 GiB and the tree, in-process on the GPU, with bounce windows of WINDOWS MiB
#            (BIN_DIR/aiscp-win reads AISCP_EXP_WINDOW_MIB), beside the host engine
#   reg      the same with the windows' memory from cuMemHostRegister, on 4 KiB or huge
#            pages (BIN_DIR/aiscp-reg reads AISCP_EXP_HOSTREG, AISCP_EXP_THP)
#   ab       BIN_DIR/aiscp beside BIN_DIR/aiscp-base: 4 GiB and the tree, host and GPU,
#            in-process and through a warm service of each build and backend; then each GPU
#            service's AnonHugePages and the --debug line of how windows were pinned
# For a dry run elsewhere: S and D name existing folders (no RAM disks made), BIG the file
# size in bytes, TREE_FILES the tree's file count.
# Rows land in $OUT/rows.tsv (what, variant, way, bin, round, wall, user, sys); thread tables
# and stage times in $OUT/threads.txt.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-gap.sh BIN_DIR PHASE...}" && pwd)
shift
out=${OUT:?set OUT}
mkdir -p "$out"
ROUNDS=${ROUNDS:-3}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"

BIG=${BIG:-$((4 << 30))}
TREE_FILES=${TREE_FILES:-4000}
step setup
if [[ -z ${S:-} ]]; then
    for m in fast fast2; do
        mountpoint -q /mnt/$m || bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 44G --mnt /mnt/$m | grep -v '^env'
    done
    S=/mnt/fast D=/mnt/fast2
fi
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nproc
    "$B/aiscp" --version | head -1
    echo "BIG=$BIG TREE_FILES=$TREE_FILES ROUNDS=$ROUNDS phases: $*"
} | tee "$out/env.txt"
export XDG_RUNTIME_DIR=/tmp/xdg-gap
mkdir -p -m 700 "$XDG_RUNTIME_DIR"
export AISCP_SERVICE=off

declare -A sock spid
# serve NAME BACKEND: a warm `BIN_DIR/aiscp --serve` of that backend on its own socket.
serve() {
    local s=$XDG_RUNTIME_DIR/$1/service.sock
    mkdir -p -m 700 "$XDG_RUNTIME_DIR/$1"
    "$B/${3:-aiscp}" --serve --backend "$2" --socket "$s" > /dev/null 2> "$out/service-$1.log" &
    spid[$1]=$!
    for _ in $(seq 200); do [[ -S $s ]] && break; sleep 0.05; done
    head -c 100000 /dev/urandom > /tmp/warm
    AISCP_SERVICE=$s "$B/${3:-aiscp}" /tmp/warm /tmp/warm.out
    sock[$1]=$s
}

rows=$out/rows.tsv
[[ -e $rows ]] || echo "what	variant	way	bin	round	wall	user	sys" > "$rows"
# one WHAT VARIANT WAY BIN ROUND [args]: a cold copy of $S/WHAT to $D/WHAT, timed whole with
# sync. WAY: host, gpu (in-process), svc-host, svc-gpu; VARIANT plain or blake3.
one() {
    local what=$1 variant=$2 way=$3 bin=$4 round=$5
    shift 5
    local args=(-r "$@") env=(AISCP_SERVICE=off)
    [[ $variant == blake3 ]] && args+=(--sums=blake3 --sums-file "/tmp/sums.$what")
    case $way in
        host | gpu) args+=(--backend "$way") ;;
        svc-*) local s=${way#svc-}; env=(AISCP_SERVICE="${sock[$s]}") args+=(--backend "${s%-base}") ;;
    esac
    rm -rf "${D:?}/$what"
    drop
    local times
    # The sync inside the timed group: `time a && b` would time `a` alone.
    if ! times=$( { TIMEFORMAT='%R %U %S'; time { env "${env[@]}" "${ENVX[@]}" "$B/$bin" "${args[@]}" "$S/$what" "$D/$what" 2> "$out/last.err" && sync; }; } 2>&1 ); then
        echo "FAILED $what $variant $way $bin $round: $(tail -3 "$out/last.err")" | tee -a "$out/failed.txt"
        return
    fi
    echo "$what	$variant	$way	$bin	$round	${times// /	}" | tee -a "$rows"
}
ENVX=()
# sources: the 4 GiB file and the 4,000 x 256 KiB tree, made once.
sources() {
    [[ -e $S/big ]] || gen_random "$S/big" "$BIG"
    if [[ ! -d $S/tree ]]; then
        for d in $(seq -w 0 $((TREE_FILES / 100 - 1))); do
            mkdir -p "$S/tree/d$d"
            for f in $(seq -w 0 99); do head -c $((256 << 10)) /dev/urandom > "$S/tree/d$d/f$f"; done
        done
    fi
    sync
}

for phase in "$@"; do
    case $phase in
    gap)
        step "gap: data"
        [[ -e $S/big ]] || gen_random "$S/big" "$BIG"
        sync
        serve host host
        serve gpu gpu
        for round in $(seq "$ROUNDS"); do
            for way in host gpu svc-host svc-gpu; do one big plain $way aiscp "$round"; done
        done
        step "gap: thread times"
        for way in host gpu svc-host svc-gpu; do
            rm -rf "${D:?}/big"
            drop
            local_env=(AISCP_SERVICE=off) watch=()
            case $way in
                svc-*) local_env=(AISCP_SERVICE="${sock[${way#svc-}]}") watch=(--pid "${spid[${way#svc-}]}") ;;
            esac
            {
                echo "## big plain $way"
                env "${local_env[@]}" python3 "$HERE/thread-times.py" "${watch[@]}" -- \
                    "$B/aiscp" --backend "${way#svc-}" --stats=json "$S/big" "$D/big" 2>&1
            } >> "$out/threads.txt"
        done
        kill "${spid[host]}" "${spid[gpu]}"
        wait 2> /dev/null
        ;;
    ceiling)
        step "ceiling: data"
        [[ -e $S/big ]] || gen_random "$S/big" "$BIG"
        [[ -e $S/big2 ]] || gen_random "$S/big2" "$BIG"
        for round in $(seq "$ROUNDS"); do
            rm -f "$D/big" "$D/big2"
            AISCP_SERVICE=off "$B/aiscp" --backend host "$S/big" "$D/big"
            drop
            t=$( { TIMEFORMAT=%R; time { AISCP_SERVICE=off "$B/aiscp" --backend host "$S/big2" "$D/big2" && sync; }; } 2>&1 )
            echo "ceiling	write	alone	host	$round	$t" | tee -a "$rows"
            drop
            t=$( { TIMEFORMAT=%R; time dd if="$D/big" of=/dev/null bs=16M iflag=direct status=none; } 2>&1 )
            echo "ceiling	read	alone	dd	$round	$t" | tee -a "$rows"
            rm -f "$D/big2"
            drop
            t=$( { TIMEFORMAT=%R; time {
                dd if="$D/big" of=/dev/null bs=16M iflag=direct status=none &
                AISCP_SERVICE=off "$B/aiscp" --backend host "$S/big2" "$D/big2" && sync
                wait
            }; } 2>&1 )
            echo "ceiling	write+read	together	host+dd	$round	$t" | tee -a "$rows"
        done
        ;;
    sched)
        step "sched: data"
        sources
        # The kernels compiled once, so that every timed run finds them kept.
        AISCP_SERVICE=off "$B/aiscp-exp" --backend gpu --sums /tmp/warm /tmp/warm.out > /dev/null
        for round in $(seq "$ROUNDS"); do
            for mode in unset spin yield blocking; do
                ENVX=(AISCP_EXP_SCHED=$mode)
                one tree plain "gpu" aiscp-exp "$round-$mode"
                one tree blake3 "gpu" aiscp-exp "$round-$mode"
            done
        done
        ENVX=()
        for mode in unset blocking; do
            rm -rf "${D:?}/tree"
            drop
            {
                echo "## tree blake3 gpu $mode"
                AISCP_SERVICE=off AISCP_EXP_SCHED=$mode python3 "$HERE/thread-times.py" -- \
                    "$B/aiscp-exp" -r --backend gpu --sums=blake3 --sums-file /tmp/sums.t --stats=json "$S/tree" "$D/tree" 2>&1
            } >> "$out/threads.txt"
        done
        ;;
    window)
        # The bounce window's size (aiscp-win reads AISCP_EXP_WINDOW_MIB): 4 GiB and the
        # 4,000 x 256 KiB tree, in-process on the GPU, beside the host engine.
        step "window: data"
        sources
        for round in $(seq "$ROUNDS"); do
            for what in big tree; do
                ENVX=()
                one $what plain host aiscp-win "$round"
                for w in ${WINDOWS:-8 16 32 64}; do
                    ENVX=(AISCP_EXP_WINDOW_MIB=$w)
                    one $what "w$w" gpu aiscp-win "$round"
                done
            done
        done
        ENVX=()
        ;;
    reg)
        # Pinned windows from cuMemHostRegister on our own mapping (aiscp-reg reads
        # AISCP_EXP_HOSTREG, AISCP_EXP_THP) against cuMemHostAlloc, and the host engine's
        # buffers with and without huge pages.
        step "reg: data"
        sources
        for round in $(seq "$ROUNDS"); do
            for what in big tree; do
                ENVX=(); one $what plain host aiscp-reg "$round"
                ENVX=(AISCP_EXP_THP=on); one $what thp-on host aiscp-reg "$round"
                ENVX=(AISCP_EXP_THP=off); one $what thp-off host aiscp-reg "$round"
                ENVX=(); one $what plain gpu aiscp-reg "$round"
                ENVX=(AISCP_EXP_HOSTREG=1); one $what hostreg gpu aiscp-reg "$round"
                ENVX=(AISCP_EXP_HOSTREG=1 AISCP_EXP_THP=1); one $what hostreg-thp gpu aiscp-reg "$round"
            done
        done
        ENVX=()
        for v in plain hostreg; do
            rm -rf "${D:?}/big"
            drop
            e=(AISCP_SERVICE=off)
            [[ $v == hostreg ]] && e+=(AISCP_EXP_HOSTREG=1)
            {
                echo "## big $v gpu"
                env "${e[@]}" python3 "$HERE/thread-times.py" -- \
                    "$B/aiscp-reg" --backend gpu --stats=json "$S/big" "$D/big" 2>&1
            } >> "$out/threads.txt"
        done
        ;;
    ab)
        # The build under test (aiscp) beside a baseline (aiscp-base): 4 GiB and the
        # 4,000 x 256 KiB tree, host engine and GPU, in-process and through a warm service of
        # each build and backend.
        step "ab: data"
        sources
        serve host host; serve gpu gpu
        serve host-base host aiscp-base; serve gpu-base gpu aiscp-base
        for round in $(seq "$ROUNDS"); do
            for what in big tree; do
                for way in host gpu svc-host svc-gpu; do
                    one $what plain $way aiscp "$round"
                    b=$way; [[ $way == svc-* ]] && b=$way-base
                    one $what plain $b aiscp-base "$round"
                done
            done
        done
        # Whether each GPU service's windows are on huge pages (the runtime's pinned memory
        # shows none), and how the build under test says it pinned them.
        for s in gpu gpu-base; do
            huge=$(grep AnonHugePages "/proc/${spid[$s]}/smaps_rollup" 2> /dev/null) ||
                huge="not running (service-$s.log)"
            echo "$s service: $huge" | tee -a "$out/env.txt"
        done
        rm -rf "${D:?}/big"
        said=$(AISCP_SERVICE=off "$B/aiscp" --backend gpu --debug "$S/big" "$D/big" 2>&1 |
            grep -E "route:|pinned windows") || said="no route or pinned-windows line (--debug)"
        echo "$said" | tee -a "$out/env.txt"
        kill "${spid[host]}" "${spid[gpu]}" "${spid[host-base]}" "${spid[gpu-base]}"
        wait 2> /dev/null
        ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
    esac
done
step done
