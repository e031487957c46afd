"""cocotb on Verilator: 4x4 mesh and 2x2-chiplet system of 2x2 NoCs — uniform / bit-complement /
transpose / hotspot traffic mixed with multicast under random back-pressure, zero-load
latency, reset in the middle of traffic, bad input, deadlock watchdog — scoreboarded against
the golden model."""
import pytest

from tessera.tb.runner import make_flags, run

# -O0: these Verilated models are big and the cocotb runs are Python-bound, so a fast C++
# build beats a fast model.
FAST_BUILD = make_flags("-O0")


@pytest.mark.slow    # make test budget: test_soak_short (4x4 mesh, mixed traffic, scoreboarded) and the
# router cocotb tests stay in make test
def test_mesh_4x4_cocotb(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", FAST_BUILD)
    run("mesh", {"kx": 4, "ky": 4, "max_node": 4, "payload_width": 32},
        "tessera.tb.noc.tb_mesh", seed=3, public="top")


@pytest.mark.slow    # make test budget: the package cocotb test (tests/test_package.py) runs two-level
# routing through real chiplets and the nocsys export is linted in make test
def test_two_level_2x2_of_2x2_cocotb(monkeypatch):
    monkeypatch.setenv("MAKEFLAGS", FAST_BUILD)
    run("nocsys", {"kx": 2, "ky": 2, "ckx": 2, "cky": 2, "max_node": 2, "max_chiplet": 4,
                   "payload_width": 32, "nop_link_latency": 4, "nop_buffer_flits": 10},
        "tessera.tb.noc.tb_mesh", seed=5, public="top")
