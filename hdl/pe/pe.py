"""The Simba processing element (Simba §3.1 / Fig 1(c), Listing 1 PE and
vector-MAC levels), weight-stationary.

Datapath (one MAC operation per cycle, no stalls inside the MAC pipeline):

    S0 issue     sequencer op -> read input buffer; read weight buffer on the
                 first pixel of a weight block
    S1 MAC       weights = new block from the buffer or the held weight
                 registers (double-buffered: the next block is read while the
                 current one is still in use, so switching costs no bubble);
                 K0 x C0 int8 dot products, registered; read accumulator
    S2 acc       sum = (first ? 0 : acc) + dot (wrapping, acc_width bits);
                 written back, or (final) pushed to the result FIFO
    drain        + psum_in (MIDDLE/LAST, wrapping) -> psum_out (FIRST/MIDDLE)
                 or the PPU -> out (LAST/ONLY)

Final results stream out while later ones are still being computed, so the
drain overlaps the compute.  Operations that produce a final result are only
issued when the FIFO has room for them (issue-side throttling), which is how
back-pressure on ``psum_out``/``out`` and a late ``psum_in`` stall the PE
without losing anything.  The accumulator read port is transparent to its
write port, so back-to-back accumulation into one entry (P1*Q1 = 1) is exact.

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
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from tessera.params import ParamError

from .config import ErrorCause, PEParams, Role
from .layouts import (act_layout, bits_for, cfg_layout, iload_layout, lanes, psum_layout,
                      pload_layout, wload_layout)
from .mac_array import MacArray
from .ppu import PPU
from .sequencer import Sequencer

RESULT_FIFO_DEPTH = 4


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


class SimbaPE(wiring.Component):
    """Ports (all flows are ``lib.stream``): ``w_load``, ``i_load``, ``p_load``
    (buffer loads, accepted while idle), ``psum_in``/``psum_out`` (cross-PE
    reduction chain), ``out`` (int8 activations); ``cfg`` + ``start``;
    ``busy``, ``done`` (one-cycle pulse), ``error`` + ``error_cause``;
    ``cfg_cause`` (combinational check of ``cfg``)."""

    def __init__(self, K0=8, C0=8, acc_width=24, wbuf_bytes=32768, ibuf_bytes=8192,
                 abuf_entries=128, ppu_depth=16):
        self.params = p = PEParams(K0, C0, acc_width, wbuf_bytes, ibuf_bytes, abuf_entries,
                                   ppu_depth)
        validate_params(p)
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

        m.submodules.seq = seq = Sequencer(p)
        m.submodules.mac = mac = MacArray(K0, C0)
        m.submodules.ppu = ppu = PPU(p)
        m.submodules.fifo = fifo = SyncFIFO(width=K0 * AW, depth=RESULT_FIFO_DEPTH)
        m.submodules.wbuf = wbuf = Memory(shape=K0 * C0 * 8, depth=p.wbuf_entries, init=[])
        m.submodules.ibuf = ibuf = Memory(shape=C0 * 8, depth=p.ibuf_words, init=[])
        m.submodules.abuf = abuf = Memory(shape=K0 * AW, depth=p.abuf_entries, init=[])
        wb_wr, wb_rd = wbuf.write_port(granularity=C0 * 8), wbuf.read_port()
        ib_wr, ib_rd = ibuf.write_port(), ibuf.read_port()
        ab_wr = abuf.write_port()
        ab_rd = abuf.read_port(transparent_for=(ab_wr,))

        # ---- control: start, configuration check, busy/done/error ----------------
        cfg = self.cfg
        cur = Signal(cfg_layout())
        cause = Signal(4)
        checks = [
            (ErrorCause.ZERO_BOUND, (cfg.R == 0) | (cfg.S == 0) | (cfg.C1 == 0) | (cfg.K1 == 0)
             | (cfg.P1 == 0) | (cfg.Q1 == 0) | (cfg.H_in == 0) | (cfg.W_in == 0)),
            (ErrorCause.BAD_STRIDE, (cfg.stride != 1) & (cfg.stride != 2)),
            (ErrorCause.BAD_PAD, (cfg.pad_top >= cfg.R) | (cfg.pad_left >= cfg.S)),
            (ErrorCause.WBUF_OVERFLOW, cfg.R * cfg.S * cfg.K1 * cfg.C1 > p.wbuf_entries),
            (ErrorCause.IBUF_OVERFLOW, cfg.C1 * cfg.H_in * cfg.W_in > p.ibuf_words),
            (ErrorCause.ABUF_OVERFLOW, cfg.K1 * cfg.P1 * cfg.Q1 > p.abuf_entries),
            (ErrorCause.PPU_OVERFLOW, ((cfg.role == Role.LAST) | (cfg.role == Role.ONLY))
             & (cfg.K1 > p.ppu_depth)),
            (ErrorCause.BAD_POOL, cfg.pool & (cfg.P1[0] | cfg.Q1[0])),
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
        expected = Signal(24)
        emitted = Signal(24)
        accept = self.start & ~self.busy
        m.d.comb += [seq.cfg.eq(cfg), seq.start.eq(accept & (cause == 0))]
        m.d.sync += self.done.eq(0)
        with m.If(accept):
            m.d.sync += [self.error.eq(cause != 0), self.error_cause.eq(cause)]
            with m.If(cause == 0):
                n = cfg.K1 * cfg.P1 * cfg.Q1
                role_ppu = (cfg.role == Role.LAST) | (cfg.role == Role.ONLY)
                m.d.sync += [cur.eq(cfg), self.busy.eq(1), emitted.eq(0),
                             expected.eq(Mux(cfg.pool & role_ppu, n >> 2, n))]

        # ---- buffer loads (only while idle) ---------------------------------------
        wl, il = self.w_load, self.i_load
        m.d.comb += [
            wl.ready.eq(~self.busy), il.ready.eq(~self.busy),
            wb_wr.addr.eq(wl.payload.addr),
            wb_wr.data.eq(Cat(*[wl.payload.data] * K0)),
            wb_wr.en.eq(Mux(wl.valid & ~self.busy, 1 << wl.payload.row, 0)),
            ib_wr.addr.eq(il.payload.addr), ib_wr.data.eq(il.payload.data),
            ib_wr.en.eq(il.valid & ~self.busy),
        ]
        wiring.connect(m, wiring.flipped(self.p_load), ppu.load)
        m.d.comb += [ppu.load_en.eq(~self.busy), ppu.shift.eq(cur.shift),
                     ppu.relu.eq(cur.relu), ppu.pool.eq(cur.pool)]

        # ---- S0: issue -------------------------------------------------------------
        op = seq.op.payload
        s1_valid, s2_valid = Signal(), Signal()
        s1 = Signal(data.StructLayout({"pad": 1, "newblock": 1, "acc_addr": bits_for(p.abuf_entries),
                                       "first": 1, "final": 1}))
        s2 = Signal(data.StructLayout({"acc_addr": bits_for(p.abuf_entries), "first": 1,
                                       "final": 1}))
        reserved = fifo.level + (s1_valid & s1.final) + (s2_valid & s2.final)
        m.d.comb += seq.op.ready.eq(~op.final | (reserved < RESULT_FIFO_DEPTH))
        issue = seq.op.valid & seq.op.ready
        m.d.comb += [ib_rd.addr.eq(op.ib_addr), wb_rd.addr.eq(op.wb_addr),
                     wb_rd.en.eq(issue & op.newblock)]
        m.d.sync += [s1_valid.eq(issue), s1.pad.eq(op.pad), s1.newblock.eq(op.newblock),
                     s1.acc_addr.eq(op.acc_addr), s1.first.eq(op.first), s1.final.eq(op.final)]

        # ---- S1: weights + MAC -----------------------------------------------------
        wreg = Signal(K0 * C0 * 8)
        w_active = Mux(s1.newblock, wb_rd.data, wreg)
        with m.If(s1_valid & s1.newblock):
            m.d.sync += wreg.eq(wb_rd.data)
        m.d.comb += [mac.w.eq(w_active), mac.x.eq(Mux(s1.pad, 0, ib_rd.data)), mac.en.eq(1),
                     ab_rd.addr.eq(s1.acc_addr)]
        m.d.sync += [s2_valid.eq(s1_valid), s2.acc_addr.eq(s1.acc_addr), s2.first.eq(s1.first),
                     s2.final.eq(s1.final)]

        # ---- S2: accumulate (wrapping) ---------------------------------------------
        old = lanes(AW, K0)(ab_rd.data)
        acc = Signal(lanes(AW, K0))
        for k in range(K0):
            m.d.comb += acc[k].eq(Mux(s2.first, 0, old[k]) + mac.dot[k])   # truncates: wraps
        m.d.comb += [ab_wr.addr.eq(s2.acc_addr), ab_wr.data.eq(acc),
                     ab_wr.en.eq(s2_valid & ~s2.final),
                     fifo.w_data.eq(acc), fifo.w_en.eq(s2_valid & s2.final)]

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

        pix = Signal(16)
        k1 = Signal(8)
        with m.If(accept):
            m.d.sync += [pix.eq(0), k1.eq(0)]
        with m.Elif(pop):
            with m.If(pix == cur.P1 * cur.Q1 - 1):
                m.d.sync += [pix.eq(0), k1.eq(k1 + 1)]
            with m.Else():
                m.d.sync += pix.eq(pix + 1)

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
