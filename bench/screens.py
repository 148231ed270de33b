#!/usr/bin/env python3
"""What a person sees: runs a copy command in a pseudo-terminal of COLS columns and prints the
screen (through pyte, a terminal emulator) mid-copy (after MID seconds) and at the end.

    bench/screens.py COLS MID -- COMMAND...
"""
import os
import pty
import select
import struct
import subprocess
import sys
import time
import fcntl
import termios

import pyte


def screen_text(screen):
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def main():
    cols, mid = int(sys.argv[1]), float(sys.argv[2])
    cmd = sys.argv[sys.argv.index("--") + 1:]
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, cols, 0, 0))
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    screen = pyte.Screen(cols, 24)
    stream = pyte.ByteStream(screen)
    start, shown_mid = time.monotonic(), False
    while True:
        if not shown_mid and time.monotonic() - start >= mid:
            print(f"--- {cols} columns, at {mid:.1f} s ---\n{screen_text(screen)}")
            shown_mid = True
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            stream.feed(data)
        elif proc.poll() is not None:
            break
    proc.wait()
    print(f"--- {cols} columns, at the end ({time.monotonic() - start:.1f} s, exit "
          f"{proc.returncode}) ---\n{screen_text(screen)}")


if __name__ == "__main__":
    main()
