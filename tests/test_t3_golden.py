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


@pytest.mark.parametrize("rl", [2, 1])
def test_tracker_hand_sequence(rl):
    t = _ready_tracker(sets=4, ways=1, overflow=1, trig_depth=1, threshold=6, read_latency=rl)
    seq = [(1, 0, 0x30, 4, 0), (1, 0, 0x20, 2, 1)] + [None] * (4 + rl)
    outs = [t.step(u is not None, u, True) for u in seq]
    # read latency 2 (default): cycle 0 accept, 1 SA, 2 S1, 3 S2, 4 S3 counts 4; the second
    # update reaches 6 in S3 at cycle 5, S4 pushes it into the FIFO in cycle 6: trigger visible
    # in cycle 7 (6 cycles after its acceptance; read latency 1: no SA, 5 cycles)
    assert [o["upd_ready"] for o in outs] == [True] * (6 + rl)
    assert [o["trig"] for o in outs] == [None] * (5 + rl) + [(1, 0, 0x20)]
    assert t.latency == 4 + rl
    assert t.occupancy == 0
    # set 1 holds one way; a second tag goes to the overflow entry, a third evicts the way's tile,
    # whose record re-enters (and, still conflicting, evicts again): the input is never held
    for u in [(1, 1, 0x10, 1, 0), (5, 1, 0x50, 1, 0), (9, 1, 0x90, 1, 0)]:
        assert t.step(True, u, True)["upd_ready"]
    for _ in range(5):
        t.step(False, None, True)
    assert t.conflicts == 1 and t.evictions >= 1 and t.occupancy == 2
    # completing the three tiles (5 more elements each) drains everything, each tile once
    trigs, pending = [], [(1, 1, 0x18, 5, 0), (5, 1, 0x58, 5, 0), (9, 1, 0x98, 5, 0)]
    for _ in range(40):
        u = pending[0] if pending else None
        o = t.step(u is not None, u, True)
        if u is not None and o["upd_ready"]:
            pending.pop(0)
        if o["trig_valid"]:
            trigs.append(o["trig"])
    assert sorted(trigs) == [(1, 1, 0x10), (5, 1, 0x50), (9, 1, 0x90)]
    assert t.idle() and t.occupancy == 0 and t.err == 0


@pytest.mark.parametrize("rl", [2, 1])
def test_tracker_overcount_keeps_state(rl):
    t = _ready_tracker(sets=1, ways=2, overflow=0, trig_depth=2, threshold=4, read_latency=rl)
    for u in [(0, 0, 8, 3, 0), (0, 0, 4, 3, 0), (0, 0, 6, 1, 0)] + [None] * (2 + rl):
        o = t.step(u is not None, u, True)
    assert t.err == 1 and o["trig"] is None    # 3 + 3 > 4 discarded (committed in 4 + rl)
    assert t.step()["trig"] is None
    assert t.step()["trig"] == (0, 0, 6)        # 3 + 1 = 4: start address min(8, 6)


def _storm(n_tiles, victims, seed=3):
    """One in-order stream, ``n_tiles`` live tiles in set 0 (2 ways, 1 overflow entry), 3 rounds
    of 4-element updates, every tile started before any completes; random trigger back-pressure.
    Returns (finished, triggers, model)."""
    import random
    rng = random.Random(seed)
    t = _ready_tracker(sets=2, ways=2, overflow=1, trig_depth=1, threshold=12, victims=victims)
    tiles = [(2 * k, k % 3) for k in range(n_tiles)]
    stream = [(wg, wf, 0x100 * k + 4 * (2 - r), 4, 0) for r in range(3)
              for k, (wg, wf) in enumerate(tiles)]
    trigs, pos = [], 0
    for _ in range(3000):
        u = stream[pos] if pos < len(stream) else None
        ready = rng.random() < 0.7
        o = t.step(u is not None, u, ready)
        if o["trig_valid"] and ready:
            trigs.append(o["trig"])
        if u is not None and o["upd_ready"]:
            pos += 1
        if pos == len(stream) and t.idle():
            return True, trigs, tiles, t
    return False, trigs, tiles, t


def test_tracker_conflict_storm_never_blocks():
    """More live tiles in one set than its ways and the overflow entry (the old design held this
    stream until reset from the 4th tile on): evictions and victim re-entry finish it, every tile
    once with its start address.  With more live tiles than entries + victim records the input
    is held (``stall``), as any finite Tracker must."""
    for n, victims in ((4, 1), (5, 1), (6, 4)):
        ok, trigs, tiles, t = _storm(n, victims)
        assert ok, (n, victims)
        assert sorted(trigs) == sorted((wg, wf, 0x100 * k) for k, (wg, wf) in enumerate(tiles))
        assert t.evictions > 0 and t.occupancy == 0 and t.err == 0
    ok, trigs, _, t = _storm(9, 1)
    assert not ok and trigs == [] and t.step(True, (99, 0, 0, 1, 0), True)["stall"]


def test_dma_table_blocks():
    m = DmaTableModel(entries=4, wf_width=3, addr_width=24)
    m.program(0, DmaEntry(8, 11, 0x100, 2, 0x900, OP_UPDATE, 2))
    m.program(1, DmaEntry(16, 31, 0x400, 1, 0x1400, OP_UPDATE, 1))
    m.program(2, DmaEntry(40, 47, 0, 0, 0, OP_NONE, 1))
    outs = [m.step(True, trig, True) for trig in [(1, 1, 0x180), (2, 3, 0x4a0), (1, 0, 0x100),
                                                  (5, 0, 0x0), (7, 0, 0)]]
    outs += [m.step(cmd_ready=True) for _ in range(3)]      # command 3 cycles after its trigger
    cmds = [o["cmd"] for o in outs if o["cmd_valid"]]
    assert cmds == [{"src": 0x4a0, "dst_dev": 1, "dst": 0x14a0, "tiles": 1, "op": 1, "wg": 2, "wf": 3},
                    {"src": 0x100, "dst_dev": 2, "dst": 0x900, "tiles": 2, "op": 1, "wg": 1, "wf": 0}]
    assert (m.done, m.misses) == (1, 1)


def _grant(o):
    """Source granted in a cycle (0 compute, 1 communication, None)."""
    return 1 if o["m_ready"] else 0 if o["c_ready"] else None


def test_arbiter_policies_hand():
    cfg = dict(threshold=3, starve_limit=2)
    rr = ArbiterModel()
    o = [rr.step(True, True, True, 0, policy=POLICY_RR, **cfg) for _ in range(4)]
    assert [_grant(x) for x in o] == [0, 1, 0, 1]
    # the grant register: a request granted in cycle t is on ``out`` in cycle t+1
    assert [x["out_valid"] for x in o] == [False, True, True, True]
    assert [x["out_src"] for x in o[1:]] == [0, 1, 0]
    cf = ArbiterModel()
    assert [_grant(cf.step(True, True, True, 0, policy=POLICY_COMPUTE_FIRST, **cfg))
            for _ in range(3)] == [0, 0, 0]
    mca = ArbiterModel()
    # compute always valid: comm waits 0, 1, then starves at wait 2 and goes first
    o = [mca.step(True, True, True, 0, policy=POLICY_MCA, **cfg) for _ in range(4)]
    assert [_grant(x) for x in o] == [0, 0, 1, 0]
    # no compute, occupancy at the threshold: comm blocked until it starves
    mca = ArbiterModel()
    o = [mca.step(False, True, True, 3, policy=POLICY_MCA, **cfg) for _ in range(3)]
    assert [_grant(x) for x in o] == [None, None, 1]
    # drain: comm first even with compute and full threshold
    assert _grant(mca.step(True, True, True, 9, policy=POLICY_MCA, drain=True, **cfg)) == 1
    # no grant while the queue cannot take a command; the register holds the last grant
    b = ArbiterModel()
    o = [b.step(True, False, r, 0, policy=POLICY_RR, **cfg) for r in (True, False, True)]
    assert [x["c_ready"] for x in o] == [True, False, True]
    assert [x["out_valid"] for x in o] == [False, True, True]


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
