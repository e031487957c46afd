"""Fast unit tests of the Simba PE's pieces in Amaranth's simulator (seconds,
no Verilator): shift-and-add multipliers, the sequencer's op stream against an
independent model of the documented loop nest (addresses from config.py's
formulas, not from the RTL's running sums), the PPU against golden.pe.ppu,
and a whole small PE tile against golden.pe.run_tile."""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from tessera.golden import pe as golden
from tessera.hdl.pe.arith import lut_mul
from tessera.hdl.pe.config import PEConfig, PEParams, Role
from tessera.hdl.pe.ppu import PPU, latency as ppu_latency
from tessera.hdl.pe.sequencer import Sequencer

SMALL = PEParams(K0=4, C0=2, acc_width=20, wbuf_bytes=4096, ibuf_bytes=2048,
                 abuf_entries=256, ppu_depth=4)


def _offer(ctx, port, fields):
    """Present one beat (``fields`` of the payload; lists fill array fields) on a stream port."""
    ctx.set(port.valid, 1)
    for k, v in fields.items():
        if isinstance(v, list):
            for i, x in enumerate(v):
                ctx.set(getattr(port.payload, k)[i], x)
        else:
            ctx.set(getattr(port.payload, k), v)


async def _beat(ctx, port, fields):
    """One beat, then ``valid`` low (amaranth.sim testbench)."""
    _offer(ctx, port, fields)
    await ctx.tick()
    ctx.set(port.valid, 0)


async def _load_weights(ctx, dut, p, cfg, W):
    """Drive the weight image of ``cfg`` into ``w_load`` back to back (amaranth.sim testbench)."""
    for b in golden.weight_beats(p, cfg, W):
        _offer(ctx, dut.w_load, b)
        await ctx.tick()
    ctx.set(dut.w_load.valid, 0)



def _run(dut, tb, cycles=None):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(tb)
    sim.run()


# ------------------------------------------------------------------ multipliers
@pytest.mark.parametrize("sa,sb,wa,wb,stages,width", [
    (True, True, 25, 16, 2, None), (True, True, 8, 8, 0, None), (False, False, 11, 11, 2, 10),
    (False, False, 8, 4, 1, 7), (True, True, 8, 8, 3, None), (False, False, 8, 8, 2, 2)])
def test_lut_mul(sa, sb, wa, wb, stages, width):
    m = Module()
    a = Signal(signed(wa) if sa else unsigned(wa))
    b = Signal(signed(wb) if sb else unsigned(wb))
    y = lut_mul(m, a, b, stages, "t", width)
    m.d.sync += Signal().eq(1)               # a sync domain even when combinational
    rng = random.Random(1)
    lo = lambda w, s: -(1 << (w - 1)) if s else 0
    hi = lambda w, s: (1 << (w - 1)) - 1 if s else (1 << w) - 1
    cases = [(lo(wa, sa), lo(wb, sb)), (hi(wa, sa), hi(wb, sb)), (lo(wa, sa), hi(wb, sb))]
    cases += [(rng.randint(lo(wa, sa), hi(wa, sa)), rng.randint(lo(wb, sb), hi(wb, sb)))
              for _ in range(60)]

    async def tb(ctx):
        for i, (x, z) in enumerate(cases + [(0, 0)] * stages):
            ctx.set(a, x)
            ctx.set(b, z)
            if i >= stages:
                ex, ez = cases[i - stages]
                want = ex * ez if width is None else (ex * ez) % (1 << width)
                assert ctx.get(y) == want, (ex, ez, ctx.get(y))
            await ctx.tick()
    _run(m, tb)


# ------------------------------------------------------------------ sequencer
def reference_ops(cfg: PEConfig) -> list[dict]:
    """The documented schedule: for r, s, k1, c1 a sweep over the pixels in
    pixel order; sweeps other than the first (r=s=c1=0) and final (last r, s, c1)
    of an entry skip, on unpooled tiles, the rows p and columns q whose input
    row/column is outside the tile (padding).  Addresses by config.py."""
    c = cfg
    order = golden.pixel_order(c.P1, c.Q1, c.pool)
    base = golden.ibuf_region(SMALL, c.ibuf_half)[0]
    ops = []
    for r in range(c.R):
        for s in range(c.S):
            for k1 in range(c.K1):
                for c1 in range(c.C1):
                    first = r == 0 and s == 0 and c1 == 0
                    final = r == c.R - 1 and s == c.S - 1 and c1 == c.C1 - 1
                    pix = order
                    if not (first or final or c.pool):
                        pix = [(p, q) for p, q in order
                               if 0 <= p * c.stride + r - c.pad_top < c.H_in
                               and 0 <= q * c.stride + s - c.pad_left < c.W_in]
                    for i, (p, q) in enumerate(pix):
                        h, w = p * c.stride + r - c.pad_top, q * c.stride + s - c.pad_left
                        inside = 0 <= h < c.H_in and 0 <= w < c.W_in
                        ops.append({"ib_addr": base + (c1 * c.H_in + h) * c.W_in + w
                                    if inside else None,
                                    "pad": int(not inside),
                                    "wb_addr": ((r * c.S + s) * c.K1 + k1) * c.C1 + c1,
                                    "newblock": int(i == 0),
                                    "acc_addr": (k1 * c.P1 + p) * c.Q1 + q,
                                    "first": int(first), "final": int(final)})
    return ops


def sequencer_ops(p: PEParams, cfg: PEConfig, seed: int) -> list[dict]:
    dut = Sequencer(p)
    ops = []
    rng = random.Random(seed)
    expect = len(reference_ops(cfg))

    async def tb(ctx):
        for k, v in cfg.as_dict().items():
            ctx.set(getattr(dut.cfg, k), v)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(4 * expect + 200):
            rdy = rng.random() < 0.8
            ctx.set(dut.op.ready, rdy)
            if ctx.get(dut.op.valid) and rdy:
                pl = ctx.get(dut.op.payload)
                d = {k: int(getattr(pl, k)) for k in
                     ("ib_addr", "pad", "wb_addr", "newblock", "acc_addr", "first", "final")}
                if d["pad"]:
                    d["ib_addr"] = None
                ops.append(d)
            await ctx.tick()
    _run(dut, tb)
    return ops


def _cases():
    rng = np.random.default_rng(7)
    out = []
    small = {"K1": 2, "C1": 2}
    overrides = [{**small, "P1": 5, "Q1": 3}, {**small, "pool": True, "P1": 4, "Q1": 2},
                 {"K1": 3, "C1": 1, "P1": 3, "Q1": 4, "R": 3, "pad_top": 2, "stride": 2},
                 {"R": 7, "S": 7, "stride": 2, "pad_top": 3, "pad_left": 3, "K1": 1, "C1": 1,
                  "P1": 3, "Q1": 3},
                 {"R": 5, "S": 2, "stride": 2, "pad_top": 4, "pad_left": 1, "pool": False},
                 {"R": 5, "S": 5, "stride": 1, "pad_top": 4, "pad_left": 2, "pool": False,
                  "K1": 1, "C1": 2},
                 {"P1": 1, "Q1": 1, "pool": False}, {"P1": 1, "Q1": 2, "pool": False, "R": 3},
                 {**small, "pool": True, "stride": 2, "R": 3, "S": 3, "pad_top": 1},
                 {"K1": 1, "C1": 1, "pool": True, "stride": 2, "R": 3, "S": 3},
                 {**small, "ibuf_half": 2, "R": 3, "S": 3, "pad_top": 1, "pad_left": 2,
                  "pool": False}]
    for i, ov in enumerate(overrides):
        out.append(golden.random_case(SMALL, rng, **ov)[0])
    return out


@pytest.mark.parametrize("idx", range(11))
def test_sequencer_matches_loop_nest(idx):
    cfg = _cases()[idx]
    got = sequencer_ops(SMALL, cfg, idx)
    want = reference_ops(cfg)
    assert len(got) == len(want), cfg
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"op {i} of {cfg}: {g} != {w}"


# ------------------------------------------------------------------ PPU
@pytest.mark.parametrize("pool,mul_stages,big", [(False, 2, False), (True, 2, False),
                                                  (False, 1, True), (True, 3, True),
                                                  (False, 2, True)])
def test_ppu_matches_golden(pool, mul_stages, big):
    """big: full-range values (mostly saturating: the wide datapath); otherwise
    values and shift chosen so that most outputs land inside int8 (rounding)."""
    p = PEParams(K0=4, C0=2, acc_width=20, ppu_depth=4)
    rng = np.random.default_rng(3 + mul_stages + 10 * big)
    K1, n = 3, 8
    vb, bb, sb = (19, 23, 15) if big else (11, 11, 9)
    cfg = PEConfig(R=1, S=1, C1=1, K1=K1, P1=2, Q1=4, H_in=2, W_in=4, role=Role.ONLY,
                   relu=bool(pool), pool=pool,
                   shift=int(rng.integers(0, 32)) if big else 14)
    bias = rng.integers(-(1 << bb), 1 << bb, size=K1 * p.K0)
    scale = rng.integers(-(1 << sb), 1 << sb, size=K1 * p.K0)
    v = rng.integers(-(1 << vb), 1 << vb, size=(K1 * n, p.K0))
    if big:
        v[0, :] = [-(1 << 19), (1 << 19) - 1, 0, 1]
    y = np.asarray(golden.ppu(p, cfg, v.reshape(K1, n, p.K0), bias, scale)).reshape(-1, p.K0)
    if pool:                                   # 4 consecutive beats = one 2x2 block
        y = y.reshape(-1, 4, p.K0).max(axis=1)
    want = y.astype(int).tolist()
    dut = PPU(p, mul_stages)
    got = []

    async def tb(ctx):
        ctx.set(dut.load_en, 1)
        for b in golden.ppu_beats(p, cfg, bias, scale):
            ctx.set(dut.load.valid, 1)
            ctx.set(dut.load.payload.addr, b["addr"])
            ctx.set(dut.load.payload.row, b["row"])
            ctx.set(dut.load.payload.bias, b["bias"])
            ctx.set(dut.load.payload.scale, b["scale"])
            await ctx.tick()
        ctx.set(dut.load.valid, 0)
        ctx.set(dut.load_en, 0)
        ctx.set(dut.shift, cfg.shift)
        ctx.set(dut.relu, cfg.relu)
        ctx.set(dut.pool, cfg.pool)
        r = random.Random(mul_stages)
        i = 0
        for _ in range(600):
            ctx.set(dut.i.valid, i < len(v) and r.random() < 0.7)
            if i < len(v):
                for k in range(p.K0):
                    ctx.set(dut.i.payload.v[k], int(v[i, k]))
                ctx.set(dut.i.payload.k1, i // n)
            rdy = r.random() < 0.6
            ctx.set(dut.o.ready, rdy)
            if ctx.get(dut.o.valid) and rdy:
                got.append([ctx.get(dut.o.payload[k]) for k in range(p.K0)])
            if ctx.get(dut.i.valid) and ctx.get(dut.i.ready):
                i += 1
            await ctx.tick()
    _run(dut, tb)
    assert got == want


def test_ppu_latency():
    """One beat in, no back-pressure: out valid latency(mul_stages) cycles later."""
    p = PEParams(K0=2, C0=2, ppu_depth=2)
    for ms in (1, 2, 3):
        dut = PPU(p, ms)
        seen = []

        async def tb(ctx):
            ctx.set(dut.o.ready, 1)
            ctx.set(dut.i.valid, 1)
            await ctx.tick()
            ctx.set(dut.i.valid, 0)
            for t in range(1, 12):
                if ctx.get(dut.o.valid):
                    seen.append(t)
                await ctx.tick()
        _run(dut, tb)
        assert seen == [ppu_latency(ms)] == [6 + ms]


# ------------------------------------------------------------------ whole PE
TINY = dict(K0=2, C0=2, acc_width=20, wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=64,
            ppu_depth=4, mac_dsps=1)


def pe_tile(params: dict, cfg: PEConfig, seed: int, ready_prob: float):
    """Run one tile on SimbaPE in Amaranth's simulator with random back-pressure
    and psum_in gaps; returns (beats, expected beats, cycles start -> done)."""
    from tessera.hdl.pe import SimbaPE
    dut = SimbaPE(**params)
    p = dut.params
    rng = np.random.default_rng(seed)
    _, W, X, bias, scale = golden.random_case(p, rng, **{k: v for k, v in cfg.as_dict().items()})
    psum = golden.random_psum(p, cfg, rng) if cfg.role in (Role.MIDDLE, Role.LAST) else None
    exp = golden.run_tile(p, cfg, W, X, psum_in=psum, bias=bias, scale=scale)
    to_ppu = cfg.role in (Role.LAST, Role.ONLY)
    want = np.asarray(exp["out" if to_ppu else "psum_out"]).reshape(-1, p.K0).astype(int).tolist()
    got, when = [], {}
    r = random.Random(seed)

    async def tb(ctx):
        for b in golden.weight_beats(p, cfg, W):
            await _beat(ctx, dut.w_load, b)
        for b in golden.input_beats(p, cfg, X):
            await _beat(ctx, dut.i_load, b)
        if to_ppu:
            for b in golden.ppu_beats(p, cfg, bias, scale):
                await _beat(ctx, dut.p_load, b)
        for k, v in cfg.as_dict().items():
            ctx.set(getattr(dut.cfg, k), v)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        sink = dut.out if to_ppu else dut.psum_out
        ps_i = 0
        for t in range(1, 20000):
            rdy = r.random() < ready_prob
            ctx.set(sink.ready, rdy)
            ps_valid = psum is not None and ps_i < len(psum) and r.random() < ready_prob
            ctx.set(dut.psum_in.valid, ps_valid)
            if ps_valid:
                for k in range(p.K0):
                    ctx.set(dut.psum_in.payload[k], int(psum[ps_i][k]))
            if ctx.get(sink.valid) and rdy:
                got.append([ctx.get(sink.payload[k]) for k in range(p.K0)])
            if ps_valid and ctx.get(dut.psum_in.ready):
                ps_i += 1
            assert not ctx.get(dut.error)
            await ctx.tick()
            if ctx.get(dut.done):
                when["done"] = t
                break
    _run(dut, tb)
    return got, want, when.get("done")


@pytest.mark.parametrize("over,ready", [
    ({"role": Role.ONLY, "P1": 1, "Q1": 1, "C1": 3, "R": 1, "S": 3, "pool": False}, 0.5),
    ({"role": Role.MIDDLE, "K1": 2, "C1": 2, "P1": 2, "Q1": 3, "pool": False}, 0.4),
    ({"role": Role.LAST, "pool": True, "P1": 2, "Q1": 4, "K1": 2}, 0.7),
    ({"role": Role.ONLY, "R": 3, "S": 3, "pad_top": 2, "pad_left": 1, "stride": 2,
      "P1": 3, "Q1": 3, "C1": 2, "pool": False}, 1.0),
    # two accumulator entries (P1*Q1 = 2): an entry is re-read two cycles after its
    # write (the second forwarding path)
    ({"role": Role.FIRST, "P1": 1, "Q1": 2, "R": 1, "S": 3, "C1": 2, "K1": 1,
      "pool": False}, 1.0),
    # every operation final, heavy back-pressure: the result FIFO fills (credits)
    ({"role": Role.FIRST, "R": 1, "S": 1, "C1": 1, "K1": 2, "P1": 4, "Q1": 4,
      "pool": False}, 0.15)])
def test_pe_tile_matches_golden(over, ready):
    rng = np.random.default_rng(11)
    p = PEParams(**TINY)
    cfg = golden.random_case(p, rng, **over)[0]
    got, want, done = pe_tile(TINY, cfg, 5, ready)
    assert done is not None, "no done"
    assert got == want, cfg


# ------------------------------------------------------------ input double buffer
def pe_tiles(params: dict, cfgs: list[PEConfig], seed: int, ready_prob: float = 1.0,
             preload: int = 1):
    """Run ``cfgs`` one after the other on one SimbaPE (same weights/PPU
    parameters, a fresh input tile each) with a loader that streams every
    tile's input beats as early as the PE accepts them: tiles 0..preload-1
    are loaded while idle, the others while earlier tiles run.  Tile t
    starts as soon as the PE is idle and its input is loaded.  Returns a dict:
    ``got``/``want`` beats per tile, ``start``/``done`` cycles per tile,
    ``busy_loads`` (input beats per tile accepted while busy) and
    ``load_end`` (cycle of each tile's last accepted input beat)."""
    from tessera.hdl.pe import SimbaPE
    dut = SimbaPE(**params)
    p = dut.params
    rng = np.random.default_rng(seed)
    base = cfgs[0]
    _, W, _, bias, scale = golden.random_case(p, rng, **base.as_dict())
    to_ppu = base.role in (Role.LAST, Role.ONLY)
    assert base.role in (Role.FIRST, Role.ONLY)
    Xs, want = [], []
    for cfg in cfgs:
        X = rng.integers(-128, 128, size=(cfg.C1 * p.C0, cfg.H_in, cfg.W_in), dtype=np.int8)
        Xs.append(X)
        exp = golden.run_tile(p, cfg, W, X, bias=bias, scale=scale)
        want.append(np.asarray(exp["out" if to_ppu else "psum_out"]).reshape(-1, p.K0)
                    .astype(int).tolist())
    res = {"got": [], "want": want, "start": [], "done": [],
           "busy_loads": [0] * len(cfgs), "load_end": [None] * len(cfgs),
           "load_first": [None] * len(cfgs)}
    st = {"cycle": 0, "loaded": 0, "tile": -1, "end": False}
    r = random.Random(seed)

    async def control(ctx):
        await _load_weights(ctx, dut, p, base, W)
        if to_ppu:
            for b in golden.ppu_beats(p, base, bias, scale):
                ctx.set(dut.p_load.valid, 1)
                for k, v in b.items():
                    ctx.set(getattr(dut.p_load.payload, k), v)
                await ctx.tick()
            ctx.set(dut.p_load.valid, 0)
        st["weights"] = True
        for t, cfg in enumerate(cfgs):
            for k, v in cfg.as_dict().items():
                ctx.set(getattr(dut.cfg, k), v)
            while not ctx.get(dut.start_ready) or st["loaded"] <= t:
                await ctx.tick()
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            res["start"].append(st["cycle"])
            st["tile"] = t
            assert not ctx.get(dut.error), cfg
        while ctx.get(dut.busy):
            await ctx.tick()
        st["end"] = True

    async def loader(ctx):
        while not st.get("weights"):
            await ctx.tick()
        for t, (cfg, X) in enumerate(zip(cfgs, Xs)):
            while t >= preload and st["tile"] < t - preload:   # tile t-preload has started
                await ctx.tick()
            for b in golden.input_beats(p, cfg, X):
                ctx.set(dut.i_load.valid, 1)
                ctx.set(dut.i_load.payload.addr, b["addr"])
                for i, x in enumerate(b["data"]):
                    ctx.set(dut.i_load.payload.data[i], x)
                while True:
                    ok = ctx.get(dut.i_load.ready)
                    busy = ctx.get(dut.busy)
                    await ctx.tick()
                    if ok:
                        res["busy_loads"][t] += busy
                        if res["load_first"][t] is None:
                            res["load_first"][t] = st["cycle"]
                        break
                ctx.set(dut.i_load.valid, 0)
            res["load_end"][t] = st["cycle"]
            st["loaded"] = t + 1

    async def monitor(ctx):
        sink = dut.out if to_ppu else dut.psum_out
        while not st["end"] and st["cycle"] < 50000:
            rdy = r.random() < ready_prob
            ctx.set(sink.ready, rdy)
            if ctx.get(sink.valid) and rdy:
                res["got"].append([ctx.get(sink.payload[k]) for k in range(p.K0)])
            await ctx.tick()
            st["cycle"] += 1
            if ctx.get(dut.done):
                res["done"].append(st["cycle"])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(control)
    sim.add_testbench(loader)
    sim.add_testbench(monitor)
    sim.run()
    got, res["got"] = res["got"], []
    for w in want:                       # beats leave in tile order
        res["got"].append(got[:len(w)])
        got = got[len(w):]
    assert got == [], "beats after the last tile"
    return res


def _db_cfgs(halves, **over):
    rng = np.random.default_rng(17)
    p = PEParams(**TINY)
    base = golden.random_case(p, rng, **{"role": Role.ONLY, "R": 3, "S": 3, "C1": 2, "K1": 2,
                                         "P1": 3, "Q1": 3, "pool": False, **over})[0]
    return [PEConfig(**{**base.as_dict(), "ibuf_half": int(h)}) for h in halves]


@pytest.mark.parametrize("role,ready,over", [
    (Role.ONLY, 1.0, {}), (Role.FIRST, 0.6, {}),
    # short tiles (18 or 24 issue cycles, shorter than the pipeline's fill + drain): three
    # tiles in flight at once
    (Role.ONLY, 1.0, {"R": 1, "S": 1, "C1": 1, "K1": 3, "P1": 2, "Q1": 3, "H_in": 2, "W_in": 3}),
    (Role.FIRST, 1.0, {"R": 1, "S": 1, "C1": 1, "K1": 4, "P1": 2, "Q1": 3, "H_in": 2, "W_in": 3})])
def test_double_buffer_back_to_back(role, ready, over):
    """Tiles alternating LOWER/UPPER: tile t+1's input is loaded into the other
    half while tile t computes (every beat accepted while busy), tile t+1
    starts while tile t still drains (same configuration but ibuf_half), every
    result is exact, and without back-pressure consecutive tiles finish exactly
    one tile's issue cycles apart (one MAC operation per cycle across tiles)."""
    from tessera.hdl.pe.config import IbufHalf
    halves = [IbufHalf.LOWER, IbufHalf.UPPER] * 2 + [IbufHalf.LOWER]
    cfgs = _db_cfgs(halves, role=role, **over)
    res = pe_tiles(TINY, cfgs, 3, ready)
    n_in = cfgs[0].C1 * cfgs[0].H_in * cfgs[0].W_in
    assert len(res["done"]) == len(cfgs)
    for t in range(len(cfgs)):
        assert res["got"][t] == res["want"][t], f"tile {t}"
    assert res["busy_loads"][1:] == [n_in] * (len(cfgs) - 1)     # all overlapped
    ops = len(reference_ops(cfgs[0]))
    for t in range(len(cfgs) - 1):
        assert res["load_end"][t + 1] < res["done"][t]          # loaded during tile t
        assert res["start"][t + 1] < res["done"][t]             # overlapped with the drain
        if ready == 1.0:
            assert res["done"][t + 1] - res["done"][t] == ops   # no bubble between tiles


@pytest.mark.parametrize("running", ["LOWER", "UPPER", "WHOLE"])
def test_double_buffer_busy_half_held_back(running):
    """An input load into the region the running tile reads (the same half, or
    anything for a WHOLE tile) is held back (ready low) until the tile's last
    operation has been issued, then lands: the running tile still computes on
    its own data and the next tile, which reads the held-back data, is exact."""
    from tessera.hdl.pe.config import IbufHalf
    h = IbufHalf[running]
    cfgs = _db_cfgs([h, h, h])
    res = pe_tiles(TINY, cfgs, 5, 0.8)
    assert len(res["done"]) == 3
    for t in range(3):
        assert res["got"][t] == res["want"][t], f"tile {t}"
    ops = len(reference_ops(cfgs[0]))
    for t in range(2):
        assert res["load_first"][t + 1] - res["start"][t] >= ops     # not before its reads end
        assert res["start"][t + 1] > res["load_end"][t + 1]


def test_double_buffer_half_capacity():
    """IBUF_OVERFLOW is checked against the half in LOWER/UPPER mode; ibuf_half 3
    is refused (BAD_IBUF_HALF); the RTL's cfg_cause agrees with the golden model
    (``cfg_cause`` is the cause of the fields other than ``ibuf_half`` as they were
    CHECK_LATENCY cycles before, and of ``ibuf_half`` now)."""
    from tessera.hdl.pe import SimbaPE
    from tessera.hdl.pe.pe import CHECK_LATENCY
    from tessera.hdl.pe.config import ErrorCause
    dut = SimbaPE(**TINY)
    p = dut.params
    n = p.ibuf_words
    cases = []
    for half in range(4):
        for words in (n // 2, n // 2 + 1, n):
            cases.append(PEConfig(R=1, S=1, C1=1, K1=1, P1=1, Q1=1, H_in=1, W_in=words,
                                  ibuf_half=half))
    want = [golden.check_config(p, c) for c in cases]
    assert want[:6] == [0, 0, 0, 0, ErrorCause.IBUF_OVERFLOW, ErrorCause.IBUF_OVERFLOW]
    assert want[9:] == [ErrorCause.BAD_IBUF_HALF] + [ErrorCause.IBUF_OVERFLOW] * 2  # smallest code
    got = []

    async def tb(ctx):
        for c in cases:
            for k, v in c.as_dict().items():
                ctx.set(getattr(dut.cfg, k), v)
            for _ in range(CHECK_LATENCY):
                await ctx.tick()
            got.append(ctx.get(dut.cfg_cause))
    _run(dut, tb)
    assert got == [int(w) for w in want]


@pytest.mark.parametrize("extra", [2, 3])
def test_result_credits_bound_issue(extra):
    """The result-FIFO credit bound (pe.py: final results in flight + queued,
    up to the result register, <= ``fifo_depth``; two more wait in the
    ``psum_out`` register and its skid register): with ``psum_out`` stalled from
    the start, a tile of ``fifo_depth + 2`` final operations issues all of them
    (its last issue frees the input buffer: an ``i_load`` into the region it reads
    is accepted while the output is still stalled), one of ``fifo_depth + 3`` stops
    one short (the load is held back until the output moves).  Results are exact
    either way.  (``fifo_depth + 1`` / ``+ 2`` before the skid register, issue 20.)"""
    from tessera.hdl.pe import SimbaPE
    dut = SimbaPE(**TINY)
    p = dut.params
    depth = dut.latency["fifo_depth"]
    n = depth + extra                              # every operation final: R=S=C1=K1=1
    rng = np.random.default_rng(7)
    cfg, W, X, _, _ = golden.random_case(p, rng, role=Role.FIRST, R=1, S=1, C1=1, K1=1,
                                         P1=1, Q1=n, pad_top=0, pad_left=0, stride=1,
                                         pool=False)
    want = np.asarray(golden.run_tile(p, cfg, W, X)["psum_out"]).reshape(-1, p.K0)
    want = want.astype(int).tolist()
    STALL = 60
    got, seen = [], {}

    async def tb(ctx):
        for b in golden.weight_beats(p, cfg, W):
            await _beat(ctx, dut.w_load, b)
        for b in golden.input_beats(p, cfg, X):
            await _beat(ctx, dut.i_load, b)
        for k, v in cfg.as_dict().items():
            ctx.set(getattr(dut.cfg, k), v)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        # an input beat for the next tile, offered from the start (address outside
        # this tile's input words, so an accepted beat cannot change its results)
        ctx.set(dut.i_load.valid, 1)
        ctx.set(dut.i_load.payload.addr, p.ibuf_words - 1)
        for t in range(STALL + 400):
            ctx.set(dut.psum_out.ready, t >= STALL)
            if ctx.get(dut.i_load.ready) and "load" not in seen:
                seen["load"] = t
                ctx.set(dut.i_load.valid, 0)
            if ctx.get(dut.psum_out.valid) and t >= STALL:
                got.append([ctx.get(dut.psum_out.payload[k]) for k in range(p.K0)])
            await ctx.tick()
            if ctx.get(dut.done):
                break
    _run(dut, tb)
    assert got == want
    if extra == 2:
        assert seen["load"] < STALL, "all fifo_depth + 2 final operations issue while stalled"
    else:
        assert seen["load"] >= STALL, "more than fifo_depth + 2 final results buffered"


@pytest.mark.parametrize("params,over,ready", [
    # accumulation into one entry back to back (P1*Q1 = 1: the forwarding paths
    # feed the three-input accumulate), C0 = 2 with one DSP lane
    (TINY, {"role": Role.FIRST, "P1": 1, "Q1": 1, "R": 2, "S": 2, "C1": 2, "K1": 1,
            "pool": False}, 1.0),
    (dict(TINY, K0=4, C0=4, acc_width=20, wbuf_bytes=2048, mac_dsps=5),
     {"role": Role.MIDDLE, "K1": 2, "C1": 2, "P1": 2, "Q1": 3, "pool": False}, 0.6),
    (dict(TINY, K0=2, C0=1, mac_stages=4, wbuf_bytes=512),
     {"role": Role.LAST, "pool": True, "P1": 2, "Q1": 2, "K1": 2}, 0.8),
    # mac_stages 4 and 5: the pq product registers before the tree (pe_chain's timing
    # option), DSP and LUT lanes mixed
    (dict(TINY, K0=4, C0=4, acc_width=20, wbuf_bytes=2048, mac_dsps=5, mac_stages=4),
     {"role": Role.MIDDLE, "K1": 2, "C1": 2, "P1": 2, "Q1": 3, "pool": False}, 0.7),
    (dict(TINY, K0=2, C0=4, wbuf_bytes=1024, mac_dsps=3, mac_stages=5),
     {"role": Role.FIRST, "P1": 1, "Q1": 2, "R": 2, "S": 1, "C1": 2, "K1": 2,
      "pool": False}, 1.0)])
def test_mac_operand_reg_same_cycles(params, over, ready):
    """``mac_operand_reg`` (operand registers by each multiplier, the adder
    tree's last level moved into the accumulate cycle as a carry-save add)
    changes timing only: every beat exact and the done cycle the same as
    without it, wrapping accumulators included (acc_width 20)."""
    rng = np.random.default_rng(3)
    p = PEParams(**params)
    cfg = golden.random_case(p, rng, **over)[0]
    runs = {}
    for opreg in (False, True):
        got, want, done = pe_tile(dict(params, mac_operand_reg=opreg), cfg, 9, ready)
        assert got == want, opreg
        runs[opreg] = done
    assert runs[True] == runs[False] is not None


def test_mac_operand_reg_needs_two_stages():
    from tessera.hdl.pe import SimbaPE
    from tessera.params import ParamError
    with pytest.raises(ParamError, match="mac_operand_reg"):
        SimbaPE(**dict(TINY, mac_stages=1, mac_operand_reg=True))
    SimbaPE(**dict(TINY, mac_stages=1, mac_operand_reg=False))


def test_back_to_back_compare_registered():
    """The back-to-back rule compares the previous cycle's ``cfg`` (a register,
    config.py): while a tile runs, a cfg differing in more than ``ibuf_half``
    drops ``start_ready`` one cycle after it appears and keeps it low; putting
    the running configuration back (other half) raises it one cycle later."""
    from tessera.hdl.pe import SimbaPE
    from tessera.hdl.pe.config import IbufHalf
    dut = SimbaPE(**TINY)
    p = dut.params
    rng = np.random.default_rng(5)
    cfg, W, X, _, _ = golden.random_case(p, rng, role=Role.FIRST, R=1, S=1, C1=1, K1=4,
                                         P1=3, Q1=3, H_in=3, W_in=3, pad_top=0, pad_left=0,
                                         stride=1, pool=False, ibuf_half=IbufHalf.LOWER)
    other = PEConfig(**{**cfg.as_dict(), "ibuf_half": int(IbufHalf.UPPER)})
    diff = PEConfig(**{**other.as_dict(), "K1": 3})
    seen = []

    async def tb(ctx):
        def set_cfg(c):
            for k, v in c.as_dict().items():
                ctx.set(getattr(dut.cfg, k), v)
        await _load_weights(ctx, dut, p, cfg, W)
        ctx.set(dut.psum_out.ready, 1)
        set_cfg(cfg)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        set_cfg(other)
        for _ in range(60):                 # until its operations are all generated
            await ctx.tick()
            if ctx.get(dut.start_ready):
                break
        seen.append(ctx.get(dut.start_ready))        # same but ibuf_half: ready
        set_cfg(diff)
        seen.append(ctx.get(dut.start_ready))        # the compare is of the last cycle
        for _ in range(3):
            await ctx.tick()
            seen.append(ctx.get(dut.start_ready))
        set_cfg(other)
        await ctx.tick()
        seen.append(ctx.get(dut.start_ready))
    _run(dut, tb)
    assert seen == [1, 1, 0, 0, 0, 1], seen


def test_mult_impl_checks():
    """``mult_impl``: one of MULT_IMPLS; ``ecp5`` keeps the operand and product registers in
    the DSP, so it needs ``mac_operand_reg`` (one-line ParamError); the registry rejects an
    unknown value before elaboration."""
    from tessera.hdl.pe import SimbaPE
    from tessera.params import ParamError
    from tessera.registry import get
    with pytest.raises(ParamError, match="mult_impl.*needs mac_operand_reg"):
        SimbaPE(**dict(TINY, mult_impl="ecp5", mac_operand_reg=False))
    with pytest.raises(ParamError, match="mult_impl"):
        SimbaPE(**dict(TINY, mult_impl="xilinx"))
    with pytest.raises(ParamError, match="mult_impl"):
        get("pe").resolve(["mult_impl=asic"])
    from tessera.hdl.pe.pe import validate_params
    validate_params(PEParams(**dict(TINY, mult_impl="ecp5")))      # operand registers: legal


def test_idle_start_refused_on_half_causes():
    """An idle start whose only cause is the input-buffer half (ibuf_half 3:
    BAD_IBUF_HALF; LOWER with more words than a half: IBUF_OVERFLOW) is refused
    like any other: error + cause, never busy after the decision, no done and no
    output; a legal start afterwards runs (the start decision reads the cause as
    flags, pe.py ``dok``)."""
    from tessera.hdl.pe import SimbaPE
    from tessera.hdl.pe.config import ErrorCause, IbufHalf
    dut = SimbaPE(**TINY)
    n = dut.params.ibuf_words
    base = dict(R=1, S=1, C1=1, K1=1, P1=1, Q1=2, H_in=1, W_in=2, role=Role.FIRST)
    cases = [(PEConfig(**base, ibuf_half=3), ErrorCause.BAD_IBUF_HALF),
             (PEConfig(**dict(base, Q1=n // 2 + 1, W_in=n // 2 + 1), ibuf_half=IbufHalf.LOWER),
              ErrorCause.IBUF_OVERFLOW),
             (PEConfig(**base, ibuf_half=IbufHalf.UPPER), ErrorCause.NONE)]
    seen = []

    async def tb(ctx):
        ctx.set(dut.psum_out.ready, 1)
        for cfg, _ in cases:
            for k, v in cfg.as_dict().items():
                ctx.set(getattr(dut.cfg, k), v)
            await ctx.tick().repeat(6)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().repeat(2)
            busy, beats, done = ctx.get(dut.busy), 0, 0
            for _ in range(60):
                beats += ctx.get(dut.psum_out.valid)
                done += ctx.get(dut.done)
                await ctx.tick()
            seen.append((ctx.get(dut.error), ctx.get(dut.error_cause), busy, beats > 0, done))
    _run(dut, tb)
    assert seen[0] == (1, ErrorCause.BAD_IBUF_HALF, 0, False, 0), seen
    assert seen[1] == (1, ErrorCause.IBUF_OVERFLOW, 0, False, 0), seen
    assert seen[2] == (0, 0, 1, True, 1), seen
