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

Addresses are incremental (no multiplies): the sweep index is the weight
entry; the input address c1*H_in*W_in + max(h,0)*W_in + w and the accumulator
entry k1*P1*Q1 + p*Q1 + q are kept as running sums that step by +-stride,
+-stride*W_in, +-1, +-Q1 as the pixel walks, with per-r/k1/c1 bases stepped
at sweep ends.  The per-tile constants H_in*W_in, P1*Q1 and
ceil(pad_top/stride)*Q1 are shift-and-add products registered over SETUP
cycles after start; a first sweep shorter than SETUP + 1 operations waits
for them (the only timing effect).

The configuration is sampled when ``start`` is high; the sequencer then runs
until the last operation is accepted.  Left out: registering the op stream
and computing each sweep's bounds one sweep ahead -- the bounds/empty/newblock
logic from the registered configuration into the buffer read enables is the
PE's critical path (40.5 MHz routed at ECP5 speed 6), the next step to 100 MHz.
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import PEParams
from .arith import lut_mul
from .layouts import bits_for, cfg_layout

SETUP = 2     # cycles after start until the per-tile constants are valid


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
        p = self.params
        IB, AB = bits_for(p.ibuf_words), bits_for(p.abuf_entries)
        c = Signal(cfg_layout())
        r, s = Signal(4), Signal(4)
        k1, c1 = Signal(8), Signal(11)
        pb, qb, dy, dx = Signal(8), Signal(8), Signal(1), Signal(1)
        running = Signal()
        st2 = c.stride == 2

        # per-tile constants (LUT products, valid SETUP cycles after start; a
        # sweep may not end before they are: see ``consts_ok``)
        hw = lut_mul(m, c.H_in, c.W_in, 2, "hw", IB)                 # H_in*W_in
        pq = lut_mul(m, c.P1, c.Q1, 2, "pq", AB)                     # P1*Q1
        plo0 = Mux(st2, (c.pad_top + 1) >> 1, c.pad_top)
        rq0 = lut_mul(m, c.Q1, plo0[:4], 2, "rq0", AB)               # ceil(pt/st)*Q1
        pend = Signal(range(SETUP + 1))
        consts_ok = pend == 0
        with m.If(pend != 0):
            m.d.sync += pend.eq(pend - 1)

        # address trackers (all additions wrap: only the low address bits matter)
        wb = Signal(bits_for(p.wbuf_entries))    # sweep index = ((r*S+s)*K1+k1)*C1+c1
        chw = Signal(IB)                         # c1*H_in*W_in
        kpq = Signal(AB)                         # k1*P1*Q1
        rw = Signal(IB)                          # max(r - pad_top, 0) * W_in
        rq = Signal(AB)                          # first skipped row's p * Q1 (r < pad_top)
        rq_ok = Signal()                         # rq loaded from rq0
        row_i = Signal(IB)                       # max(h, 0) * W_in of the current pixel
        row_a = Signal(AB)                       # p * Q1
        col_a, col_row = Signal(AB), Signal(AB)  # q; q at the sweep's first column
        h, w, w_row = Signal(signed(13)), Signal(signed(13)), Signal(signed(13))

        # current sweep and the next one (for the counters' restart values)
        plo, phi, qlo, qhi, empty = self._sweep_range(m, c, r, s, c1, "cur")
        last_c1 = c1 == c.C1 - 1
        last_k1 = k1 == c.K1 - 1
        last_s = s == c.S - 1
        last_r = r == c.R - 1
        n_c1 = Mux(last_c1, 0, c1 + 1)
        n_k1 = Mux(last_c1, Mux(last_k1, 0, k1 + 1), k1)
        n_s = Mux(last_c1 & last_k1, Mux(last_s, 0, s + 1), s)
        r_inc = last_c1 & last_k1 & last_s
        n_r = Mux(r_inc, r + 1, r)
        all_done = last_c1 & last_k1 & last_s & last_r
        nr, ns, nc1 = Signal(4), Signal(4), Signal(11)
        m.d.comb += [nr.eq(n_r), ns.eq(n_s), nc1.eq(n_c1)]
        nplo, _, nqlo, _, _ = self._sweep_range(m, c, nr, ns, nc1, "nxt")

        pt, pl = Signal(signed(6)), Signal(signed(6))     # zero-extended to signed
        m.d.comb += [pt.eq(c.pad_top), pl.eq(c.pad_left)]
        st = Mux(st2, 2, 1)
        stw = Mux(st2, c.W_in << 1, c.W_in)[:IB]

        # next sweep's first pixel: row (skipped rows start at h in {0, 1})
        nrw = Signal(IB)
        m.d.comb += nrw.eq(Mux(r_inc & (r >= c.pad_top), rw + c.W_in, rw))
        nrq = Signal(AB)
        rq_dec = ~st2 | (c.pad_top[0] ^ r[0])            # ceil((pt - r)/st) drops
        rq_cur = Mux(rq_ok, rq, rq0)
        m.d.comb += nrq.eq(Mux(r_inc & rq_dec, rq_cur - c.Q1, rq_cur))
        skip_rows = nplo != 0
        h0odd = st2 & (c.pad_top[0] ^ nr[0])
        n_h, n_w = Signal(signed(13)), Signal(signed(13))
        m.d.comb += [n_h.eq(Mux(skip_rows, h0odd, nr - pt)),
                     n_w.eq(Mux(st2, nqlo << 1, nqlo) + ns - pl)]
        n_row_i = Mux(skip_rows, Mux(h0odd, c.W_in, 0), nrw)
        n_row_a = Mux(skip_rows, nrq, 0)

        with m.If(self.start & ~running):
            m.d.sync += [c.eq(self.cfg), running.eq(1), r.eq(0), s.eq(0), k1.eq(0), c1.eq(0),
                         pb.eq(0), qb.eq(0), dy.eq(0), dx.eq(0), pend.eq(SETUP),
                         wb.eq(0), chw.eq(0), kpq.eq(0), rw.eq(0), rq_ok.eq(0),
                         row_i.eq(0), row_a.eq(0), col_a.eq(0), col_row.eq(0),
                         h.eq(-self.cfg.pad_top), w.eq(-self.cfg.pad_left),
                         w_row.eq(-self.cfg.pad_left)]

        pool = c.pool
        inside = (h >= 0) & (h < c.H_in) & (w >= 0) & (w < c.W_in)
        op = self.op.payload
        m.d.comb += [
            op.ib_addr.eq(chw + row_i + w.as_unsigned()[:IB]),
            op.pad.eq(~inside),
            op.wb_addr.eq(wb),
            op.newblock.eq((pb == plo) & (qb == qlo) & (dy == 0) & (dx == 0)),
            op.acc_addr.eq(kpq + row_a + col_a),
            op.first.eq((r == 0) & (s == 0) & (c1 == 0)),
            op.final.eq((r == c.R - 1) & (s == c.S - 1) & (c1 == c.C1 - 1)),
        ]

        def step_row(up):
            """p +/- 1: h += / -= stride, row_i follows max(h, 0)*W_in."""
            hn = Signal(signed(13), name=f"hn_{'up' if up else 'dn'}")
            m.d.comb += hn.eq(h + st if up else h - st)
            ri = Mux(hn < 0, 0, Mux(h < 0, Mux(hn[0], c.W_in, 0),
                                    row_i + stw if up else row_i - stw))
            m.d.sync += [h.eq(hn), row_i.eq(ri),
                         row_a.eq(row_a + c.Q1 if up else row_a - c.Q1)]

        last_dx = ~pool | (dx == 1)
        last_dy = ~pool | (dy == 1)
        last_qb = qb == qhi
        last_pb = pb == phi
        sweep_end = Signal()
        m.d.comb += sweep_end.eq(empty | (last_dx & last_dy & last_qb & last_pb))

        # a sweep may not end before the per-tile constants are valid (only a
        # first sweep shorter than SETUP + 1 operations waits)
        may_end = ~sweep_end | consts_ok
        m.d.comb += self.op.valid.eq(running & ~empty & may_end)
        with m.If(running & (empty | self.op.ready) & may_end):
            with m.If(sweep_end):
                m.d.sync += [dx.eq(0), dy.eq(0), pb.eq(nplo), qb.eq(nqlo),
                             c1.eq(n_c1), k1.eq(n_k1), s.eq(n_s), r.eq(n_r),
                             wb.eq(wb + 1), rw.eq(nrw), rq.eq(nrq), rq_ok.eq(1),
                             chw.eq(Mux(last_c1, 0, chw + hw)),
                             kpq.eq(Mux(last_c1, Mux(last_k1, 0, kpq + pq), kpq)),
                             h.eq(n_h), w.eq(n_w), w_row.eq(n_w),
                             row_i.eq(n_row_i), row_a.eq(n_row_a),
                             col_a.eq(nqlo), col_row.eq(nqlo)]
                with m.If(all_done):
                    m.d.sync += running.eq(0)
            with m.Elif(~last_dx):                       # pooled: q + 1
                m.d.sync += [dx.eq(1), w.eq(w + st), col_a.eq(col_a + 1)]
            with m.Else():
                m.d.sync += dx.eq(0)
                with m.If(~last_dy):                     # pooled: p + 1, q - 1
                    m.d.sync += [dy.eq(1), w.eq(w - st), col_a.eq(col_a - 1)]
                    step_row(True)
                with m.Else():
                    m.d.sync += dy.eq(0)
                    with m.If(~last_qb):                 # q + 1 (pooled: p - 1, q + 1)
                        m.d.sync += [qb.eq(qb + 1), w.eq(w + st), col_a.eq(col_a + 1)]
                        with m.If(pool):
                            step_row(False)
                    with m.Else():                       # next row: p + 1, q = first column
                        m.d.sync += [qb.eq(qlo), pb.eq(pb + 1), w.eq(w_row),
                                     col_a.eq(col_row)]
                        step_row(True)
        return m
