#!/bin/bash
# Where a GPU copy's start-up goes on the H200 machine, in one device command per mode:
#
#   bench/h200-startup-probe.sh BIN_DIR probe        cold vs warm start-up, and the driver
#                                                    library's files read beside it (cat)
#   bench/h200-startup-probe.sh BIN_DIR env          CUDA variables against context create/release
#   bench/h200-startup-probe.sh BIN_DIR connections  CUDA_DEVICE_MAX_CONNECTIONS 1/2/4/8, and a
#                                                    4 GiB copy with each (two RAM ext4s)
#
# BIN_DIR holds aiscp and hipfile-rs's `startup` example. Output goes to stdout (and $OUT for
# the tree --debug logs of `env`). Results of 2026-12-01: bench/results/2026-12-01-h200-startup-probe/.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-startup-probe.sh BIN_DIR probe|env|connections}" && pwd)
mode=${2:?mode: probe|env|connections}
cd "$HERE/.."
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
now() { date +%s.%N; }
steps() { awk -v l="$1" '/init|context|release/{printf "%s=%s ", $1 (NF>3?$2:""), $(NF-1)} END{print l}'; }
fastdisks() { mountpoint -q /mnt/fast2 || for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env'; done; }
case $mode in
probe)
    nvidia-smi -q | grep -i -E "persistence|Driver Version" | head
    CUDA=$(ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}')
    CUFILE=$(ldconfig -p | awk '/libcufile.so.0 /{print $NF; exit}')
    [[ -n $CUFILE ]] || CUFILE=$(ls /usr/local/cuda/lib64/libcufile.so.0 2>/dev/null)
    echo "cuda=$(readlink -f $CUDA) $(stat -Lc %s $CUDA) cufile=$(readlink -f $CUFILE) $(stat -Lc %s $CUFILE)"
    echo "=== libraries and files a start-up opens"
    LD_DEBUG=files $B/startup cufile 2>&1 | grep -o 'file=[^ ]*' | sort -u
    which strace && strace -f -e trace=openat,open -o /tmp/st.txt $B/startup cufile >/dev/null 2>&1 && grep -v ENOENT /tmp/st.txt | grep -o '"[^"]*"' | sort | uniq -c | sort -rn | head -40
    LIBS=$(LD_DEBUG=files $B/startup cufile 2>&1 | grep -o 'file=/[^ ;]*' | cut -d= -f2 | sort -u | tr '\n' ' ')
    echo "libs: $LIBS"; du -chL $LIBS | tail -1
    echo "=== startup alone, cold"
    for i in 1 2 3 4; do drop; s=$(now); $B/startup cufile | tr '\n' '|'; e=$(now); echo " wall $(awk "BEGIN{print $e-$s}")"; done
    echo "=== cat libs then startup, cold (sequential)"
    for i in 1 2 3; do drop; s=$(now); cat $LIBS > /dev/null; m=$(now); $B/startup cufile | tr '\n' '|'; e=$(now); echo " cat $(awk "BEGIN{print $m-$s}") wall $(awk "BEGIN{print $e-$s}")"; done
    echo "=== cat libs in background beside startup, cold"
    for i in 1 2 3 4; do drop; s=$(now); (cat $LIBS > /dev/null &); $B/startup cufile | tr '\n' '|'; e=$(now); echo " wall $(awk "BEGIN{print $e-$s}")"; done
    echo "=== warm startup"
    for i in 1 2 3; do s=$(now); $B/startup cufile | tr '\n' '|'; e=$(now); echo " wall $(awk "BEGIN{print $e-$s}")"; done
    printf hi > /tmp/two
    echo "=== aiscp 2-byte, cold, --debug"
    for i in 1 2 3; do drop; s=$(now); $B/aiscp --debug /tmp/two /tmp/two.o 2>&1 | grep -E "loaded|backend cuFile|shut down" | tr '\n' '|'; e=$(now); echo " wall $(awk "BEGIN{print $e-$s}")"; done
    echo "=== aiscp 2-byte, cold, cat libs in background"
    for i in 1 2 3; do drop; s=$(now); (cat $LIBS > /dev/null &); $B/aiscp --debug /tmp/two /tmp/two.o 2>&1 | grep -E "loaded|backend cuFile|shut down" | tr '\n' '|'; e=$(now); echo " wall $(awk "BEGIN{print $e-$s}")"; done
    ;;
env)
    run() { local label=$1; shift; for i in 1 2 3 4 5; do env "$@" "$B/startup" cufile | steps "$label"; done; }
    "$B/startup" cufile > /dev/null
    run base X=1
    run lazy CUDA_MODULE_LOADING=LAZY
    run conn1 CUDA_DEVICE_MAX_CONNECTIONS=1
    run cachedis CUDA_CACHE_DISABLE=1
    run all CUDA_MODULE_LOADING=LAZY CUDA_DEVICE_MAX_CONNECTIONS=1 CUDA_CACHE_DISABLE=1
    run base2 X=1
    fastdisks
    mkdir -p /mnt/fast/t
    python3 -c "
import os
for i in range(4000):
    sub = f'/mnt/fast/t/d{i // 100:02d}'; os.makedirs(sub, exist_ok=True)
    open(f'{sub}/f{i:04d}', 'wb').write(os.urandom(262144))"
    for be in gpu host; do
        for r in 1 2; do
            rm -rf /mnt/fast2/t; drop; s=$(now)
            "$B/aiscp" --no-progress --debug --backend $be -r /mnt/fast/t /mnt/fast2/t 2> "${OUT:-/tmp}/tree-$be-$r.log"
            e=$(now); sync -f /mnt/fast2; f=$(now)
            echo "tree $be round $r: process $(awk "BEGIN{print $e-$s}") with sync $(awk "BEGIN{print $f-$s}")"
        done
    done
    ;;
connections)
    for c in default 1 2 4 8; do
        for i in 1 2 3 4; do
            if [[ $c == default ]]; then "$B/startup" cufile; else CUDA_DEVICE_MAX_CONNECTIONS=$c "$B/startup" cufile; fi | steps "conn $c"
        done
    done
    fastdisks
    [[ -f /mnt/fast/src4g ]] || head -c 4G /dev/urandom > /mnt/fast/src4g
    for r in 1 2 3; do
        for c in default 1 2 host; do
            rm -f /mnt/fast2/dst; drop; s=$(now)
            case $c in
                default) "$B/aiscp" --no-progress /mnt/fast/src4g /mnt/fast2/dst ;;
                host) "$B/aiscp" --no-progress --backend host /mnt/fast/src4g /mnt/fast2/dst ;;
                *) CUDA_DEVICE_MAX_CONNECTIONS=$c "$B/aiscp" --no-progress /mnt/fast/src4g /mnt/fast2/dst ;;
            esac
            sync -f /mnt/fast2; e=$(now)
            echo "4G round $r conn $c: $(awk "BEGIN{printf \"%.3f GB/s\", 4294967296/($e-$s)/1e9}")"
        done
    done
    cmp /mnt/fast/src4g /mnt/fast2/dst && echo same
    ;;
*) echo "unknown mode $mode" >&2; exit 2 ;;
esac
