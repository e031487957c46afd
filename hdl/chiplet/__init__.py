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
    from dataclasses import fields

    from tessera.hdl.pe import PARAMS as PE_PARAMS

    from .config import ChipletConfig
    d = ChipletConfig()
    own = [
        Param("nx", d.nx, "PE columns (mesh width max(nx, 3))", min=1, max=8),
        Param("ny", d.ny, "PE rows (mesh height ny + 1)", min=1, max=7),
        Param("word_bits", d.word_bits, "NoC flit payload = Global PE word = 8*C0 = 8*K0",
              min=64, max=1024),
        Param("words", d.words, "Global PE buffer words (64 KB at 64 bit)", min=8, max=1 << 15),
        Param("banks", d.banks, "Global PE SRAM banks", min=1, max=16, power_of_two=True),
        Param("groups", d.groups, "Global PE multicast groups", min=1, max=8),
        Param("credit_window", d.credit_window, "DATA packets outstanding per consumer",
              min=1, max=255),
        Param("max_tile", d.max_tile, "max words per DATA packet", min=1, max=255),
        Param("recv_slots", d.recv_slots, "Global PE RECV windows", min=1, max=4),
        Param("send_slots", d.send_slots, "Global PE SENDs in flight", min=1, max=8),
        Param("ucast_lanes", d.ucast_lanes, "Global PE unicast lanes", min=1, max=4),
        Param("psum_window", d.psum_window, "PSUM packets a PE node reserves (credits)",
              min=1, max=255),
        Param("psum_beats", d.psum_beats, "beats per PSUM packet", min=1, max=255),
        Param("out_words", d.out_words, "beats per OUT packet", min=1, max=255),
        Param("classes", d.classes, "NoC message classes", min=2, max=8),
        Param("vcs", d.vcs, "virtual channels per port", min=1, max=4),
        Param("buffer_flits", d.buffer_flits, "router buffer flits (0: max_tile + 1)",
              min=0, max=64),
        Param("link_latency", d.link_latency, "register stages per NoC link", min=1, max=4),
        Param("err_width", d.err_width, "router error counter width", min=4, max=32),
        Param("chiplet_mesh_x", d.chiplet_mesh_x, "package mesh width (address fields)",
              min=1, max=8),
        Param("chiplet_mesh_y", d.chiplet_mesh_y, "package mesh height (address fields)",
              min=1, max=8),
        Param("prog_depth", d.prog_depth, "controller instruction memory depth", min=2,
              max=4096),
        Param("timeout_bits", d.timeout_bits, "controller WAIT timeout counter width",
              min=4, max=32),
    ]
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
    return {"leaf_modules": ["chiplet_router", "chiplet_pe_node"],
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
