#!/usr/bin/env python3
"""Summarise bench/run.sh's per-run rows (results.tsv) for one label.

usage: stats.py RESULTS_TSV LABEL METHODS_TSV [MEDIANS_TSV]

METHODS_TSV lists the methods in table order: name<TAB>kind<TAB>command, where kind is
aiscp, ref, hostcopy (dd, cp, the threaded O_DIRECT copy), read or write (ceilings).
Prints a markdown table of medians and ratios; appends one row per method to MEDIANS_TSV.
Ratios divide medians of the same run: vs the reference loop at its default chunk (ref_2G),
vs dd O_DIRECT, and vs the best host copy (the fastest of dd, cp and hostcopy_qd8).
"""

import csv
import os
import statistics
import sys


def num(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def main():
    results, label, methods_path = sys.argv[1:4]
    medians_path = sys.argv[4] if len(sys.argv) > 4 else None
    with open(methods_path) as f:
        methods = [line.rstrip("\n").split("\t", 2) for line in f if line.strip()]
    with open(results) as f:
        rows = [r for r in csv.DictReader(f, delimiter="\t") if r["label"] == label]
    if not rows:
        print(f"no results for {label}")
        return 1

    summary = {}
    for name, kind, _ in methods:
        runs = [r for r in rows if r["method"] == name]
        ok = [r for r in runs if r["rc"] == "0"]
        gbps = [num(r["gbps"]) for r in ok]
        gpu = []
        for r in runs:
            g = r["gpu_mib"].lstrip("~")
            if g.isdigit() and int(g) > 0:
                gpu.append((int(g), r["gpu_mib"].startswith("~")))
        checks = {r["check"] for r in runs} - {"-", ""}
        summary[name] = {
            "kind": kind,
            "n": len(ok),
            "failed": len(runs) - len(ok),
            "median": statistics.median(gbps) if gbps else None,
            "min": min(gbps) if gbps else None,
            "max": max(gbps) if gbps else None,
            "cpu": statistics.median([num(r["cpu_s_per_gib"]) for r in ok]) if ok else None,
            "rss": max(num(r["maxrss_mib"]) for r in ok) if ok else None,
            "gpu": max(gpu) if gpu else None,
            "check": ",".join(sorted(checks)) if checks else "–",
        }

    def med(name):
        s = summary.get(name)
        return s["median"] if s else None

    ref = med("ref_2G")
    dd = med("dd_direct")
    hosts = [(s["median"], n) for n, s in summary.items()
             if s["kind"] == "hostcopy" and s["median"] is not None]
    best_host, best_host_name = max(hosts) if hosts else (None, None)

    def ratio(x, base):
        return None if x is None or not base else x / base

    first = rows[0]
    size_gib = int(first["bytes"]) / (1 << 30)
    rounds = max(int(r["round"]) for r in rows)
    caches = sorted({r["cache"] for r in rows})
    print(f"### {label}: {size_gib:g} GiB file, {rounds} round(s), caches: {', '.join(caches)}")
    print()
    cols = ["method", "GB/s (median)", "min–max", "runs"]
    if ref:
        cols.append("vs ref_2G")
    cols += ["vs dd", "vs best host copy", "CPU s/GiB", "peak RSS MiB", "GPU MiB", "checksum"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    out_rows = []
    for name, kind, _ in methods:
        s = summary[name]
        copying = kind in ("aiscp", "ref", "hostcopy")
        runs = f"{s['n']}" + (f" ({s['failed']} failed)" if s["failed"] else "")
        gpu = "–"
        if s["gpu"]:
            gpu = ("~" if s["gpu"][1] else "") + str(s["gpu"][0])
        spread = "–" if s["min"] is None else f"{fmt(s['min'])}–{fmt(s['max'])}"
        cells = [name, fmt(s["median"], 3), spread, runs]
        r_ref = ratio(s["median"], ref) if copying else None
        r_dd = ratio(s["median"], dd) if copying else None
        r_host = ratio(s["median"], best_host) if copying else None
        if ref:
            cells.append(fmt(r_ref))
        cells += [fmt(r_dd), fmt(r_host), fmt(s["cpu"]), fmt(s["rss"], 0), gpu, s["check"]]
        print("| " + " | ".join(cells) + " |")
        out_rows.append([label, name, kind, first["bytes"], s["n"], s["failed"],
                         fmt(s["median"], 4), fmt(s["min"], 4), fmt(s["max"], 4),
                         fmt(r_ref, 3), fmt(r_dd, 3), fmt(r_host, 3), fmt(s["cpu"], 3),
                         fmt(s["rss"], 0), gpu, s["check"]])
    print()
    ceil_r = max([(s["median"], n) for n, s in summary.items()
                  if s["kind"] == "read" and s["median"] is not None], default=None)
    ceil_w = max([(s["median"], n) for n, s in summary.items()
                  if s["kind"] == "write" and s["median"] is not None], default=None)
    notes = []
    if ceil_r:
        notes.append(f"O_DIRECT read ceiling {ceil_r[0]:.3f} GB/s ({ceil_r[1]})")
    if ceil_w:
        notes.append(f"write ceiling {ceil_w[0]:.3f} GB/s ({ceil_w[1]})")
    if best_host_name:
        notes.append(f"best host copy {best_host_name} {best_host:.3f} GB/s")
    if notes:
        print("; ".join(notes) + ".")
    print("GB/s = bytes / (whole-process wall time + syncfs of the target), 1 GB = 1e9 bytes; "
          "ratios divide medians of this run.")
    print()

    if medians_path:
        new = not os.path.exists(medians_path)
        with open(medians_path, "a") as f:
            if new:
                f.write("\t".join(["label", "method", "kind", "bytes", "runs_ok", "runs_failed",
                                   "gbps_median", "gbps_min", "gbps_max", "vs_ref_2G", "vs_dd",
                                   "vs_best_host", "cpu_s_per_gib", "peak_rss_mib", "gpu_mib",
                                   "checksum"]) + "\n")
            for r in out_rows:
                f.write("\t".join(str(x) for x in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
