#!/bin/bash
# The two-GPU run (device kind nvidia-h200-x2), in one device command (about 8 minutes):
# correctness with --gpu 0, 1, all and auto (scripts/gpu-check.sh), which GPUs --debug names
# under all/auto, GPU memory per device, and throughput of one GPU against --gpu all and
# `mpirun -n 2` (one rank per GPU) beside the host copies, on two RAM-backed ext4s and on the
# virtio disk, for a 4 GiB file and a tree of 4,000 x 256 KiB.
#
#   bench/h200-x2.sh BIN_DIR [PARTS]
#
# BIN_DIR holds aiscp (the build under test), aiscp-mpi (the same commit with --features mpi)
# and openmpi-bundle/ (bench/mpi-bundle.sh). PARTS picks what runs (default all):
# check,debug,memory,big,virtio,tree. Everything lands in $OUT.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
B=$(cd "${1:?usage: bench/h200-x2.sh BIN_DIR [PARTS]}" && pwd)
parts=,${2:-check,debug,memory,big,virtio,tree},
out=${OUT:?set OUT}
t0=$SECONDS
# shellcheck source=scripts/lib.sh
source "$HERE/../scripts/lib.sh"
want() { [[ $parts == *,$1,* ]]; }
export AISCP_BIN=$B/aiscp BENCH_SHARED=$B

step "machine"
nvidia-smi -L
nvidia-smi --query-gpu=index,pci.bus_id,memory.used,memory.total --format=csv
nvidia-smi topo -m 2>&1 | head -8
lsblk -o NAME,MAJ:MIN,TYPE,SIZE,MOUNTPOINT | head -12
"$AISCP_BIN" --version | head -1

# `mpirun -n 2` as an aiscp-like command for the benchmark scripts: one rank per GPU (each
# rank takes its local rank modulo the node's GPUs).
cat > "$B/aiscp-mpi2" <<EOF
#!/bin/bash
source "$B/openmpi-bundle/env.sh"
exec mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 "$B/aiscp-mpi" "\$@"
EOF
chmod +x "$B/aiscp-mpi2"

step setup
for m in fast fast2; do bash "$HERE/../scripts/gpu-setup.sh" --fastdisk 14G --mnt /mnt/$m | grep -v '^env'; done
S=/mnt/fast D=/mnt/fast2

if want check; then
    for g in 0 1 all auto; do
        step "checksums with --gpu $g"
        OUT= bash "$HERE/../scripts/gpu-check.sh" --dir "$S/check" --gpu "$g" --deadline 35 \
            --no-roundtrip > "$out/check-$g.log" 2>&1
        grep -E '^(FAIL|SUMMARY)' "$out/check-$g.log"
        cat "$S/check/gpu-check.log" >> "$out/check-cases.log"
        rm -rf "$S/check"
    done
fi

gen() { gen_random "$1" "$(parse_size "$2")"; }
if want debug || want memory; then
    gen "$S/big" 4G
    mkdir -p "$S/tree"
    for i in $(seq 64); do gen "$S/tree/f$i" 32M; done
fi

if want debug; then
    step "--debug: which GPU each file used"
    for g in all auto; do
        rm -rf "$D/out"
        "$AISCP_BIN" --no-progress --debug --gpu "$g" "$S/big" "$D/out" > "$out/debug-$g-big.log" 2>&1
        cmp -s "$S/big" "$D/out" && echo "big --gpu $g: same bytes" || echo "big --gpu $g: MISMATCH"
        rm -rf "$D/out"
        "$AISCP_BIN" --no-progress --debug --gpu "$g" -r "$S/tree" "$D/out" > "$out/debug-$g-tree.log" 2>&1
        diff -rq "$S/tree" "$D/out" >/dev/null && echo "tree --gpu $g: same bytes" || echo "tree --gpu $g: MISMATCH"
        echo "--gpu $g lines naming GPUs:"
        grep -ohE 'GPUs? [0-9][0-9,]*[^;]*' "$out/debug-$g-big.log" "$out/debug-$g-tree.log" | sort | uniq -c | head -8
    done
fi

if want memory; then
    step "GPU memory per device (peak over baseline, nvidia-smi every 50 ms)"
    for args in "--gpu 0" "--gpu all" "--gpu all -r tree"; do
        rm -rf "$D/out"
        src=$S/big
        set -- $args
        if [[ ${3:-} == -r ]]; then src=$S/tree; set -- "$1" "$2" -r; fi
        nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 50 > "$out/mem.csv" &
        smi=$!
        sleep 0.5
        /usr/bin/time -f "%e s wall, %U s user, %S s sys, %M KiB max RSS" \
            "$AISCP_BIN" --no-progress "$@" "$src" "$D/out" 2> "$out/time.txt"
        sleep 0.3
        kill "$smi"; wait "$smi" 2>/dev/null
        echo "aiscp $args: $(tail -1 "$out/time.txt")"
        awk -F', *' 'NR <= 2 { base[$1] = $2 } { if ($2 > peak[$1]) peak[$1] = $2 }
            END { for (i in peak) printf "  GPU %s: peak %d MiB, baseline %d MiB\n", i, peak[i], base[i] }' "$out/mem.csv"
    done
    rm -f "$out/mem.csv" "$out/time.txt"
fi
rm -rf "$S/big" "$S/tree" "$D/out"

extras=(--extra 'gpu_all=--backend gpu --gpu all' --extra 'host=--backend host'
    --extra "mpi2=$B/aiscp-mpi2 --backend gpu")
if want big; then
    step "4 GiB, two RAM filesystems (aiscp = --gpu 0)"
    bash "$HERE/run.sh" --dir "$S/b" --dst-dir "$D/b" --size 4G --rounds 3 --methods aiscp,hostcopy_qd8 \
        "${extras[@]}" --budget 110 --out "$out/big" --label ram2 | grep -v '^  '
    rm -rf "$S/b" "$D/b"
fi
if want virtio; then
    step "4 GiB, virtio disk"
    bash "$HERE/run.sh" --dir /var/tmp/aiscp-x2 --size 4G --rounds 3 --methods aiscp,hostcopy_qd8 \
        "${extras[@]}" --budget 110 --out "$out/virtio" --label virtio | grep -v '^  '
    rm -rf /var/tmp/aiscp-x2
fi
if want tree; then
    step "tree 4,000 x 256 KiB, two RAM filesystems"
    bash "$HERE/tree.sh" --src-dir "$S/t" --dst-dir "$D/t" --files 4000 --size 256K --rounds 3 \
        --budget 70 --out "$out/tree" --label small --extra "gpu_all=$AISCP_BIN --gpu all" \
        --extra "mpi2=$B/aiscp-mpi2 --backend gpu" | grep -v '^  '
    rm -rf "$S/t" "$D/t"
fi
step done
