"""Simba chiplet (issue 17).  Blocks so far: ``controller`` (:mod:`.controller`,
the programmable sequencer standing in for Simba's RISC-V controller, §3.1).
Its assembler is :mod:`.asm`, its instruction set :mod:`.isa`, its control
packets (CFG, DONE) :mod:`.packets`.  ``pe_node`` (:mod:`.pe_node`, the PE behind its network interface).  Not yet built: ``chiplet``.
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


# ---- pe_node: the PE behind its network interface ---------------------------------
def _pe_params():
    from tessera.hdl.pe import PARAMS as PE_PARAMS
    return list(PE_PARAMS)


PE_NODE_PARAMS = _pe_params() + [
    Param("word_bits", 64, "NoC flit payload (= 8*C0 = 8*K0)", min=64, max=128),
    *(_GPE[n] for n in ("node_mesh_x", "node_mesh_y")),
    Param("chiplet_mesh_x", 1, "package mesh width (flit address layout)", min=1, max=8),
    Param("chiplet_mesh_y", 1, "package mesh height (flit address layout)", min=1, max=8),
    Param("classes", 2, "NoC message classes", min=1, max=8),
    Param("credit_window", 4, "Global PE credit window (DATA packets outstanding)", min=1, max=64),
    Param("max_tile", 16, "Global PE max words per DATA packet", min=1, max=255),
    Param("psum_window", 2, "psum packets outstanding toward the downstream PE", min=1, max=64),
    Param("psum_beats", 5, "max partial-sum beats per PSUM packet (3 flits each)", min=1, max=255),
    Param("out_words", 16, "max output beats per OUT packet", min=1, max=255),
]


def build_pe_node(**params):
    from .packets import PeNodeConfig
    from .pe_node import PeNode, validate as validate_node
    validate_node(PeNodeConfig(**params))          # before constructing
    return PeNode(**params)


BLOCKS.append(BlockSpec(
    name="pe_node", build=build_pe_node, params=PE_NODE_PARAMS,
    doc="Simba PE + network interface on one NoC port (CFG, loads, DATA/PSUM credits, OUT, DONE)",
))
