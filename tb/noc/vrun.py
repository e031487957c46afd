"""Build-and-run a cocotb module against a test-only Verilog text (not a registered block).

Like :func:`tessera.tb.runner.run` (cached Verilator build per Verilog text, file lock), for
the NoC traffic-generator tops that are never exported.  ``opt`` is the C++ optimisation level
of the Verilated model (``-O0`` builds fast; ``-O2`` runs fast).  Only the top's ports are public to
VPI (``public="top"`` of :func:`~tessera.tb.runner.cocotb_verilator`): 3x less C++ to build.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tessera.tb.runner import (BUILD, BUILDS_USED, SIM_COMPILE_ARGS, _write_if_changed,
                                cocotb_verilator, make_flags)
from tessera.toolchain import ensure_path


def run_text(name: str, text: str, toplevel: str, module: str, env: dict | None = None,
             opt: str = "-O1", testcase: str | None = None) -> Path:
    ensure_path()
    h = hashlib.sha1(" ".join([text, opt, "public=top"] + SIM_COMPILE_ARGS).encode()).hexdigest()[:10]
    sim_dir = BUILD / "sim" / f"{name}-{h}"
    sim_dir.mkdir(parents=True, exist_ok=True)
    vpath = sim_dir / f"{toplevel}.v"
    _write_if_changed(vpath, text)
    build_dir = sim_dir / "obj"
    BUILDS_USED.append(f"{sim_dir.name}/{build_dir.name}")
    old = os.environ.get("MAKEFLAGS")
    os.environ["MAKEFLAGS"] = make_flags(opt)
    try:
        # build under the lock (once per text), simulation outside it
        cocotb_verilator(public="top", lock=sim_dir / ".lock", toplevel=toplevel, module=module,
                         testcase=testcase, verilog_sources=[str(vpath)], toplevel_lang="verilog",
                         sim_build=str(build_dir), work_dir=str(build_dir),
                         compile_args=SIM_COMPILE_ARGS,
                         make_args=["-j2"], extra_env=dict(env or {}), waves=False,
                         timescale="1ns/1ps")
    finally:
        if old is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = old
    return build_dir
