"""T3 track & trigger RTL (tracker, mca, dma_table, ring reduce-scatter) on Verilator via cocotb,
compared cycle by cycle with the golden models of ``tessera.golden.t3``."""
import pytest

from tessera.tb.runner import run, run_case

TRACKER_SMALL = {"sets": 8, "ways": 2, "wg_width": 8, "addr_width": 24, "count_width": 10,
                 "overflow": 2, "trig_depth": 2, "victims": 2}


@pytest.mark.xdist_group("tracker-small")
@pytest.mark.parametrize("testcase", ["tracker_random", "tracker_trigger_backpressure",
                                      "tracker_overcount_and_conflict"])
def test_tracker(request, testcase):
    """(the three cases run in one simulator process, tessera.tb.runner.run_case)"""
    run_case(request, "tracker", TRACKER_SMALL, "tessera.tb.t3.test_tracker", testcase, seed=3)


MCA_SMALL = {"req_width": 16, "occ_width": 5, "wait_width": 8, "learn_log2": 4}


def test_mca_policies():
    run("mca", MCA_SMALL, "tessera.tb.t3.test_mca", testcase="mca_policies", seed=2)


DMA_SMALL = {"entries": 8, "wg_width": 8, "addr_width": 24, "dev_width": 2, "tiles_width": 4}


def test_dma_table():
    run("dma_table", DMA_SMALL, "tessera.tb.t3.test_dma_table", testcase="dma_table_random", seed=4)


NODE_SMALL = {}     # t3_node defaults are testbench scale (16 sets x 4 ways, 8 DMA entries)


@pytest.mark.parametrize("rtl_dev,gran", [(0, 1), (2, 8)])
def test_ring_reduce_scatter(rtl_dev, gran):
    run("t3_node", NODE_SMALL, "tessera.tb.t3.test_ring", testcase="ring_reduce_scatter", seed=5,
        extra_env={"TESSERA_RING_RTL_DEV": str(rtl_dev), "TESSERA_RING_GRANULARITY": str(gran)})


@pytest.mark.slow
def test_tracker_paper_size_throughput():
    """Default (paper-size, 256 x 8) Tracker: 1 update/cycle, trigger 6 cycles after the update
    (read latency 2; was 5)."""
    run("tracker", {}, "tessera.tb.t3.test_tracker", testcase="tracker_throughput", seed=1)


MCA_REPLAY = {"req_width": 8, "occ_width": 7, "wait_width": 10, "learn_log2": 4}


def test_mca_replays_model_trace():
    """Issue 15: a window of the system model's arbiter trace through the RTL MCA; identical grants."""
    from tessera.tb.t3.mca_replay import RTL_PARAMS
    assert MCA_REPLAY == RTL_PARAMS
    run("mca", MCA_REPLAY, "tessera.tb.t3.test_mca_replay", testcase="mca_replay", seed=1)


@pytest.mark.cocotb
def test_waves_write_a_vcd():
    """``WAVES=1`` / ``waves=True``: the run writes dump.vcd with the top's ports in it (on the
    MCA, the smallest cocotb-tested block: the option is the runner's, not a block's; was on the
    PE, whose extra traced build cost make test ~20 s)."""
    from tessera.tb.runner import prepare
    sim_dir, _, _ = prepare("mca", MCA_SMALL)
    for d in sim_dir.glob("obj_waves*"):
        (d / "dump.vcd").unlink(missing_ok=True)
    build = run("mca", MCA_SMALL, "tessera.tb.t3.test_mca", testcase="mca_policies", seed=2,
                waves=True)
    assert build.parent == sim_dir and build.name.startswith("obj_waves")   # (+ _O0 in the suite)
    head = (build / "dump.vcd").read_text(errors="replace")[:200000]
    assert "$enddefinitions" in head and "starve_limit" in head
