#!/usr/bin/env bash
# Digests on the GPU, on the GPU machine (device tool): the kernels of
# crates/engine/src/digest/kernels.cu compiled by NVRTC at run time, checked against the
# CPU over thousands of random slices, their rate on data already in device memory, and
# compile + load time (crates/engine/examples/gpu_digests.rs prints the rows).
#
# Build here:  cargo build --release -p aiscp-engine --example gpu_digests
#              mkdir -p .bench/kernels-helper && cp target/release/examples/gpu_digests \
#                bench/gpu-digests.sh .bench/kernels-helper/
# Run there:   bash .bench/kernels-helper/gpu-digests.sh   (carry .bench/kernels-helper; rows go to $OUT)
set -u
BIN=${BIN:-.bench/kernels-helper}
OUT=${OUT:-/tmp/gpu-digests}
mkdir -p "$OUT"
{
  echo "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  ls /usr/local/cuda/lib64/ 2>/dev/null | grep -E '^libnvrtc' | tr '\n' ' '; echo
  ldconfig -p | grep -c nvrtc | sed 's/^/nvrtc entries in ld.so.cache: /'
} | tee "$OUT/env.txt"
# PIECES slices x 3 algorithms compared with the CPU, then the rates.
PIECES=${PIECES:-3000}
if ! "$BIN/gpu_digests" cufile "$PIECES" rate 2>&1 | tee "$OUT/gpu_digests.tsv"; then
  # NVRTC loads its builtins library by name: without /usr/local/cuda/lib64 on the
  # loader path it may not find it.
  echo "# again with LD_LIBRARY_PATH=/usr/local/cuda/lib64" | tee -a "$OUT/gpu_digests.tsv"
  LD_LIBRARY_PATH=/usr/local/cuda/lib64 "$BIN/gpu_digests" cufile "$PIECES" rate 2>&1 |
    tee -a "$OUT/gpu_digests.tsv"
fi

# --- aiscp --sums end to end (needs $BIN/aiscp and $BIN/b3sum) ------------------------------
# Two RAM-backed ext4s on loop devices (SRC on one, DEST on the other), each with the udev
# record cuFile needs in that VM (GPU-IO-FACTS.md); a 4 GiB file and a tree of 4,000 x 256 KiB;
# each copy cold (caches dropped), the whole process timed; rounds alternate the variants.
[ -x "$BIN/aiscp" ] || exit 0
AISCP=$(realpath "$BIN/aiscp")
B3SUM=$(realpath "$BIN/b3sum")
mkdir -p /run/udev/data
printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' >"/run/udev/data/b$(mountpoint -d /)"
for fs in src dst; do
  truncate -s 12G /dev/shm/$fs.img
  mkfs.ext4 -q -F /dev/shm/$fs.img
  dev=$(losetup --find --show --direct-io=on /dev/shm/$fs.img)
  mkdir -p /mnt/$fs && mount $dev /mnt/$fs
  printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n' >"/run/udev/data/b$(mountpoint -d /mnt/$fs)"
done
dd if=/dev/urandom of=/mnt/src/big bs=64M count=64 status=none
python3 - <<'PY'
import os
os.makedirs("/mnt/src/tree", exist_ok=True)
for i in range(4000):
    d = f"/mnt/src/tree/d{i // 100:02d}"
    os.makedirs(d, exist_ok=True)
    with open(f"{d}/f{i:04d}", "wb") as f:
        f.write(os.urandom(256 << 10))
PY
sync
cd /mnt
rows="$OUT/sums_e2e.tsv"
echo "# what	variant	round	seconds" >"$rows"
for round in 1 2 3; do
  for variant in plain blake3 crc64nvme; do
    for what in big tree; do
      rm -rf /mnt/dst/* && sync && echo 3 >/proc/sys/vm/drop_caches
      args=(-r)
      [ $variant = plain ] || args+=(--sums=$variant --sums-file "/tmp/$what.$variant")
      t0=$(date +%s.%N)
      "$AISCP" "${args[@]}" "src/$what" "dst/$what" || echo "FAILED $what $variant" >>"$rows"
      sync
      t1=$(date +%s.%N)
      echo "$what	$variant	$round	$(awk "BEGIN{print $t1 - $t0}")" >>"$rows"
    done
  done
done
cat "$rows"
# The manifests check out with b3sum itself, and --debug says where digests were computed.
for what in big tree; do
  "$B3SUM" --check --quiet "/tmp/$what.blake3" && echo "b3sum --check $what: OK ($(wc -l <"/tmp/$what.blake3") lines)"
done 2>&1 | tee "$OUT/b3sum_check.txt"
rm -rf /mnt/dst/*
"$AISCP" -r --debug --sums src/big dst/big 2>&1 >/dev/null | grep -E 'digests|backend|route' | tee "$OUT/debug.txt"
