"""Simba package (issue 18): chiplets over the NoP.  Block ``package`` (:mod:`.package`);
parameters and the chiplet/NoP map in :mod:`.config`."""
from __future__ import annotations

from tessera.registry import BlockSpec

BLOCKS = []


def _package_params():
    from tessera.hdl.chiplet import CHIPLET_PARAMS
    from tessera.params import Param

    from .config import PackageConfig
    d = PackageConfig()
    own = [
        Param("ckx", d.ckx, "chiplet columns of the NoP mesh", min=1, max=6),
        Param("cky", d.cky, "chiplet rows of the NoP mesh", min=1, max=6),
        Param("nop_link_latency", d.nop_link_latency, "register stages per NoP link", min=1,
              max=16),
        Param("nop_flit_cycles", d.nop_flit_cycles, "cycles a flit occupies a NoP link "
              "(serialisation rate)", min=1, max=64),
        Param("nop_buffer_flits", d.nop_buffer_flits, "NoP router buffer flits per VC "
              "(0: max(max packet, 2*nop_link_latency+2))", min=0, max=64),
    ]
    skip = {"chiplet_mesh_x", "chiplet_mesh_y"}
    return own + [p for p in CHIPLET_PARAMS if p.name not in skip]


PACKAGE_PARAMS = _package_params()


def build_package(**params):
    from .package import Package
    return Package(**params)


def _package_verilog(params):
    from .package import package_verilog
    return package_verilog(params)


def _package_manifest(params):
    from tessera.hdl.chiplet.config import node_map
    from tessera.hdl.chiplet.chiplet import pe_node_build
    from tessera.hdl.noc.router import Router
    from tessera.hdl.sram import srams_of

    from .config import PackageConfig
    from .package import CHIPLET_MODULE, NOP_ROUTER_MODULE, PE_NODE_MODULE, ROUTER_MODULE
    pc = PackageConfig.from_params(params).validate()
    cc = pc.chiplet_cfg()
    nm = node_map(cc)
    leaf_mem = {ROUTER_MODULE: srams_of(Router(cc.router_config()), ROUTER_MODULE),
                NOP_ROUTER_MODULE: srams_of(Router(pc.nop_router_config()), NOP_ROUTER_MODULE),
                PE_NODE_MODULE: srams_of(pe_node_build(cc), PE_NODE_MODULE)}
    return {"leaf_modules": [ROUTER_MODULE, NOP_ROUTER_MODULE, PE_NODE_MODULE, CHIPLET_MODULE],
            "leaf_memories": leaf_mem,
            "chiplet_instances": pc.nchiplets, "nop_router_instances": pc.nchiplets,
            "router_instances_per_chiplet": nm.mesh[0] * nm.mesh[1],
            "pe_node_instances_per_chiplet": cc.npes,
            "chiplets": [list(c) for c in pc.chiplets()],
            "host_addr": {"chiplet": list(pc.host_addr[0]), "node": list(pc.host_addr[1])},
            "bar_master": list(pc.bar_master),
            "node_map": {"mesh": list(nm.mesh), "pes": [list(p) for p in nm.pes],
                         "gpe": list(nm.gpe), "ctrl": list(nm.ctrl),
                         "gateway": list(nm.gateway), "empty": [list(p) for p in nm.empty]}}


BLOCKS.append(BlockSpec(
    name="package", build=build_package, params=PACKAGE_PARAMS,
    doc="Simba package: ckx x cky chiplets (hierarchical NoC) over a NoP mesh, host port, "
        "package barrier",
    verilog=_package_verilog, extra_manifest=_package_manifest,
))
