"""Simba chiplet (issue 17).  Blocks so far: ``controller`` (:mod:`.controller`,
the programmable sequencer standing in for Simba's RISC-V controller, §3.1).
Its assembler is :mod:`.asm`, its instruction set :mod:`.isa`, its control
packets (CFG, DONE) :mod:`.packets`.  ``chiplet`` (:mod:`.chiplet`): the chiplet
top (PE nodes, Global PE, controller, host gateway on one NoC mesh; parameters
and node map in :mod:`.config`); ``pe_node`` (:mod:`.pe_node`, the PE behind its
network interface).
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


def _chiplet_params():
    """ChipletConfig's fields (name, default; help and bounds from ``config.FIELD_PARAMS``)
    followed by the PE block's Params (the ``pe`` field)."""
    from dataclasses import fields

    from tessera.hdl.pe import PARAMS as PE_PARAMS

    from .config import FIELD_PARAMS, PACKAGE_FIELDS, ChipletConfig
    d = ChipletConfig()
    own = []
    for f in fields(d):
        if f.name == "pe" or f.name in PACKAGE_FIELDS:
            continue
        text, bounds = FIELD_PARAMS.get(f.name, (f"ChipletConfig.{f.name}", {}))
        own.append(Param(f.name, getattr(d, f.name), text, **bounds))
    pe_names = {f.name for f in fields(d.pe)}
    return own + [p for p in PE_PARAMS if p.name in pe_names]


CHIPLET_PARAMS = _chiplet_params()


def build_chiplet(**params):
    from .chiplet import Chiplet
    return Chiplet(**params)


def _chiplet_verilog(params):
    from .chiplet import chiplet_verilog
    return chiplet_verilog(params)


def _chiplet_manifest(params):
    from .config import ChipletConfig, node_map
    cfg = ChipletConfig.from_params(params)
    nm = node_map(cfg)
    from tessera.hdl.noc.router import Router
    from tessera.hdl.sram import srams_of

    from .chiplet import PE_NODE_MODULE, ROUTER_MODULE, pe_node_build
    # the leaves are Instances in the top: list their SRAMs once per leaf module
    leaf_mem = {ROUTER_MODULE: srams_of(Router(cfg.router_config()), ROUTER_MODULE),
                PE_NODE_MODULE: srams_of(pe_node_build(cfg), PE_NODE_MODULE)}
    return {"leaf_modules": [ROUTER_MODULE, PE_NODE_MODULE], "leaf_memories": leaf_mem,
            "router_instances": nm.mesh[0] * nm.mesh[1], "pe_node_instances": cfg.npes,
            "node_map": {"mesh": list(nm.mesh), "pes": [list(p) for p in nm.pes],
                         "gpe": list(nm.gpe), "ctrl": list(nm.ctrl),
                         "gateway": list(nm.gateway), "empty": [list(p) for p in nm.empty]}}


BLOCKS.append(BlockSpec(
    name="chiplet", build=build_chiplet, params=CHIPLET_PARAMS,
    doc="Simba chiplet: nx x ny PE nodes, Global PE, controller, host gateway on one NoC mesh",
    verilog=_chiplet_verilog, extra_manifest=_chiplet_manifest,
))


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
    Param("credit_batch", 1, "DATA packets acknowledged per CREDIT packet (coalesced)", min=1, max=64),
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
