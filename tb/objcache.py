"""Shared object cache for the Verilator runtime (``OBJCACHE`` of verilated.mk).

Every Verilated model links the same runtime (``verilated.cpp``, ``verilated_vpi.cpp``,
``verilated_threads.cpp``, ``verilated_dpi.cpp``, the trace writers): about 12 s of g++ CPU per
build at -Os, 8 s at -O0, identical for every model built with the same flags.  The runner puts
this script in front of the compiler (``make OBJCACHE=...``); for a source file in Verilator's
include directory it keys the object by the compiler command (output name removed), the
compiler's identity and the source file's bytes and copies it from ``<cache>/`` when present
(compiling once into the cache otherwise, atomically: safe under pytest-xdist).  Any other
source (the model's own C++, cocotb's ``verilator.cpp``, which includes the model's header)
is compiled as usual.  Plain build infrastructure: no paper section, no model.

Usage (as make sees it): ``python -S -E objcache.py CACHE_DIR c++ ARGS... -c -o X.o SRC.cpp``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys


def _source_and_out(args: list[str]) -> tuple[str | None, str | None]:
    out = None
    for i, a in enumerate(args):
        if a == "-o" and i + 1 < len(args):
            out = args[i + 1]
    srcs = [a for a in args if a.endswith((".cpp", ".cc", ".c")) and not a.startswith("-")]
    return (srcs[-1] if len(srcs) == 1 else None), out


def cacheable(args: list[str]) -> bool:
    """Only ``-c`` compiles of a Verilator runtime file (its include dir) into a ``.o``."""
    src, out = _source_and_out(args)
    root = os.environ.get("VERILATOR_ROOT")
    if "-c" not in args or not src or not out or not out.endswith(".o") or not root:
        return False
    inc = os.path.join(os.path.realpath(root), "include") + os.sep
    return os.path.realpath(src).startswith(inc)


def key(args: list[str]) -> str:
    src, out = _source_and_out(args)
    h = hashlib.sha256()
    skip = False
    for a in args:                       # the command without the output name
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        h.update(a.encode() + b"\0")
    cxx = shutil.which(args[0]) or args[0]
    st = os.stat(os.path.realpath(cxx))
    h.update(f"{os.path.realpath(cxx)}:{st.st_size}:{st.st_mtime_ns}".encode())
    with open(src, "rb") as fh:
        h.update(fh.read())
    inc = os.path.dirname(os.path.realpath(src))
    for hdr in sorted(os.listdir(inc)):             # the runtime's headers (same directory)
        if hdr.endswith(".h"):
            p = os.path.join(inc, hdr)
            st = os.stat(p)
            h.update(f"{hdr}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:24]


def main(argv: list[str]) -> int:
    cache, args = argv[0], argv[1:]
    if not cacheable(args):
        os.execvp(args[0], args)
    _, out = _source_and_out(args)
    dep = os.path.splitext(out)[0] + ".d"
    k = key(args)
    obj_c, dep_c = os.path.join(cache, k + ".o"), os.path.join(cache, k + ".d")
    if not (os.path.exists(obj_c) and os.path.exists(dep_c)):
        os.makedirs(cache, exist_ok=True)
        rc = subprocess.call(args)
        if rc:
            return rc
        tmp = f".{os.getpid()}.tmp"
        if os.path.exists(dep):
            shutil.copyfile(dep, dep_c + tmp)
        else:
            open(dep_c + tmp, "w").close()
        shutil.copyfile(out, obj_c + tmp)
        os.replace(dep_c + tmp, dep_c)              # .d first: the .o's presence means both are there
        os.replace(obj_c + tmp, obj_c)
        return 0
    shutil.copyfile(obj_c, out)
    if os.path.getsize(dep_c):
        shutil.copyfile(dep_c, dep)
    if os.environ.get("TESSERA_OBJCACHE_LOG"):
        with open(os.environ["TESSERA_OBJCACHE_LOG"], "a") as fh:
            fh.write(f"hit {os.path.basename(out)} {k}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
