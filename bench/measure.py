#!/usr/bin/env python3
"""Run one benchmark command from a cold cache and measure it as a whole process.

usage: measure.py [--drop] [--evict FILE]... --sync DIR [--timeout S] [--gpu-sample]
                  --log FILE -- CMD [ARG...]

Before the clock starts: FILEs are flushed and evicted from the page cache
(posix_fadvise DONTNEED, which needs no privilege), then, with --drop, every cache is
dropped (sync; echo 3 > /proc/sys/vm/drop_caches, root only). The timed span is the command
itself plus syncfs() of the filesystem holding DIR, so data still in the page cache
(cp's buffered writes) is paid for. CPU time and peak RSS come from wait4() on the command's
own process (not the sampler's children). With --gpu-sample, nvidia-smi is polled during the
run for the command's GPU memory (its CUDA context included).

Prints one tab-separated line: rc wall_s user_s sys_s maxrss_kib gpu_mib cache
(gpu_mib is '-' when not sampled, '~N' when only the whole GPU's use was seen; cache is drop_caches, fadvise or none).
"""

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time


def evict(paths):
    """Flush and drop FILEs' pages; returns True if any file was evicted."""
    done = False
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            done = True
        except OSError:
            pass
        finally:
            os.close(fd)
    return done


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


_libc = ctypes.CDLL(None, use_errno=True)


def syncfs(path):
    """Flush the filesystem holding `path` (all filesystems if syncfs is unavailable)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        os.sync()
        return
    try:
        if _libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


class GpuSampler(threading.Thread):
    """Polls nvidia-smi for the GPU memory of one process (MiB), keeping the peak."""

    def __init__(self, pid, interval=0.2):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = None
        self.peak_any = None  # all processes together, for when pids don't match (namespaces)
        self.stop = threading.Event()

    def run(self):
        query = ["nvidia-smi", "--query-compute-apps=pid,used_memory",
                 "--format=csv,noheader,nounits"]
        while not self.stop.is_set():
            try:
                out = subprocess.run(query, capture_output=True, text=True, timeout=5).stdout
            except (OSError, subprocess.SubprocessError):
                return
            total = mine = 0  # a process on several GPUs has one row per GPU: summed
            for line in out.splitlines():
                parts = [x.strip() for x in line.split(",")]
                if len(parts) == 2 and parts[1].isdigit():
                    total += int(parts[1])
                    if parts[0] == str(self.pid):
                        mine += int(parts[1])
            if mine:
                self.peak = max(self.peak or 0, mine)
            if total:
                self.peak_any = max(self.peak_any or 0, total)
            self.stop.wait(self.interval)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--drop", action="store_true")
    ap.add_argument("--evict", action="append", default=[])
    ap.add_argument("--sync", required=True)
    ap.add_argument("--timeout", type=float, default=0)
    ap.add_argument("--gpu-sample", action="store_true")
    ap.add_argument("--log", required=True)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command")

    evicted = evict(a.evict)
    cache = "drop_caches" if a.drop and drop_caches() else ("fadvise" if evicted else "none")

    with open(a.log, "ab") as log:
        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            log.write(f"cannot run {cmd[0]}: {e}\n".encode())
            print(f"127\t0\t0\t0\t0\t-\t{cache}")
            return
        sampler = GpuSampler(proc.pid) if a.gpu_sample else None
        if sampler:
            sampler.start()
        timer = None
        if a.timeout > 0:
            def kill():
                log.write(f"\n*** timed out after {a.timeout:.0f} s, killed\n".encode())
                log.flush()
                os.killpg(proc.pid, signal.SIGKILL)
            timer = threading.Timer(a.timeout, kill)
            timer.start()
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if timer:
            timer.cancel()
        syncfs(a.sync)
        wall = time.perf_counter() - t0
        if sampler:
            sampler.stop.set()
            sampler.join(timeout=6)
    rc = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    gpu = "-"
    if sampler:
        if sampler.peak is not None:
            gpu = str(sampler.peak)
        elif sampler.peak_any is not None:
            gpu = f"~{sampler.peak_any}"  # not matched by pid: every process on the GPU
        else:
            gpu = "0"  # never seen (a run shorter than the polling interval reads 0 too)
    print(f"{rc}\t{wall:.4f}\t{ru.ru_utime:.3f}\t{ru.ru_stime:.3f}\t{ru.ru_maxrss}\t{gpu}\t{cache}")


if __name__ == "__main__":
    sys.exit(main())
