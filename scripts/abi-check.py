#!/usr/bin/env python3
"""Holds hipfile-rs's ABI, and the fake GPU library, to the vendors' own artefacts.

hipFile: AMD's wrappers (PyPI rocm-bindings-systems) were generated from the real hipfile.h and
compiled against it, so their c_sizeof() and the bytes their field setters touch are the C
compiler's layout; their enums are the header's values; their declarations (cyhipfile.pxd) are
the header's signatures. The wrappers dlopen libhipfile.so and libamdhip64.so from
$ROCM_PATH/lib, so pointing that at the fake drives the fake through AMD's own calling code.

cuFile: NVIDIA's cufile.h and libcufile.so.0 (PyPI nvidia-cufile). gcc compiles a probe
against the header (with a two-line stand-in for cuda.h, which declares only types cufile.h
names) for sizes, offsets, enum values and parameter sizes; `nm -D` and dlopen for the symbols.

Input: the JSON that `cargo run -p hipfile-rs --example abi_dump` prints. Exit status 1 when
anything differs, each difference on its own line.
"""

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import tempfile

FAILURES = []
PASSED = []
VERBOSE = False


def check(ok, what):
    if VERBOSE or not ok:
        print(("ok:   " if ok else "FAIL: ") + what)
    (PASSED if ok else FAILURES).append(what)


def fields_text(fields):
    return ", ".join(f"{p}@{o}+{s}" for p, o, s in fields)


def compare_fields(label, ours, theirs):
    """Both sides are flattened scalars in declaration order: compare offset and size."""
    same = len(ours) == len(theirs) and all(
        a[1:] == b[1:] for a, b in zip(ours, theirs)
    )
    check(
        same,
        f"{label} fields (ours: {fields_text(ours)}; theirs: {fields_text(theirs)})",
    )


def norm(name):
    """Enumerator names compared without case, underscores or the vendor prefix."""
    for prefix in ("hipFile", "CU_FILE_", "CUFILE_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return name.replace("_", "").lower()


def compare_enum(label, ours, theirs):
    """`ours`: [[name, value]]; `theirs`: {vendor name: value}. Every one of ours must exist
    with the same value; vendor enumerators we do not name are fine."""
    theirs_norm = {norm(n): (n, v) for n, v in theirs.items()}
    for name, value in ours:
        found = theirs_norm.get(norm(name))
        if found is None:
            check(False, f"{label}: {name} = {value} has no enumerator in the vendor's header")
        else:
            check(found[1] == value, f"{label}: {name} = {value} (vendor {found[0]} = {found[1]})")


# ---------------------------------------------------------------------------------------------
# hipFile, through AMD's wrappers
# ---------------------------------------------------------------------------------------------

HIP_STRUCTS = {
    "FileError": "hipFileError",
    "FileDescr": "hipFileDescr",
    "DriverProps": "hipFileDriverProps",
    "IoParams": "hipFileIOParams",
    "IoEvents": "hipFileIOEvents",
}


def is_struct(value):
    return hasattr(value, "c_sizeof") and hasattr(type(value), "PROPERTIES")


def set_scalar(obj, name, module):
    """Stores a small nonzero value in a scalar field: a plain 1 where the setter takes it,
    else the first nonzero member of whichever of the module's enums the setter accepts."""
    try:
        setattr(obj, name, 1)
        return
    except (TypeError, ValueError):
        pass
    for enum_type in [
        v for v in vars(module).values() if isinstance(v, type) and issubclass(v, int)
    ]:
        members = [m for m in getattr(enum_type, "__members__", {}).values() if int(m)]
        if not members:
            continue
        try:
            setattr(obj, name, members[0])
            return
        except (TypeError, ValueError):
            continue
    raise RuntimeError(f"cannot set field {name} of {type(obj).__name__}")


def probe_struct(top, obj, prefix, module):
    """Flattened [path, offset, size] of `obj`'s scalars, offsets from `top`'s start: each
    scalar's extent is the bytes its setter changes in a buffer filled with 0xff."""
    size = top.c_sizeof()
    members = []
    for name in type(obj).PROPERTIES():
        value = embedded_struct(top, obj, name)
        if value is not None:
            sub = probe_struct(top, value, f"{prefix}{name}.", module)
            members.append((int(value) - int(top), value.c_sizeof(), sub))
            continue
        ctypes.memset(int(top), 0xFF, size)
        set_scalar(obj, name, module)
        after = ctypes.string_at(int(top), size)
        changed = [i for i, b in enumerate(after) if b != 0xFF]
        if not changed:
            raise RuntimeError(f"setting {prefix}{name} changed no byte")
        start, end = changed[0], changed[-1] + 1
        members.append((start, end - start, [[prefix + name, start, end - start]]))
    # A union: every member starts at the same place; keep the largest (first on a tie).
    if len(members) > 1 and len({m[0] for m in members}) == 1:
        return max(members, key=lambda m: m[1])[2]
    return [leaf for m in members for leaf in m[2]]


def embedded_struct(top, obj, name):
    """The wrapper of a struct or union field stored inside `top`, else None (a scalar, or a
    pointer to a struct, which the wrappers also hand back as a struct object). Read from a
    zeroed buffer, so that a pointer field is null; reading an enum field can fail there (0 is
    not every enum's member), and such a field is a scalar."""
    ctypes.memset(int(top), 0, top.c_sizeof())
    try:
        value = getattr(obj, name)
    except (TypeError, ValueError):
        return None
    if is_struct(value) and int(top) <= int(value) < int(top) + top.c_sizeof():
        return value
    return None


def parse_pxd_functions(pxd_text):
    """`cdef RET NAME(PARAMS) noexcept nogil` lines of the wrapper's declarations."""
    out = {}
    for m in re.finditer(
        r"^cdef\s+([\w\s\*]+?)\s*\b(hipFile\w+)\s*\(([^)]*)\)\s*noexcept", pxd_text, re.M
    ):
        params = [p.strip() for p in m.group(3).split(",") if p.strip()]
        out[m.group(2)] = (m.group(1).strip(), params)
    return out


def hip_type_size(text, error_size):
    """Size of a type as the wrapper's declarations spell it (x86_64 Linux)."""
    text = re.sub(r"\bconst\b", "", text).strip()
    if "*" in text:
        return 8
    words = text.split()
    # A trailing parameter name is dropped ("size_t length" -> "size_t").
    base = " ".join(words[:-1]) if len(words) > 1 and words[0] != "unsigned" else text
    if len(words) == 3 and words[0] == "unsigned":
        base = " ".join(words[:2])
    sizes = {
        "void": 0,
        "_Bool": 1,
        "int": 4,
        "unsigned int": 4,
        "unsigned": 4,
        "hipFileOpError": 4,
        "int64_t": 8,
        "size_t": 8,
        "ssize_t": 8,
        "hipStream_t": 8,
        "hipFileError": error_size,
    }
    if base not in sizes:
        raise RuntimeError(f"no size known for the type {text!r}")
    return sizes[base]


def enum_doc_texts(enum_type):
    """Each enumerator's description in the wrapper's docstring (from hipfile.h's comments)."""
    texts = {}
    lines = (enum_type.__doc__ or "").splitlines()
    for i, line in enumerate(lines[:-1]):
        m = re.fullmatch(r"\s*(hipFile\w+):\s*", line)
        if m:
            texts[m.group(1)] = lines[i + 1].strip()
    return texts


def check_hipfile(dump, site, fake, work):
    rocm = os.path.join(work, "rocm")
    os.makedirs(os.path.join(rocm, "lib"), exist_ok=True)
    for name in ("libhipfile.so", "libamdhip64.so"):
        link = os.path.join(rocm, "lib", name)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.abspath(fake), link)
    # Read when the wrappers first load a library, which is after this.
    os.environ["ROCM_PATH"] = rocm
    sys.path.insert(0, site)
    from rocm.bindings import hipfile as h

    print(f"hipFile wrappers: rocm-bindings-systems for hipfile.h {h.HIPFILE_VERSION_MAJOR}."
          f"{h.HIPFILE_VERSION_MINOR}.{h.HIPFILE_VERSION_PATCH}")

    for ours, theirs in HIP_STRUCTS.items():
        spec = dump["structs"][ours]
        obj = getattr(h, theirs)()
        check(spec["size"] == obj.c_sizeof(),
              f"hipFile {theirs}: size {spec['size']} (c_sizeof {obj.c_sizeof()})")
        compare_fields(f"hipFile {theirs}", spec["fields"], probe_struct(obj, obj, "", h))

    enums = dump["enums"]
    def members(enum_type):
        return {n: int(v) for n, v in enum_type.__members__.items()}
    compare_enum("hipFile op error", enums["op_errors"]["hipfile"], members(h.hipFileOpError))
    ours_codes = {v for _, v in enums["op_errors"]["hipfile"]}
    missing = sorted(set(members(h.hipFileOpError).values()) - ours_codes)
    check(not missing, f"hipFile op errors we do not name: {missing}")
    compare_enum("hipFile handle type", enums["handle_types"], members(h.hipFileFileHandleType))
    compare_enum("hipFile opcode", enums["opcodes"], members(h.hipFileOpcode))
    compare_enum("hipFile batch mode", enums["batch_modes"], members(h.hipFileBatchMode))
    compare_enum("hipFile status", enums["statuses"], members(h.hipFileStatus))
    check(enums["base_err"] == h.HIPFILE_BASE_ERR,
          f"HIPFILE_BASE_ERR {enums['base_err']} (vendor {h.HIPFILE_BASE_ERR})")

    pxd = open(os.path.join(site, "rocm", "bindings", "cyhipfile.pxd")).read()
    declared = parse_pxd_functions(pxd)
    error_size = h.hipFileError().c_sizeof()
    table = dump["tables"]["hipfile"]
    wrappers = (h.HIPFILE_VERSION_MAJOR, h.HIPFILE_VERSION_MINOR, h.HIPFILE_VERSION_PATCH)
    for fn in table["functions"]:
        since = tuple(fn.get("since", {}).get("hipfile", (0, 0, 0)))
        if since > wrappers and not fn["symbols"]:
            continue  # a call this vendor does not have (cuFile's stats level, start)
        if since > wrappers:
            # Newer than the wrappers' hipfile.h: nothing genuine to hold it to here (the
            # fake's exports are checked below; the layouts against cufile.h).
            print(f"not checkable: hipFile {', '.join(fn['symbols'])} ({fn['field']}) is "
                  f"hipFile {'.'.join(map(str, since))}; the wrappers are "
                  f"{'.'.join(map(str, wrappers))}")
            continue
        for symbol in fn["symbols"]:
            decl = declared.get(symbol)
            if decl is None:
                check(False, f"hipFile symbol {symbol} ({fn['field']}) is not in hipfile.h")
                continue
            check(callable(getattr(h, symbol, None)), f"hipFile {symbol} has a wrapper")
            ret, params = decl
            theirs = {
                "params": [hip_type_size(p, error_size) for p in params if p != "void"],
                "ret": hip_type_size(ret, error_size),
            }
            check(fn["shape"] == theirs,
                  f"hipFile {symbol} signature: ours {fn['shape']}, hipfile.h {theirs} "
                  f"({ret} {symbol}({', '.join(params)}))")

    fake_lib = ctypes.CDLL(os.path.abspath(fake))
    for symbol in table["all_symbols"]:
        check(hasattr(fake_lib, symbol), f"the fake exports hipFile's {symbol}")

    drive_fake(h, work)


def drive_fake(h, work):
    """The calls AMD's high-level wrappers make, against the fake: open, version, use count,
    register a file and a buffer, read and write at offsets, error texts, close."""
    from rocm.bindings import hip
    from rocm.hipfile import Buffer, Driver, FileHandle, HipFileException, get_version

    size = 1 << 20
    data = os.urandom(size)
    src = os.path.join(work, "src.bin")
    with open(src, "wb") as f:
        f.write(data)

    driver = Driver()
    driver.open()
    check(Driver.use_count() >= 1, f"fake via wrappers: use count {Driver.use_count()} after open")
    version = get_version()
    check(len(version) == 3 and all(isinstance(v, int) for v in version),
          f"fake via wrappers: version {version}")

    err, ptr = hip.hipMalloc(size)
    check(int(err) == 0, f"fake via wrappers: hipMalloc {err}")
    buf = Buffer(int(ptr), size, 0)
    buf.register()
    flags = os.O_RDWR | getattr(os, "O_DIRECT", 0)
    src_fh = FileHandle(src, flags)
    src_fh.open()
    outputs = []
    try:
        n = src_fh.read(buf, size, 0, 0)
        check(n == size, f"fake via wrappers: read {n} of {size} bytes")
        whole = os.path.join(work, "whole.bin")
        dst = FileHandle(whole, flags | os.O_CREAT)
        dst.open()
        n = dst.write(buf, size, 0, 0)
        dst.close()
        check(n == size, f"fake via wrappers: wrote {n} of {size} bytes")
        outputs.append(("whole file", whole, data))

        # File offset and buffer offset are separate arguments: swapped, these bytes differ.
        part = 64 << 10
        n = src_fh.read(buf, part, 4096, 8192)
        check(n == part, f"fake via wrappers: read {n} of {part} at file 4096 into buffer 8192")
        piece = os.path.join(work, "piece.bin")
        dst = FileHandle(piece, flags | os.O_CREAT)
        dst.open()
        n = dst.write(buf, part, 0, 8192)
        dst.close()
        check(n == part, f"fake via wrappers: wrote {n} of {part} from buffer 8192")
        outputs.append(("offsets", piece, data[4096:4096 + part]))

        # A second registration of the same buffer is an error the wrappers raise.
        try:
            Buffer(int(ptr), size, 0).register()
            check(False, "fake via wrappers: registering a buffer twice must fail")
        except HipFileException as e:
            # The exception's own str() trips over the wrappers' two OpError enums: the code.
            code = int(e.hipfile_err)
            check(code == int(h.hipFileOpError.hipFileMemoryAlreadyRegistered),
                  f"fake via wrappers: second buffer registration fails with {code}")
    finally:
        src_fh.close()
        buf.deregister()
        hip.hipFree(ptr)
        driver.close()
    for what, path, expected in outputs:
        with open(path, "rb") as f:
            check(f.read() == expected, f"fake via wrappers: {what} copied byte for byte")
    check(Driver.use_count() == 0, f"fake via wrappers: use count {Driver.use_count()} after close")

    texts = enum_doc_texts(h.hipFileOpError)
    for member in h.hipFileOpError:
        (text,) = h.hipFileGetOpErrorString(member)
        text = text.decode() if isinstance(text, (bytes, bytearray)) else str(text)
        check(text == texts.get(member.name),
              f"fake's text for {member.name} ({int(member)}): {text!r} "
              f"(hipfile.h: {texts.get(member.name)!r})")


# ---------------------------------------------------------------------------------------------
# cuFile, against cufile.h and libcufile.so.0
# ---------------------------------------------------------------------------------------------

CU_STRUCTS = {
    "FileError": "CUfileError_t",
    "FileDescr": "CUfileDescr_t",
    "DriverProps": "CUfileDrvProps_t",
    "IoParams": "CUfileIOParams_t",
    "IoEvents": "CUfileIOEvents_t",
    # Statistics (cufile.h 1.19): Level 1 with the vector I/O counters, whose original part
    # is hipFile 0.5's and cuFile 1.15's Level 1.
    "OpCounter": "CUfileOpCounter_t",
    "StatsLevel1Vectored": "CUfileStatsLevel1_t",
    "StatsLevel2Vectored": "CUfileStatsLevel2_t",
    "PerGpuStats": "CUfilePerGpuStats_t",
    "StatsLevel3Vectored": "CUfileStatsLevel3_t",
}

# cufile.h names these types from cuda.h and needs nothing else of it.
CUDA_STAND_IN = "typedef int CUresult;\ntypedef struct CUstream_st *CUstream;\n"


def strip_comments(text):
    """The header without comments and preprocessor lines (with their continuations)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)


def struct_body(text, typedef):
    for m in re.finditer(r"typedef\s+struct\s+\w*\s*\{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        tail = re.match(r"\s*(\w+)\s*;", text[i:])
        if tail and tail.group(1) == typedef:
            return text[m.end():i - 1]
    raise RuntimeError(f"cufile.h has no struct {typedef}")


def parse_members(body, prefix=""):
    """[(kind, path, children)] of a struct or union body: kind is 'struct', 'union' or
    'leaf'."""
    out, i = [], 0
    while True:
        while i < len(body) and body[i] in " \t\n;":
            i += 1
        if i >= len(body):
            return out
        m = re.match(r"(struct|union)\s*\{", body[i:])
        if m:
            depth, j = 1, i + m.end()
            while depth:
                depth += {"{": 1, "}": -1}.get(body[j], 0)
                j += 1
            name = re.match(r"\s*(\w+)\s*;", body[j:])
            path = prefix + name.group(1)
            inner = parse_members(body[i + m.end():j - 1], path + ".")
            out.append((m.group(1), path, inner))
            i = j + name.end()
            continue
        end = body.index(";", i)
        # An array member is named before its brackets ("char uuid[CUFILE_GPU_UUID_LEN]").
        decl = re.sub(r"\[[^\]]*\]", "", body[i:end])
        out.append(("leaf", prefix + re.findall(r"\w+", decl)[-1], []))
        i = end + 1


def walk(members):
    for kind, path, children in members:
        yield path
        yield from walk(children)


def flatten(members, layout):
    leaves = []
    for kind, path, children in members:
        if kind == "leaf":
            leaves.append([path, *layout[path]])
        elif kind == "struct":
            leaves.extend(flatten(children, layout))
        else:
            largest = max(children, key=lambda c: layout[c[1]][1])
            leaves.extend(flatten([largest], layout))
    return leaves


def parse_c_functions(text):
    out = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(cuFile\w+)\s*\(([^;{)]*)\)\s*;", text):
        params = [" ".join(p.split()) for p in m.group(3).split(",") if p.strip()]
        out.setdefault(m.group(2), (" ".join(m.group(1).split()), params))
    return out


def param_type(param):
    """A parameter's type without its name ("size_t *size_p" -> "size_t *")."""
    words = re.findall(r"\w+|\*", param)
    keywords = {"int", "long", "short", "char", "unsigned", "signed"}
    if len(words) > 1 and re.fullmatch(r"\w+", words[-1]) and words[-1] not in keywords:
        words = words[:-1]
    return " ".join(words)


def check_cufile(dump, site, work):
    root = os.path.join(site, "nvidia")
    found = [
        (os.path.join(d, "cufile.h"), os.path.join(os.path.dirname(d), "lib", "libcufile.so.0"))
        for d, _, files in os.walk(root) if "cufile.h" in files
    ]
    check(len(found) == 1, f"one cufile.h under {root}: {[f[0] for f in found]}")
    header, lib = found[0]
    text = strip_comments(open(header).read())
    raw_header = open(header).read()

    structs = {}
    for ours, theirs in CU_STRUCTS.items():
        members = parse_members(struct_body(text, theirs))
        structs[ours] = (theirs, members)
    functions = parse_c_functions(text)
    aliases = dict(re.findall(r"#define\s+(cuFile\w+)\s+(cuFile\w+)", raw_header))
    aliases = {new: old for old, new in aliases.items()}
    table = dump["tables"]["cufile"]
    wanted_fns = {}
    for fn in table["functions"]:
        for symbol in fn["symbols"]:
            decl = functions.get(symbol) or functions.get(aliases.get(symbol, ""))
            if decl is None:
                check(False, f"cuFile symbol {symbol} ({fn['field']}) is not in cufile.h")
            else:
                wanted_fns[symbol] = (fn, decl)
    op_names = re.findall(r"CUFILE_OP\(\s*[^,]+,\s*(CU_FILE_\w+)\s*,", raw_header)
    enum_names = op_names + re.findall(
        r"\b(CU_FILE_HANDLE_TYPE_\w+|CUFILE_(?:READ|WRITE|BATCH|WAITING|PENDING|INVALID|"
        r"CANCELED|COMPLETE|TIMEOUT|FAILED))\b\s*[=,}\n]", text)

    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "cufile.h"', "int main(void) {"]
    for ours, (theirs, members) in structs.items():
        lines.append(f'printf("S {ours} %zu\\n", sizeof({theirs}));')
        for path in walk(members):
            lines.append(
                f'printf("F {ours} {path} %zu %zu\\n", offsetof({theirs}, {path}), '
                f"sizeof((({theirs} *)0)->{path}));")
    for name in sorted(set(enum_names)):
        lines.append(f'printf("E {name} %d\\n", (int){name});')
    for symbol, (fn, (ret, params)) in sorted(wanted_fns.items()):
        sizes = [f"sizeof({param_type(p)})" for p in params if p != "void"]
        ret_size = "0" if ret.split()[-1] == "void" and "*" not in ret else f"sizeof({ret})"
        lines.append(f'printf("P {symbol} %zu' + " %zu" * len(sizes) + '\\n", '
                     + ", ".join([f"(size_t){ret_size}"] + sizes) + ");")
    lines += ["return 0;", "}"]
    inc = os.path.join(work, "include")
    os.makedirs(inc, exist_ok=True)
    with open(os.path.join(inc, "cuda.h"), "w") as f:
        f.write(CUDA_STAND_IN)
    src = os.path.join(work, "cufile_probe.c")
    with open(src, "w") as f:
        f.write("\n".join(lines) + "\n")
    exe = os.path.join(work, "cufile_probe")
    subprocess.run(["gcc", "-std=gnu11", "-I", inc, "-I", os.path.dirname(header), src, "-o", exe],
                   check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout

    sizes, layout, enum_values, shapes = {}, {}, {}, {}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "S":
            sizes[rest[0]] = int(rest[1])
        elif kind == "F":
            layout.setdefault(rest[0], {})[rest[1]] = (int(rest[2]), int(rest[3]))
        elif kind == "E":
            enum_values[rest[0]] = int(rest[1])
        else:
            shapes[rest[0]] = {"ret": int(rest[1]), "params": [int(x) for x in rest[2:]]}

    for ours, (theirs, members) in structs.items():
        spec = dump["structs"][ours]
        theirs_fields = flatten(members, layout[ours])
        if "cufile" in spec["vendors"]:
            check(spec["size"] == sizes[ours], f"cuFile {theirs}: size {spec['size']} "
                                               f"(cufile.h {sizes[ours]})")
            compare_fields(f"cuFile {theirs}", spec["fields"], theirs_fields)
        else:
            same = spec["size"] == sizes[ours] and [f[1:] for f in spec["fields"]] == [
                f[1:] for f in theirs_fields]
            check(not same, f"cuFile {theirs} differs from ours as sys.rs says "
                            f"(cufile.h: {fields_text(theirs_fields)})")

    enums = dump["enums"]
    ops = {n: enum_values[n] for n in op_names}
    compare_enum("cuFile op error", enums["op_errors"]["cufile"], ops)
    ours_codes = {v for _, v in enums["op_errors"]["cufile"]}
    missing = sorted(set(ops.values()) - ours_codes)
    check(not missing, f"cuFile op errors we do not name: {missing}")
    for label, key in [("handle type", "handle_types"), ("opcode", "opcodes"),
                       ("batch mode", "batch_modes"), ("status", "statuses")]:
        ours = enums[key]
        if key == "opcodes":  # cuFile spells them CUFILE_READ / CUFILE_WRITE
            ours = [[n.replace("Batch", ""), v] for n, v in ours]
        compare_enum(f"cuFile {label}", ours, enum_values)

    for symbol, (fn, (ret, params)) in sorted(wanted_fns.items()):
        check(fn["shape"] == shapes[symbol],
              f"cuFile {symbol} signature: ours {fn['shape']}, cufile.h {shapes[symbol]} "
              f"({ret} {symbol}({', '.join(params)}))")

    nm = subprocess.run(["nm", "-D", "--defined-only", lib], check=True, capture_output=True,
                        text=True).stdout
    exported = {line.split()[-1] for line in nm.splitlines() if line.split()[-2:-1] == ["T"]}
    cufile = ctypes.CDLL(lib)
    for symbol in table["all_symbols"]:
        check(symbol in exported and hasattr(cufile, symbol),
              f"libcufile.so.0 exports {symbol} (nm -D, dlsym)")
    version = ctypes.c_int(0)
    cufile.cuFileGetVersion.restype = ctypes.c_uint64
    err = cufile.cuFileGetVersion(ctypes.byref(version)) & 0xFFFFFFFF
    check(err == 0 and version.value > 0,
          f"genuine cuFileGetVersion answers without a GPU: {version.value} (err {err})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", required=True, help="abi_dump's JSON")
    parser.add_argument("--site", required=True,
                        help="where rocm-bindings-systems and nvidia-cufile are installed")
    parser.add_argument("--fake", required=True, help="the built libfake_gpu.so")
    parser.add_argument("--verbose", action="store_true", help="print every check, not only failures")
    args = parser.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    with open(args.dump) as f:
        dump = json.load(f)
    check(dump["pointer_size"] == 8, "x86_64: 8-byte pointers")
    with tempfile.TemporaryDirectory(prefix="abi-check-", dir=os.path.dirname(
            os.path.abspath(args.dump))) as work:
        check_cufile(dump, os.path.abspath(args.site), work)
        check_hipfile(dump, os.path.abspath(args.site), args.fake, work)
    if FAILURES:
        print(f"\n{len(FAILURES)} difference(s) from the vendors' artefacts:", file=sys.stderr)
        for what in FAILURES:
            print(f"  {what}", file=sys.stderr)
        sys.exit(1)
    print(f"abi-check: {len(PASSED)} checks passed: hipfile-rs and the fake agree with the "
          "vendors' artefacts")


if __name__ == "__main__":
    main()
