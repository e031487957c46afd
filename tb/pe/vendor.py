"""Verilator runs of PE Verilog that instantiates vendor primitives (``mult_impl`` other
than ``generic``, tessera.hdl.pe.mult): the primitive's behavioural model
(``mult.SIM_MODELS``) is appended to the Verilog text, which is built like
:func:`tessera.tb.runner.run` (cached per text, file lock, simulation outside it).

``run_pe`` runs a cocotb module of the ``pe`` block at ``params``; ``mult_pair_verilog``
is a test top holding the generic and the ecp5 :class:`~tessera.hdl.pe.mult.RegMult`
side by side on the same inputs (tb/pe/test_mult.py compares them every cycle).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from amaranth import Module, signed
from amaranth.back import verilog
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tessera.export import generate, manifest
from tessera.hdl.pe.mult import SIM_MODELS, RegMult
from tessera.registry import get
from tessera.tb.runner import (BUILD, BUILDS_USED, SIM_COMPILE_ARGS, _locked, _write_if_changed,
                               cocotb_verilator, make_flags)
from tessera.toolchain import ensure_path


def with_models(text: str, impl: str) -> str:
    return text + "".join("\n" + f.read_text() for f in SIM_MODELS[impl])


def run_text(name: str, text: str, toplevel: str, module: str, *, testcase=None, env=None,
             manifest_doc: dict | None = None, opt: str | None = None) -> Path:
    ensure_path()
    opt = opt or os.environ.get("TESSERA_SIM_OPT") or "-O0"
    h = hashlib.sha1(" ".join([text, opt] + SIM_COMPILE_ARGS).encode()).hexdigest()[:10]
    sim_dir = BUILD / "sim" / f"{name}-{h}"
    sim_dir.mkdir(parents=True, exist_ok=True)
    with _locked(sim_dir / ".lock"):
        _write_if_changed(sim_dir / f"{toplevel}.v", text)
        if manifest_doc is not None:
            _write_if_changed(sim_dir / f"{toplevel}.manifest.json",
                              json.dumps(manifest_doc, indent=2) + "\n")
    build_dir = sim_dir / f"obj_{opt.lstrip('-')}"
    BUILDS_USED.append(f"{sim_dir.name}/{build_dir.name}")
    cocotb_verilator(public="all", lock=sim_dir / ".lock", toplevel=toplevel, module=module,
                     testcase=testcase, verilog_sources=[str(sim_dir / f"{toplevel}.v")],
                     toplevel_lang="verilog", sim_build=str(build_dir), work_dir=str(build_dir),
                     compile_args=SIM_COMPILE_ARGS,
                     make_args=["-j2"] + make_flags(opt).split(), extra_env=dict(env or {}),
                     waves=False, timescale="1ns/1ps")
    return build_dir


def run_pe(params: dict, module: str, *, testcase=None, seed: int = 1) -> Path:
    """cocotb ``module`` against the ``pe`` block at ``params`` plus its primitives' models."""
    spec = get("pe")
    text, component, params = generate(spec, params)
    doc = manifest(spec, params, component)
    env = {"TESSERA_PARAMS": json.dumps(params), "TESSERA_SEED": str(seed), "TESSERA_BLOCK": "pe"}
    return run_text(f"pe-{params['mult_impl']}", with_models(text, params["mult_impl"]), "pe",
                    module, testcase=testcase, env=env, manifest_doc=doc)


class MultPair(wiring.Component):
    """``a``, ``b`` into a generic and an ``impl`` RegMult; ``p_ref``/``p_impl`` their products."""

    def __init__(self, width: int = 8, impl: str = "ecp5"):
        self.width, self.impl = width, impl
        super().__init__({"a": In(signed(width)), "b": In(signed(width)),
                          "p_ref": Out(signed(2 * width)), "p_impl": Out(signed(2 * width))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.ref = ref = RegMult(self.width, "generic")
        m.submodules.dut = dut = RegMult(self.width, self.impl)
        for c in (ref, dut):
            m.d.comb += [c.a.eq(self.a), c.b.eq(self.b)]
        m.d.comb += [self.p_ref.eq(ref.p), self.p_impl.eq(dut.p)]
        return m


def mult_pair_verilog(width: int = 8, impl: str = "ecp5") -> str:
    return with_models(verilog.convert(MultPair(width, impl), name="mult_pair", emit_src=False),
                       impl)
