"""Loop-nest sequencer of the Simba PE (Listing 1, PE level, §3.3).

Walks ``for r, s, k1, c1, (p, q)`` and emits one MAC operation per cycle on a
stream: input-buffer address (or ``pad`` for zero padding), weight-buffer
entry and ``newblock`` (first pixel of a weight block: load the weight
registers), accumulation-buffer entry, ``first`` (r = s = c1 = 0: start from
0) and ``final`` (last r, s, c1: the result leaves the PE).  Pixel order is
row-major, or 2x2-blocked when pooling (see config.py).

The configuration is sampled when ``start`` is high; the sequencer then runs
until the last operation is accepted.  Left out: address-generation
pipelining (the addresses are a combinational function of the counters).
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import PEParams
from .layouts import bits_for, cfg_layout


def op_layout(p: PEParams) -> data.StructLayout:
    return data.StructLayout({
        "ib_addr": bits_for(p.ibuf_words),
        "pad": 1,
        "wb_addr": bits_for(p.wbuf_entries),
        "newblock": 1,
        "acc_addr": bits_for(p.abuf_entries),
        "first": 1,
        "final": 1,
    })


class Sequencer(wiring.Component):
    def __init__(self, params: PEParams):
        self.params = params
        super().__init__({
            "cfg": In(cfg_layout()),
            "start": In(1),
            "op": Out(stream.Signature(op_layout(params))),
        })

    def elaborate(self, platform):
        m = Module()
        c = Signal(cfg_layout())
        r, s = Signal(4), Signal(4)
        k1, c1 = Signal(8), Signal(11)
        pb, qb, dy, dx = Signal(8), Signal(8), Signal(1), Signal(1)
        running = Signal()

        m.d.comb += self.op.valid.eq(running)
        with m.If(self.start & ~running):
            m.d.sync += [c.eq(self.cfg), running.eq(1), r.eq(0), s.eq(0), k1.eq(0), c1.eq(0),
                         pb.eq(0), qb.eq(0), dy.eq(0), dx.eq(0)]

        pool = c.pool
        p = Signal(8)
        q = Signal(8)
        m.d.comb += [p.eq(Mux(pool, (pb << 1) | dy, pb)), q.eq(Mux(pool, (qb << 1) | dx, qb))]
        h = Signal(signed(13))
        w = Signal(signed(13))
        pad_t, pad_l = Signal(signed(6)), Signal(signed(6))     # zero-extended to signed
        m.d.comb += [pad_t.eq(c.pad_top), pad_l.eq(c.pad_left),
                     h.eq(p * c.stride + r - pad_t), w.eq(q * c.stride + s - pad_l)]
        inside = (h >= 0) & (h < c.H_in) & (w >= 0) & (w < c.W_in)
        op = self.op.payload
        m.d.comb += [
            op.ib_addr.eq((c1 * c.H_in + h.as_unsigned()[:11]) * c.W_in + w.as_unsigned()[:11]),
            op.pad.eq(~inside),
            op.wb_addr.eq(((r * c.S + s) * c.K1 + k1) * c.C1 + c1),
            op.newblock.eq((pb == 0) & (qb == 0) & (dy == 0) & (dx == 0)),
            op.acc_addr.eq((k1 * c.P1 + p) * c.Q1 + q),
            op.first.eq((r == 0) & (s == 0) & (c1 == 0)),
            op.final.eq((r == c.R - 1) & (s == c.S - 1) & (c1 == c.C1 - 1)),
        ]

        last_dx = ~pool | (dx == 1)
        last_dy = ~pool | (dy == 1)
        last_qb = qb == Mux(pool, c.Q1 >> 1, c.Q1) - 1
        last_pb = pb == Mux(pool, c.P1 >> 1, c.P1) - 1
        last_c1 = c1 == c.C1 - 1
        last_k1 = k1 == c.K1 - 1
        last_s = s == c.S - 1
        last_r = r == c.R - 1

        with m.If(self.op.valid & self.op.ready):
            with m.If(~last_dx):
                m.d.sync += dx.eq(1)
            with m.Else():
                m.d.sync += dx.eq(0)
                with m.If(~last_dy):
                    m.d.sync += dy.eq(1)
                with m.Else():
                    m.d.sync += dy.eq(0)
                    with m.If(~last_qb):
                        m.d.sync += qb.eq(qb + 1)
                    with m.Else():
                        m.d.sync += qb.eq(0)
                        with m.If(~last_pb):
                            m.d.sync += pb.eq(pb + 1)
                        with m.Else():
                            m.d.sync += pb.eq(0)
                            with m.If(~last_c1):
                                m.d.sync += c1.eq(c1 + 1)
                            with m.Else():
                                m.d.sync += c1.eq(0)
                                with m.If(~last_k1):
                                    m.d.sync += k1.eq(k1 + 1)
                                with m.Else():
                                    m.d.sync += k1.eq(0)
                                    with m.If(~last_s):
                                        m.d.sync += s.eq(s + 1)
                                    with m.Else():
                                        m.d.sync += s.eq(0)
                                        with m.If(~last_r):
                                            m.d.sync += r.eq(r + 1)
                                        with m.Else():
                                            m.d.sync += running.eq(0)
        return m
