"""Simba PE RTL (cocotb on Verilator) against the golden model.

Each cocotb test is a separate pytest case so xdist spreads them; builds are
cached per parameter set (tessera.tb.runner).  Parameter sets: the Simba
default (8x8, 24-bit) and a small odd one (K0=4, C0=2, 20-bit accumulators,
small buffers, LUT multipliers next to DSP ones, non-default pipeline depths)
so that layout/width/timing bugs that cancel at the defaults show up."""
import pytest

from tessera.tb.runner import run

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
@pytest.mark.parametrize("params,seed", [(DEFAULT, 11), (SMALL, 23)], ids=["simba", "small"])
def test_pe(params, seed, testcase):
    run("pe", params, "tessera.tb.pe.test_pe", testcase=testcase, seed=seed)


@pytest.mark.cocotb
def test_waves_write_a_vcd():
    """``WAVES=1`` / ``waves=True``: the run writes dump.vcd with the top's ports in it."""
    from tessera.tb.runner import prepare
    sim_dir, _, _ = prepare("pe", SMALL)
    for d in sim_dir.glob("obj_waves*"):
        (d / "dump.vcd").unlink(missing_ok=True)
    build = run("pe", SMALL, "tessera.tb.pe.test_pe", testcase="ppu_corners", seed=23, waves=True)
    assert build.parent == sim_dir and build.name.startswith("obj_waves")   # (+ _O0 in the suite)
    head = (build / "dump.vcd").read_text(errors="replace")[:200000]
    assert "$enddefinitions" in head and "psum_out" in head
