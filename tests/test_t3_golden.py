"""Golden T3 models (``tessera.golden.t3``) and the RTL programming wrapper against hand-computed
cycle sequences and the paper's 4-GPU example (§4.2, §4.4, §4.5).  Pure Python, fast."""
import numpy as np
import pytest

from tessera.golden.t3 import (OP_NONE, OP_UPDATE, POLICY_COMPUTE_FIRST, POLICY_MCA, POLICY_RR,
                               ArbiterModel, DmaEntry, DmaTableModel, TrackerModel)
from tessera.hdl.t3.programming import node_program
from tessera.sim_models.t3.address_space import configure_gemm_rs


def _ready_tracker(**kw):
    t = TrackerModel(**kw)
    for _ in range(t.sets):
        assert t.step()["upd_ready"] is False          # clear sweep: one set per cycle
    return t


def test_tracker_hand_sequence():
    t = _ready_tracker(sets=4, ways=1, overflow=1, trig_depth=1, threshold=6)
    seq = [(1, 0, 0x30, 4, 0), (1, 0, 0x20, 2, 1), None, None]
    outs = [t.step(u is not None, u, True) for u in seq]
    # cycle 0 accept, cycle 1 S1 counts 4, cycle 2 S1 reaches 6 -> FIFO, cycle 3 trigger visible
    assert [o["upd_ready"] for o in outs] == [True, True, True, True]
    assert [o["trig"] for o in outs] == [None, None, None, (1, 0, 0x20)]
    assert t.occupancy == 0
    # set 1 holds one way; a second tag goes to the overflow entry, a third stalls
    for u in [(1, 1, 0, 1, 0), (5, 1, 0, 1, 0), (9, 1, 0, 1, 0)]:
        t.step(True, u, True)
    o = [t.step(False, None, True) for _ in range(3)]
    assert t.conflicts == 1 and t.occupancy == 2
    # S1 allocates the way (cycle +1), the overflow entry (+2), then holds the third tag (+3 ...)
    assert [x["upd_ready"] for x in o] == [False, False, False] and o[-1]["stall"]


def test_tracker_overcount_keeps_state():
    t = _ready_tracker(sets=1, ways=2, overflow=0, trig_depth=2, threshold=4)
    for u in [(0, 0, 8, 3, 0), (0, 0, 4, 3, 0), (0, 0, 6, 1, 0), None]:
        o = t.step(u is not None, u, True)
    assert t.err == 1 and o["trig"] is None    # 3 + 3 > 4 discarded
    assert t.step()["trig"] == (0, 0, 6)        # 3 + 1 = 4: start address min(8, 6)


def test_dma_table_blocks():
    m = DmaTableModel(entries=4, wf_width=3, addr_width=24)
    m.program(0, DmaEntry(8, 11, 0x100, 2, 0x900, OP_UPDATE, 2))
    m.program(1, DmaEntry(16, 31, 0x400, 1, 0x1400, OP_UPDATE, 1))
    m.program(2, DmaEntry(40, 47, 0, 0, 0, OP_NONE, 1))
    outs = [m.step(True, trig, True) for trig in [(1, 1, 0x180), (2, 3, 0x4a0), (1, 0, 0x100),
                                                  (5, 0, 0x0), (7, 0, 0)]]
    outs.append(m.step())
    cmds = [o["cmd"] for o in outs if o["cmd_valid"]]
    assert cmds == [{"src": 0x4a0, "dst_dev": 1, "dst": 0x14a0, "tiles": 1, "op": 1, "wg": 2, "wf": 3},
                    {"src": 0x100, "dst_dev": 2, "dst": 0x900, "tiles": 2, "op": 1, "wg": 1, "wf": 0}]
    assert (m.done, m.misses) == (1, 1)


def test_arbiter_policies_hand():
    cfg = dict(threshold=3, starve_limit=2)
    rr = ArbiterModel()
    src = [rr.step(True, True, True, 0, policy=POLICY_RR, **cfg)["out_src"] for _ in range(4)]
    assert src == [0, 1, 0, 1]
    cf = ArbiterModel()
    assert [cf.step(True, True, True, 0, policy=POLICY_COMPUTE_FIRST, **cfg)["out_src"]
            for _ in range(3)] == [0, 0, 0]
    mca = ArbiterModel()
    # compute always valid: comm waits 0, 1, then starves at wait 2 and goes first
    o = [mca.step(True, True, True, 0, policy=POLICY_MCA, **cfg) for _ in range(4)]
    assert [x["out_src"] for x in o] == [0, 0, 1, 0]
    # no compute, occupancy at the threshold: comm blocked until it starves
    mca = ArbiterModel()
    o = [mca.step(False, True, True, 3, policy=POLICY_MCA, **cfg) for _ in range(3)]
    assert [x["out_valid"] for x in o] == [False, False, True]
    # drain: comm first even with compute and full threshold
    assert mca.step(True, True, True, 9, policy=POLICY_MCA, drain=True, **cfg)["out_src"] == 1


def test_arbiter_dynamic_threshold_table():
    a = ArbiterModel(occ_width=6, learn_log2=2)
    for occ in (20, 30, 25, 27):            # mean 25 >= bins[0]=24 -> table[0] = 5
        a.step(False, False, True, occ, policy=POLICY_MCA, dynamic=True, learn=True)
    assert a.dyn_valid and a.dyn_thr == 5
    for occ in (1, 2, 1, 2):                # mean 1 < 4 -> no limit
        a.step(False, False, True, occ, policy=POLICY_MCA, dynamic=True, learn=False)
        a.step(False, False, True, occ, policy=POLICY_MCA, dynamic=True, learn=True)
    assert a.dyn_thr == 5                   # window restarted every other cycle: not complete
    for occ in (1, 2, 1, 2):
        a.step(False, False, True, occ, policy=POLICY_MCA, dynamic=True, learn=True)
    assert a.dyn_thr == 63


def test_node_program_paper_example():
    cfg = configure_gemm_rs(256, 256, (64, 64), (32, 32), stages=4, n_devices=4)
    p = node_program(cfg.devices[0])
    assert p.threshold == 2048
    # chunks 1, 2 DMA'd per tile (merged into one range entry each), chunk 3 completion-only
    assert [(e.key_lo >> 3, e.key_hi >> 3, e.op, e.tiles, e.dst_dev) for e in p.entries] == \
        [(4, 7, OP_UPDATE, 1, 3), (8, 11, OP_UPDATE, 1, 3), (12, 15, OP_NONE, 1, 0)]
    g = node_program(configure_gemm_rs(256, 256, (64, 64), (32, 32), stages=4, n_devices=4,
                                       dma_granularity=4).devices[0])
    assert [e.tiles for e in g.entries] == [4] * 8 + [1]


def test_node_program_rejects_what_the_rtl_cannot_do():
    clipped = configure_gemm_rs(100, 64, (32, 32), (16, 16), stages=4, n_devices=4)
    with pytest.raises(ValueError, match="single threshold"):
        node_program(clipped.devices[0])
    cfg = configure_gemm_rs(256, 256, (64, 64), (32, 32), stages=4, n_devices=4, dma_granularity=1)
    with pytest.raises(ValueError, match="entries"):
        node_program(configure_gemm_rs(256, 256, (64, 64), (32, 32), stages=4, n_devices=4,
                                       dma_granularity=2).devices[0], entries=8)
    with pytest.raises(ValueError, match="count_width"):
        node_program(cfg.devices[0], count_width=10)


def test_rtl_parameters_validated():
    from tessera.params import ParamError
    from tessera.registry import get
    with pytest.raises(ParamError, match="sets"):
        get("tracker").resolve(["sets=3"])
    with pytest.raises(ParamError, match="wg_width"):
        get("tracker").elaborate_checked(get("tracker").resolve(["sets=512", "wg_width=8"]))
    with pytest.raises(ParamError, match="learn_log2"):
        get("mca").resolve(["learn_log2=40"])
    with pytest.raises(ParamError, match="entries"):
        get("dma_table").resolve(["entries=0"])
