"""Simba PE RTL (cocotb on Verilator) against the golden model.

Each cocotb test is a separate pytest case so xdist spreads them; builds are
cached per parameter set (tessera.tb.runner).  Parameter sets: the Simba
default (8x8, 24-bit) and a small odd one (K0=4, C0=2, 20-bit accumulators,
small buffers) so that layout/width bugs that cancel at 8x8 show up."""
import pytest

from tessera.tb.runner import run

DEFAULT = {}
SMALL = {"K0": 4, "C0": 2, "acc_width": 20, "wbuf_bytes": 512, "ibuf_bytes": 256,
         "abuf_entries": 64, "ppu_depth": 4}

TESTS = ["random_tiles", "directed", "chain3", "ppu_corners", "illegal", "reset_mid_tile",
         "busy_rules", "latency",
         # review tests (pereview)
         "acc_wrap", "extreme_fields", "start_with_load", "psum_timing", "reset_out_valid",
         "done_under_stall", "random_wide"]


@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", TESTS)
@pytest.mark.parametrize("params,seed", [(DEFAULT, 11), (SMALL, 23)], ids=["simba", "small"])
def test_pe(params, seed, testcase):
    run("pe", params, "tessera.tb.pe.test_pe", testcase=testcase, seed=seed)
