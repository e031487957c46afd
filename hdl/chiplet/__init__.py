"""Simba chiplet (issue 17).  Blocks so far: ``controller`` (:mod:`.controller`,
the programmable sequencer standing in for Simba's RISC-V controller, §3.1).
Its assembler is :mod:`.asm`, its instruction set :mod:`.isa`, its control
packets (CFG, DONE) :mod:`.packets`.  Not yet built: ``pe_node``, ``chiplet``.
"""
from __future__ import annotations

from tessera.hdl.global_pe import PARAMS as GPE_PARAMS
from tessera.params import Param
from tessera.registry import BlockSpec

# The mesh geometry is the Global PE's (one definition: same names, defaults and bounds).
_GPE = {p.name: p for p in GPE_PARAMS}

PARAMS = [
    Param("prog_depth", 256, "instruction memory depth (64-bit words)", min=2, max=4096),
    *(_GPE[n] for n in ("node_mesh_x", "node_mesh_y", "chiplet_mesh_x", "chiplet_mesh_y")),
    Param("word_bits", 256, "NoC flit payload width", min=64, max=1024),
    Param("classes", 2, "NoC message classes", min=1, max=8),
    Param("groups", 4, "Global PE multicast groups (command layout)", min=1, max=8),
    Param("timeout_bits", 24, "WAIT/BAR timeout counter width", min=4, max=32),
]


def build(**params):
    from .controller import Controller, validate
    validate({p.name: p.default for p in PARAMS} | params)   # before constructing
    return Controller(**params)


BLOCKS = [BlockSpec(
    name="controller", build=build, params=PARAMS,
    doc="Simba chiplet controller: program memory, CFG packets, Global PE commands, WAIT on DONEs",
)]
