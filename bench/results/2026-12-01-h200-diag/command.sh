#!/bin/bash
# Device command of the diagnosis (one call, 121 s): `bash .probe/diag.sh`, .probe carried with
# aiscp = release build of ea12796 and pinned_io = crates/hipfile-rs/examples/pinned_io.rs (its
# first form: the same reads and writes, buffers leaked at exit instead of freed).
set -u
B=$(cd "$(dirname "$0")" && pwd)
for m in fast fast2; do bash scripts/gpu-setup.sh --fastdisk 12G --mnt /mnt/$m | grep -v '^env' | tail -2; done
command -v perf strace bpftrace; uname -r; cat /sys/kernel/mm/transparent_hugepage/enabled; nproc
cat /sys/block/loop*/queue/max_sectors_kb 2>/dev/null | sort | uniq -c; losetup -l
S=/mnt/fast D=/mnt/fast2
mkdir -p $S/b $D/b
for i in 0 1 2 3; do head -c 1G /dev/urandom > $S/b/p$i & done; wait
cat $S/b/p0 $S/b/p1 $S/b/p2 $S/b/p3 > $S/b/src; rm $S/b/p?
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
echo "=== pinned_io piece 8 MiB x4"; $B/pinned_io $S/b/src $D/b 8 4
echo "=== pinned_io piece 64 MiB x4"; $B/pinned_io $S/b/src $D/b 64 4
echo "=== pinned_io piece 8 MiB x1"; $B/pinned_io $S/b/src $D/b 8 1
for r in 1 2 3; do
  for v in "--backend gpu" "--backend host" "--backend host --chunk-size 8M" "--backend gpu --streams 8 --chunk-size 32M" "--backend host --streams 8 --chunk-size 32M"; do
    rm -f $D/b/dst; drop
    echo "== r$r $v: $( $B/aiscp --debug $v $S/b/src $D/b/dst 2>&1 | grep -E "bytes in" | sed 's/.*debug: //' | tr '\n' ' ')"
  done
done
cmp $S/b/src $D/b/dst && echo cmp-ok
