#!/usr/bin/env bash
# cargo-mutants over the safety-critical code, each layer with the tests that guard it:
#   engine: the per-file copy (slices, workers, transfer loops, slots, files in flight,
#           bounce route, O_DIRECT I/O), tested by the engine crate's own suite and the
#           end-to-end suites that drive it (faults, routes, big slices, engine paths,
#           in-flight, verify, signals);
#   cp:     the cp layer (src/cp/copy/*.rs, attributes, GNU's same-file rules), tested by the
#           binary's unit tests and the parity, guarantees, atomic, trees and full-disk suites.
# A mutant that survives is a change to that code no test notices: kill it with a test or
# say why it is harmless. Needs `cargo install --locked cargo-mutants`; results in
# mutants.out/ (outcomes.json, missed.txt, caught.txt).
#
# Usage: scripts/mutants.sh engine|cp [cargo-mutants options...]
#   e.g. scripts/mutants.sh cp --file src/cp/same_file.rs --timeout 120
#        scripts/mutants.sh engine --shard 1/4 --sharding round-robin
#          (a quarter of the mutants spread over every file; plain --shard takes a
#          contiguous run, e.g. 0/20 of the cp layer is the first 33, all in src/cp/attrs.rs)
set -euo pipefail
cd "$(dirname "$0")/.."
layer="${1:?usage: scripts/mutants.sh engine|cp [cargo-mutants options...]}"
shift
files=()
test_args=()
case "$layer" in
  engine)
    for f in pipeline worker transfer slots queue flight bounce fileio chunk_plan streams verify; do
      files+=(--file "crates/engine/src/$f.rs")
    done
    # Both packages' tests for every mutant: the engine's unit tests and its own suite
    # (modules host, fake_gpu, plan, queue), and the end-to-end modules that reach it. One
    # filter list serves both suites (libtest matches substrings).
    test_args=(--test-package aiscp-engine --test-package aiscp --
      --lib --test it -- ::tests:: host:: plan:: queue:: fake_gpu:: big_slices::
      engine_paths:: engine_route:: faults:: in_flight:: verify:: signals:: multi_gpu::
      trees::)
    ;;
  cp)
    for f in src/cp/copy/*.rs src/cp/attrs.rs src/cp/same_file.rs; do
      files+=(--file "$f")
    done
    # Parity on the host backend only (the cp layer is the same on both), and the suites
    # that check what cp promises beyond GNU's output.
    test_args=(-- --bin aiscp --test it -- parity::host:: parity::xattrs parity::acls
      parity::same_file parity::one_file_system guarantees:: atomic:: trees:: full_disk::
      in_flight::)
    ;;
  *)
    echo "unknown layer $layer (engine or cp)" >&2
    exit 2
    ;;
esac
# The built target/ is copied, so each mutant rebuilds only what it touches; the suites
# need root (mount, setpriv) as in CI, but skip loudly elsewhere.
exec cargo mutants --copy-target=true --baseline=skip "${files[@]}" "$@" "${test_args[@]}"
