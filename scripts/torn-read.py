#!/usr/bin/env python3
"""Shows that the kernel's buffered reads can return zeros a file never held: one process
rewrites, cuts and grows a file with nonzero bytes (as scripts/change-tree.py does), another
preads it whole in a loop, as cp and aiscp's buffered reads do, and counts the reads that
hold a NUL byte. A read racing a truncate copies the page tail the truncate is zeroing.

    scripts/torn-read.py [DIR] [SECONDS]     (DIR: where the file lives, default .)

Prints each of the first reads with zeros (where, of how many bytes, the size just after)
and the totals.
"""
import multiprocessing
import os
import random
import sys
import tempfile
import time


def change(path, stop):
    rng = random.Random(1)
    v = 0
    while not stop.is_set():
        v = v % 254 + 1
        try:
            what = rng.randrange(3)
            if what == 0:
                with open(path, "wb") as f:
                    f.write(bytes([v]) * rng.randrange(1, 40001))
            elif what == 1:
                os.truncate(path, rng.randrange(0, os.path.getsize(path) + 1))
            else:
                room = 80000 - os.path.getsize(path)
                if room > 0:
                    with open(path, "ab") as f:
                        f.write(bytes([v]) * min(rng.randrange(1, 10000), room))
        except OSError:
            pass


def main():
    where = sys.argv[1] if len(sys.argv) > 1 else "."
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 20
    with tempfile.TemporaryDirectory(dir=where) as d:
        path = os.path.join(d, "f")
        with open(path, "wb") as f:
            f.write(b"\1")
        stop = multiprocessing.Event()
        changer = multiprocessing.Process(target=change, args=(path, stop))
        changer.start()
        fd = os.open(path, os.O_RDONLY)
        reads = torn = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            data = os.pread(fd, 1 << 17, 0)
            reads += 1
            at = data.find(0)
            if at >= 0:
                torn += 1
                if torn <= 5:
                    size = os.fstat(fd).st_size
                    print(f"NUL at {at} of {len(data)} bytes read; size just after: {size}")
        stop.set()
        changer.join()
        os.close(fd)
    print(f"{reads} reads, {torn} with a NUL byte")


if __name__ == "__main__":
    main()
