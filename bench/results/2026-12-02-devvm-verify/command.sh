#!/bin/sh
# The run behind BENCHMARKS.md, "--verify at copy speed": this branch's release build at
# 8aaa0cd (b03dc44 before the branch was rebased onto main and its read-back threads made
# generic, no change in behaviour; copied to /work/scratch/aiscp-8aaa0cd so that no rebuild
# could touch it mid-run) against 1363dcf
# (/work/old/target/release/aiscp), as root on the dev VM.
bench/verify-cost.sh --dir /work/scratch/vc --new /work/scratch/aiscp-8aaa0cd --rounds 3
