#!/bin/bash
# Runs a command with every aiscp in it going through one staging service: starts
# `aiscp --serve --debug` on BACKEND (host or fake, the fake GPU library of crates/fake-gpu)
# at the per-user socket of a fresh XDG_RUNTIME_DIR, runs the command with that
# XDG_RUNTIME_DIR (so aiscp finds the service by default, as a user's runs would; runs as
# another user, such as the parity suite's `nobody` cases, cannot reach it and copy
# in-process), then stops the service and prints how many clients it served and whether the
# fake GPU's report is clean.
#
#   scripts/through-service.sh host|fake COMMAND...
#   e.g. scripts/through-service.sh host cargo test --test it parity::host
#        scripts/through-service.sh fake cargo test --test it parity::fake_gpu
#        GNU_CP_TESTS_PASSENV=XDG_RUNTIME_DIR AISCP_BACKEND=host \
#            scripts/through-service.sh host scripts/gnu-cp-tests.sh target/debug/aiscp
#
# AISCP_BIN names the service's binary (the tree's debug build otherwise, built first).
# The service's log is left in $SERVICE_LOG (default /tmp/aiscp-service-$$.log).
set -uo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
backend=${1:?usage: through-service.sh host|fake COMMAND...}
shift
# AISCP_BIN: the service's binary (default: this tree's debug build, built first).
if [ -z "${AISCP_BIN:-}" ]; then
  cargo build --quiet --manifest-path "$HERE/Cargo.toml" -p aiscp -p fake-gpu || exit 1
fi
BIN=${AISCP_BIN:-$HERE/target/debug/aiscp}
runtime=$(mktemp -d /tmp/aiscp-xdg-XXXXXX)
chmod 700 "$runtime"
log=${SERVICE_LOG:-/tmp/aiscp-service-$$.log}
report=$runtime/fake-report
case $backend in
  host) env=(AISCP_BACKEND=host) ;;
  fake)
    lib=$runtime/libfake_gpu.so
    cp "$HERE/target/debug/libfake_gpu.so" "$lib"
    env=(AISCP_BACKEND=hipfile AISCP_HIPFILE_LIB="$lib" AISCP_HIP_LIB="$lib"
         AISCP_FAKE_GPU_REPORT="$report")
    ;;
  *) echo "backend: host or fake" >&2; exit 2 ;;
esac
env "${env[@]}" XDG_RUNTIME_DIR="$runtime" XDG_CACHE_HOME="$runtime/cache" "$BIN" --serve --debug 2>"$log" &
svc=$!
for _ in $(seq 200); do [ -S "$runtime/aiscp/service.sock" ] && break; sleep 0.05; done
[ -S "$runtime/aiscp/service.sock" ] || { echo "service did not start:" >&2; cat "$log" >&2; exit 1; }
# AISCP_TESTS_THROUGH_SERVICE: the tests' support module then accepts a fake-GPU client that
# wrote no report of its own (its copies were the service's).
XDG_RUNTIME_DIR="$runtime" AISCP_TESTS_THROUGH_SERVICE=1 "$@"
status=$?
kill -TERM "$svc"
wait "$svc"
echo "service: exit $?, $(grep -c 'connected$' "$log") clients served (log: $log)"
if [ "$backend" = fake ]; then
  if grep -qE '^(leak|misuse):' "$report"; then echo "fake GPU report NOT clean:"; cat "$report"; status=1
  else echo "fake GPU report clean"; fi
fi
rm -rf "$runtime"
exit $status
