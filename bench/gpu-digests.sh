#!/usr/bin/env bash
# Digests on the GPU, on the GPU machine (device tool): the kernels of
# crates/engine/src/digest/kernels.cu compiled by NVRTC at run time, checked against the
# CPU over thousands of random slices, their rate on data already in device memory, and
# compile + load time (crates/engine/examples/gpu_digests.rs prints the rows).
#
# Build here:  cargo build --release -p aiscp-engine --example gpu_digests
#              mkdir -p .bench/kernels-helper && cp target/release/examples/gpu_digests \
#                bench/gpu-digests.sh .bench/kernels-helper/
# Run there:   sh .bench/kernels-helper/gpu-digests.sh   (carry .bench/kernels-helper; rows go to $OUT)
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
