#!/usr/bin/env python3
# Usage: scripts/import-circles.py src crates/engine/src crates/hipfile-rs/src (exit 1 on a circle)
"""Import circles between the top-level modules of each crate given (its src/ folder).

An edge a -> b is any path in a's files naming b: `crate::b`, `super::b` from a top-level
module, `crate::{.., b, ..}`, or an item the crate root re-exports from b (`crate::Name`,
with `pub use b::Name` in lib.rs/main.rs). Items defined in the crate root itself make an
edge to <root>; the root's own uses of a module (outside `mod`/`pub use` lines) make edges
from <root>. Comments are ignored; test modules count. Prints the edges, then the strongly
connected components with more than one module (the circles)."""
import os, re, sys

def files_by_module(src):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith('.rs'):
                path = os.path.join(root, f)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                name = '<root>' if parts in (['lib'], ['main']) else parts[0]
                mods.setdefault(name, []).append((path, parts))
    return mods

def strip_comments(text):
    return re.sub(r'//[^\n]*', '', text)

def graph(src):
    mods = files_by_module(src)
    names = set(mods) - {'<root>'}
    root_text = ''.join(strip_comments(open(p).read()) for p, _ in mods.get('<root>', []))
    reexport = {}
    for m, body in re.findall(r'pub use (\w+)::(\{[^}]*\}|[\w:]+)', root_text):
        for item in re.findall(r'(\w+)\s*(?:,|\}|$)', body.strip('{}') + ','):
            reexport[item] = m
    root_items = set(re.findall(r'(?:struct|enum|fn|trait|type|const|static)\s+(\w+)', root_text))
    def target(name):
        if name in names: return name
        if name in reexport and reexport[name] in names: return reexport[name]
        if name in root_items: return '<root>'
        return None
    g = {m: set() for m in mods}
    for m, files in mods.items():
        for path, parts in files:
            text = strip_comments(open(path).read())
            found = set(re.findall(r'\bcrate::(\w+)', text))
            for group in re.findall(r'\bcrate::\{([^}]*)\}', text):
                found |= set(re.findall(r'(?:^|,)\s*(\w+)', group))
            if len(parts) == 1 and m != '<root>':
                found |= set(re.findall(r'\bsuper::(\w+)', text))
            if m == '<root>':
                code = '\n'.join(l for l in text.splitlines()
                                 if not re.match(r'\s*(pub(\(crate\))? )?(mod|use) ', l))
                found |= {n for n in names if re.search(r'\b' + n + r'::', code)}
                found |= {n for n in names if re.search(r'^\s*use (self::)?' + n + r'::', text, re.M)}
            for name in found:
                t = target(name)
                if t and t != m:
                    g[m].add(t)
    return g

def circles(g):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in sorted(g[v]):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in sorted(g):
        if v not in index: visit(v)
    return out

status = 0
for src in sys.argv[1:]:
    g = graph(src)
    print(f'== {src}')
    for m in sorted(g):
        if g[m]: print(f'  {m} -> {", ".join(sorted(g[m]))}')
    c = circles(g)
    print('  circles:', c or 'none')
    status |= bool(c)
sys.exit(status)
