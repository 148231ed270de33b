#!/usr/bin/env python3
# Interleaved A/B with paired ratios: ab-paired.py ROUNDS SRC name=cmd ... (last = base; cmd gets SRC DST appended).
# Per round each build's wall and CPU (user+sys, wait4) are divided by the base's of the same round;
# prints medians and the median paired ratio with a bootstrap 90% interval. RAW (env), when set:
# a TSV of every run (round, name, wall s, cpu s, user s).
import os, sys, time, shutil, statistics, subprocess, shlex, collections, random
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
if os.environ.get("RAW"):
    with open(os.environ["RAW"], "w") as f:
        f.write("round\tname\twall_s\tcpu_s\tuser_s\n")
        for name, _ in specs:
            for r in range(rounds):
                f.write(f"{r}\t{name}\t{wall[name][r]:.4f}\t{cpu[name][r]:.4f}\t{usr[name][r]:.4f}\n")
base = specs[-1][0]
rng = random.Random(1)
def ci(xs):
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(2000))
    return meds[100], meds[1899]
for name, _ in specs:
    rw = [a / b for a, b in zip(wall[name], wall[base])]
    rc = [a / b for a, b in zip(cpu[name], cpu[base])]
    lw, hw = ci(rw); lc, hc = ci(rc)
    print(f"{name:8s} wall {statistics.median(wall[name]):.3f} cpu {statistics.median(cpu[name]):.3f} user {statistics.median(usr[name]):.3f} | paired wall/{base} {statistics.median(rw):.3f} [{lw:.3f}-{hw:.3f}] cpu/{base} {statistics.median(rc):.3f} [{lc:.3f}-{hc:.3f}]")
