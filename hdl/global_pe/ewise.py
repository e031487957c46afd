"""EWISE near-memory unit: element-wise add / multiply / max of two int8 regions.

Simba §3.1 "Simba global PE": "a platform for near-memory computation ...
element-wise multiply/add" (low-reuse operations computed next to the
activation buffer instead of shipping data to the PEs).

Arithmetic, per int8 lane (a buffer word holds ``word_bits / 8`` lanes, lane
j = bits [8j+7 : 8j], two's complement), for word i of the regions:

* ADD: ``x = a + b``   (exact, 9 bit)
* MUL: ``x = a * b``   (exact, 16 bit)
* MAX: ``x = max(a, b)``
* requantise: ``y = x >> shift`` (arithmetic shift, i.e. floor(x / 2**shift)),
  ``shift`` in 0..15;
* saturate: ``c = min(127, max(-128, y))``.

Pipeline: two read requesters (A and B; each operand slot holds one word,
used straight from the SRAM output or parked if the other operand or the
write is late) -> one result register -> write requester; one word per cycle
when the A and B reads are in different banks and the write is not held
back; half that when A and B share a bank (one read port per bank).

Max pooling is composed from this unit: EWISE max of row pairs, EWISE max of
neighbouring words, then a SEND whose stride-2 address level picks the
pooled words (testbench ``maxpool_near_memory``, checked against numpy).

Left out: a dedicated pooling command, average pooling (floor of pairwise
means is not the exact mean) and depth-wise convolution (Simba lists them as
near-memory candidates), rounding modes other than floor, per-channel shifts.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .buffer import read_req_signature, write_req_signature
from .packets import EW_ADD, EW_MUL, FIELD, SHIFT_BITS, TAG_BITS, GpeConfig


def ewise_word(m: Module, a, b, sub, shift, lanes: int):
    """Combinational result word of f(a, b) >> shift, saturated, for ``lanes`` int8 lanes."""
    out = []
    for j in range(lanes):
        x = a[8 * j:8 * j + 8].as_signed()
        y = b[8 * j:8 * j + 8].as_signed()
        r = Signal(signed(17), name=f"ew_raw{j}")
        with m.If(sub == EW_ADD):
            m.d.comb += r.eq(x + y)
        with m.Elif(sub == EW_MUL):
            m.d.comb += r.eq(x * y)
        with m.Else():               # EW_MAX (3 is rejected by the decoder)
            m.d.comb += r.eq(Mux(x > y, x, y))
        s = Signal(signed(17), name=f"ew_shr{j}")
        m.d.comb += s.eq(r >> shift)
        q = Signal(8, name=f"ew_sat{j}")
        m.d.comb += q.eq(Mux(s > 127, 127, Mux(s < -128, -128, s)))
        out.append(q)
    return Cat(*out)


class EwiseUnit(wiring.Component):
    def __init__(self, cfg: GpeConfig, addr_bits: int):
        self.cfg = cfg
        self.addr_bits = addr_bits
        w = cfg.word_bits
        super().__init__({
            "start": In(1), "busy": Out(1), "done": Out(1),
            "sub": In(2), "shift": In(SHIFT_BITS),
            "a": In(FIELD), "b": In(FIELD), "c": In(FIELD), "n": In(FIELD),
            "tag": In(TAG_BITS),
            "rda": Out(read_req_signature(addr_bits, w)),
            "rdb": Out(read_req_signature(addr_bits, w)),
            "wr": Out(write_req_signature(addr_bits, w)),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        w = cfg.word_bits
        sub = Signal(2)
        shift = Signal(SHIFT_BITS)
        a0, b0, c0, n = (Signal(FIELD, name=x) for x in ("a0", "b0", "c0", "n"))
        ia, ib, ic, iw = (Signal(FIELD + 1, name=x) for x in ("ia", "ib", "ic", "iw"))
        running = Signal()
        a_wait, a_full, b_wait, b_full = Signal(), Signal(), Signal(), Signal()
        a_data, b_data = Signal(w), Signal(w)
        w_full = Signal()
        w_data = Signal(w)
        w_addr = Signal(FIELD)

        m.d.comb += self.busy.eq(running)
        with m.If(self.start & ~running):
            m.d.sync += [sub.eq(self.sub), shift.eq(self.shift), a0.eq(self.a), b0.eq(self.b),
                         c0.eq(self.c), n.eq(self.n), ia.eq(0), ib.eq(0), ic.eq(0), iw.eq(0),
                         running.eq(1)]

        # operand slots: one word each, either in flight (``wait``: the SRAM returns it
        # this cycle) or parked (``full``); consumed straight from the SRAM output
        a_avail, b_avail = Signal(), Signal()
        a_val, b_val = Signal(w), Signal(w)
        m.d.comb += [a_avail.eq(a_full | a_wait), b_avail.eq(b_full | b_wait),
                     a_val.eq(Mux(a_full, a_data, self.rda.data)),
                     b_val.eq(Mux(b_full, b_data, self.rdb.data))]
        consume = Signal()
        m.d.comb += consume.eq(running & a_avail & b_avail & (~w_full | self.wr.grant))
        result = ewise_word(m, a_val, b_val, sub, shift, cfg.lanes_int8)

        m.d.comb += [self.rda.addr.eq((a0 + ia)[:self.addr_bits]),
                     self.rda.valid.eq(running & (ia < n) & (~a_avail | consume))]
        m.d.comb += [self.rdb.addr.eq((b0 + ib)[:self.addr_bits]),
                     self.rdb.valid.eq(running & (ib < n) & (~b_avail | consume))]
        for wait, full, data, port in ((a_wait, a_full, a_data, self.rda),
                                       (b_wait, b_full, b_data, self.rdb)):
            with m.If(consume):
                m.d.sync += [full.eq(0), wait.eq(0)]
            with m.Elif(wait):                       # arrived, not used yet: park it
                m.d.sync += [full.eq(1), data.eq(port.data), wait.eq(0)]
            with m.If(port.grant):
                m.d.sync += wait.eq(1)
        with m.If(self.rda.grant):
            m.d.sync += ia.eq(ia + 1)
        with m.If(self.rdb.grant):
            m.d.sync += ib.eq(ib + 1)

        # result register -> write
        m.d.comb += [self.wr.valid.eq(w_full), self.wr.addr.eq(w_addr[:self.addr_bits]),
                     self.wr.data.eq(w_data)]
        with m.If(self.wr.grant):
            m.d.sync += [w_full.eq(0), iw.eq(iw + 1)]
        with m.If(consume):
            m.d.sync += [w_full.eq(1), w_data.eq(result), w_addr.eq((c0 + ic)[:FIELD]),
                         ic.eq(ic + 1)]
        with m.If(running & (iw == n) & ~w_full):
            m.d.comb += self.done.eq(1)
            m.d.sync += running.eq(0)
        return m
