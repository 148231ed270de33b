#!/usr/bin/env python3
"""Checks aiscp's --sums manifests against implementations that share no code with aiscp.

    scripts/digest-check.py gen DIR [--files N] [--sparse-gib G]
    scripts/digest-check.py check MANIFEST ALGORITHM DIR

`gen` fills DIR with N regular files (default 10,000) whose sizes cross every boundary the
copy has: 0, 1, 1023, 1024, 1025 (BLAKE3's chunk), 2^k - 1, 2^k, 2^k + 1 up to 64 MiB + 1
(the default slice), random sizes between them, a sparse file over 4 GiB with data around
the 4 GiB mark, and names that b3sum escapes (backslash, newline, carriage return); plus a
symlink and a FIFO, which a manifest must not list. Data is random.

`check` reads MANIFEST (the lines `aiscp --sums=ALGORITHM --sums-file MANIFEST` wrote, names
relative to the current directory as -v names them), recomputes every digest from DEST with
an independent implementation (BLAKE3: the `blake3` Python package or, without it, the b3sum
binary; CRC32C and CRC64NVME: AWS's own awscrt package, S3's definitions), and fails unless
every line matches and every regular file under DIR has exactly one line. Prints one summary
line; exit status 1 on any mismatch.
"""
import argparse
import base64
import os
import random
import subprocess
import sys

SLICE = 64 << 20
READ = 8 << 20


def boundary_sizes():
    sizes = {0, 1, 1023, 1024, 1025, SLICE - 1, SLICE, SLICE + 1}
    for k in range(1, 27):
        sizes.update({(1 << k) - 1, 1 << k, (1 << k) + 1})
    return sorted(sizes)


def gen(root, files, sparse_gib):
    rng = random.Random(int.from_bytes(os.urandom(8), "little"))
    os.makedirs(root, exist_ok=True)
    sizes = boundary_sizes()
    # The rest: mostly small (where per-file costs show), some up to 2 MiB.
    while len(sizes) < files - 5:
        sizes.append(rng.choice([rng.randrange(0, 8192), rng.randrange(0, 2 << 20)]))
    for i, size in enumerate(sizes):
        d = os.path.join(root, f"d{i // 500:03d}")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, f"f{i:05d}.{size}"), "wb") as f:
            f.write(os.urandom(size))
    for name in ["back\\slash", "new\nline", "carriage\rreturn", "both\\and\nmore", "space name"]:
        with open(os.path.join(root, name), "wb") as f:
            f.write(os.urandom(rng.randrange(1, 5000)))
    if sparse_gib:
        size = sparse_gib << 30
        with open(os.path.join(root, "sparse"), "wb") as f:
            f.truncate(size)
            for at in [0, (4 << 30) - 4096 - 7, (4 << 30) + (1 << 20), size - 5000]:
                f.seek(at)
                f.write(os.urandom(12345))
    os.symlink("d000", os.path.join(root, "link"))
    os.mkfifo(os.path.join(root, "fifo"))


def unescape(name):
    out, i = [], 0
    while i < len(name):
        if name[i] == "\\" and i + 1 < len(name):
            out.append({"\\": "\\", "n": "\n", "r": "\r"}[name[i + 1]])
            i += 2
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def parse(manifest):
    """(name, digest) per line, undoing b3sum's escaping (a leading backslash)."""
    with open(manifest, encoding="utf-8", newline="\n") as f:
        for line in f.read().split("\n")[:-1]:
            escaped = line.startswith("\\")
            digest, name = line[escaped:].split("  ", 1)
            yield (unescape(name) if escaped else name), digest


def chunks(path):
    with open(path, "rb") as f:
        while block := f.read(READ):
            yield block


def blake3_of():
    try:
        from blake3 import blake3

        def of(path):
            h = blake3()
            for block in chunks(path):
                h.update(block)
            return h.hexdigest()

        return of, "the blake3 Python package"
    except ImportError:
        b3sum = os.environ.get("B3SUM", "b3sum")

        def of(path):
            out = subprocess.run([b3sum, "--no-names", "--", path], capture_output=True, check=True)
            return out.stdout.decode().split()[0]

        return of, f"{b3sum} (the blake3 Python package is missing)"


def crc_of(algorithm):
    from awscrt import checksums

    fn, width = {
        "crc32c": (checksums.crc32c, 4),
        "crc64nvme": (checksums.crc64nvme, 8),
    }[algorithm]

    def of(path):
        crc = 0
        for block in chunks(path):
            crc = fn(block, crc)
        return base64.b64encode(crc.to_bytes(width, "big")).decode()

    return of, "awscrt " + getattr(sys.modules.get("awscrt"), "__version__", "")


def check(manifest, algorithm, root):
    of, by = blake3_of() if algorithm == "blake3" else crc_of(algorithm)
    listed = {}
    for name, digest in parse(manifest):
        if name in listed:
            sys.exit(f"digest-check: {name!r} is listed twice")
        listed[name] = digest
    regular = set()
    for d, dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p) and not os.path.islink(p):
                regular.add(p)
    bad = [n for n in listed if n not in regular]
    missing = sorted(regular - set(listed))
    wrong = [n for n, digest in listed.items() if n in regular and of(n) != digest]
    total = sum(os.stat(n).st_size for n in regular)
    print(
        f"{algorithm}: {len(listed)} lines, {len(regular)} regular files ({total / 2**30:.2f} GiB), "
        f"{len(wrong)} wrong, {len(missing)} missing, {len(bad)} not regular files under {root} "
        f"(checked with {by})"
    )
    for n in (wrong + missing + bad)[:10]:
        print(f"  {n!r}")
    return not (wrong or missing or bad)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--files", type=int, default=10000)
    g.add_argument("--sparse-gib", type=int, default=5)
    c = sub.add_parser("check")
    c.add_argument("manifest")
    c.add_argument("algorithm", choices=["blake3", "crc32c", "crc64nvme"])
    c.add_argument("dir")
    a = p.parse_args()
    if a.cmd == "gen":
        gen(a.dir, a.files, a.sparse_gib)
    else:
        sys.exit(0 if check(a.manifest, a.algorithm, a.dir) else 1)


if __name__ == "__main__":
    main()
