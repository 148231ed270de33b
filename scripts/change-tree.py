#!/usr/bin/env python3
"""Changes a tree of files f000, f001, ... in a loop until DIR/../stop exists: per pass over
the tree, each file is rewritten whole (truncated, then written), cut to a shorter length,
or grown by an append; lengths stay within 0..=2*LEN. Every byte it writes is nonzero and no
file is extended with a hole, so a NUL byte in a copy made meanwhile is a byte the file never
held. Used by tests/it/source_changes.rs and bench/h200-source-changes.sh.

    change-tree.py DIR FILES LEN
"""
import os
import random
import sys

d, files, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(1)
v = 0
while not os.path.exists(os.path.join(d, "..", "stop")):
    for i in range(files):
        p = os.path.join(d, "f%03d" % i)
        v = v % 254 + 1
        try:
            what = rng.randrange(3)
            if what == 0:
                with open(p, "wb") as f:
                    f.write(bytes([v]) * rng.randrange(1, n + 1))
            elif what == 1:
                size = os.path.getsize(p)
                os.truncate(p, rng.randrange(0, size + 1))
            else:
                room = 2 * n - os.path.getsize(p)
                if room > 0:
                    with open(p, "ab") as f:
                        f.write(bytes([v]) * min(rng.randrange(1, n // 4), room))
        except OSError:
            pass
