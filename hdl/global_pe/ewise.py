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

from tessera.hdl.pe.mult import RegMult

from .buffer import read_req_signature, write_req_signature
from .packets import EW_ADD, EW_MUL, FIELD, SHIFT_BITS, TAG_BITS, GpeConfig


WQ_DEPTH = 4          # write queue: operand + raw stage + queue turnaround + 1
EWISE_STAGES = (3, 4)  # ``ewise_stages``: 4 adds a register between shift and saturate-select
COPY_LANES = 4        # lanes per copy of the command's shift / mask / is_mul registers


def wq_depth(stages: int) -> int:
    """Words the write queue holds: one per stage between the operand take and the
    queue's read port (operand, raw, [shift], queue turnaround) + 1, so a pair is taken
    every cycle while the writes are granted (the take waits while ``inq`` == depth)."""
    return WQ_DEPTH + (stages - 3)


def ewise_addmax(m: Module, a, b, sub, lanes: int):
    """Per-lane add or max (9-bit signed, exact) for ``lanes`` int8 lanes (the multiply is
    in :class:`~tessera.hdl.pe.mult.RegMult` cells, selected after the raw register)."""
    out = []
    for j in range(lanes):
        x = a[8 * j:8 * j + 8].as_signed()
        y = b[8 * j:8 * j + 8].as_signed()
        r = Signal(signed(9), name=f"ew_am{j}")
        with m.If(sub == EW_ADD):
            m.d.comb += r.eq(x + y)
        with m.Else():               # EW_MAX (EW_MUL takes the product; 3 is rejected)
            m.d.comb += r.eq(Mux(x > y, x, y))
        out.append(r)
    return out


def ewise_shift(m: Module, raw, shifts, satms):
    """Per lane ``y = raw >> shift`` (floor): its low 8 bits, whether it overflows int8 and
    the sign.  ``satm`` (10 bits, bit i = ``i >= shift``, a register loaded with the
    command) marks the raw bits 7 + shift .. 16: ``y`` fits int8 iff they are all equal
    (``y``'s bits 7..16 are raw bits min(k + shift, 16)), so the overflow test is an
    AND/OR of raw bits and mask bits next to the shifter, not a compare after it.
    ``shifts`` / ``satms``: lane j's copies of the two registers."""
    out = []
    for j, (r, shift, satm) in enumerate(zip(raw, shifts, satms)):
        s = Signal(signed(17), name=f"ew_shr{j}")
        m.d.comb += s.eq(r >> shift)
        hi = Signal(10, name=f"ew_hi{j}")
        m.d.comb += hi.eq(r.as_unsigned()[7:17] & satm)
        ovf = Signal(name=f"ew_ovf{j}")
        m.d.comb += ovf.eq(hi.any() & (hi != satm))
        out.append((s[:8], ovf, r[16]))
    return out


def ewise_saturate(lanes):
    """(low 8 bits, overflow, sign) per lane -> the saturated int8 lanes packed in a word."""
    return Cat(*[Mux(ovf, Mux(sign, 0x80, 0x7F), y8) for y8, ovf, sign in lanes])


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
            "wq_level": Out(range(wq_depth(cfg.ewise_stages) + 1)),   # observability (tests)
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        w = cfg.word_bits
        AB = self.addr_bits
        sub = Signal(2)
        # the command's shift, overflow mask (bit i: i >= shift, the raw bits 7+i that must
        # equal the sign) and is_mul, one copy per COPY_LANES lanes (each feeds ~17 x 4 LUTs
        # of its lanes, not ~550 across the unit: the shift's fan-out was 3.8 ns of routing
        # in the stop-29 critical path); each copy has its own reset value so that Yosys
        # does not merge them back (the values before the first EWISE are never used)
        ncopy = -(-cfg.lanes_int8 // COPY_LANES)
        shift_c = [Signal(SHIFT_BITS, init=g % 16, name=f"ew_shift_c{g}") for g in range(ncopy)]
        satm_c = [Signal(10, init=g, name=f"ew_satm_c{g}") for g in range(ncopy)]
        mul_c = [Signal(init=g % 2, name=f"ew_is_mul_c{g}") for g in range(ncopy)]
        satm_in = Signal(10)
        m.d.comb += satm_in.eq(Cat(*[self.shift <= i for i in range(10)]))
        D = wq_depth(cfg.ewise_stages)
        extra = cfg.ewise_stages - 3     # 1: a register between the shifter and saturate
        ra, rb, wc = (Signal(AB, name=x) for x in ("ra", "rb", "wc"))     # next addresses
        a_left, b_left, w_left = (Signal(FIELD, name=x) for x in ("a_left", "b_left", "w_left"))
        running = Signal()

        # a_more / b_more: a_left / b_left != 0, kept in registers (the read requests
        # come from registers through two LUT levels: they reach the bank arbiters
        # and the block-RAM address multiplexers in the same cycle)
        a_more, b_more = Signal(), Signal()
        m.d.comb += self.busy.eq(running)
        with m.If(self.start & ~running):
            m.d.sync += [sub.eq(self.sub), ra.eq(self.a), rb.eq(self.b),
                         wc.eq(self.c), a_left.eq(self.n), b_left.eq(self.n),
                         a_more.eq(self.n != 0), b_more.eq(self.n != 0),
                         w_left.eq(self.n), running.eq(1)]
            for g in range(ncopy):
                m.d.sync += [shift_c[g].eq(self.shift), satm_c[g].eq(satm_in),
                             mul_c[g].eq(self.sub == EW_MUL)]

        # write queue and the two non-stalling stages in front of it
        # data in LUT RAM (SyncFIFO); the addresses in a shift register whose head is a
        # flip-flop (timing: the write request's bank reaches the bank arbiters, and
        # through them the RECV write grant, from a register, not a LUT-RAM read)
        m.submodules.wq = wq = SyncFIFO(width=w, depth=D)
        aq = [Signal(AB, name=f"wq_addr{i}") for i in range(D)]
        o_v, r_v = Signal(), Signal()
        o_a, o_b = Signal(w), Signal(w)
        o_addr, r_addr = Signal(AB), Signal(AB)
        am_q = [Signal(signed(9), name=f"ew_amq{j}") for j in range(cfg.lanes_int8)]
        room = Signal()
        # words in the operand, raw (and shift) stages and the queue (= wq.level + o_v + r_v
        # (+ s_v)), counted in a register: + a pair taken, - a write granted
        inq = Signal(range(D + 1))
        m.d.comb += [room.eq(inq < D), self.wq_level.eq(wq.level)]

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
        # the last write completes the EWISE); ``room`` is ``inq != D`` (inq <= D), written
        # on the bits that tell D from the smaller values (D = 4: ~inq[2]; D = 5:
        # ~(inq[2] & inq[0])); ``full`` implies the operand's own word is here (the oldest
        # of C grants made in C different cycles has arrived)
        assert D in (4, 5)
        room_r = ~inq[2] if D == 4 else ~(inq[2] & inq[0])
        m.d.comb += [self.rda.addr.eq(ra),
                     self.rda.valid.eq(a_more & (~ops["a"]["full"] | (b_avail & room_r)))]
        m.d.comb += [self.rdb.addr.eq(rb),
                     self.rdb.valid.eq(b_more & (~ops["b"]["full"] | (a_avail & room_r)))]
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

        # stage 1: operands; stage 2: raw results (add / max in fabric registers, the
        # products in RegMult cells: their operand register is stage 1's, loaded from the
        # same words every cycle, their product register stage 2's: with mult_impl=ecp5
        # both sit inside the MULT18X18D); then the mul / add-max select, shift and the
        # overflow test, [stage 3 (ewise_stages=4): registered,] saturate into the queue
        m.d.sync += [o_v.eq(consume), r_v.eq(o_v)]
        with m.If(consume):
            m.d.sync += [o_a.eq(a_val), o_b.eq(b_val), o_addr.eq(wc), wc.eq(wc + 1)]
        am = ewise_addmax(m, o_a, o_b, sub, cfg.lanes_int8)
        m.d.sync += [am_q[j].eq(am[j]) for j in range(cfg.lanes_int8)]
        m.d.sync += r_addr.eq(o_addr)
        raw = []
        for j in range(cfg.lanes_int8):
            m.submodules[f"mul{j}"] = mul = RegMult(8, cfg.mult_impl)
            m.d.comb += [mul.a.eq(a_val[8 * j:8 * j + 8]), mul.b.eq(b_val[8 * j:8 * j + 8])]
            x = Signal(signed(17), name=f"ew_raw{j}")
            m.d.comb += x.eq(Mux(mul_c[j // COPY_LANES], mul.p, am_q[j]))
            raw.append(x)
        lanes = ewise_shift(m, raw, [shift_c[j // COPY_LANES] for j in range(cfg.lanes_int8)],
                            [satm_c[j // COPY_LANES] for j in range(cfg.lanes_int8)])
        if extra:
            s_v, s_addr = Signal(), Signal(AB)
            s_lanes = [(Signal(8, name=f"ew_y{j}"), Signal(name=f"ew_ovfq{j}"),
                        Signal(name=f"ew_sign{j}")) for j in range(cfg.lanes_int8)]
            m.d.sync += [s_v.eq(r_v), s_addr.eq(r_addr)]
            m.d.sync += [q.eq(v) for sl, ln in zip(s_lanes, lanes) for q, v in zip(sl, ln)]
            w_v, w_addr, lanes = s_v, s_addr, s_lanes
        else:
            w_v, w_addr = r_v, r_addr
        m.d.comb += [wq.w_en.eq(w_v), wq.w_data.eq(ewise_saturate(lanes))]
        # address queue: entry i is the i-th oldest; a pop shifts, a push lands behind
        # the last entry (wq.level: entries before this cycle's push and pop)
        for i in range(D):
            nxt = aq[i + 1] if i + 1 < D else aq[i]
            with m.If(w_v & (wq.level - self.wr.grant == i)):
                m.d.sync += aq[i].eq(w_addr)
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
