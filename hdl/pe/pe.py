"""The Simba processing element (Simba §3.1 / Fig 1(c), Listing 1 PE and
vector-MAC levels), weight-stationary.

Control: the configuration check is a pipeline on the live ``cfg``
(``CHECK_LATENCY`` cycles); a start while idle is decided one cycle after it is
accepted (CHECK_LATENCY + 1 if cfg changed in the CHECK_LATENCY cycles before),
a back-to-back start (cfg of the previous cycle the same but ``ibuf_half``:
a registered compare) at once.

Datapath (one MAC operation per cycle, no stalls inside the MAC pipeline;
every buffer is a :class:`~tessera.hdl.sram.SRAM`, read latency 1):

    S0 issue     sequencer op register (pipelined descriptor generator +
                 pixel walker, no multiplies; the input-buffer half's base
                 is in the address) -> read input buffer; read weight buffer
                 on the first pixel of a weight block
    S1 operands  input word (0 for padding) and, on a new block, the weight
                 block -> operand registers (the next block is read while the
                 current one is still in use, so switching costs no bubble)
    MAC          K0 x C0 int8 dot products, ``mac_stages`` cycles (products on
                 DSPs for the first ``mac_dsps`` multipliers, the rest in LUTs;
                 ``mac_operand_reg``: operands registered again by each
                 multiplier, the tree's last level moved into accumulate,
                 same cycle count)
    accumulate   sum = (first ? 0 : acc) + dot (wrapping, acc_width bits); the
                 accumulator read is issued two cycles ahead and registered;
                 writes to that entry in the two cycles since are forwarded
                 (back-to-back accumulation into one entry, P1*Q1 = 1, is
                 exact); written back, or (final) pushed to the result FIFO
                 (:class:`~tessera.hdl.pe.fifo.SramFIFO`, an SRAM)
    drain        FIFO head -> result register; + psum_in (MIDDLE/LAST,
                 wrapping) -> psum_out (FIRST/MIDDLE) or the PPU
                 (5 + ``ppu_mul_stages`` cycles) -> out (LAST/ONLY); each
                 port behind a skid register (``_skid``): ``psum_out.ready`` /
                 ``out.ready`` load only the skid, not the FIFO pop (timing;
                 no cycle changes without back-pressure, one more beat
                 buffered under it)

Final results stream out while later ones are still being computed, so the
drain overlaps the compute; the next tile (same configuration, the other
input-buffer half) may start while the previous one drains (``start_ready``),
so back-to-back tiles issue one MAC operation per cycle with no gap.
Operations that produce a final result are only issued with a result-FIFO credit (final results in flight + queued <= FIFO
depth, sized for the pipeline so that the credits never throttle an
unstalled drain), which is how back-pressure on ``psum_out``/``out`` and a
late ``psum_in`` stall the PE without losing anything.  Cycle counts:
:func:`pipeline_latency`.

Behavioural contract, buffer layouts, stream orders, PPU arithmetic, error
causes and overflow behaviour: :mod:`tessera.hdl.pe.config`.
Left out: Simba's per-PE router/NoC interface (the PE's streams are what a
router port would carry), clock gating, the PE-local controller's
instruction memory (configuration is one register write + start).
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM
from tessera.params import ParamError

from .config import CFG_FIELDS, ErrorCause, IbufHalf, PEParams, Role
from .layouts import (act_layout, bits_for, cfg_layout, iload_layout, lanes, psum_layout,
                      pload_layout, wload_layout)
from .arith import lut_mul
from .fifo import SramFIFO
from .mac_array import MacArray
from .mult import MULT_IMPLS
from .ppu import PPU, latency as ppu_latency
from .sequencer import Sequencer


# tiles in flight at most (one issuing, the others draining: short tiles back to back)
MAX_IN_FLIGHT = 3
# cycles from ``cfg`` to its configuration check (``cfg_cause``); an idle start is
# decided 1 cycle after it is accepted if cfg had not changed in this many cycles
# before, else CHECK_LATENCY + 1 cycles after it
CHECK_LATENCY = 4


def pipeline_latency(p: PEParams) -> dict:
    """Cycle counts of the pipeline (no back-pressure): the last result beat
    leaves ``out`` (LAST/ONLY) or ``psum_out`` (FIRST/MIDDLE) ``ppu_extra`` /
    ``psum_extra`` cycles after the cycle the last operation is issued; the
    result FIFO holds every final result in flight (issue-side credits)."""
    acc = 2 + p.mac_stages                 # issue -> operand regs -> MAC -> accumulate
    return {"acc": acc,
            # FIFO write, FIFO head -> result register (pop), psum_out register
            "psum_extra": acc + 3,
            "ppu_extra": acc + 2 + ppu_latency(p.ppu_mul_stages),
            # final results issued before the first one pops: acc + 3
            "fifo_depth": 1 << (acc + 2).bit_length()}


def validate_params(p: PEParams) -> None:
    def need(cond, name, msg):
        if not cond:
            raise ParamError(name, msg)
    need(1 <= p.K0 <= 16, "K0", f"must be in 1..16, got {p.K0}")
    need(1 <= p.C0 <= 16, "C0", f"must be in 1..16, got {p.C0}")
    min_acc = 16 + max(1, (p.C0 - 1).bit_length()) + 1
    need(min_acc <= p.acc_width <= 32, "acc_width",
         f"must be in {min_acc}..32 (one C0={p.C0} dot product must fit), got {p.acc_width}")
    for name, size, unit in (("wbuf_bytes", p.wbuf_bytes, p.K0 * p.C0),
                             ("ibuf_bytes", p.ibuf_bytes, p.C0)):
        need(size >= unit and size % unit == 0, name,
             f"must be a positive multiple of {unit} bytes, got {size}")
        entries = size // unit
        need(entries & (entries - 1) == 0, name,
             f"must give a power-of-two number of entries ({size}/{unit} = {entries})")
        need(entries <= 1 << 16, name, f"at most {(1 << 16) * unit} bytes, got {size}")
    need(1 <= p.abuf_entries <= 4096 and p.abuf_entries & (p.abuf_entries - 1) == 0,
         "abuf_entries", f"must be a power of two in 1..4096, got {p.abuf_entries}")
    need(1 <= p.ppu_depth <= 256 and p.ppu_depth & (p.ppu_depth - 1) == 0,
         "ppu_depth", f"must be a power of two in 1..256, got {p.ppu_depth}")
    need(0 <= p.mac_dsps <= 256, "mac_dsps", f"must be in 0..256 (K0*C0 at most are used), got {p.mac_dsps}")
    need(1 <= p.mac_stages <= 5, "mac_stages", f"must be in 1..5, got {p.mac_stages}")
    need(1 <= p.ppu_mul_stages <= 4, "ppu_mul_stages", f"must be in 1..4, got {p.ppu_mul_stages}")
    need(not p.mac_operand_reg or p.mac_stages >= 2, "mac_operand_reg",
         f"needs mac_stages >= 2 (operand and product registers), got mac_stages={p.mac_stages}")
    need(p.mult_impl in MULT_IMPLS, "mult_impl",
         f"must be one of {', '.join(MULT_IMPLS)}, got {p.mult_impl!r}")
    need(p.mult_impl == "generic" or p.mac_operand_reg, "mult_impl",
         f"{p.mult_impl!r} puts the operand and product registers in the DSP: needs mac_operand_reg")


class SimbaPE(wiring.Component):
    """Ports (all flows are ``lib.stream``): ``w_load``, ``i_load``, ``p_load``
    (buffer loads, accepted while idle; ``i_load`` also while busy into the
    input-buffer half the running tile does not read), ``psum_in``/``psum_out`` (cross-PE
    reduction chain), ``out`` (int8 activations); ``cfg`` + ``start``;
    ``start_ready`` (a start is accepted), ``busy``, ``done`` (one-cycle
    pulse per tile), ``error`` + ``error_cause``;
    ``cfg_cause`` (pipelined check of ``cfg``: CHECK_LATENCY cycles behind for
    every field but ``ibuf_half``; see config.py)."""

    def __init__(self, K0=8, C0=8, acc_width=24, wbuf_bytes=32768, ibuf_bytes=8192,
                 abuf_entries=128, ppu_depth=16, mac_dsps=64, mac_stages=3, ppu_mul_stages=2,
                 mac_operand_reg=True, mult_impl="generic"):
        self.params = p = PEParams(K0, C0, acc_width, wbuf_bytes, ibuf_bytes, abuf_entries,
                                   ppu_depth, mac_dsps, mac_stages, ppu_mul_stages,
                                   bool(mac_operand_reg), mult_impl)
        validate_params(p)
        self.latency = pipeline_latency(p)
        super().__init__({
            "w_load": In(stream.Signature(wload_layout(p))),
            "i_load": In(stream.Signature(iload_layout(p))),
            "p_load": In(stream.Signature(pload_layout(p))),
            "psum_in": In(stream.Signature(psum_layout(p))),
            "psum_out": Out(stream.Signature(psum_layout(p))),
            "out": Out(stream.Signature(act_layout(p))),
            "cfg": In(cfg_layout()),
            "start": In(1),
            # a start is accepted this cycle (idle, or the overlap rule of config.py)
            "start_ready": Out(1),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "error_cause": Out(4),
            # the cause ``cfg`` gets once held CHECK_LATENCY cycles (pipelined), so
            # that a controller (e.g. pe_chain) can check a tile before starting it
            "cfg_cause": Out(4),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        K0, C0, AW = p.K0, p.C0, p.acc_width
        L = self.latency

        m.submodules.seq = seq = Sequencer(p)
        m.submodules.mac = mac = MacArray(K0, C0, p.mac_dsps, p.mac_stages, p.mac_operand_reg,
                                             p.mult_impl)
        m.submodules.ppu = ppu = PPU(p, p.ppu_mul_stages)
        m.submodules.fifo = fifo = SramFIFO(K0 * AW, L["fifo_depth"])
        m.submodules.wbuf = wbuf = SRAM(p.wbuf_entries, K0 * C0 * 8, granularity=C0 * 8)
        m.submodules.ibuf = ibuf = SRAM(p.ibuf_words, C0 * 8)
        m.submodules.abuf = abuf = SRAM(max(2, p.abuf_entries), K0 * AW)

        # ---- control: start, configuration check, busy/done/error ----------------
        # The check is a pipeline on the live ``cfg`` (products in LUTs, no DSPs):
        # its flags are registered CHECK_LATENCY cycles after the cfg they belong to,
        # and everything that follows them (compare, encode) ends in a register or
        # the ``cfg_cause`` port.  ``ibuf_half`` enters at the end (not delayed), so
        # double-buffered tiles that change only ``ibuf_half`` are checked at once.
        cfg = self.cfg
        cur = Signal(cfg_layout())
        LC = CHECK_LATENCY
        # (at most two adder levels per cycle)
        rs = lut_mul(m, cfg.R, cfg.S, 2, "chk_rs")
        kc = lut_mul(m, cfg.C1, cfg.K1, 2, "chk_kc")
        rskc = lut_mul(m, kc, rs, LC - 2, "chk_w")
        hw = lut_mul(m, cfg.H_in, cfg.W_in, 2, "chk_hw")
        hwc = lut_mul(m, hw, _delay(m, cfg.C1, 2, "chk_c1"), LC - 2, "chk_i")
        pq = lut_mul(m, cfg.P1, cfg.Q1, 2, "chk_pq")
        pqk = lut_mul(m, pq, _delay(m, cfg.K1, 2, "chk_k1"), LC - 2, "chk_a")
        hi_flags = [          # causes before IBUF_OVERFLOW, in code order
            (ErrorCause.ZERO_BOUND, _delay(m, (cfg.R == 0) | (cfg.S == 0) | (cfg.C1 == 0)
                                           | (cfg.K1 == 0) | (cfg.P1 == 0) | (cfg.Q1 == 0)
                                           | (cfg.H_in == 0) | (cfg.W_in == 0), LC, "chk_zero")),
            (ErrorCause.BAD_STRIDE, _delay(m, (cfg.stride != 1) & (cfg.stride != 2), LC,
                                           "chk_stride")),
            (ErrorCause.BAD_PAD, _delay(m, (cfg.pad_top >= cfg.R) | (cfg.pad_left >= cfg.S), LC,
                                        "chk_pad")),
            (ErrorCause.WBUF_OVERFLOW, rskc > p.wbuf_entries),
        ]
        lo_flags = [          # causes after IBUF_OVERFLOW, before BAD_IBUF_HALF
            (ErrorCause.ABUF_OVERFLOW, pqk > p.abuf_entries),
            (ErrorCause.PPU_OVERFLOW, _delay(m, ((cfg.role == Role.LAST) | (cfg.role == Role.ONLY))
                                             & (cfg.K1 > p.ppu_depth), LC, "chk_ppu")),
            (ErrorCause.BAD_POOL, _delay(m, cfg.pool & (cfg.P1[0] | cfg.Q1[0]), LC, "chk_pool")),
        ]
        # hi/lo: the smallest failing code of each group (0: none); over_whole /
        # over_half: the tile's inputs exceed the whole buffer / one half
        chk = data.StructLayout({"hi": 4, "lo": 4, "over_whole": 1, "over_half": 1})
        chk_now, chk_q = Signal(chk), Signal(chk)
        m.d.comb += [chk_now.hi.eq(_first(hi_flags)), chk_now.lo.eq(_first(lo_flags)),
                     chk_now.over_whole.eq(hwc > p.ibuf_words),
                     chk_now.over_half.eq(hwc > p.ibuf_words // 2)]
        # chk_ok_q: chk_q has no hi/lo cause (registered with it: the start decision
        # reads flags, not the cause encoder; timing)
        chk_ok_q = Signal(init=1)             # chk_q resets to 0: no cause
        m.d.sync += [chk_q.eq(chk_now), chk_ok_q.eq((chk_now.hi == 0) & (chk_now.lo == 0))]

        def cause_of(c, half):
            ib_over = Mux(half == IbufHalf.WHOLE, c.over_whole, c.over_half)
            return Mux(c.hi != 0, c.hi, Mux(ib_over, ErrorCause.IBUF_OVERFLOW,
                                            Mux(c.lo != 0, c.lo,
                                                Mux(half == 3, ErrorCause.BAD_IBUF_HALF,
                                                    ErrorCause.NONE))))
        m.d.comb += self.cfg_cause.eq(cause_of(chk_now, cfg.ibuf_half))

        # cfg (but ibuf_half) unchanged for the last ``run`` cycles (saturating at LC):
        # then chk_q, one cycle later, belongs to the cfg of this cycle
        CW = len(cur.as_value()) - CFG_FIELDS["ibuf_half"]      # ibuf_half: the top bits
        prev = Signal(CW)
        run = Signal(range(LC + 1))
        run_full = Signal()                   # run == LC, registered (timing)
        run_nxt = Mux(cfg.as_value()[:CW] == prev, Mux(run == LC, LC, run + 1), 0)
        m.d.sync += [prev.eq(cfg.as_value()[:CW]), run.eq(run_nxt), run_full.eq(run_nxt == LC)]
        to_ppu = (cur.role == Role.LAST) | (cur.role == Role.ONLY)
        needs_psum = (cur.role == Role.MIDDLE) | (cur.role == Role.LAST)
        emitted = Signal(24)
        # tiles started and not done: up to MAX_IN_FLIGHT when later tiles started
        # while earlier ones drain (same configuration but ibuf_half, see config.py)
        in_flight = Signal(range(MAX_IN_FLIGHT + 1))
        prev_half = Signal(2)                 # input-buffer region of the tile before cur
        cur_over = Signal(2)                  # cur's over_whole, over_half (it is legal)
        # back-to-back rule, registered (timing: no wide compare on the start path):
        # same_q = cfg of the previous cycle equals cur in every field but ibuf_half
        # (cur changes only on an idle start, to that cycle's cfg, and same_q is not
        # used before that start is decided, a cycle or more later); a back-to-back
        # tile takes cur's fields and only the start's ibuf_half
        same_q = Signal()
        m.d.sync += same_q.eq(cfg.as_value()[:CW] == cur.as_value()[:CW])
        half_ok = (cfg.ibuf_half != 3) & ~Mux(cfg.ibuf_half == IbufHalf.WHOLE, cur_over[0],
                                              cur_over[1])
        # an idle start is decided (started or refused) in the cycle after it is
        # accepted when cfg had not changed in the CHECK_LATENCY cycles before, else
        # CHECK_LATENCY + 1 cycles after it; busy meanwhile
        pend = Signal()
        wait = Signal(range(LC + 1))
        m.d.comb += [self.busy.eq((in_flight != 0) | pend),
                     self.start_ready.eq(((in_flight == 0) & ~pend)
                                         | ((in_flight != 0) & (in_flight < MAX_IN_FLIGHT)
                                            & seq.free & same_q & half_ok))]
        accept = self.start & self.start_ready
        cold = accept & (in_flight == 0)
        # wait == LC / wait == 0 as registers beside wait (timing: the decision is a
        # few gates on registers)
        wait_nxt, wait_lc, wait_0 = Signal.like(wait), Signal(), Signal(init=1)
        m.d.comb += wait_nxt.eq(wait)
        with m.If(pend):
            m.d.comb += wait_nxt.eq(wait - 1)
        with m.Elif(cold):
            m.d.comb += wait_nxt.eq(LC)
        m.d.sync += [wait.eq(wait_nxt), wait_lc.eq(wait_nxt == LC), wait_0.eq(wait_nxt == 0)]
        decide = Signal()
        m.d.comb += decide.eq(pend & ((wait_lc & run_full) | wait_0))
        dcause = Signal(4)
        m.d.comb += dcause.eq(cause_of(chk_q, cur.ibuf_half))
        # dcause == 0 from flags (cause_of: no hi/lo cause, no input overflow, a real half)
        dok = Signal()
        m.d.comb += dok.eq(chk_ok_q & (cur.ibuf_half != 3)
                           & ~Mux(cur.ibuf_half == IbufHalf.WHOLE, chk_q.over_whole,
                                  chk_q.over_half))
        started = Signal()                    # a tile starts in the sequencer this cycle
        m.d.comb += started.eq((accept & ~cold) | (decide & dok))
        m.d.comb += [seq.cfg.eq(cur), seq.cfg.ibuf_half.eq(Mux(pend, cur.ibuf_half, cfg.ibuf_half)),
                     seq.start.eq(started)]
        m.d.sync += self.done.eq(0)
        tile_done = Signal()
        with m.If(accept):
            m.d.sync += [self.error.eq(0), self.error_cause.eq(0)]
            with m.If(cold):
                m.d.sync += [pend.eq(1), cur.eq(cfg)]
            with m.Else():
                m.d.sync += [prev_half.eq(cur.ibuf_half), cur.ibuf_half.eq(cfg.ibuf_half)]
        with m.If(pend):
            with m.If(decide):
                m.d.sync += [pend.eq(0), self.error.eq(dcause != 0), self.error_cause.eq(dcause),
                             cur_over.eq(Cat(chk_q.over_whole, chk_q.over_half))]
        m.d.sync += in_flight.eq(in_flight + started - tile_done)
        # tiles whose operations are not all issued yet (they still read their input:
        # the newest ``reading`` of the tiles in flight)
        reading = Signal(2)
        last_issued = Signal()
        m.d.sync += reading.eq(reading + started - last_issued)
        idle_start = decide & dok
        with m.If(idle_start):
            m.d.sync += emitted.eq(0)
        # beats the tile emits, minus 1: K1*P1*Q1 (/4 when pooled in the PPU), from the
        # registered configuration (5 cycles, long before the first beat)
        n_pq = lut_mul(m, cur.P1, cur.Q1, 2, "n_pq")
        n_all = lut_mul(m, n_pq, cur.K1, 2, "n_all")
        expected_m1 = Signal(24)
        m.d.sync += expected_m1.eq(Mux(cur.pool & to_ppu, n_all >> 2, n_all) - 1)

        # ---- buffer loads: weights/PPU only while idle; inputs also while busy
        # into a region no tile still issuing operations reads (double buffering) --
        wl, il = self.w_load, self.i_load
        IB = bits_for(p.ibuf_words)
        hi_addr = il.payload.addr[IB - 1]

        def reads(half):          # a tile with this ibuf_half reads the beat's address
            return ((half == IbufHalf.WHOLE) | ((half == IbufHalf.UPPER) & hi_addr)
                    | ((half == IbufHalf.LOWER) & ~hi_addr))
        il_ok = Signal()
        m.d.comb += il_ok.eq(~(((reading != 0) | pend) & reads(cur.ibuf_half))
                             & ~((reading == 2) & reads(prev_half)))
        m.d.comb += [
            wl.ready.eq(~self.busy), il.ready.eq(il_ok),
            wbuf.w_addr.eq(wl.payload.addr),
            wbuf.w_data.eq(Cat(*[wl.payload.data] * K0)),
            wbuf.w_en.eq(Mux(wl.valid & ~self.busy, 1 << wl.payload.row, 0)),
            ibuf.w_addr.eq(il.payload.addr), ibuf.w_data.eq(il.payload.data),
            ibuf.w_en.eq(il.valid & il_ok),
        ]
        wiring.connect(m, wiring.flipped(self.p_load), ppu.load)
        m.d.comb += [ppu.load_en.eq(~self.busy), ppu.shift.eq(cur.shift),
                     ppu.relu.eq(cur.relu), ppu.pool.eq(cur.pool)]

        # ---- S0: issue (a final operation needs a result-FIFO credit) -------------
        op = seq.op.payload
        credits = Signal(range(L["fifo_depth"] + 1))      # final results in flight + queued
        m.d.comb += seq.op.ready.eq(~op.final | (credits < L["fifo_depth"]))
        issue = seq.op.valid & seq.op.ready
        m.d.comb += last_issued.eq(issue & op.last)
        m.d.comb += [ibuf.r_addr.eq(op.ib_addr), ibuf.r_en.eq(issue),
                     wbuf.r_addr.eq(op.wb_addr), wbuf.r_en.eq(issue & op.newblock)]
        ctl = data.StructLayout({"valid": 1, "acc_addr": bits_for(p.abuf_entries),
                                 "first": 1, "final": 1})
        s1 = Signal(data.StructLayout({"pad": 1, "newblock": 1, "c": ctl}))
        m.d.sync += [s1.c.valid.eq(issue), s1.pad.eq(op.pad), s1.newblock.eq(op.newblock),
                     s1.c.acc_addr.eq(op.acc_addr), s1.c.first.eq(op.first),
                     s1.c.final.eq(op.final)]

        # ---- S1: buffer data -> MAC operand registers ------------------------------
        # the weight registers load a new block on its first pixel and hold it
        # (the next block's read is issued while the current one is still in use)
        wreg = Signal(K0 * C0 * 8)
        xreg = Signal(C0 * 8)
        with m.If(s1.c.valid & s1.newblock):
            m.d.sync += wreg.eq(wbuf.r_data)
        m.d.sync += xreg.eq(Mux(s1.pad, 0, ibuf.r_data))
        m.d.comb += [mac.w.eq(wreg), mac.x.eq(xreg)]
        # control follows the MAC pipeline: 1 (operand registers) + mac_stages
        c_pipe = [s1.c]
        for i in range(1 + p.mac_stages):
            nxt = Signal(ctl, name=f"ctl{i + 2}")
            m.d.sync += nxt.eq(c_pipe[-1])
            c_pipe.append(nxt)
        ca2, ca, cb = c_pipe[-3], c_pipe[-2], c_pipe[-1]   # 2, 1, 0 cycles before accumulate

        # ---- accumulate (wrapping): the accumulator read is issued two cycles
        # ahead and registered; writes to that entry in the read cycle (same-address
        # collision) and the cycle after are forwarded ---------------------------------
        acc = Signal(lanes(AW, K0))
        writes = cb.valid & ~cb.final
        rd_q = Signal(K0 * AW)
        hit2, hit2_q, fwd1, fwd2 = Signal(), Signal(), Signal(), Signal()
        d1, d2 = Signal(K0 * AW), Signal(K0 * AW)
        m.d.comb += [abuf.r_addr.eq(ca2.acc_addr), abuf.r_en.eq(1)]
        m.d.sync += [rd_q.eq(abuf.r_data),
                     hit2.eq(writes & (cb.acc_addr == ca2.acc_addr)), fwd2.eq(hit2),
                     fwd1.eq(writes & (cb.acc_addr == ca.acc_addr)),
                     d1.eq(acc), d2.eq(d1)]
        old = lanes(AW, K0)(Mux(fwd1, d1, Mux(fwd2, d2, rd_q)))
        for k in range(K0):
            o = Signal(AW, name=f"acc_old{k}")
            m.d.comb += o.eq(Mux(cb.first, 0, old[k]))
            if p.mac_operand_reg:
                # acc = old + half0 + half1 (the MAC tree's last level): a 3:2 carry-save
                # step in LUTs, then one carry chain (mod 2**AW: wraps)
                a, b = Signal(AW, name=f"acc_h0_{k}"), Signal(AW, name=f"acc_h1_{k}")
                m.d.comb += [a.eq(mac.half[k][0]), b.eq(mac.half[k][1])]     # sign-extends
                sv = o ^ a ^ b
                cv = ((o & a) | (o & b) | (a & b))[:AW - 1]
                m.d.comb += acc[k].eq(sv + Cat(0, cv))                         # truncates: wraps
            else:
                m.d.comb += acc[k].eq(o + mac.dot[k])                          # truncates: wraps
        m.d.comb += [abuf.w_addr.eq(cb.acc_addr), abuf.w_data.eq(acc), abuf.w_en.eq(writes),
                     fifo.w_data.eq(acc), fifo.w_en.eq(cb.valid & cb.final)]

        # ---- drain: result FIFO -> register -> cross-PE psum add -> psum_out or PPU --
        rv = Signal()                              # result register (FIFO head, registered)
        rdat = Signal(lanes(AW, K0))
        res = rdat
        total = Signal(lanes(AW, K0))
        for k in range(K0):
            m.d.comb += total[k].eq(res[k] + Mux(needs_psum, self.psum_in.payload[k], 0))
        psum_ok = ~needs_psum | self.psum_in.valid
        # psum_out register ``po`` (and the PPU's output) reach the ports through a skid
        # register (_skid): the ports' ready loads only the skid, so it never reaches the
        # pop -> result-FIFO read path; without back-pressure the ports are the registers
        po = stream.Signature(psum_layout(p)).flip().create(path=("po",))
        po_ready = _skid(m, po, self.psum_out, "psum_out")
        po_adv = ~po.valid | po_ready
        dst_ready = Mux(to_ppu, ppu.i.ready, po_adv)
        pop = rv & psum_ok & dst_ready
        m.d.comb += fifo.r_en.eq(fifo.r_rdy & (~rv | pop))
        with m.If(fifo.r_en):
            m.d.sync += [rv.eq(1), rdat.eq(fifo.r_data)]
        with m.Elif(pop):
            m.d.sync += rv.eq(0)
        m.d.comb += self.psum_in.ready.eq(pop & needs_psum)
        m.d.sync += credits.eq(credits + (issue & op.final) - pop)

        # k1 group of the beat being drained (indexes the PPU parameters); wraps at
        # the end of a tile (the next one may already be draining behind it)
        pcnt, qcnt = Signal(8), Signal(8)
        k1 = Signal(8)
        with m.If(idle_start):
            m.d.sync += [pcnt.eq(0), qcnt.eq(0), k1.eq(0)]
        with m.Elif(pop):
            with m.If(qcnt == cur.Q1 - 1):
                m.d.sync += qcnt.eq(0)
                with m.If(pcnt == cur.P1 - 1):
                    m.d.sync += [pcnt.eq(0), k1.eq(Mux(k1 == cur.K1 - 1, 0, k1 + 1))]
                with m.Else():
                    m.d.sync += pcnt.eq(pcnt + 1)
            with m.Else():
                m.d.sync += qcnt.eq(qcnt + 1)

        m.d.comb += [ppu.i.valid.eq(rv & psum_ok & to_ppu),
                     ppu.i.payload.v.eq(total), ppu.i.payload.k1.eq(k1)]
        with m.If(po_adv):
            m.d.sync += po.valid.eq(0)
        with m.If(pop & ~to_ppu):
            m.d.sync += [po.valid.eq(1), po.payload.eq(total)]
        m.d.comb += ppu.o.ready.eq(_skid(m, ppu.o, self.out, "out"))

        # ---- completion: done once per tile, in order ------------------------------
        handshake = Mux(to_ppu, self.out.valid & self.out.ready,
                        self.psum_out.valid & self.psum_out.ready)
        with m.If((in_flight != 0) & handshake):
            m.d.sync += emitted.eq(emitted + 1)
            with m.If(emitted == expected_m1):
                m.d.sync += [emitted.eq(0), self.done.eq(1)]
                m.d.comb += tile_done.eq(1)
        return m


def _skid(m, src, port, name: str):
    """Output stage with a skid register: ``src`` (a registered stream: valid/payload
    of a register) drives ``port`` directly while the skid is empty; a beat the port
    does not take is moved into the skid, which the port shows first.  Returns
    ``src``'s ready = skid empty, a register: the port's ``ready`` only loads/clears the
    skid.  Two entries (``src`` + skid); without back-pressure the skid stays empty and
    the port shows ``src`` cycle for cycle; under back-pressure ``src`` may advance
    once more than a plain output register would let it."""
    sk_v = Signal(name=f"{name}_skid_valid")
    sk_d = Signal(len(src.payload.as_value()), name=f"{name}_skid")
    m.d.comb += [port.valid.eq(src.valid | sk_v),
                 port.payload.eq(Mux(sk_v, sk_d, src.payload.as_value()))]
    with m.If(sk_v):
        with m.If(port.ready):
            m.d.sync += sk_v.eq(0)
    with m.Elif(src.valid & ~port.ready):
        m.d.sync += [sk_v.eq(1), sk_d.eq(src.payload.as_value())]
    return ~sk_v


def _delay(m, v, n: int, name: str):
    """``v`` delayed by ``n`` registers."""
    for i in range(n):
        d = Signal(len(v), name=f"{name}_d{i}")
        m.d.sync += d.eq(v)
        v = d
    return v


def _first(flags):
    """The first (smallest) code of ``(code, flag)`` pairs whose flag is set, else 0."""
    out = 0
    for code, flag in reversed(flags):
        out = Mux(flag, code, out)
    return out
