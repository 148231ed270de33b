#!/usr/bin/env bash
# The skipped tests of a run, counted by reason: every skip (test_support::skip) appends
# `TEST<TAB>REASON` to target/skipped.tsv (or $AISCP_SKIP_LOG). Remove the log before the
# run (`scripts/skip-summary.sh --reset`), run the tests, then run this to print the count.
# `--add TESTS REASON` logs tests skipped outside the test binaries (.ci/run's mpi tests
# where Open MPI cannot be installed), so they are counted with the rest.
# Usage: scripts/skip-summary.sh [--reset] [LOG]
#        scripts/skip-summary.sh --add TESTS REASON [LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
reset=false add=()
if [ "${1:-}" = "--reset" ]; then reset=true; shift; fi
if [ "${1:-}" = "--add" ]; then
  [ $# -ge 3 ] || { echo "usage: skip-summary.sh --add TESTS REASON [LOG]" >&2; exit 2; }
  add=("$2" "$3"); shift 3
fi
log="${1:-${AISCP_SKIP_LOG:-target/skipped.tsv}}"
if $reset; then rm -f "$log"; exit 0; fi
if [ ${#add[@]} -gt 0 ]; then
  mkdir -p "$(dirname "$log")"
  printf '%s\t%s\n' "${add[0]}" "${add[1]//$'\t'/ }" >>"$log"
  echo "skipped: ${add[0]}: ${add[1]}" >&2
  exit 0
fi
if ! [ -s "$log" ]; then
  echo "skipped tests: 0"
  exit 0
fi
echo "skipped tests: $(wc -l < "$log"), by reason:"
cut -f2 "$log" | sort | uniq -c | sort -rn
echo "(each test: $log)"
