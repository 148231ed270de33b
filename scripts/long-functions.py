#!/usr/bin/env python3
"""Lists product functions longer than a limit (default 80 lines), longest first.

Product code is src/ and crates/*/src/, less `#[cfg(test)]` modules. It relies on rustfmt's
layout: a function ends at the first `}` at its own indentation.
Usage: scripts/long-functions.py [LIMIT]
"""
import pathlib
import re
import sys

LIMIT = int(sys.argv[1]) if len(sys.argv) > 1 else 80
FN = re.compile(r"^(\s*)(?:pub(?:\([^)]*\))? )?(?:const )?(?:async )?(?:unsafe )?(?:extern \"C\" )?fn (\w+)")
root = pathlib.Path(__file__).resolve().parent.parent
files = sorted(root.glob("src/**/*.rs")) + sorted(root.glob("crates/*/src/**/*.rs"))
found = []
for path in files:
    lines = path.read_text().splitlines()
    skip_to = -1
    for i, line in enumerate(lines):
        if i < skip_to:
            continue
        if line.strip() == "#[cfg(test)]":
            # skip the test module that follows
            j = i + 1
            if j < len(lines) and re.match(r"^(\s*)(pub )?mod \w+ \{", lines[j]):
                indent = re.match(r"^(\s*)", lines[j]).group(1)
                for k in range(j + 1, len(lines)):
                    if lines[k] == indent + "}":
                        skip_to = k + 1
                        break
            continue
        m = FN.match(line)
        if not m:
            continue
        indent, name = m.group(1), m.group(2)
        # a declaration without a body (a trait's) ends its signature with `;`
        sig_end = next(k for k in range(i, len(lines)) if "{" in lines[k] or lines[k].endswith(";"))
        if "{" not in lines[sig_end]:
            continue
        for k in range(i + 1, len(lines)):
            if lines[k] == indent + "}" or (lines[k].startswith(indent + "}") and k == i):
                length = k - i + 1
                if length > LIMIT:
                    found.append((length, f"{path.relative_to(root)}:{i + 1}", name))
                break
for length, where, name in sorted(found, reverse=True):
    print(f"{length:4} {where} {name}")
