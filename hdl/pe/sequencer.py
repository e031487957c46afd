"""Loop-nest sequencer of the Simba PE (Listing 1, PE level, §3.3).

Walks ``for r, s, k1, c1, (p, q)`` and emits one MAC operation per cycle on a
stream: input-buffer address (or ``pad`` for zero padding), weight-buffer
entry and ``newblock`` (first pixel of a weight block: load the weight
registers), accumulation-buffer entry, ``first`` (r = s = c1 = 0: start from
0) and ``final`` (last r, s, c1: the result leaves the PE).  Pixel order is
row-major, or 2x2-blocked when pooling (see config.py).

Zero padding costs no cycles where it can be skipped: in every sweep but the
first (which initialises each accumulator entry) and the final one (which
emits it), rows and columns whose inputs are all padding are not visited
(they would add 0); a sweep that is all padding costs one idle cycle.
Pooled tiles always visit the whole tile.

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

    def _sweep_range(self, m, c, r, s, c1, name):
        """Pixel range [plo, phi] x [qlo, qhi] (block counters) of the sweep
        (r, s, c1).  The first and final sweeps of an entry, and pooled tiles,
        cover the whole tile; the others skip rows/columns that read only zero
        padding (they would add 0), and may be empty."""
        first = (r == 0) & (s == 0) & (c1 == 0)
        final = (r == c.R - 1) & (s == c.S - 1) & (c1 == c.C1 - 1)
        skippable = ~c.pool & ~first & ~final
        st2 = c.stride == 2

        def bounds(pad, off, extent, tile, lo, hi, ok):
            a = Signal(signed(7), name=f"{name}_a_{lo.name}")      # pad - off
            b = Signal(signed(14), name=f"{name}_b_{lo.name}")     # extent - 1 + pad - off
            m.d.comb += [a.eq(pad - off), b.eq(extent - 1 + pad - off)]
            lo_raw = Mux(a <= 0, 0, Mux(st2, (a + 1) >> 1, a))
            hi_raw = Mux(st2, b >> 1, b)
            m.d.comb += [
                lo.eq(Mux(skippable, lo_raw, 0)),
                hi.eq(Mux(skippable, Mux(hi_raw > tile - 1, tile - 1, hi_raw), tile - 1)),
                ok.eq(~skippable | ((b >= 0) & (lo_raw <= hi_raw) & (lo_raw <= tile - 1))),
            ]

        plo, phi, qlo, qhi = (Signal(8, name=f"{name}_{n}") for n in ("plo", "phi", "qlo", "qhi"))
        pok, qok = Signal(name=f"{name}_pok"), Signal(name=f"{name}_qok")
        pad_t, pad_l = Signal(signed(6), name=f"{name}_pt"), Signal(signed(6), name=f"{name}_pl")
        rr, ss = Signal(signed(6), name=f"{name}_r"), Signal(signed(6), name=f"{name}_s")
        m.d.comb += [pad_t.eq(c.pad_top), pad_l.eq(c.pad_left), rr.eq(r), ss.eq(s)]
        PB = Mux(c.pool, c.P1 >> 1, c.P1)
        QB = Mux(c.pool, c.Q1 >> 1, c.Q1)
        bounds(pad_t, rr, c.H_in, PB, plo, phi, pok)
        bounds(pad_l, ss, c.W_in, QB, qlo, qhi, qok)
        return plo, phi, qlo, qhi, ~(pok & qok)

    def elaborate(self, platform):
        m = Module()
        c = Signal(cfg_layout())
        r, s = Signal(4), Signal(4)
        k1, c1 = Signal(8), Signal(11)
        pb, qb, dy, dx = Signal(8), Signal(8), Signal(1), Signal(1)
        running = Signal()

        # current sweep and the next one (for the counters' restart values)
        plo, phi, qlo, qhi, empty = self._sweep_range(m, c, r, s, c1, "cur")
        last_c1 = c1 == c.C1 - 1
        last_k1 = k1 == c.K1 - 1
        last_s = s == c.S - 1
        last_r = r == c.R - 1
        n_c1 = Mux(last_c1, 0, c1 + 1)
        n_k1 = Mux(last_c1, Mux(last_k1, 0, k1 + 1), k1)
        n_s = Mux(last_c1 & last_k1, Mux(last_s, 0, s + 1), s)
        n_r = Mux(last_c1 & last_k1 & last_s, r + 1, r)
        all_done = last_c1 & last_k1 & last_s & last_r
        nr, ns, nc1 = Signal(4), Signal(4), Signal(11)
        m.d.comb += [nr.eq(n_r), ns.eq(n_s), nc1.eq(n_c1)]
        nplo, _, nqlo, _, _ = self._sweep_range(m, c, nr, ns, nc1, "nxt")

        m.d.comb += self.op.valid.eq(running & ~empty)
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
            op.newblock.eq((pb == plo) & (qb == qlo) & (dy == 0) & (dx == 0)),
            op.acc_addr.eq((k1 * c.P1 + p) * c.Q1 + q),
            op.first.eq((r == 0) & (s == 0) & (c1 == 0)),
            op.final.eq((r == c.R - 1) & (s == c.S - 1) & (c1 == c.C1 - 1)),
        ]

        last_dx = ~pool | (dx == 1)
        last_dy = ~pool | (dy == 1)
        last_qb = qb == qhi
        last_pb = pb == phi
        sweep_end = Signal()
        m.d.comb += sweep_end.eq(empty | (last_dx & last_dy & last_qb & last_pb))

        with m.If(running & (empty | self.op.ready)):
            with m.If(sweep_end):
                m.d.sync += [dx.eq(0), dy.eq(0), pb.eq(nplo), qb.eq(nqlo),
                             c1.eq(n_c1), k1.eq(n_k1), s.eq(n_s), r.eq(n_r)]
                with m.If(all_done):
                    m.d.sync += running.eq(0)
            with m.Elif(~last_dx):
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
                        m.d.sync += [qb.eq(qlo), pb.eq(pb + 1)]
        return m
