"""cocotb testbench of a chain of N Simba PEs (pe_chain) doing cross-PE reduction.

Every PE gets its own slice of the input channels (same tile shape); the
chain's output must equal (a) the golden FIRST -> MIDDLE -> ... -> LAST
reduction and (b) one PE computing the whole channel range (golden ONLY).
The PEs run concurrently: the chain finishes within a few cycles of one PE's
MAC operation count.  Random back-pressure on ``out`` and random gaps on loads.
"""
from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from tessera.golden import pe as golden
from tessera.hdl.pe.config import ErrorCause, PEConfig, PEParams, Role
from tessera.tb.common import StreamSink, StreamSource, TBBase, load_manifest, pack
from tessera.tb.pe.test_pe import _flat, _lanes


class ChainTB(TBBase):
    def __init__(self, dut, ready_prob=1.0, idle_prob=0.0):
        super().__init__(dut)
        self.n = self.params.pop("n")
        self.p = PEParams(**self.params)
        man = load_manifest()
        st = {s["name"]: s["payload_fields"] for s in man["streams"]}
        self.cfg_fields = next(x for x in man["ports"] if x["name"] == "cfg")["fields"]
        self.w = StreamSource(dut, "w_load", self.clk, st["w_load"], idle_prob, self.rng)
        self.i = StreamSource(dut, "i_load", self.clk, st["i_load"], idle_prob, self.rng)
        self.pl = StreamSource(dut, "p_load", self.clk, st["p_load"], idle_prob, self.rng)
        self.o = StreamSink(dut, "out", self.clk, st["out"], ready_prob, self.rng)
        dut.start.value = 0

    async def pulse_start(self, cfg: PEConfig, around: PEConfig | None = None):
        """``start`` for one cycle with ``cfg``; with ``around``, ``cfg`` is shown only
        in the start cycle (``around`` for 8 cycles before and from the next cycle on)."""
        if around is not None:
            self.dut.cfg.value = pack(self.cfg_fields, around.as_dict())
            await self.clocks(8)
        self.dut.cfg.value = pack(self.cfg_fields, cfg.as_dict())
        self.dut.start.value = 1
        await RisingEdge(self.clk)
        self.dut.start.value = 0
        if around is not None:
            self.dut.cfg.value = pack(self.cfg_fields, around.as_dict())

    async def run_case(self, base: PEConfig, parts, bias, scale, name, around=None):
        """``around``: a cfg shown on ``cfg`` for 8 cycles before and from the cycle
        after the start (the start's cfg only in its cycle)."""
        p, n = self.p, self.n
        for k, (W, X) in enumerate(parts):
            cfg_k = PEConfig(**{**base.as_dict(), "role": int(Role.FIRST)})
            for b in golden.weight_beats(p, cfg_k, W):
                self.w.send_nowait({"pe": k, **{f"beat.{key}": v for key, v in _flat(b).items()}})
            for b in golden.input_beats(p, cfg_k, X):
                self.i.send_nowait({"pe": k, **{f"beat.{key}": v for key, v in _flat(b).items()}})
        for b in golden.ppu_beats(p, base, bias, scale):
            self.pl.send_nowait(_flat(b))
        for s in (self.w, self.i, self.pl):
            await s.wait_idle()
        # golden: the chain, stage by stage
        psum = None
        roles = [Role.ONLY] if n == 1 else [Role.FIRST] + [Role.MIDDLE] * (n - 2) + [Role.LAST]
        for role, (W, X) in zip(roles, parts):
            cfg = PEConfig(**{**base.as_dict(), "role": int(role)})
            res = golden.run_tile(p, cfg, W, X, psum_in=psum, bias=bias, scale=scale)
            psum = res["psum_out"] if role in (Role.FIRST, Role.MIDDLE) else res["out"]
        expected = np.asarray(psum).reshape(-1, p.K0).tolist()
        roomy = PEParams(p.K0, p.C0, p.acc_width, 1 << 22, 1 << 20, 4096, 256)
        whole_cfg = PEConfig(**{**base.as_dict(), "role": int(Role.ONLY), "C1": base.C1 * n})
        whole = golden.run_tile(roomy, whole_cfg, np.concatenate([w for w, _ in parts], axis=1),
                                np.concatenate([x for _, x in parts], axis=0),
                                bias=bias, scale=scale)["out"]
        self.check_equal(expected, np.asarray(whole).reshape(-1, p.K0).tolist(),
                         "golden chain != golden single PE")
        n0 = len(self.o.items)
        await self.pulse_start(base, around)
        cycles = 0
        while True:
            await RisingEdge(self.clk)
            cycles += 1
            if int(self.dut.done.value):
                break
            assert cycles < 100000, "chain did not finish"
        self.check(not int(self.dut.error.value), "error")
        got = [_lanes(b, p.K0) for b in self.o.items[n0:]]
        self.check_equal(len(got), len(expected), f"{name}: beats")
        for j, (g, e) in enumerate(zip(got, expected)):
            self.check_equal(g, e, f"{name}: beat {j}")
        self.cycles += cycles
        return cycles


def _parts(tb, base, rng):
    out = []
    for _ in range(tb.n):
        _, W, X, _, _ = golden.random_case(tb.p, rng, **base.as_dict())
        out.append((W, X))
    return out


@cocotb.test()
async def demo(dut):
    tb = ChainTB(dut, 0.8, 0.2)
    await tb.reset()
    rng = np.random.default_rng(tb.seed)
    base, _, _, b, s = golden.random_case(tb.p, rng, role=Role.ONLY, pool=False)
    await tb.run_case(base, _parts(tb, base, rng), b, s, "demo")
    tb.report("demo", what=f"{tb.n}-PE chain: a random tile, every output beat vs golden "
                           "single-PE reduction")


@cocotb.test()
async def random_chain(dut):
    """Random tiles (with and without pooling), random back-pressure on out."""
    tb = ChainTB(dut, 0.6, 0.3)
    await tb.reset()
    rng = np.random.default_rng(tb.seed)
    for k in range(6):
        base, _, _, b, s = golden.random_case(tb.p, rng, role=Role.ONLY, pool=bool(k % 2))
        await tb.run_case(base, _parts(tb, base, rng), b, s, f"chain{k}")
    tb.report("random_chain")


@cocotb.test()
async def concurrent(dut):
    """No back-pressure: the N PEs overlap, so the chain takes about one PE's
    operation count (plus the pipeline), not N times it."""
    tb = ChainTB(dut, 1.0, 0.0)
    await tb.reset()
    rng = np.random.default_rng(tb.seed)
    base, _, _, b, s = golden.random_case(tb.p, rng, role=Role.ONLY, pool=False, R=3, S=3,
                                          C1=2, K1=2, P1=4, Q1=4, stride=1)
    cycles = await tb.run_case(base, _parts(tb, base, rng), b, s, "concurrent")
    ops = base.R * base.S * base.C1 * base.K1 * base.P1 * base.Q1
    tb.check(cycles <= ops + 8 + 2 * tb.n, f"chain took {cycles} cycles for {ops} ops per PE")
    tb.report("concurrent")


# ----------------------------------------------------------------------------------------
# Review tests (pereview)

@cocotb.test()
async def chain_ppu_overflow(dut):
    """K1 > ppu_depth is illegal only for the LAST PE (PPU_OVERFLOW), legal for FIRST /
    MIDDLE.  Contract (config.py): an illegal configuration raises error, computes and
    emits nothing, busy stays low.  The chain must not start its FIRST/MIDDLE PEs."""
    tb = ChainTB(dut, 1.0, 0.0)
    await tb.reset()
    p = tb.p
    cfg = PEConfig(R=1, S=1, C1=1, K1=p.ppu_depth + 1, P1=1, Q1=1, H_in=1, W_in=1,
                   stride=1, role=int(Role.ONLY))
    for role in (Role.FIRST, Role.MIDDLE, Role.LAST):
        want = ErrorCause.PPU_OVERFLOW if role == Role.LAST else ErrorCause.NONE
        tb.check_equal(golden.check_config(p, PEConfig(**{**cfg.as_dict(), "role": int(role)})),
                       want, f"golden verdict for {role.name}")
    tb.dut.cfg.value = pack(tb.cfg_fields, cfg.as_dict())
    tb.dut.start.value = 1
    await RisingEdge(tb.clk)
    tb.dut.start.value = 0
    await tb.clocks(200)
    tb.check_equal((int(dut.error.value), int(dut.error_cause.value)),
                   (1, int(ErrorCause.PPU_OVERFLOW)), "chain error")
    tb.check_equal(int(dut.busy.value), 0, "chain busy after an illegal config (hung)")
    tb.report("chain_ppu_overflow")


@cocotb.test()
async def chain_start_while_busy(dut):
    """start held high while the chain is busy must be ignored (contract: start while
    busy is ignored).  The FIRST/MIDDLE PEs finish a few cycles before the LAST one
    (PPU pipeline); they must not take the start in that window."""
    tb = ChainTB(dut, 1.0, 0.0)
    await tb.reset()
    rng = np.random.default_rng(tb.seed)
    base, _, _, b, s = golden.random_case(tb.p, rng, role=Role.ONLY, pool=False, K1=1,
                                          P1=2, Q1=2)
    state = {"done": False}

    async def hammer():
        from cocotb.triggers import ReadOnly, Timer
        while not int(dut.busy.value):
            await RisingEdge(tb.clk)
        await tb.clocks(2)
        while True:
            await RisingEdge(tb.clk)
            await ReadOnly()
            busy, done = int(dut.busy.value), int(dut.done.value)
            await Timer(1, unit="ns")
            if done or state["done"]:
                dut.start.value = 0
                return
            dut.start.value = busy

    cocotb.start_soon(hammer())
    await tb.run_case(base, _parts(tb, base, rng), b, s, "tile with start held while busy")
    state["done"] = True
    dut.start.value = 0
    n0 = len(tb.o.items)
    await tb.clocks(300)
    tb.check_equal(int(dut.busy.value), 0, "chain still busy after done (a PE took the start)")
    tb.check_equal(len(tb.o.items), n0, "beats after done")
    tb.report("chain_start_while_busy")


@cocotb.test()
async def chain_bad_pe_index(dut):
    """A load beat addressed to a PE index >= n (the pe field has spare codes when n is
    not a power of two) must not wedge the load stream: it should be refused with an
    error or dropped visibly, not left pending forever ahead of the legal beats."""
    tb = ChainTB(dut, 1.0, 0.0)
    await tb.reset()
    n = tb.n
    if n & (n - 1) == 0:
        return                                        # no spare index codes
    tb.w.send_nowait({"pe": n, "beat.addr": 0, "beat.row": 0})
    tb.w.send_nowait({"pe": 0, "beat.addr": 0, "beat.row": 0})
    await tb.clocks(50)
    tb.check_equal((tb.w.sent, int(dut.w_load__valid.value)), (2, 0),
                   f"w_load beats accepted after a beat to pe={n} (stream wedged)")
    tb.check_equal(int(dut.bad_loads.value), 1, "dropped beat counted in bad_loads")
    tb.report("chain_bad_pe_index")


@cocotb.test()
async def chain_cfg_only_in_start_cycle(dut):
    """The chain takes the cfg of the start's cycle (contract: cfg is sampled with
    start), whatever ``cfg`` shows before and after: an illegal cfg (PPU_OVERFLOW for
    the LAST PE) shown only in the start cycle between legal ones is refused with its
    cause; a legal tile shown only in its start cycle between illegal cfgs runs and
    matches the golden reduction (the PEs' checks must see the start's cfg, not the
    chain's previous one nor the next one)."""
    tb = ChainTB(dut, 1.0, 0.0)
    await tb.reset()
    p = tb.p
    rng = np.random.default_rng(tb.seed)
    base, _, _, b, s = golden.random_case(p, rng, role=Role.ONLY, pool=False, K1=1, P1=2, Q1=2)
    bad = PEConfig(**{**base.as_dict(), "K1": p.ppu_depth + 1})
    await tb.pulse_start(bad, around=base)
    await tb.clocks(50)
    tb.check_equal((int(dut.error.value), int(dut.error_cause.value), int(dut.busy.value)),
                   (1, int(ErrorCause.PPU_OVERFLOW), 0), "illegal cfg only in the start cycle")
    await tb.run_case(base, _parts(tb, base, rng), b, s, "legal cfg only in the start cycle",
                      around=bad)
    tb.report("chain_cfg_only_in_start_cycle")
