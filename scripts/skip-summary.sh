#!/usr/bin/env bash
# The skipped tests of a run, counted by reason: every skip (test_support::skip) appends
# `TEST<TAB>REASON` to target/skipped.tsv (or $AISCP_SKIP_LOG). Remove the log before the
# run (`scripts/skip-summary.sh --reset`), run the tests, then run this to print the count.
# Usage: scripts/skip-summary.sh [--reset] [LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
reset=false
if [ "${1:-}" = "--reset" ]; then reset=true; shift; fi
log="${1:-${AISCP_SKIP_LOG:-target/skipped.tsv}}"
if $reset; then rm -f "$log"; exit 0; fi
if ! [ -s "$log" ]; then
  echo "skipped tests: 0"
  exit 0
fi
echo "skipped tests: $(wc -l < "$log"), by reason:"
cut -f2 "$log" | sort | uniq -c | sort -rn
echo "(each test: $log)"
