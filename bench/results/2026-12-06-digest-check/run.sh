set -u
cd /dev/shm/dc10
export PYTHONPATH=/var/tmp/py B3SUM=/var/tmp/tools/bin/b3sum AISCP_SERVICE=off XDG_CACHE_HOME=/dev/shm/dc10/cache
B=/work/main/target/release/aiscp L=/work/main/target/release/libfake_gpu.so
python3 /work/main/scripts/digest-check.py gen src/check --files 10000 --sparse-gib 5
for backend in host fake; do
  for a in blake3 crc64nvme crc32c; do
    rm -rf dst; mkdir dst
    if [ $backend = fake ]; then env=(AISCP_BACKEND=hipfile AISCP_HIPFILE_LIB=$L AISCP_HIP_LIB=$L AISCP_HIPRTC_LIB=$L AISCP_FAKE_GPU_REPORT=/dev/shm/dc10/rep); else env=(AISCP_BACKEND=host); fi
    env "${env[@]}" $B -r --debug --sums=$a --sums-file /dev/shm/dc10/m.$a src/check dst/check 2>err.$backend.$a
    echo "$backend $a: aiscp exit $?; $(grep -h 'digests computed' err.$backend.$a | sed 's/.*digests computed/digests computed/')"
    python3 /work/main/scripts/digest-check.py check /dev/shm/dc10/m.$a $a dst/check
  done
  $B3SUM --check --quiet /dev/shm/dc10/m.blake3 >/dev/null 2>&1 && echo "$backend: b3sum --check OK ($(wc -l < /dev/shm/dc10/m.blake3) lines)" || echo "$backend: b3sum --check FAILED"
done
