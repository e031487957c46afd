"""Chiplet top (block ``chiplet``) smoke tests on a 2x2-PE chiplet in amaranth.sim, through
the chiplet testbench class and scenarios of tb/chiplet/chiplet.py (the cocotb test,
tb/chiplet/test_chiplet_top.py, runs the same scenarios on Verilator).  One simulation
(elaborating the chiplet costs ~30 s) runs them back to back, the host pulsing ``clear``
between programs:

* a controller program that CFG-writes a PE and WAITs for its DONE with a short timeout
  ends with error TIMEOUT and the timeout flag (never hangs);
* data round trip: the program opens a Global PE RECV window for the gateway, raises BAR 1
  (the host streams the words into ``host_in`` as OUT packets, with random gaps), WAITs for
  the RECV, SENDs the window unicast to the gateway; the host reads the DATA packets on
  ``host_out`` under random back-pressure, returns a CREDIT per packet, and every word
  comes back bit-exact, in order; no router error, no Global PE error flag.
"""
import pytest

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.pe.config import PEParams
from tessera.tb.chiplet.chiplet import (amaranth_run, check_round_trip, check_timeout,
                                       run_round_trip, run_timeout)

CFG = ChipletConfig(nx=2, ny=2, words=256, banks=2, max_tile=8, out_words=8, psum_beats=2,
                    prog_depth=64, timeout_bits=16,
                    pe=PEParams(wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=32, ppu_depth=4))
SEEDS = (1, 2)


@pytest.fixture(scope="module")
def results():
    res = {}

    async def body(tb):
        res["timeout"] = await run_timeout(tb)
        for seed in SEEDS:
            res[seed] = await run_round_trip(tb, seed)

    amaranth_run(CFG, body)
    return res


def test_cfg_then_wait_times_out(results):
    check_timeout(results["timeout"])


@pytest.mark.parametrize("seed", SEEDS)
def test_gpe_round_trip_through_gateway(results, seed):
    check_round_trip(results[seed], CFG.max_tile)


# ---------------------------------------------------------------------------- cocotb
COCOTB_PARAMS = dict(nx=2, ny=2, words=256, banks=2, max_tile=8, out_words=8, psum_beats=2,
                     prog_depth=64, timeout_bits=16, wbuf_bytes=1024, ibuf_bytes=512,
                     abuf_entries=32, ppu_depth=4)


@pytest.mark.cocotb
def test_cocotb_verilator_chiplet_2x2(tmp_path):
    from tessera.tb.runner import run
    run("chiplet", COCOTB_PARAMS, "tessera.tb.chiplet.test_chiplet_top", seed=3, opt="-O0",
        public="top", result_file=tmp_path / "res.jsonl")
