#!/usr/bin/env python3
"""Where a command's threads spend their time: CPU seconds and sampled states per thread name.

    bench/thread-times.py [--pid PID] [--every MS] [--json] -- COMMAND ARGS...

Runs COMMAND (or watches a running PID, e.g. a staging service, until COMMAND ends) and
samples /proc/PID/task/*/stat every MS milliseconds (default 5). For each thread name it
prints the threads seen, their user and system CPU seconds (the last sample of each thread,
so a thread that ends between samples loses at most one interval; a watched PID's threads
count from the first sample) and how many samples found them running (R), in the disk
wait (D) or sleeping (S). Thread names are what the
threads set (aiscp-file-3, aiscp-client-1, ...); digits are folded so that a pool reads as
one row. Without perf on a machine, this is the per-stage thread time a profile needs.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def sample(pid, seen, base):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # comm is in parentheses and may hold spaces; the fields after it are fixed.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        state, utime, stime = fields[0], int(fields[11]), int(fields[12])
        # A watched process's threads count from the first sample: what they did before
        # the command is not the command's.
        start = (utime, stime) if base else (0, 0)
        entry = seen.setdefault(tid, {"name": name, "start": start, "states": {}})
        entry.update(name=name, user=utime - entry["start"][0], sys=stime - entry["start"][1])
        entry["states"][state] = entry["states"].get(state, 0) + 1
    return True


def summarize(seen):
    rows = {}
    for entry in seen.values():
        key = re.sub(r"\d+", "N", entry["name"])
        row = rows.setdefault(key, {"threads": 0, "user": 0.0, "sys": 0.0, "R": 0, "D": 0, "S": 0})
        row["threads"] += 1
        row["user"] += entry["user"] / TICK
        row["sys"] += entry["sys"] / TICK
        for state, count in entry["states"].items():
            bucket = state if state in "RD" else "S"
            row[bucket] += count
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid", type=int, help="watch this process instead of COMMAND's")
    parser.add_argument("--every", type=float, default=5.0, help="milliseconds between samples")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no COMMAND")
    started = time.monotonic()
    child = subprocess.Popen(command)
    pid = args.pid or child.pid
    seen = {}
    if args.pid:
        sample(pid, seen, True)
    while child.poll() is None:
        sample(pid, seen, bool(args.pid))
        time.sleep(args.every / 1000)
    wall = time.monotonic() - started
    rows = summarize(seen)
    if args.json:
        print(json.dumps({"wall": wall, "exit": child.returncode, "threads": rows}), file=sys.stderr)
    else:
        print(f"# wall {wall:.3f} s, exit {child.returncode}, samples every {args.every} ms", file=sys.stderr)
        print("# name\tthreads\tuser\tsys\tR\tD\tS", file=sys.stderr)
        for name, r in sorted(rows.items(), key=lambda kv: -(kv[1]["user"] + kv[1]["sys"])):
            print(f"{name}\t{r['threads']}\t{r['user']:.2f}\t{r['sys']:.2f}\t{r['R']}\t{r['D']}\t{r['S']}", file=sys.stderr)
    sys.exit(child.returncode)


if __name__ == "__main__":
    main()
