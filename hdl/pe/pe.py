"""The Simba processing element (Simba §3.1 / Fig 1(c), Listing 1 PE and
vector-MAC levels), weight-stationary.

Datapath (one MAC operation per cycle, no stalls inside the MAC pipeline;
every buffer is a :class:`~tessera.hdl.sram.SRAM`, read latency 1):

    S0 issue     sequencer op (incremental address counters, no multiplies)
                 -> read input buffer (+ the half's base, cfg ``ibuf_half``:
                 the other half is loaded meanwhile, double buffering);
                 read weight buffer on the first pixel
                 of a weight block
    S1 operands  input word (0 for padding) and, on a new block, the weight
                 block -> operand registers (the next block is read while the
                 current one is still in use, so switching costs no bubble)
    MAC          K0 x C0 int8 dot products, ``mac_stages`` cycles (products on
                 DSPs for the first ``mac_dsps`` multipliers, the rest in LUTs)
    accumulate   sum = (first ? 0 : acc) + dot (wrapping, acc_width bits); the
                 accumulator read is issued one cycle ahead and a same-cycle
                 write to that entry is forwarded (back-to-back accumulation
                 into one entry, P1*Q1 = 1, is exact); written back, or
                 (final) pushed to the result FIFO
    drain        + psum_in (MIDDLE/LAST, wrapping) -> psum_out (FIRST/MIDDLE)
                 or the PPU (4 + ``ppu_mul_stages`` cycles) -> out (LAST/ONLY)

Final results stream out while later ones are still being computed, so the
drain overlaps the compute.  Operations that produce a final result are only
issued with a result-FIFO credit (final results in flight + queued <= FIFO
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
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM
from tessera.params import ParamError

from .config import ErrorCause, IbufHalf, PEParams, Role
from .layouts import (act_layout, bits_for, cfg_layout, iload_layout, lanes, psum_layout,
                      pload_layout, wload_layout)
from .arith import lut_mul
from .mac_array import MacArray
from .ppu import PPU, latency as ppu_latency
from .sequencer import Sequencer


def pipeline_latency(p: PEParams) -> dict:
    """Cycle counts of the pipeline (no back-pressure): the last result beat
    leaves ``out`` (LAST/ONLY) or ``psum_out`` (FIRST/MIDDLE) ``ppu_extra`` /
    ``psum_extra`` cycles after the cycle the last operation is issued; the
    result FIFO holds every final result in flight (issue-side credits)."""
    acc = 2 + p.mac_stages                 # issue -> operand regs -> MAC -> accumulate
    return {"acc": acc,
            "psum_extra": acc + 2,         # FIFO write, pop -> psum_out register
            "ppu_extra": acc + 1 + ppu_latency(p.ppu_mul_stages),
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
    ms = MacArray.max_stages(p.C0)
    need(1 <= p.mac_stages <= ms, "mac_stages", f"must be in 1..{ms}, got {p.mac_stages}")
    need(1 <= p.ppu_mul_stages <= 4, "ppu_mul_stages", f"must be in 1..4, got {p.ppu_mul_stages}")


class SimbaPE(wiring.Component):
    """Ports (all flows are ``lib.stream``): ``w_load``, ``i_load``, ``p_load``
    (buffer loads, accepted while idle; ``i_load`` also while busy into the
    input-buffer half the running tile does not read), ``psum_in``/``psum_out`` (cross-PE
    reduction chain), ``out`` (int8 activations); ``cfg`` + ``start``;
    ``busy``, ``done`` (one-cycle pulse), ``error`` + ``error_cause``;
    ``cfg_cause`` (combinational check of ``cfg``)."""

    def __init__(self, K0=8, C0=8, acc_width=24, wbuf_bytes=32768, ibuf_bytes=8192,
                 abuf_entries=128, ppu_depth=16, mac_dsps=64, mac_stages=2, ppu_mul_stages=2):
        self.params = p = PEParams(K0, C0, acc_width, wbuf_bytes, ibuf_bytes, abuf_entries,
                                   ppu_depth, mac_dsps, mac_stages, ppu_mul_stages)
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
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "error_cause": Out(4),
            # the cause the current ``cfg`` would get (combinational), so that a
            # controller (e.g. pe_chain) can check a tile before starting it
            "cfg_cause": Out(4),
        })

    def elaborate(self, platform):
        m = Module()
        p = self.params
        K0, C0, AW = p.K0, p.C0, p.acc_width
        L = self.latency

        m.submodules.seq = seq = Sequencer(p)
        m.submodules.mac = mac = MacArray(K0, C0, p.mac_dsps, p.mac_stages)
        m.submodules.ppu = ppu = PPU(p, p.ppu_mul_stages)
        m.submodules.fifo = fifo = SyncFIFO(width=K0 * AW, depth=L["fifo_depth"])
        m.submodules.wbuf = wbuf = SRAM(p.wbuf_entries, K0 * C0 * 8, granularity=C0 * 8)
        m.submodules.ibuf = ibuf = SRAM(p.ibuf_words, C0 * 8)
        m.submodules.abuf = abuf = SRAM(max(2, p.abuf_entries), K0 * AW)

        # ---- control: start, configuration check, busy/done/error ----------------
        cfg = self.cfg
        cur = Signal(cfg_layout())
        cause = Signal(4)
        # buffer-size checks: exact products of the cfg fields, in LUTs (no DSPs)
        rs = lut_mul(m, cfg.R, cfg.S, 0, "chk_rs")
        rsk = lut_mul(m, rs, cfg.K1, 0, "chk_rsk")
        hw = lut_mul(m, cfg.H_in, cfg.W_in, 0, "chk_hw")
        pq = lut_mul(m, cfg.P1, cfg.Q1, 0, "chk_pq")
        checks = [
            (ErrorCause.ZERO_BOUND, (cfg.R == 0) | (cfg.S == 0) | (cfg.C1 == 0) | (cfg.K1 == 0)
             | (cfg.P1 == 0) | (cfg.Q1 == 0) | (cfg.H_in == 0) | (cfg.W_in == 0)),
            (ErrorCause.BAD_STRIDE, (cfg.stride != 1) & (cfg.stride != 2)),
            (ErrorCause.BAD_PAD, (cfg.pad_top >= cfg.R) | (cfg.pad_left >= cfg.S)),
            (ErrorCause.WBUF_OVERFLOW, _gt_product(m, rsk, cfg.C1, p.wbuf_entries, "chk_w")),
            (ErrorCause.IBUF_OVERFLOW, lut_mul(m, hw, cfg.C1, 0, "chk_i")
             > Mux(cfg.ibuf_half == IbufHalf.WHOLE, p.ibuf_words, p.ibuf_words // 2)),
            (ErrorCause.ABUF_OVERFLOW, _gt_product(m, pq, cfg.K1, p.abuf_entries, "chk_a")),
            (ErrorCause.PPU_OVERFLOW, ((cfg.role == Role.LAST) | (cfg.role == Role.ONLY))
             & (cfg.K1 > p.ppu_depth)),
            (ErrorCause.BAD_POOL, cfg.pool & (cfg.P1[0] | cfg.Q1[0])),
            (ErrorCause.BAD_IBUF_HALF, cfg.ibuf_half == 3),
        ]
        with m.Switch(Cat(*[c for _, c in checks])):      # smallest cause wins
            for i, (code, _) in enumerate(checks):
                with m.Case("-" * (len(checks) - 1 - i) + "1" + "0" * i):
                    m.d.comb += cause.eq(code)
            with m.Default():
                m.d.comb += cause.eq(ErrorCause.NONE)

        m.d.comb += self.cfg_cause.eq(cause)
        to_ppu = (cur.role == Role.LAST) | (cur.role == Role.ONLY)
        needs_psum = (cur.role == Role.MIDDLE) | (cur.role == Role.LAST)
        emitted = Signal(24)
        accept = self.start & ~self.busy
        m.d.comb += [seq.cfg.eq(cfg), seq.start.eq(accept & (cause == 0))]
        m.d.sync += self.done.eq(0)
        with m.If(accept):
            m.d.sync += [self.error.eq(cause != 0), self.error_cause.eq(cause)]
            with m.If(cause == 0):
                m.d.sync += [cur.eq(cfg), self.busy.eq(1), emitted.eq(0)]
        # beats the tile emits: K1*P1*Q1 (/4 when pooled in the PPU), from the
        # registered configuration (4 cycles, long before the first beat)
        n_pq = lut_mul(m, cur.P1, cur.Q1, 2, "n_pq")
        n_all = lut_mul(m, n_pq, cur.K1, 2, "n_all")
        expected = Mux(cur.pool & to_ppu, n_all >> 2, n_all)

        # ---- buffer loads: weights/PPU only while idle; inputs also while busy
        # into the half the running tile does not read (double buffering) -------
        wl, il = self.w_load, self.i_load
        IB = bits_for(p.ibuf_words)
        upper = Signal()                 # the running tile reads the upper half
        m.d.comb += upper.eq(cur.ibuf_half == IbufHalf.UPPER)
        il_ok = Signal()
        m.d.comb += il_ok.eq(~self.busy | ((cur.ibuf_half != IbufHalf.WHOLE)
                                           & (il.payload.addr[IB - 1] != upper)))
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
        # the upper half's base is ibuf_words/2: its address bit IB-1 (a tile in a
        # half addresses < ibuf_words/2, so that bit is 0 in op.ib_addr)
        m.d.comb += [ibuf.r_addr.eq(op.ib_addr | (upper << (IB - 1))), ibuf.r_en.eq(issue),
                     wbuf.r_addr.eq(op.wb_addr), wbuf.r_en.eq(issue & op.newblock)]
        ctl = data.StructLayout({"valid": 1, "acc_addr": bits_for(p.abuf_entries),
                                 "first": 1, "final": 1})
        s1 = Signal(data.StructLayout({"pad": 1, "newblock": 1, "c": ctl}))
        m.d.sync += [s1.c.valid.eq(issue), s1.pad.eq(op.pad), s1.newblock.eq(op.newblock),
                     s1.c.acc_addr.eq(op.acc_addr), s1.c.first.eq(op.first),
                     s1.c.final.eq(op.final)]

        # ---- S1: buffer data -> MAC operand registers ------------------------------
        # the weight registers load a new block on its first pixel and hold it
        # (the next block's read is issued while the current one is in use)
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
        ca, cb = c_pipe[-2], c_pipe[-1]          # one cycle before / at the accumulate stage

        # ---- accumulate (wrapping): read issued one cycle ahead; a write to the
        # entry in that cycle (same-address collision) is forwarded ------------------
        acc = Signal(lanes(AW, K0))
        fwd = Signal()
        fwd_data = Signal(lanes(AW, K0))
        m.d.comb += [abuf.r_addr.eq(ca.acc_addr), abuf.r_en.eq(1)]
        m.d.sync += [fwd.eq(abuf.w_en & (abuf.w_addr == ca.acc_addr)), fwd_data.eq(acc)]
        old = lanes(AW, K0)(Mux(fwd, fwd_data, abuf.r_data))
        for k in range(K0):
            m.d.comb += acc[k].eq(Mux(cb.first, 0, old[k]) + mac.dot[k])   # truncates: wraps
        m.d.comb += [abuf.w_addr.eq(cb.acc_addr), abuf.w_data.eq(acc),
                     abuf.w_en.eq(cb.valid & ~cb.final),
                     fifo.w_data.eq(acc), fifo.w_en.eq(cb.valid & cb.final)]

        # ---- drain: cross-PE psum add, then psum_out or PPU -----------------------
        res = lanes(AW, K0)(fifo.r_data)
        total = Signal(lanes(AW, K0))
        for k in range(K0):
            m.d.comb += total[k].eq(res[k] + Mux(needs_psum, self.psum_in.payload[k], 0))
        psum_ok = ~needs_psum | self.psum_in.valid
        po = self.psum_out
        po_adv = ~po.valid | po.ready
        dst_ready = Mux(to_ppu, ppu.i.ready, po_adv)
        pop = fifo.r_rdy & psum_ok & dst_ready
        m.d.comb += [fifo.r_en.eq(pop), self.psum_in.ready.eq(pop & needs_psum)]
        m.d.sync += credits.eq(credits + (issue & op.final) - pop)

        # k1 group of the beat being drained (indexes the PPU parameters)
        pcnt, qcnt = Signal(8), Signal(8)
        k1 = Signal(8)
        with m.If(accept):
            m.d.sync += [pcnt.eq(0), qcnt.eq(0), k1.eq(0)]
        with m.Elif(pop):
            with m.If(qcnt == cur.Q1 - 1):
                m.d.sync += qcnt.eq(0)
                with m.If(pcnt == cur.P1 - 1):
                    m.d.sync += [pcnt.eq(0), k1.eq(k1 + 1)]
                with m.Else():
                    m.d.sync += pcnt.eq(pcnt + 1)
            with m.Else():
                m.d.sync += qcnt.eq(qcnt + 1)

        m.d.comb += [ppu.i.valid.eq(fifo.r_rdy & psum_ok & to_ppu),
                     ppu.i.payload.v.eq(total), ppu.i.payload.k1.eq(k1)]
        with m.If(po_adv):
            m.d.sync += po.valid.eq(0)
        with m.If(pop & ~to_ppu):
            m.d.sync += [po.valid.eq(1), po.payload.eq(total)]
        wiring.connect(m, ppu.o, wiring.flipped(self.out))

        # ---- completion --------------------------------------------------------------
        handshake = Mux(to_ppu, self.out.valid & self.out.ready, po.valid & po.ready)
        with m.If(self.busy & handshake):
            m.d.sync += emitted.eq(emitted + 1)
            with m.If(emitted == expected - 1):
                m.d.sync += [self.busy.eq(0), self.done.eq(1)]
        return m


def _gt_product(m, a, b, limit: int, name: str):
    """a * b > limit (exact, LUT product)."""
    return lut_mul(m, a, b, 0, name) > limit
