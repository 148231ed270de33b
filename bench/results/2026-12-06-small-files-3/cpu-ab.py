#!/usr/bin/env python3
# Interleaved A/B: ab40.py ROUNDS SRC name=cmd ...  (cmd gets SRC DST appended). Wall and CPU (user+sys) medians.
import os, sys, time, shutil, statistics, subprocess, shlex, collections
rounds, src = int(sys.argv[1]), sys.argv[2]
specs = [a.split("=", 1) for a in sys.argv[3:]]
dst = os.path.join(os.path.dirname(src.rstrip("/")), "abdst")
wall, cpu, usr = collections.defaultdict(list), collections.defaultdict(list), collections.defaultdict(list)
for r in range(rounds):
    order = specs[r % len(specs):] + specs[:r % len(specs)]
    for name, cmd in order:
        shutil.rmtree(dst, ignore_errors=True)
        os.sync()
        t = time.perf_counter()
        p = subprocess.Popen(shlex.split(cmd) + [src, dst])
        _, status, ru = os.wait4(p.pid, 0)
        w = time.perf_counter() - t
        if status != 0: print(name, "FAILED", status)
        wall[name].append(w); cpu[name].append(ru.ru_utime + ru.ru_stime); usr[name].append(ru.ru_utime)
shutil.rmtree(dst, ignore_errors=True)
base = specs[-1][0]
for name, _ in specs:
    mw, mc = statistics.median(wall[name]), statistics.median(cpu[name])
    print(f"{name:8s} wall {mw:.3f} ({min(wall[name]):.3f}-{max(wall[name]):.3f})  cpu {mc:.3f} ({min(cpu[name]):.3f}-{max(cpu[name]):.3f})  wall/{base} {mw/statistics.median(wall[base]):.3f} cpu/{base} {mc/statistics.median(cpu[base]):.3f}  user {statistics.median(usr[name]):.3f}")
