#!/usr/bin/env python3
"""The GPU route's fixed costs in a tree run, and the ceiling they set.

usage: fixed_costs.py row LABEL ROUND METHOD RC < LOG-PART   (one fixed.tsv row, or none)
       fixed_costs.py ceiling RESULTS.TSV FIXED.TSV LABEL  (prints the ceiling line)

`row` reads what one run wrote (aiscp's --stats=json line among it) and prints LABEL,
ROUND, METHOD, the backend, startup_s and shutdown_s; nothing when the run failed (RC not 0)
or printed no engine times (a copy that moved no data, or not an aiscp).

`ceiling`: a GPU run can at best take the host engine's time for the same bytes plus the
GPU's start-up and shutdown, so the ceiling is the median wall time of aiscp_host plus the
median of aiscp's own start-up + shutdown (rounds staged through a GPU; none when aiscp fell
back to host memory), both from this run; it is set against cp and xcp beside what aiscp
reached.
"""

import csv
import json
import statistics as st
import sys


def row(label, rnd, method, rc):
    if rc != "0":
        return
    for line in sys.stdin:
        if not line.startswith('{"files"'):
            continue
        d = json.loads(line)
        if d.get("startup_seconds") is not None:
            up, down = d["startup_seconds"], d["shutdown_seconds"]
            print(f"{label}\t{rnd}\t{method}\t{d['backend']}\t{up:.4f}\t{down:.4f}")


def table(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def ceiling(results, fixed, label):
    wall = {}
    for r in table(results):
        if r["label"] == label and r["rc"] == "0":
            wall.setdefault(r["method"], []).append(float(r["wall_s"]))
    fixed_s = [
        float(r["startup_s"]) + float(r["shutdown_s"])
        for r in table(fixed)
        if r["label"] == label and r["method"] == "aiscp" and r.get("backend") != "host memory"
    ]
    if not fixed_s or "aiscp_host" not in wall or "aiscp" not in wall:
        return
    host = st.median(wall["aiscp_host"])
    up = st.median(fixed_s)
    best = host + up
    got = st.median(wall["aiscp"])
    line = (
        f"GPU route's ceiling in this run: host engine {host:.3f} s + aiscp's start-up and "
        f"shutdown {up:.3f} s (median of {len(fixed_s)}) = {best:.3f} s; aiscp took {got:.3f} s"
    )
    for other in ("cp", "xcp"):
        if other in wall:
            o = st.median(wall[other])
            line += f"; vs {other}: reached {o / got:.2f}x, ceiling {o / best:.2f}x"
    print(line + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "row":
        row(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "ceiling":
        ceiling(*sys.argv[2:])
    else:
        sys.exit(__doc__)
