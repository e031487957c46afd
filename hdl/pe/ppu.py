"""Post-processing unit of the Simba PE (Simba §3.1: the PE's PPU applies
bias, ReLU, requantisation and pooling before activations leave the PE).

Stream in: K0 wrapped ``acc_width``-bit results with their k1 group; stream
out: K0 int8 activations.  Arithmetic (exact, see config.py):
``t = v + bias; y = t*scale; y = (y + 2**(shift-1)) >> shift`` (shift > 0,
round half up), ``relu``, saturate to int8, optional 2x2 max pooling over 4
consecutive beats.  Per-channel bias (int24) and scale (int16) live
in a ``ppu_depth``-entry memory indexed by k1, written through ``load``.
Pipeline: read params | bias+scale | round/relu/sat/pool into the output register,
each stage with valid/ready (full back-pressure, no loss).
Left out: per-channel shifts, average pooling, non-2x2 windows.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .config import PEParams
from .layouts import BIAS_WIDTH, act_layout, bits_for, pload_layout, psum_layout


class PPU(wiring.Component):
    def __init__(self, params: PEParams):
        self.params = params
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
        m.submodules.mem = mem = Memory(shape=K0 * pw, depth=p.ppu_depth, init=[])
        wr = mem.write_port(granularity=pw)
        rd = mem.read_port()

        # parameter load
        m.d.comb += [self.load.ready.eq(self.load_en),
                     wr.addr.eq(self.load.payload.addr),
                     wr.data.eq(Cat(*[Cat(self.load.payload.bias, self.load.payload.scale)] * K0)),
                     wr.en.eq(Mux(self.load.valid & self.load_en, 1 << self.load.payload.row, 0))]

        # stage A: value + parameters (read issued as the item enters A)
        a_valid = Signal()
        a_v = Signal(psum_layout(p))
        # stage B: y = (v + bias) * scale
        b_valid = Signal()
        TW = max(AW, BIAS_WIDTH) + 1                   # t = v + bias, exact
        b_y = Signal(data.ArrayLayout(signed(TW + 16), K0))
        o_adv = ~self.o.valid | self.o.ready
        pool_cnt = Signal(2)
        pool_max = Signal(act_layout(p))
        b_adv = Signal()
        a_adv = ~b_valid | b_adv
        i_adv = ~a_valid | a_adv

        m.d.comb += [self.i.ready.eq(i_adv), rd.addr.eq(self.i.payload.k1), rd.en.eq(i_adv)]
        with m.If(i_adv):
            m.d.sync += [a_valid.eq(self.i.valid), a_v.eq(self.i.payload.v)]

        params = data.ArrayLayout(data.StructLayout({"bias": signed(BIAS_WIDTH),
                                                     "scale": signed(16)}), K0)
        prm = params(rd.data)
        with m.If(a_adv):
            m.d.sync += b_valid.eq(a_valid)
            for k in range(K0):
                m.d.sync += b_y[k].eq((a_v[k] + prm[k].bias) * prm[k].scale)

        # stage B -> output register: round, ReLU, saturate, 2x2 max pool
        act = Signal(act_layout(p))
        half = Signal(32)
        m.d.comb += half.eq(Mux(self.shift == 0, 0, Const(1, 32) << (self.shift - 1)[:5]))
        for k in range(K0):
            rounded = Signal(signed(TW + 16 + 1), name=f"rnd{k}")
            m.d.comb += rounded.eq((b_y[k] + half) >> self.shift)
            relu_y = Mux(self.relu & (rounded < 0), 0, rounded)
            m.d.comb += act[k].eq(Mux(relu_y > 127, 127, Mux(relu_y < -128, -128, relu_y)))

        m.d.comb += b_adv.eq(Mux(self.pool & (pool_cnt != 3), 1, o_adv))
        with m.If(o_adv):
            m.d.sync += self.o.valid.eq(0)
        with m.If(b_valid & b_adv):
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
