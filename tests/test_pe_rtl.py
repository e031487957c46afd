"""Simba PE RTL (cocotb on Verilator) against the golden model.

Each cocotb test is a separate pytest case, reported by name; the cases of one parameter set
run in one simulator process (tessera.tb.runner.run_case: one start-up instead of 18) on one
xdist worker (``xdist_group``); builds are cached per parameter set.  Parameter sets: the Simba
default (8x8, 24-bit) and a small odd one (K0=4, C0=2, 20-bit accumulators,
small buffers, LUT multipliers next to DSP ones, non-default pipeline depths)
so that layout/width/timing bugs that cancel at the defaults show up."""
import pytest

from tessera.tb.runner import run_case

DEFAULT = {}
SMALL = {"K0": 4, "C0": 2, "acc_width": 20, "wbuf_bytes": 512, "ibuf_bytes": 256,
         "abuf_entries": 64, "ppu_depth": 4,
         # 5 of the 8 multipliers on DSPs, 3 shift-and-add; the other pipeline depths
         "mac_dsps": 5, "mac_stages": 1, "ppu_mul_stages": 3, "mac_operand_reg": False}

TESTS = ["random_tiles", "directed", "chain3", "ppu_corners", "illegal", "reset_mid_tile",
         "busy_rules", "latency",
         # review tests (pereview)
         "acc_wrap", "extreme_fields", "start_with_load", "psum_timing", "reset_out_valid",
         "done_under_stall", "random_wide",
         # input double buffer (issue 17)
         "double_buffer", "busy_half",
         # back-to-back tiles (issue 20)
         "back_to_back"]


@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", TESTS)
@pytest.mark.parametrize("params,seed", [
    pytest.param(DEFAULT, 11, id="simba", marks=pytest.mark.xdist_group("pe-simba")),
    # soak: the small, non-default pipeline configuration (its own Verilator build, ~25 CPU-s;
    # make test budget); make test runs every testcase on the default (simba) build
    pytest.param(SMALL, 23, id="small", marks=[pytest.mark.xdist_group("pe-small"),
                                                pytest.mark.slow])])
def test_pe(request, params, seed, testcase):
    run_case(request, "pe", params, "tessera.tb.pe.test_pe", testcase, seed=seed)
