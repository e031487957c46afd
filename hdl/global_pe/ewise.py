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

Pipeline (for >= 100 MHz on ECP5): two read requesters (A and B; each
operand slot holds ``read_latency`` words granted and not yet used -- in flight,
arriving, or parked if the other operand is late -- so one pair per cycle flows at
either read latency; a word is taken straight from the SRAM output when none is
parked) -> operand registers -> raw per-lane result
(add / mul / max, registered) -> shift and saturate -> write queue
(:data:`WQ_DEPTH` words: data in LUT RAM, addresses in a shift register
whose head is a flip-flop, so the write request's bank comes from a
register) -> write requester.  The operand and raw
stages never stall: a pair is taken only while the words in those stages
plus the queue's fill level are below the queue depth, so the queue cannot
overflow and nothing waits on this cycle's write grant.  One word per cycle
when the A and B reads are in different banks and the writes are granted;
half that when A and B share a bank (one read port per bank); an EWISE
takes 3 cycles longer than the single-stage unit did (pipeline fill), and one more at
read latency 2.  At read latency 2 the SEND engine goes first on the read
port: an operand read waits in every cycle a SEND may read (``rd_hold``).

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
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .buffer import read_req_signature, write_req_signature
from .packets import EW_ADD, EW_MUL, FIELD, SHIFT_BITS, TAG_BITS, GpeConfig


WQ_DEPTH = 4          # write queue: operand + raw stage + queue turnaround + 1


def ewise_raw(m: Module, a, b, sub, lanes: int):
    """Per-lane f(a, b) (17-bit signed, exact) for ``lanes`` int8 lanes."""
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
        out.append(r)
    return out


def ewise_finish(m: Module, raw, shift):
    """``raw >> shift`` (floor), saturated to int8, packed into a word."""
    out = []
    for j, r in enumerate(raw):
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
            "wq_level": Out(range(WQ_DEPTH + 1)),     # observability (tests)
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        w = cfg.word_bits
        AB = self.addr_bits
        sub = Signal(2)
        shift = Signal(SHIFT_BITS)
        ra, rb, wc = (Signal(AB, name=x) for x in ("ra", "rb", "wc"))     # next addresses
        a_left, b_left, w_left = (Signal(FIELD, name=x) for x in ("a_left", "b_left", "w_left"))
        running = Signal()

        # a_more / b_more: a_left / b_left != 0, kept in registers (the read requests
        # come from registers through two LUT levels: they reach the bank arbiters
        # and the block-RAM address multiplexers in the same cycle)
        a_more, b_more = Signal(), Signal()
        m.d.comb += self.busy.eq(running)
        with m.If(self.start & ~running):
            m.d.sync += [sub.eq(self.sub), shift.eq(self.shift), ra.eq(self.a), rb.eq(self.b),
                         wc.eq(self.c), a_left.eq(self.n), b_left.eq(self.n),
                         a_more.eq(self.n != 0), b_more.eq(self.n != 0),
                         w_left.eq(self.n), running.eq(1)]

        # write queue and the two non-stalling stages in front of it
        # data in LUT RAM (SyncFIFO); the addresses in a shift register whose head is a
        # flip-flop (timing: the write request's bank reaches the bank arbiters, and
        # through them the RECV write grant, from a register, not a LUT-RAM read)
        m.submodules.wq = wq = SyncFIFO(width=w, depth=WQ_DEPTH)
        aq = [Signal(AB, name=f"wq_addr{i}") for i in range(WQ_DEPTH)]
        o_v, r_v = Signal(), Signal()
        o_a, o_b = Signal(w), Signal(w)
        o_addr, r_addr = Signal(AB), Signal(AB)
        raw_q = [Signal(signed(17), name=f"ew_rawq{j}") for j in range(cfg.lanes_int8)]
        room = Signal()
        # words in the operand and raw stages and the queue (= wq.level + o_v + r_v),
        # counted in a register: + a pair taken, - a write granted
        inq = Signal(range(WQ_DEPTH + 1))
        m.d.comb += [room.eq(inq < WQ_DEPTH), self.wq_level.eq(wq.level)]

        # operand slots: each operand has up to C = read latency words granted and not yet
        # consumed (``cnt``; ``full`` == (cnt == C), a register): in flight in the SRAM,
        # arriving this cycle (``arr``: the grant C cycles ago), or parked (``pk`` words in
        # ``park``).  A word is consumed straight from the SRAM output when none is parked.
        # C words per operand keep one pair per cycle flowing with C cycles of read latency.
        # ``pres`` (a word is here this cycle) is kept in a register (timing: the read
        # requests start one LUT level closer to the flip-flops).
        C = cfg.read_latency
        ops = {}
        for x, port in (("a", self.rda), ("b", self.rdb)):
            o = dict(port=port, arr=Signal(name=f"{x}_arr"), pk=Signal(range(C + 1), name=f"{x}_pk"),
                     park=[Signal(w, name=f"{x}_park{j}") for j in range(C)],
                     cnt=Signal(range(C + 1), name=f"{x}_cnt"), full=Signal(name=f"{x}_full"),
                     pres=Signal(name=f"{x}_avail"), val=Signal(w, name=f"{x}_val"))
            m.d.comb += o["val"].eq(Mux(o["pk"] != 0, o["park"][0], port.data))
            ops[x] = o
        a_avail, b_avail = ops["a"]["pres"], ops["b"]["pres"]
        a_val, b_val = ops["a"]["val"], ops["b"]["val"]
        consume = Signal()
        m.d.comb += consume.eq(running & a_avail & b_avail & room)

        # the requests, with ``consume`` expanded and ``running`` dropped (a_more / b_more
        # imply running: both are set with it and cleared by the last read grant, before
        # the last write completes the EWISE); ``room`` is ``~inq[2]`` (inq <= WQ_DEPTH);
        # ``full`` implies the operand's own word is here (the oldest of C grants made in
        # C different cycles has arrived)
        assert WQ_DEPTH == 4
        m.d.comb += [self.rda.addr.eq(ra),
                     self.rda.valid.eq(a_more & (~ops["a"]["full"] | (b_avail & ~inq[2])))]
        m.d.comb += [self.rdb.addr.eq(rb),
                     self.rdb.valid.eq(b_more & (~ops["b"]["full"] | (a_avail & ~inq[2])))]
        m.d.sync += inq.eq(inq + consume - self.wr.grant)
        for x, o in ops.items():
            port, arr, pk, park, cnt = o["port"], o["arr"], o["pk"], o["park"], o["cnt"]
            # the grant, delayed C cycles, is ``arr``; ``arr_n`` is its next value
            arr_n = port.grant
            for d in range(C - 1):
                dl = Signal(name=f"{x}_inflight{d}")
                m.d.sync += dl.eq(arr_n)
                arr_n = dl
            m.d.sync += arr.eq(arr_n)
            cnt_n = Signal(range(C + 2), name=f"{x}_cnt_next")
            m.d.comb += cnt_n.eq(cnt + port.grant - consume)
            m.d.sync += [cnt.eq(cnt_n), o["full"].eq(cnt_n == C)]
            # parking: a consume takes the oldest parked word (the rest move up), an
            # arriving word not consumed directly lands behind the parked ones
            shift_ = Signal(name=f"{x}_unpark")
            put = Signal(name=f"{x}_park_put")
            pk_n = Signal(range(C + 1), name=f"{x}_pk_next")
            m.d.comb += [shift_.eq(consume & (pk != 0)), put.eq(arr & ~(consume & (pk == 0))),
                         pk_n.eq(pk + put - shift_)]
            with m.If(shift_):
                m.d.sync += [park[j].eq(park[j + 1]) for j in range(C - 1)]
            with m.If(put):
                for j in range(C):
                    with m.If(pk - shift_ == j):
                        m.d.sync += park[j].eq(port.data)
            m.d.sync += [pk.eq(pk_n), o["pres"].eq((pk_n != 0) | arr_n)]
        with m.If(self.rda.grant):
            m.d.sync += [ra.eq(ra + 1), a_left.eq(a_left - 1), a_more.eq(a_left != 1)]
        with m.If(self.rdb.grant):
            m.d.sync += [rb.eq(rb + 1), b_left.eq(b_left - 1), b_more.eq(b_left != 1)]

        # stage 1: operands; stage 2: raw results; then shift / saturate into the queue
        m.d.sync += [o_v.eq(consume), r_v.eq(o_v)]
        with m.If(consume):
            m.d.sync += [o_a.eq(a_val), o_b.eq(b_val), o_addr.eq(wc), wc.eq(wc + 1)]
        raw = ewise_raw(m, o_a, o_b, sub, cfg.lanes_int8)
        m.d.sync += [raw_q[j].eq(raw[j]) for j in range(cfg.lanes_int8)]
        m.d.sync += r_addr.eq(o_addr)
        m.d.comb += [wq.w_en.eq(r_v), wq.w_data.eq(ewise_finish(m, raw_q, shift))]
        # address queue: entry i is the i-th oldest; a pop shifts, a push lands behind
        # the last entry (wq.level: entries before this cycle's push and pop)
        for i in range(WQ_DEPTH):
            nxt = aq[i + 1] if i + 1 < WQ_DEPTH else aq[i]
            with m.If(r_v & (wq.level - self.wr.grant == i)):
                m.d.sync += aq[i].eq(r_addr)
            with m.Elif(self.wr.grant):
                m.d.sync += aq[i].eq(nxt)

        m.d.comb += [self.wr.valid.eq(wq.r_rdy), self.wr.data.eq(wq.r_data),
                     self.wr.addr.eq(aq[0]), wq.r_en.eq(self.wr.grant)]
        with m.If(self.wr.grant):
            m.d.sync += w_left.eq(w_left - 1)
        with m.If(running & ~w_left.any()):
            m.d.comb += self.done.eq(1)
            m.d.sync += running.eq(0)
        return m
