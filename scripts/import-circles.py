#!/usr/bin/env python3
# Usage: scripts/import-circles.py [--no-back-arrows DIR]... src crates/engine/src ...
#        (exit 1 on a circle, or on a back-arrow in a file under a DIR given)
"""Import circles between the top-level modules of each crate given (its src/ folder), and
back-arrows: a module naming an item through one of its own ancestors.

An edge a -> b is any path in a's files naming b: `crate::b`, `super::b` from a top-level
module, `crate::{.., b, ..}`, or an item the crate root re-exports from b (`crate::Name`,
with `pub use b::Name` in lib.rs/main.rs). Items defined in the crate root itself make an
edge to <root>; the root's own uses of a module (outside `mod`/`pub use` lines) make edges
from <root>. Comments are ignored; test modules count. Prints the edges, then the strongly
connected components with more than one module (the circles). A top-level folder whose mod.rs
only declares modules (src/cp/, src/sys/) is a group, not a module: each module in it is one
(`cp::options`), so grouping files changes no edge.

A back-arrow is a path (`crate::..`, `super::..`, outside inline modules such as tests) whose
item is found in a module that encloses the file naming it: `crate::Config` from
crates/engine/src/pipeline/flight.rs names Config through lib.rs's re-export, `super::Copier`
from src/cp/copy/walk.rs through copy/mod.rs. Paths to modules, or through a parent into a
sibling module (`super::entry::Parent`), import from where things are defined and are not
back-arrows; nor are test modules' paths (a test module tests its parent)."""
import os, re, sys

def groups_of(src):
    """Top-level folders that only group modules: a mod.rs with nothing but `mod` lines (and
    attributes). Each module inside one is a module of the graph, named `group::module`."""
    found = set()
    for d in sorted(os.listdir(src)):
        mod_rs = os.path.join(src, d, 'mod.rs')
        if os.path.isfile(mod_rs):
            code = [l.strip() for l in strip_comments(open(mod_rs).read()).splitlines() if l.strip()]
            if code and all(re.match(r'(#\[.*\]|(pub(\([^)]*\))? )?mod \w+;)$', l) for l in code):
                found.add(d)
    return found

def node_of(path, groups):
    """The graph's module that a module path (segments from the crate root) lies in."""
    if not path: return '<root>'
    if path[0] in groups and len(path) > 1: return path[0] + '::' + path[1]
    return path[0]

def files_by_module(src, groups):
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith('.rs'):
                path = os.path.join(root, f)
                parts = os.path.relpath(path, src)[:-3].split(os.sep)
                name = '<root>' if parts in (['lib'], ['main']) else node_of(
                    [p for p in parts if p != 'mod'], groups)
                mods.setdefault(name, []).append((path, parts))
    return mods

def strip_comments(text):
    return re.sub(r'//[^\n]*', '', text)

def graph(src):
    groups = groups_of(src)
    mods = files_by_module(src, groups)
    names = set(mods) - {'<root>'} - groups
    root_text = ''.join(strip_comments(open(p).read()) for p, _ in mods.get('<root>', []))
    reexport = {}
    for m, body in re.findall(r'pub use (\w+)::(\{[^}]*\}|[\w:]+)', root_text):
        for item in re.findall(r'(\w+)\s*(?:,|\}|$)', body.strip('{}') + ','):
            reexport[item] = m
    root_items = set(re.findall(r'(?:struct|enum|fn|trait|type|const|static)\s+(\w+)', root_text))
    def target(segs):
        name = node_of(segs, groups)
        if name in names: return name
        if not segs: return None
        if segs[0] in reexport and reexport[segs[0]] in names: return reexport[segs[0]]
        if segs[0] in root_items: return '<root>'
        return None
    g = {m: set() for m in mods if m not in groups}
    for m, files in mods.items():
        if m in groups: continue
        for path, parts in files:
            here = parts[:-1] if parts[-1] in ('mod', 'lib', 'main') else parts
            text = strip_comments(open(path).read())
            found = set()
            for hit in re.finditer(r'\bcrate\s*::\s*(?=[\w{])', text):
                found |= {target(segs) for segs in use_paths(text, hit.end())}
            # `super` outside inline modules (in one, it names the file's own module).
            outer = strip_inline_mods(text)
            for hit in re.finditer(r'\b((?:super\s*::\s*)+)(?=[\w{])', outer):
                base = here[:len(here) - hit.group(1).count('super')]
                found |= {target(base + segs) for segs in use_paths(outer, hit.end())}
            if m == '<root>':
                code = '\n'.join(l for l in text.splitlines()
                                 if not re.match(r'\s*(pub(\(crate\))? )?(mod|use) ', l))
                for hit in re.finditer(r'(?<![\w:])(\w+)::(\w+)', code):
                    found.add(target(list(hit.groups())))
                for hit in re.finditer(r'^\s*use (?:self::)?(?=\w+::)', text, re.M):
                    found |= {target(segs) for segs in use_paths(text, hit.end())}
            for t in found:
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

def module_tree(src):
    """Each module's path (a tuple) -> the names of its child modules, from the file tree."""
    tree = {}
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        here = () if rel == '.' else tuple(rel.split(os.sep))
        kids = tree.setdefault(here, set())
        kids |= {f[:-3] for f in files if f.endswith('.rs') and f not in ('mod.rs', 'lib.rs', 'main.rs')}
        kids |= {d for d in dirs if os.path.exists(os.path.join(root, d, 'mod.rs'))}
    return tree

def strip_inline_mods(text):
    """The text less inline `mod name { .. }` blocks (rustfmt's layout: the block ends at a `}`
    at the opening line's indentation), where `super` means the file's own module."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(text.splitlines()):
        m = re.match(r'^(\s*)(?:pub(?:\([^)]*\))? )?mod \w+ \{', lines[i])
        if m:
            end = next((k for k in range(i + 1, len(lines)) if lines[k] == m.group(1) + '}'), len(lines))
            i = end + 1
            continue
        out.append(lines[i]); i += 1
    return '\n'.join(out)

def use_paths(text, at):
    """The full paths of the use tree starting at text[at:] (after `crate::`/`super::`)."""
    paths, prefix, i = [], [], at
    m = re.match(r'((?:\w+\s*::\s*)*)(\w+|\*|\{)', text[i:])
    if not m: return paths
    prefix = [seg.strip() for seg in m.group(1).split('::') if seg.strip()]
    last = m.group(2)
    if last != '{':
        return [prefix + [last]]
    depth, j = 1, i + m.end()
    start = j
    while depth:
        depth += {'{': 1, '}': -1}.get(text[j], 0); j += 1
    body, part, d = text[start:j - 1], '', 0
    for ch in body + ',':
        if ch == ',' and d == 0:
            if part.strip():
                paths += [prefix + p for p in use_paths(part.strip(), 0)]
            part = ''
            continue
        d += {'{': 1, '}': -1}.get(ch, 0); part += ch
    return paths

def back_arrows(src):
    tree, found = module_tree(src), []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith('.rs'): continue
            path = os.path.join(root, f)
            parts = tuple(os.path.relpath(path, src)[:-3].split(os.sep))
            here = parts[:-1] if parts[-1] in ('mod', 'lib', 'main') else parts
            # A test module (inline, or a tests.rs) tests its parent: it may name its items.
            if not here or here[-1] == 'tests': continue
            text = strip_inline_mods(strip_comments(open(path).read()))
            for m in re.finditer(r'\b(crate\s*::|(?:super\s*::\s*)+)\s*(?=[\w{*])', text):
                base = () if m.group(1).startswith('crate') else here[:len(here) - m.group(1).count('super')]
                for segs in use_paths(text, m.end()):
                    mod, item = base, None
                    for seg in segs:
                        if seg in ('self',): break
                        if seg in tree.get(mod, ()): mod = mod + (seg,)
                        else: item = seg; break
                    if item and len(mod) < len(here) and here[:len(mod)] == mod:
                        found.append((path, '::'.join(['crate', *mod, item])))
    return sorted(set(found))

args, strict = sys.argv[1:], []
while args and args[0] == '--no-back-arrows':
    strict.append(os.path.normpath(args[1])); args = args[2:]
status = 0
for src in args:
    g = graph(src)
    print(f'== {src}')
    for m in sorted(g):
        if g[m]: print(f'  {m} -> {", ".join(sorted(g[m]))}')
    c = circles(g)
    print('  circles:', c or 'none')
    status |= bool(c)
    arrows = back_arrows(src)
    held = [(p, i) for p, i in arrows if any(os.path.normpath(p).startswith(d + os.sep) for d in strict)]
    for p, item in arrows:
        print(f'  back-arrow{" (not allowed)" if (p, item) in held else ""}: {p} -> {item}')
    print('  back-arrows not allowed:', len(held) or 'none')
    status |= bool(held)
sys.exit(status)
