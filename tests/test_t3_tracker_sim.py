"""Tracker RTL (``tessera.hdl.t3.tracker``) in lock-step with ``TrackerModel`` on amaranth.sim:
every output compared every cycle, on small configurations whose streams hammer one or two sets
(back-to-back same-tile and same-set items at every pipeline distance, overflow allocation,
evictions and victim re-entry, trigger back-pressure).  Fast (no Verilator); the
cocotb test ``tb/t3/test_tracker.py`` is the verification of record."""
import random

import pytest
from amaranth.sim import Simulator

from tessera.golden.t3 import TrackerModel
from tessera.hdl.t3.tracker import Tracker

# (Tracker parameters, live tiles at a time)
CONFIGS = [
    (dict(sets=4, ways=2, overflow=1, trig_depth=1, victims=1), 5),
    (dict(sets=2, ways=1, overflow=1, trig_depth=2, victims=2), 2),
    (dict(sets=2, ways=1, overflow=0, trig_depth=2, victims=1), 2),    # livelocked before
    (dict(sets=1, ways=3, overflow=2, trig_depth=1, victims=1), 7),
    (dict(sets=64, ways=2, overflow=1, trig_depth=2, victims=2), 3),   # SRAM set memory (> 1 kbit)
    # narrow fields: the trigger FIFO (<= 64 bits) in registers (_RegFIFO), as in the formal proofs
    (dict(sets=2, ways=1, overflow=1, trig_depth=1, victims=1, wg_width=3, addr_width=2), 3),
    # read latency 1 (no SA stage; the earlier pipeline, trigger at t+5): register and SRAM sets
    (dict(sets=4, ways=2, overflow=1, trig_depth=1, victims=1, read_latency=1), 5),
    (dict(sets=64, ways=2, overflow=1, trig_depth=2, victims=2, read_latency=1), 3),
]
WIDTHS = dict(wg_width=8, wf_width=1, addr_width=10, count_width=6, n_width=3)


def _stream(rng, c, live_max, n, thr):
    """About ``n`` updates of at most ``live_max`` live tiles, in one set of a small Tracker (so
    that it evicts); each tile gets exactly ``thr`` elements and is not reused."""
    out, live = [], {}
    w = {**WIDTHS, **c}
    tiles = [(wg, wf) for wg in range(1 << w["wg_width"]) for wf in range(2)
             if wg % c["sets"] == 0 or c["sets"] > 8]
    rng.shuffle(tiles)
    tiles_all = list(tiles)
    while len(out) < n or live:
        if not tiles:                        # narrow: reuse the tiles that have triggered
            tiles = [t for t in tiles_all if t not in live]
            rng.shuffle(tiles)
        if len(out) < n and len(live) < live_max:
            live[tiles.pop()] = thr
        t = rng.choice(list(live))
        k = min(live[t], rng.randint(1, 3))
        live[t] -= k
        if live[t] == 0:
            del live[t]
        out.append((t[0], t[1], rng.randrange(1 << w["addr_width"]), k, rng.randrange(3)))
    return out


def _lockstep(c, stream, rng, thr=6, min_trigs=20):
    """Run ``stream`` through the Tracker of config ``c`` and ``TrackerModel`` in lock-step (every
    output compared every cycle); returns the model."""
    dut = Tracker(**{**WIDTHS, **c})
    model = TrackerModel(threshold=thr, **{k: v for k, v in c.items() if k not in WIDTHS})
    ready_p = rng.choice([1.0, 0.6])

    async def bench(ctx):
        ctx.set(dut.threshold, thr)
        pos, trigs, n = 0, 0, 0
        while n < 8000:
            v = pos < len(stream) and rng.random() < 0.9
            u = stream[pos] if v else None
            tr = rng.random() < ready_p
            ctx.set(dut.upd.valid, v)
            if v:
                ctx.set(dut.upd.payload, dict(zip(("wg", "wf", "addr", "n", "src"), u)))
            ctx.set(dut.trig.ready, tr)
            exp = model.step(v, u, tr)
            got = {"upd_ready": ctx.get(dut.upd.ready), "trig_valid": ctx.get(dut.trig.valid),
                   "err_count": ctx.get(dut.err_count), "conflicts": ctx.get(dut.conflicts),
                   "evictions": ctx.get(dut.evictions), "occupancy": ctx.get(dut.occupancy),
                   "busy": ctx.get(dut.busy), "stall": ctx.get(dut.stall)}
            for k, g in got.items():
                assert g == exp[k], (n, k, g, exp[k])
            if got["trig_valid"]:
                t = ctx.get(dut.trig.payload)
                assert (t.wg, t.wf, t.addr) == exp["trig"], n
                trigs += tr
            if v and got["upd_ready"]:
                pos += 1
            await ctx.tick()
            n += 1
            if pos == len(stream) and model.idle():
                break
        assert pos == len(stream) and model.idle(), "stream did not finish"
        assert trigs > min_trigs

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return model


@pytest.mark.parametrize("cfg", range(len(CONFIGS)))
@pytest.mark.parametrize("seed", [1, 2])
def test_tracker_matches_golden_model(cfg, seed):
    c, live_max = CONFIGS[cfg]
    thr = 6
    rng = random.Random(seed * 100 + cfg)
    stream = _stream(rng, c, live_max, 400, thr)
    _lockstep(c, stream, rng, thr)


@pytest.mark.parametrize("cfg", [0, 6])
def test_update_above_threshold_is_an_overcount(cfg):
    """An update whose own n exceeds the threshold (n = 7 > 6) is an over-count on a hit and on a
    miss: discarded, counted in ``err_count``, no entry allocated or changed (the S3 decision's
    ``s3_kok`` = valid and n <= threshold); the other tiles' streams go on and trigger as the
    model says.  Lock-step with the golden model."""
    c, live_max = CONFIGS[cfg]
    thr = 6
    rng = random.Random(77 + cfg)
    stream = _stream(rng, c, live_max, 150, thr)
    out = []
    for k, u in enumerate(stream):                # after some updates, one of n = 7 to its tile
        out.append(u)
        if k % 5 == 2:
            out.append((u[0], u[1], rng.randrange(1 << WIDTHS["addr_width"]), 7, rng.randrange(3)))
    model = _lockstep(c, out, rng, thr, min_trigs=5)
    assert model.err >= len(stream) // 5


@pytest.mark.parametrize("depth", [4, 7])
def test_victim_fifo_merge_semantics(depth):
    """The Tracker's victim FIFO (``_VictimFIFO``) alone against its documented behaviour, with
    back-to-back pushes of one tile (which the Tracker's streams rarely make): a record pushed in
    cycle c lands in c+1, merged into the waiting record of its tile (counts added, smaller
    address kept) -- into the one read out when that is popped in c+1 -- else appended; the head
    is read out first-word-fall-through (its ``wg`` also from a register, ``r_wg``); ``level``
    counts the slots plus a push not landed."""
    from amaranth import Module
    from tessera.hdl.t3.tracker import _VictimFIFO, update_layout
    lay = update_layout(16, 3, 48, 16)
    m = Module()
    m.submodules.f = f = _VictimFIFO(lay, depth)
    rng = random.Random(depth)
    queue, pending = [], None                     # the reference: records, the push in flight

    def merge(a, b):
        return {**a, "n": a["n"] + b["n"], "addr": min(a["addr"], b["addr"])}

    def same(a, b):
        return (a["wg"], a["wf"]) == (b["wg"], b["wf"])

    async def bench(ctx):
        nonlocal queue, pending
        for cyc in range(4000):
            level = len(queue) + (pending is not None)
            we = rng.random() < 0.6 and level < depth
            rec = {"wg": rng.randrange(3), "wf": rng.randrange(2), "n": rng.randrange(50),
                   "src": 3, "addr": rng.choice([rng.randrange(1 << 48), rng.randrange(8)])}
            re = rng.random() < 0.4
            ctx.set(f.w_en, we)
            ctx.set(f.w_data, rec)
            ctx.set(f.r_en, re)
            head = queue[0] if queue else None
            if head is not None and pending is not None and same(head, pending):
                head = merge(head, pending)
            assert ctx.get(f.level) == level, cyc
            assert ctx.get(f.r_rdy) == (head is not None), cyc
            if head is not None:
                got = ctx.get(f.r_data)
                assert (got.wg, got.wf, got.addr, got.n) == \
                    (head["wg"], head["wf"], head["addr"], head["n"]), cyc
                assert ctx.get(f.r_wg) == head["wg"], cyc       # the registered copy
            if pending is not None:               # the push of the previous cycle lands
                hit = [i for i, q in enumerate(queue) if same(q, pending)]
                if hit:
                    queue[hit[0]] = merge(queue[hit[0]], pending)
                else:
                    queue.append(pending)
            if re and head is not None:
                queue.pop(0)
            pending = rec if we else None
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
