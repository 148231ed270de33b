#!/bin/sh
# The runs behind bench/results/HISTORY.md, "--verify at copy speed", as root on the dev VM, each a
# release build of this branch copied out of target/ first (so no rebuild could touch it
# mid-run) against 1363dcf (/work/old/target/release/aiscp):
#   run 1: 8aaa0cd (b03dc44's code before a rebase and a refactor that changed no behaviour)
#   run 2: 9ed4791 (read-back threads as merged, before buffers were kept)
#   run 3: d6f1522 (buffers kept from file to file)
bench/verify-cost.sh --dir /work/scratch/vc --new /work/scratch/aiscp-8aaa0cd --rounds 3
bench/verify-cost.sh --dir /work/scratch/vc --new /work/scratch/aiscp-final --rounds 3
bench/verify-cost.sh --dir /work/scratch/vc --new /work/scratch/aiscp-kept --rounds 3
