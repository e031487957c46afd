"""Post-processing unit of the Simba PE (Simba §3.1: the PE's PPU applies
bias, ReLU, requantisation and pooling before activations leave the PE).

Stream in: K0 wrapped ``acc_width``-bit results with their k1 group; stream
out: K0 int8 activations.  Arithmetic (exact, see config.py):
``t = v + bias; y = t*scale; y = (y + 2**(shift-1)) >> shift`` (shift > 0,
round half up), ``relu``, saturate to int8, optional 2x2 max pooling over 4
consecutive beats.  Per-channel bias (int24) and scale (int16) live in a
``ppu_depth``-entry :class:`~tessera.hdl.sram.SRAM` indexed by k1, written
through ``load``.

Pipeline (one global stall: every stage holds while the output register is
full and not accepted), ``latency(mul_stages)`` = 6 + ``mul_stages`` cycles from
an accepted input to its output beat:
read params | t = v + bias | t * scale (two 18x18 DSP products, low 17 bits
of t unsigned and the rest signed, then their sum: ``mul_stages`` register
levels) | add half | arithmetic shift | ReLU, saturate | pool -> output
register (6 + ``mul_stages``: round and saturate/pool are two stages each for
100 MHz, issue 20).
With ``mult_impl=ecp5`` (the ECP5 flow's choice, tessera.synth) the 2*K0 scale
products are MULT18X18D primitives (``mult.ecp5_mult``) whose own input and
output registers are ``t1``/``s1`` and ``ylo``/``yhi``, clock enable = the
stall: the same registers and cycles as the fabric ones (Verilator,
tests/test_pe_ecp5.py).  With fabric registers ``synth_ecp5`` used the DSP
combinationally between two long routes (pe_node, stop 32: 87.5 MHz, path
``t1`` -> 3.7 ns -> MULT18X18D 3.9 ns -> 3.3 ns -> ``ylo``).
Left out: per-channel shifts, average pooling, non-2x2 windows.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM

from .config import PEParams
from .mult import ecp5_mult
from .layouts import BIAS_WIDTH, act_layout, bits_for, pload_layout, psum_layout


def latency(mul_stages: int) -> int:
    return 6 + mul_stages


class PPU(wiring.Component):
    def __init__(self, params: PEParams, mul_stages: int = 2):
        self.params = params
        self.mul_stages = mul_stages
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"v": psum_layout(params),
                                                        "k1": bits_for(params.ppu_depth)}))),
            "o": Out(stream.Signature(act_layout(params))),
            "load": In(stream.Signature(pload_layout(params))),
            "load_en": In(1),          # loads accepted only while the PE is idle
            "shift": In(5),
            "relu": In(1),
            "pool": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        K0, AW = p.K0, p.acc_width
        pw = BIAS_WIDTH + 16                           # one channel's {bias, scale}
        m.submodules.mem = mem = SRAM(max(2, p.ppu_depth), K0 * pw, granularity=pw)

        # parameter load
        m.d.comb += [self.load.ready.eq(self.load_en),
                     mem.w_addr.eq(self.load.payload.addr),
                     mem.w_data.eq(Cat(*[Cat(self.load.payload.bias, self.load.payload.scale)] * K0)),
                     mem.w_en.eq(Mux(self.load.valid & self.load_en, 1 << self.load.payload.row, 0))]

        adv = Signal()                                 # global pipeline enable
        m.d.comb += [adv.eq(~self.o.valid | self.o.ready), self.i.ready.eq(adv),
                     mem.r_addr.eq(self.i.payload.k1), mem.r_en.eq(adv)]

        # stage 0: value (parameters being read)
        v0_valid = Signal()
        v0 = Signal(psum_layout(p))
        TW = max(AW, BIAS_WIDTH) + 1                   # t = v + bias, exact
        YW = TW + 16
        # stage 1: t = v + bias, scale
        t1_valid = Signal()
        ecp5 = p.mult_impl == "ecp5"
        t1 = Signal(data.ArrayLayout(signed(TW), K0))
        s1 = Signal(data.ArrayLayout(signed(16), K0))
        prm = data.ArrayLayout(data.StructLayout({"bias": signed(BIAS_WIDTH),
                                                  "scale": signed(16)}), K0)(mem.r_data)
        with m.If(adv):
            m.d.sync += [v0_valid.eq(self.i.valid), v0.eq(self.i.payload.v), t1_valid.eq(v0_valid)]
            for k in range(K0):
                if not ecp5:        # (ecp5: t1/s1 are the DSPs' input registers, below)
                    m.d.sync += [t1[k].eq(v0[k] + prm[k].bias), s1[k].eq(prm[k].scale)]

        # stages 2..: y = t * scale (exact), mul_stages cycles: t split at bit
        # LO into an unsigned low part and a signed high part, each product fits
        # one 18x18 DSP; mul_stages >= 2 registers the two products before the
        # add, further stages only delay
        LO = 17
        ys = []
        for k in range(K0):
            if ecp5:
                # MULT18X18D primitives with their input registers (= t1, s1) and, with
                # mul_stages >= 2, their output registers (= ylo, yhi), enable adv: the
                # same registers inside the DSP (timing: with fabric registers the
                # DSP sat between ~3.3-3.7 ns routes, pe_node's 87.5 MHz path)
                tn = Signal(signed(TW), name=f"t1n{k}")
                m.d.comb += tn.eq(v0[k] + prm[k].bias)
                r2 = self.mul_stages >= 2
                lo = ecp5_mult(m, tn.as_unsigned()[:LO], prm[k].scale, adv, f"ylo{k}_dsp",
                               r2)[:LO + 17].as_signed()
                hi = ecp5_mult(m, tn[LO:].as_signed(), prm[k].scale, adv, f"yhi{k}_dsp",
                               r2)[:TW - LO + 16].as_signed()
            else:
                lo = t1[k].as_unsigned()[:LO] * s1[k]
                hi = t1[k][LO:].as_signed() * s1[k]
            if self.mul_stages >= 2 and not ecp5:
                lo_r = Signal(signed(LO + 17), name=f"ylo{k}")
                hi_r = Signal(signed(TW - LO + 16), name=f"yhi{k}")
                with m.If(adv):
                    m.d.sync += [lo_r.eq(lo), hi_r.eq(hi)]
                lo, hi = lo_r, hi_r
            y = Signal(signed(YW), name=f"ymul{k}")
            with m.If(adv):
                m.d.sync += y.eq((hi << LO) + lo)
            for i in range(2, self.mul_stages):
                d = Signal(signed(YW), name=f"ymul{k}_d{i}")
                with m.If(adv):
                    m.d.sync += d.eq(y)
                y = d
            ys.append(y)
        y_valid = t1_valid
        for i in range(self.mul_stages):
            nv = Signal(name=f"y_valid{i}")
            with m.If(adv):
                m.d.sync += nv.eq(y_valid)
            y_valid = nv

        # round: (y + 2**(shift-1)) >> shift: the add and the shift each registered
        half = Signal(32)
        m.d.sync += half.eq(Mux(self.shift == 0, 0, Const(1, 32) << (self.shift - 1)[:5]))
        yh_valid, rnd_valid = Signal(), Signal()
        yh = Signal(data.ArrayLayout(signed(YW + 1), K0))
        rnd = Signal(data.ArrayLayout(signed(YW + 1), K0))
        with m.If(adv):
            m.d.sync += [yh_valid.eq(y_valid), rnd_valid.eq(yh_valid)]
            for k in range(K0):
                y = Signal(signed(YW), name=f"y{k}")
                m.d.comb += y.eq(ys[k])
                m.d.sync += [yh[k].eq(y + half), rnd[k].eq(yh[k] >> self.shift)]

        # ReLU + saturate (reductions over the high bits, no wide compare) ->
        # registered; then 2x2 max pool -> output register
        act_valid = Signal()
        act = Signal(act_layout(p))
        with m.If(adv):
            m.d.sync += act_valid.eq(rnd_valid)
            for k in range(K0):
                v = rnd[k]
                neg, high = v[-1], v[7:]
                over = ~neg & high.any()                 # > 127
                under = neg & ~high.all()                # < -128
                m.d.sync += act[k].eq(Mux(neg & self.relu, 0,
                                          Mux(over, 127, Mux(under, -128, v[:8].as_signed()))))
        pool_cnt = Signal(2)
        pool_max = Signal(act_layout(p))
        with m.If(adv):
            m.d.sync += self.o.valid.eq(0)
            with m.If(act_valid):
                newmax = Signal(act_layout(p))
                for k in range(K0):
                    m.d.comb += newmax[k].eq(Mux((pool_cnt == 0) | (act[k] > pool_max[k]),
                                                 act[k], pool_max[k]))
                with m.If(self.pool):
                    m.d.sync += [pool_max.eq(newmax), pool_cnt.eq(pool_cnt + 1)]
                    with m.If(pool_cnt == 3):
                        m.d.sync += [self.o.payload.eq(newmax), self.o.valid.eq(1)]
                with m.Else():
                    m.d.sync += [self.o.payload.eq(act), self.o.valid.eq(1)]
        return m
