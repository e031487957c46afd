"""Chiplet top (block ``chiplet``) smoke tests on a 2x2-PE chiplet in amaranth.sim, through
the chiplet testbench class and scenarios of tb/chiplet/chiplet.py (the cocotb test,
tb/chiplet/test_chiplet_top.py, runs the same scenarios on Verilator and is make test's; these run in make soak).  One simulation
(elaborating the chiplet costs ~30 s) runs them back to back, the host pulsing ``clear``
between programs:

* a controller program that CFG-writes a PE and WAITs for its DONE with a short timeout
  ends with error TIMEOUT and the timeout flag (never hangs); a bad opcode, a CFG to a node
  outside the mesh and a WAIT on a node that can never answer end in BAD_OPCODE / BAD_NODE
  / TIMEOUT;
* sticky summaries: a malformed packet to a PE node sets its ``pe_error`` bit, a flit to an
  empty node its ``noc_err`` bit; both stay set after the node's own flags are cleared,
  until the host's ``clear``;
* data round trip: the program opens a Global PE RECV window for the gateway, raises BAR 1
  (the host streams the words into ``host_in`` as OUT packets, with random gaps), WAITs for
  the RECV, SENDs the window unicast to the gateway; the host reads the DATA packets on
  ``host_out`` under random back-pressure, returns a CREDIT per packet, and every word
  comes back bit-exact, in order; no router error, no Global PE error flag.
"""
import pytest

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.pe.config import PEParams
from tessera.hdl.chiplet.config import node_map
from tessera.tb.chiplet.chiplet import (amaranth_run, bad_programs, check_bad_programs,
                                       check_round_trip, check_status_flags, check_timeout,
                                       run_program, run_round_trip, run_status_flags,
                                       run_timeout)

CFG = ChipletConfig(nx=2, ny=2, words=256, banks=2, max_tile=8, out_words=8, psum_beats=2,
                    prog_depth=64, timeout_bits=16,
                    pe=PEParams(wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=32, ppu_depth=4))
SEEDS = (1, 2)

# make test budget: these four amaranth.sim tests repeat, check for check, the scenarios of the
# cocotb test of record below (test_cocotb_verilator_chiplet_2x2, the same checks on Verilator,
# seeds 3 and 4); their one simulation costs ~50 s of CPU, so they run in make soak.
SOAK = pytest.mark.slow


@pytest.fixture(scope="module")
def results():
    res = {}

    async def body(tb):
        res["timeout"] = await run_timeout(tb)
        res["bad"] = {k: await run_program(tb, w) for k, (w, _c, _t) in bad_programs(CFG).items()}
        res["flags"] = await run_status_flags(tb)
        for seed in SEEDS:
            res[seed] = await run_round_trip(tb, seed)

    amaranth_run(CFG, body)
    return res


@SOAK
def test_cfg_then_wait_times_out(results):
    check_timeout(results["timeout"])


@SOAK
def test_bad_programs_end_in_error(results):
    check_bad_programs(results["bad"], bad_programs(CFG))


@SOAK
def test_sticky_status_summaries(results):
    check_status_flags(results["flags"], node_map(CFG))


@SOAK
@pytest.mark.parametrize("seed", SEEDS)
def test_gpe_round_trip_through_gateway(results, seed):
    check_round_trip(results[seed], CFG.max_tile)


# ---------------------------------------------------------------------------- cocotb
# make test: the scenarios on the suite's one verilated chiplet (tb/chiplet/run_layer.py
# SUITE_CFG, shared with tests/test_run_layer_rtl.py: one ~60 CPU-s build instead of two).  It
# acknowledges every DATA packet (credit_batch=1); the chiplet default, CREDITs coalesced per 4
# DATA packets, runs the same scenarios in make soak (test_cocotb_verilator_chiplet_2x2_coalesced).
DEFAULT_CREDITS_PARAMS = dict(nx=2, ny=2, words=256, banks=2, max_tile=8, out_words=8, psum_beats=2,
                              prog_depth=64, timeout_bits=16, wbuf_bytes=1024, ibuf_bytes=512,
                              abuf_entries=32, ppu_depth=4)


def _cocotb_chiplet(params, tmp_path):
    from tessera.tb.runner import run
    run("chiplet", params, "tessera.tb.chiplet.test_chiplet_top", seed=3, opt="-O0",
        public="top", result_file=tmp_path / "res.jsonl")


@pytest.mark.cocotb
def test_cocotb_verilator_chiplet_2x2(tmp_path):
    from tessera.tb.chiplet.run_layer import SUITE_CFG, chiplet_params
    _cocotb_chiplet(chiplet_params(SUITE_CFG), tmp_path)


@SOAK
@pytest.mark.cocotb
def test_cocotb_verilator_chiplet_2x2_coalesced(tmp_path):
    _cocotb_chiplet(DEFAULT_CREDITS_PARAMS, tmp_path)
