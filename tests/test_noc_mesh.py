"""cocotb on Verilator: 4x4 mesh and 2x2-chiplet system of 2x2 NoCs — uniform / bit-complement /
transpose / hotspot traffic mixed with multicast under random back-pressure, zero-load
latency, reset in the middle of traffic, bad input, deadlock watchdog — scoreboarded against
the golden model."""
import pytest

from tessera.tb.runner import make_flags, run

# -O0: these Verilated models are big and the cocotb runs are Python-bound, so a fast C++
# build beats a fast model.
FAST_BUILD = make_flags("-O0")


@pytest.mark.slow    # make test budget: the router cocotb test, the default router's 2x2 mesh under mixed
# traffic in amaranth.sim (tests/test_noc_sa2_sim.py) and the chiplet's Verilated mesh stay in make test
def test_mesh_4x4_cocotb(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", FAST_BUILD)
    run("mesh", {"kx": 4, "ky": 4, "max_node": 4, "payload_width": 32},
        "tessera.tb.noc.tb_mesh", seed=3, public="top")


@pytest.mark.slow    # make test budget: two-level routing runs in make test in amaranth.sim
# (tests/test_package_1xn.py); the package cocotb test and the nocsys lint are in make soak
def test_two_level_2x2_of_2x2_cocotb(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", FAST_BUILD)
    run("nocsys", {"kx": 2, "ky": 2, "ckx": 2, "cky": 2, "max_node": 2, "max_chiplet": 4,
                   "payload_width": 32, "nop_link_latency": 4, "nop_buffer_flits": 10},
        "tessera.tb.noc.tb_mesh", seed=5, public="top")
