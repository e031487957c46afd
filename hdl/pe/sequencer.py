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

Two pipelined parts, no multiplies (pipelined for 100 MHz, issue 20):

* sweep generator: one sweep descriptor (r, s, k1, c1) per cycle through
  registered stages A (loop counters and the running bases: weight entry,
  c1*H_in*W_in + the input-buffer half's base, k1*P1*Q1, max(r - pad_top,
  0)*W_in, the first skipped row's p*Q1) -> B1 (padding offsets) -> B2
  (visited pixel bounds, empty) -> C (first pixel's h, w, row and
  accumulator offsets) with a skid register behind C; a small pipeline that
  stalls as a whole while the skid register is full (a registered enable:
  the walker's take, which waits on the op stream, does not reach it);
* pixel walker: takes the next descriptor in the cycle its current sweep
  issues its last pixel (no bubble between sweeps) and steps h, w and the
  row/column offsets by +-stride, +-stride*W_in, +-1, +-Q1; the operation
  leaves through an output register (``op``).

The per-tile constants H_in*W_in, P1*Q1 and ceil(pad_top/stride)*Q1 are
shift-and-add products registered over SETUP cycles after a start while
idle; the generator waits for them.  ``free`` is high when the generator has
produced every descriptor of its tile: a new ``start`` is accepted then
(``start`` while not ``free`` is ignored), and the new tile's descriptors
queue behind the walker's last sweeps, so back-to-back tiles issue without
a gap.  A start while the walker still runs (overlap) must carry the same
configuration but for ``ibuf_half`` (the PE guarantees it): the constants
are then kept (no SETUP wait).
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import IbufHalf, PEParams
from .arith import lut_mul
from .layouts import bits_for, cfg_layout

SETUP = 2     # cycles after an idle start until the per-tile constants are valid


def op_layout(p: PEParams) -> data.StructLayout:
    return data.StructLayout({
        "ib_addr": bits_for(p.ibuf_words),
        "pad": 1,
        "wb_addr": bits_for(p.wbuf_entries),
        "newblock": 1,
        "acc_addr": bits_for(p.abuf_entries),
        "first": 1,
        "final": 1,
        "last": 1,          # the tile's last operation (its input is read for the last time)
    })


class Sequencer(wiring.Component):
    def __init__(self, params: PEParams):
        self.params = params
        super().__init__({
            "cfg": In(cfg_layout()),
            "start": In(1),
            "free": Out(1),        # a start is accepted (the generator is idle)
            "idle": Out(1),        # nothing in flight (generator, walker, op register)
            "op": Out(stream.Signature(op_layout(params))),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        IB, AB, WB = bits_for(p.ibuf_words), bits_for(p.abuf_entries), bits_for(p.wbuf_entries)
        c = Signal(cfg_layout())
        st2 = c.stride == 2
        pool = c.pool

        # ---- per-tile constants (LUT products, SETUP cycles) --------------------
        hw = lut_mul(m, c.H_in, c.W_in, 2, "hw", IB)                 # H_in*W_in
        pq = lut_mul(m, c.P1, c.Q1, 2, "pq", AB)                     # P1*Q1
        plo0 = Mux(st2, (c.pad_top + 1) >> 1, c.pad_top)
        rq0 = lut_mul(m, c.Q1, plo0[:4], 2, "rq0", AB)               # ceil(pt/st)*Q1
        pend = Signal(range(SETUP + 1))
        consts_ok = pend == 0
        with m.If(pend != 0):
            m.d.sync += pend.eq(pend - 1)

        # ---- stage A: loop counters and running bases ---------------------------
        gen = Signal()                           # generating descriptors
        r, s = Signal(4), Signal(4)
        k1, c1 = Signal(8), Signal(11)
        wb = Signal(WB)                          # ((r*S+s)*K1+k1)*C1+c1
        base = Signal(IB)                        # input-buffer half's base
        chw = Signal(IB)                         # base + c1*H_in*W_in
        kpq = Signal(AB)                         # k1*P1*Q1
        rw = Signal(IB)                          # max(r - pad_top, 0) * W_in
        rq = Signal(AB)                          # first skipped row's p*Q1 (r < pad_top)
        rq_ok = Signal()                         # rq valid (else rq0)

        # descriptor pipeline registers
        B1 = data.StructLayout({
            "valid": 1, "r": 4, "s": 4, "wb": WB, "chw": IB, "kpq": AB, "rw": IB, "rq": AB,
            "first": 1, "final": 1, "last": 1, "skippable": 1,
            # per axis: b = extent - 1 + pad - off, lo_raw/hi_raw (see bounds())
            "bt": signed(14), "plo_raw": 8, "phi_raw": signed(14),
            "bl": signed(14), "qlo_raw": 8, "qhi_raw": signed(14)})
        B2 = data.StructLayout({
            "valid": 1, "r": 4, "s": 4, "wb": WB, "chw": IB, "kpq": AB, "rw": IB, "rq": AB,
            "first": 1, "final": 1, "last": 1, "plo": 8, "phi": 8, "qlo": 8, "qhi": 8,
            "empty": 1})
        CL = data.StructLayout({
            "valid": 1, "wb": WB, "chw": IB, "kpq": AB, "first": 1, "final": 1, "last": 1,
            "plo": 8, "phi": 8, "qlo": 8, "qhi": 8, "empty": 1,
            "h": signed(13), "w": signed(13), "row_i": IB, "row_a": AB})
        b1, b2, cc = Signal(B1), Signal(B2), Signal(CL)
        sk = Signal(CL)                          # skid register behind cc
        cn = Signal(CL)                          # stage C's result for b2
        take = Signal()                          # the walker takes descriptor cc
        adv = Signal()                           # the descriptor pipeline advances
        # from a register: the walker's take (which waits on the op stream's ready)
        # does not reach the generator's enables; the skid register holds the one
        # descriptor C produced while the walker did not take (sk.valid implies cc.valid)
        m.d.comb += adv.eq(~sk.valid)

        last_c1 = c1 == c.C1 - 1
        last_k1 = k1 == c.K1 - 1
        last_s = s == c.S - 1
        last_r = r == c.R - 1
        r_inc = last_c1 & last_k1 & last_s
        all_done = r_inc & last_r
        a_valid = gen & consts_ok
        first = (r == 0) & (s == 0) & (c1 == 0)
        final = last_r & last_s & last_c1

        running = Signal()                       # walker busy or op register valid
        m.d.comb += [self.free.eq(~gen),
                     self.idle.eq(~gen & ~b1.valid & ~b2.valid & ~cc.valid & ~sk.valid
                                  & ~running)]

        with m.If(self.start & ~gen):
            half = self.cfg.ibuf_half
            b0 = Mux(half == IbufHalf.UPPER, p.ibuf_words // 2, 0)
            m.d.sync += [c.eq(self.cfg), gen.eq(1), r.eq(0), s.eq(0), k1.eq(0), c1.eq(0),
                         wb.eq(0), base.eq(b0), chw.eq(b0), kpq.eq(0), rw.eq(0), rq_ok.eq(0)]
            with m.If(self.idle):
                m.d.sync += pend.eq(SETUP)
        with m.Elif(adv & a_valid):
            rq_cur = Mux(rq_ok, rq, rq0)
            rq_dec = ~st2 | (c.pad_top[0] ^ r[0])          # ceil((pt - r)/st) drops
            m.d.sync += [
                c1.eq(Mux(last_c1, 0, c1 + 1)),
                k1.eq(Mux(last_c1, Mux(last_k1, 0, k1 + 1), k1)),
                s.eq(Mux(last_c1 & last_k1, Mux(last_s, 0, s + 1), s)),
                r.eq(Mux(r_inc, r + 1, r)),
                wb.eq(wb + 1),
                chw.eq(Mux(last_c1, base, chw + hw)),
                kpq.eq(Mux(last_c1, Mux(last_k1, 0, kpq + pq), kpq)),
                rw.eq(Mux(r_inc & (r >= c.pad_top), rw + c.W_in, rw)),
                rq.eq(Mux(r_inc & rq_dec, rq_cur - c.Q1, rq_cur)), rq_ok.eq(1),
            ]
            with m.If(all_done):
                m.d.sync += gen.eq(0)

        # ---- B1: padding offsets of the sweep ------------------------------------
        at, al = Signal(signed(7)), Signal(signed(7))           # pad - off
        bt, bl = Signal(signed(14)), Signal(signed(14))         # extent - 1 + pad - off
        m.d.comb += [at.eq(c.pad_top - r), bt.eq(c.H_in - 1 + c.pad_top - r),
                     al.eq(c.pad_left - s), bl.eq(c.W_in - 1 + c.pad_left - s)]

        def lo_raw(a):
            return Mux(a <= 0, 0, Mux(st2, (a + 1) >> 1, a))

        with m.If(adv):
            m.d.sync += [
                b1.valid.eq(a_valid), b1.r.eq(r), b1.s.eq(s), b1.wb.eq(wb), b1.chw.eq(chw),
                b1.kpq.eq(kpq), b1.rw.eq(rw), b1.rq.eq(Mux(rq_ok, rq, rq0)),
                b1.first.eq(first), b1.final.eq(final), b1.last.eq(all_done),
                b1.skippable.eq(~pool & ~first & ~final),
                b1.bt.eq(bt), b1.plo_raw.eq(lo_raw(at)), b1.phi_raw.eq(Mux(st2, bt >> 1, bt)),
                b1.bl.eq(bl), b1.qlo_raw.eq(lo_raw(al)), b1.qhi_raw.eq(Mux(st2, bl >> 1, bl)),
            ]

        # ---- B2: visited pixel range [plo, phi] x [qlo, qhi] (block counters) -----
        # last block row / column of the tile (registered: c is stable while a tile
        # runs, and SETUP covers this register after an idle start)
        pbm1, qbm1 = Signal(signed(9)), Signal(signed(9))
        m.d.sync += [pbm1.eq(Mux(pool, c.P1 >> 1, c.P1) - 1), qbm1.eq(Mux(pool, c.Q1 >> 1, c.Q1) - 1)]

        def bounds(b, lo_raw, hi_raw, tm1, skippable):
            lo = Mux(skippable, lo_raw, 0)
            hi = Mux(skippable, Mux(hi_raw > tm1, tm1, hi_raw), tm1)
            ok = ~skippable | ((b >= 0) & (lo_raw <= hi_raw) & (lo_raw <= tm1))
            return lo, hi, ok

        plo, phi, pok = bounds(b1.bt, b1.plo_raw, b1.phi_raw, pbm1, b1.skippable)
        qlo, qhi, qok = bounds(b1.bl, b1.qlo_raw, b1.qhi_raw, qbm1, b1.skippable)
        with m.If(adv):
            m.d.sync += [
                b2.valid.eq(b1.valid), b2.r.eq(b1.r), b2.s.eq(b1.s), b2.wb.eq(b1.wb),
                b2.chw.eq(b1.chw), b2.kpq.eq(b1.kpq), b2.rw.eq(b1.rw), b2.rq.eq(b1.rq),
                b2.first.eq(b1.first), b2.final.eq(b1.final), b2.last.eq(b1.last),
                b2.plo.eq(plo), b2.phi.eq(phi), b2.qlo.eq(qlo), b2.qhi.eq(qhi),
                b2.empty.eq(~(pok & qok)),
            ]

        # ---- C: the sweep's first pixel (skipped rows start at h in {0, 1}) --------
        pt, pl = Signal(signed(6)), Signal(signed(6))     # zero-extended to signed
        rr, ss = Signal(signed(6)), Signal(signed(6))
        m.d.comb += [pt.eq(c.pad_top), pl.eq(c.pad_left), rr.eq(b2.r), ss.eq(b2.s)]
        skip_rows = b2.plo != 0
        h0odd = st2 & (c.pad_top[0] ^ b2.r[0])
        m.d.comb += [
            cn.valid.eq(b2.valid), cn.wb.eq(b2.wb), cn.chw.eq(b2.chw), cn.kpq.eq(b2.kpq),
            cn.first.eq(b2.first), cn.final.eq(b2.final), cn.last.eq(b2.last),
            cn.plo.eq(b2.plo), cn.phi.eq(b2.phi), cn.qlo.eq(b2.qlo), cn.qhi.eq(b2.qhi),
            cn.empty.eq(b2.empty),
            cn.h.eq(Mux(skip_rows, h0odd, rr - pt)),
            cn.w.eq(Mux(st2, b2.qlo << 1, b2.qlo) + ss - pl),
            cn.row_i.eq(Mux(skip_rows, Mux(h0odd, c.W_in, 0), b2.rw)),
            cn.row_a.eq(Mux(skip_rows, b2.rq, 0)),
        ]
        with m.If(take):
            with m.If(sk.valid):
                m.d.sync += [cc.eq(sk), sk.valid.eq(0)]
            with m.Else():
                m.d.sync += cc.eq(cn)
        with m.Elif(~cc.valid):
            m.d.sync += cc.eq(cn)
        with m.Elif(adv):
            m.d.sync += sk.eq(cn)

        # ---- pixel walker ------------------------------------------------------------
        wk = Signal()                            # walking a sweep
        pb, qb, dy, dx = Signal(8), Signal(8), Signal(1), Signal(1)
        qlo_w = Signal(8)
        # (timing) q_end = (qb == the sweep's last column block), p_end = (pb == last row
        # block) as registers, kept with their next values (compares against the bounds
        # minus 1, registered at the take, and the sweep's first column), so that
        # the walker's sweep end -- and the take that loads every walker register -- is
        # one LUT level from registers
        q_end, p_end, q_end0 = Signal(), Signal(), Signal()
        phi_m1, qhi_m1 = Signal(8), Signal(8)
        empty_w, first_w, final_w, last_w, nb = Signal(), Signal(), Signal(), Signal(), Signal()
        wb_w, chw_w, kpq_w = Signal(WB), Signal(IB), Signal(AB)
        row_i = Signal(IB)                       # max(h, 0) * W_in of the current pixel
        row_a = Signal(AB)                       # p * Q1
        col_a, col_row = Signal(AB), Signal(AB)  # q; q at the sweep's first column
        h, w, w_row = Signal(signed(13)), Signal(signed(13)), Signal(signed(13))
        st = Mux(st2, 2, 1)
        stw = Mux(st2, c.W_in << 1, c.W_in)[:IB]

        op = self.op
        oadv = ~op.valid | op.ready
        pix = wk & ~empty_w                      # a pixel to issue
        last_dx = ~pool | (dx == 1)
        last_dy = ~pool | (dy == 1)
        last_pix = last_dx & last_dy & q_end & p_end
        sweep_end = empty_w | last_pix
        step = pix & oadv                        # the pixel goes to the op register
        m.d.comb += take.eq(cc.valid & (~wk | (sweep_end & (empty_w | oadv))))
        m.d.comb += running.eq(wk | op.valid)

        with m.If(oadv):
            m.d.sync += op.valid.eq(pix)
        inside = (h >= 0) & (h < c.H_in) & (w >= 0) & (w < c.W_in)
        with m.If(step):
            m.d.sync += [
                op.payload.ib_addr.eq(chw_w + row_i + w.as_unsigned()[:IB]),
                op.payload.pad.eq(~inside),
                op.payload.wb_addr.eq(wb_w),
                op.payload.newblock.eq(nb),
                op.payload.acc_addr.eq(kpq_w + row_a + col_a),
                op.payload.first.eq(first_w),
                op.payload.final.eq(final_w),
                op.payload.last.eq(last_w & last_pix),
                nb.eq(0),
            ]

        def step_row(up):
            """p +/- 1: h += / -= stride, row_i follows max(h, 0)*W_in."""
            hn = Signal(signed(13), name=f"hn_{'up' if up else 'dn'}")
            m.d.comb += hn.eq(h + st if up else h - st)
            ri = Mux(hn < 0, 0, Mux(h < 0, Mux(hn[0], c.W_in, 0),
                                    row_i + stw if up else row_i - stw))
            m.d.sync += [h.eq(hn), row_i.eq(ri),
                         row_a.eq(row_a + c.Q1 if up else row_a - c.Q1)]

        with m.If(take):
            m.d.sync += [wk.eq(1), dx.eq(0), dy.eq(0), pb.eq(cc.plo), qb.eq(cc.qlo),
                         qlo_w.eq(cc.qlo),
                         empty_w.eq(cc.empty), first_w.eq(cc.first), final_w.eq(cc.final),
                         last_w.eq(cc.last),
                         nb.eq(1), wb_w.eq(cc.wb), chw_w.eq(cc.chw), kpq_w.eq(cc.kpq),
                         h.eq(cc.h), w.eq(cc.w), w_row.eq(cc.w),
                         row_i.eq(cc.row_i), row_a.eq(cc.row_a),
                         col_a.eq(cc.qlo), col_row.eq(cc.qlo),
                         q_end.eq(cc.qlo == cc.qhi), q_end0.eq(cc.qlo == cc.qhi),
                         p_end.eq(cc.plo == cc.phi),
                         phi_m1.eq(cc.phi - 1), qhi_m1.eq(cc.qhi - 1)]
        with m.Elif(wk & sweep_end & (empty_w | oadv)):
            m.d.sync += wk.eq(0)
        with m.Elif(step):
            with m.If(~last_dx):                         # pooled: q + 1
                m.d.sync += [dx.eq(1), w.eq(w + st), col_a.eq(col_a + 1)]
            with m.Else():
                m.d.sync += dx.eq(0)
                with m.If(~last_dy):                     # pooled: p + 1, q - 1
                    m.d.sync += [dy.eq(1), w.eq(w - st), col_a.eq(col_a - 1)]
                    step_row(True)
                with m.Else():
                    m.d.sync += dy.eq(0)
                    with m.If(~q_end):                   # q + 1 (pooled: p - 1, q + 1)
                        m.d.sync += [qb.eq(qb + 1), w.eq(w + st), col_a.eq(col_a + 1),
                                     q_end.eq(qb == qhi_m1)]
                        with m.If(pool):
                            step_row(False)
                    with m.Else():                       # next row: p + 1, q = first column
                        m.d.sync += [qb.eq(qlo_w), pb.eq(pb + 1), w.eq(w_row),
                                     col_a.eq(col_row), q_end.eq(q_end0),
                                     p_end.eq(pb == phi_m1)]
                        step_row(True)
        return m
