"""Simba NoC/NoP mesh router (issue 3). See flit.py for the shared packet layout,
router.py for the router, mesh.py for the mesh and the two-level chiplet/NoP system."""
from tessera.params import Param, ParamError
from tessera.registry import BlockSpec

from .flit import MAX_MESH


# Switch allocation cycles of the router and mesh blocks.  2 (issue 20) was measured and is
# NOT the default: on ECP5-85k grade 6 it gives router 75.2 MHz (1: 75.5), 2x2 mesh 69.8 (1:
# 63.0), costs a router cycle per hop (cycles/hop 3 -> 4) and a cycle of credit round trip
# (2*link_latency+3: buffers of 5 for one flow at full rate), and at 1 VC x 4 flits its 4x4
# saturation (0.496 flits/node/cycle) falls below BookSim's 0.51.  With 2, the default
# buffer must be 5 (the mesh checks the round trip).  The chiplet and package keep
# RouterConfig's default (1) regardless.
SA_STAGES = 1
# Allocation loop over two cycles (issue 20): an option, NOT the default.  Stop 30: stall
# fixed, 4x4 saturation at 1 VC x 4 0.606 (1-flit; BookSim 0.51), unicast 3.0 cycles/hop as
# with 1, multicast +2 cycles per router; P&R 88.9 / 91.2 MHz (seeds 1/2).  Stop 31
# (cycle-identical cuts: one-hot registered grant VC, registered credit compares, error
# events registered as bits): 84.5 / 92.4 MHz (seeds 1/2; the allocation loop is no longer the
# critical path: the input side -- validation, buffer write, next request -- is), 2x2 mesh
# 75.1 (default routers 63.0); 100 MHz is not reached, so 1 stays (it keeps the exact cycles
# of the chiplet's router).  See router.py's docstring.
ALLOC_STAGES = 1
BUFFER_FLITS = 4 if SA_STAGES == 1 else 5


def _common(kx=4, ky=4):
    return [
        Param("kx", kx, "mesh width (nodes)", min=1, max=MAX_MESH),
        Param("ky", ky, "mesh height (nodes)", min=1, max=MAX_MESH),
        Param("vcs", 2, "virtual channels per port (message classes map onto them)", min=1, max=4),
        Param("buffer_flits", BUFFER_FLITS, "input buffer depth per VC (flits; >= the credit "
              "round trip 2*link_latency+1+sa_stages for one flow at full rate)", min=1, max=64),
        Param("sa_stages", SA_STAGES, "switch allocation cycles (2: requests and acceptance "
              "registered a cycle ahead, +1 cycle per router)", min=1, max=2),
        Param("alloc_stages", ALLOC_STAGES, "allocation loop cycles (2: grants registered and "
              "committed a cycle later, each input VC's next request selected by its "
              "registered send; same unicast cycles per hop, a multicast head waits 2 cycles "
              "more)",
              min=1, max=2),
        Param("max_packet_flits", 4, "longest legal packet (flits)", min=1, max=64),
        Param("payload_width", 64, "flit payload bits", min=1, max=1024),
        Param("classes", 2, "message classes", min=1, max=4),
        Param("max_node", MAX_MESH, "address space of the node mesh (max_node x max_node)",
              min=1, max=MAX_MESH),
    ]


def _checked(fn, **p):
    """Constructor ValueErrors -> one-line ParamError naming the parameter."""
    try:
        return fn(**p)
    except ParamError:
        raise
    except ValueError as err:
        name = getattr(err, "param", None) or "config"
        msg = str(err)
        if msg.startswith(f"{name}: "):
            msg = msg[len(name) + 2:]
        raise ParamError(name, msg) from None


def _build_router(**p):
    from .router import Router
    return _checked(Router, **p)


def _build_mesh(**p):
    from .mesh import Mesh
    return _checked(Mesh, **p)


def _mesh_verilog(p):
    mesh = _build_mesh(**p)
    return mesh.verilog(), mesh


def _build_sys(**p):
    from .mesh import TwoLevel
    return _checked(TwoLevel, **p)


def _sys_verilog(p):
    s = _build_sys(**p)
    return s.verilog(), s


def _flit_doc(p):
    from .flit import flit_layout
    return {"flit_layout": "hdl/noc/flit.py; every flit carries the header (body flits: don't-care "
                           "on input, the packet head's header on output); mask bit of node "
                           "(x,y) is y*kx+x; north is y-1, east is x+1",
            "flit_width": flit_layout(p.get("payload_width", 64), p.get("classes", 2),
                                      (p.get("max_node", 8),) * 2,
                                      (p.get("max_chiplet", 1 if "link_latency" in p
                                             and "ckx" not in p else 8),) * 2).size}


def _mesh_manifest(p):
    d = _flit_doc(p)
    d.update({"leaf_modules": ["mesh_router"], "router_instances": p["kx"] * p["ky"],
              "local_port_index": "y*kx + x"})
    return d


def _sys_manifest(p):
    from .mesh import TwoLevel
    s = TwoLevel(**p)
    s._MustUse__silence = True
    d = _flit_doc(p)
    d.update({"leaf_modules": ["nocsys_router", "nocsys_nop_router"],
              "router_instances": p["kx"] * p["ky"] * p["ckx"] * p["cky"],
              "nop_router_instances": p["ckx"] * p["cky"],
              "local_ports": [{"chiplet": list(c), "node": list(n)} for c, n in s.local_ports]})
    return d


BLOCKS = [
    BlockSpec(
        name="router",
        build=_build_router,
        params=_common() + [
            Param("level", "noc", "routing level", kind=str, choices=["noc", "nop"]),
        ],
        doc="5-port XY router: wormhole unicast, cut-through XY-tree multicast, credits, VCs",
        extra_manifest=_flit_doc,
        demo_module="tessera.tb.noc.tb_router",
        demo_testcase="directed_turns",
        demo_params={"kx": 3, "ky": 3, "max_node": 4, "payload_width": 32},
    ),
    BlockSpec(
        name="mesh",
        build=_build_mesh,
        params=_common(2, 2) + [
            Param("link_latency", 1, "register stages per link", min=1, max=16),
        ],
        doc="kx x ky mesh of routers (router emitted once, instantiated kx*ky times)",
        verilog=_mesh_verilog,
        extra_manifest=_mesh_manifest,
        demo_module="tessera.tb.noc.tb_mesh",
        demo_testcase="random_uniform",
        demo_params={"kx": 4, "ky": 4, "max_node": 4, "payload_width": 32},
    ),
    BlockSpec(
        name="nocsys",
        build=_build_sys,
        params=[
            Param("kx", 2, "chiplet NoC width", min=1, max=MAX_MESH),
            Param("ky", 2, "chiplet NoC height", min=1, max=MAX_MESH),
            Param("ckx", 2, "NoP width (chiplets)", min=1, max=MAX_MESH),
            Param("cky", 2, "NoP height (chiplets)", min=1, max=MAX_MESH),
            Param("gw_x", 0, "gateway node x", min=0, max=MAX_MESH - 1),
            Param("gw_y", 0, "gateway node y", min=0, max=MAX_MESH - 1),
            Param("vcs", 2, "virtual channels", min=1, max=4),
            Param("buffer_flits", 4, "NoC input buffer depth per VC", min=1, max=64),
            Param("nop_buffer_flits", 10, "NoP input buffer depth per VC", min=1, max=64),
            Param("max_packet_flits", 4, "longest legal packet", min=1, max=64),
            Param("payload_width", 64, "flit payload bits", min=1, max=1024),
            Param("classes", 2, "message classes", min=1, max=4),
            Param("link_latency", 1, "NoC link stages", min=1, max=16),
            Param("nop_link_latency", 4, "NoP link stages", min=1, max=16),
            Param("max_node", MAX_MESH, "node address space", min=1, max=MAX_MESH),
            Param("max_chiplet", MAX_MESH, "chiplet address space", min=1, max=MAX_MESH),
        ],
        doc="two-level system: chiplet NoCs joined through gateway nodes by a NoP mesh",
        verilog=_sys_verilog,
        extra_manifest=_sys_manifest,
    ),
]
