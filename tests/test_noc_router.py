"""cocotb on Verilator: one router at (1,1) of a 3x3 mesh (directed turns with zero-load
latency, multicast to every subset of outputs, blocked outputs, random traffic, bad input),
scoreboarded against the golden XY / XY-tree model."""
import pytest

from tessera.tb.runner import make_flags, run

BASE = {"kx": 3, "ky": 3, "max_node": 4, "payload_width": 32}


# sa_stages 2: two-cycle switch allocation (an option); 1: the default and the chiplet's
# alloc_stages 2: the allocation loop over two cycles (an option)
@pytest.mark.parametrize("vcs,buffer_flits,max_packet_flits,sa_stages,alloc_stages",
                         [(1, 5, 5, 1, 1),
                          # soak: own Verilator builds (~20-27 CPU-s each, make test budget); the
                          # options run in amaranth.sim in make test (tests/test_noc_sa2_sim.py,
                          # tests/test_noc_alloc2_sim.py, tests/test_noc_router_sim.py)
                          pytest.param(2, 4, 4, 2, 1, marks=pytest.mark.slow),
                          pytest.param(2, 4, 4, 1, 2, marks=pytest.mark.slow)])
def test_router_cocotb(vcs, buffer_flits, max_packet_flits, sa_stages, alloc_stages,
                       monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", make_flags("-O0"))
    run("router", {**BASE, "vcs": vcs, "buffer_flits": buffer_flits,
                   "max_packet_flits": max_packet_flits, "classes": min(2, vcs),
                   "sa_stages": sa_stages, "alloc_stages": alloc_stages},
        "tessera.tb.noc.tb_router", seed=vcs)
