"""Simba Global PE top: activation buffer, command decoder, SEND engine with
multicast manager, RECV tracker and EWISE near-memory unit.

Simba §3.1 "Simba global PE".  Interfaces (all ``amaranth.lib.stream``):

* ``cmd`` (in): :func:`packets.command_layout` commands from the chiplet
  controller;
* ``cpl`` (out): :func:`packets.completion_layout` (tag, status), one per
  command, tagged; they leave roughly in the order commands finish (a SEND to
  a fast group may complete before an earlier SEND still waiting for slow
  consumers), one cycle after the finish at the earliest;
* ``net_out`` (out): NoC flits (:mod:`tessera.hdl.noc.flit` layout,
  payload = one buffer word) -- DATA packets of SENDs;
* ``net_in`` (in): NoC flits -- OUT packets (RECV) and CREDIT packets;
* ``node_id`` (in, static): this Global PE's NoC address (``src`` of its flits);
* ``status`` (out): sticky error flags (:func:`packets.status_layout`).

Buffer requesters: read 0 = SEND, read 1/2 = EWISE operands A/B; write 0 =
network in (RECV, first on the write port: it never waits), write 1 = EWISE
result.  Up to ``send_slots`` SENDs,
one EWISE, ``recv_slots`` RECVs and one decoder completion (rejected
command or GROUP) are in flight at once (dispatch rules in
:mod:`.decoder`).  Completions from the sources (each RECV slot, each send
slot, EWISE, decoder) wait in one register each; a round-robin merge moves
one per cycle into the ``cpl`` output register (its payload holds still
while ``cpl`` is back-pressured).  A unit or slot is not reused while its
completion waits, so none is lost, and round robin means none starves.
Completions are tagged and leave roughly in the order commands finish, not
in command order.

Left out: the AXI register interface of the real chiplet (commands arrive as
a stream), a dedicated pooling command (max pooling is composed from EWISE max
and a strided SEND, see :mod:`.ewise`), depth-wise operations, power management.
"""
from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out, connect

from tessera.hdl.pe.mult import MULT_IMPLS
from tessera.params import ParamError

from .buffer import Buffer, round_robin
from .decoder import Decoder
from .ewise import EWISE_STAGES, EwiseUnit
from .mcast import MulticastManager
from .packets import (FIELD, MAX_MESH_CHECK, TAG_BITS, GpeConfig, command_layout,
                      completion_layout, net_flit_layout, node_address_layout, status_layout)
from .recv import RecvUnit
from .send import SendEngine


def validate(cfg: GpeConfig):
    def bad(name, msg):
        raise ParamError(name, msg)
    if cfg.banks < 1 or cfg.banks & (cfg.banks - 1):
        bad("banks", "must be a power of two")
    if cfg.words % cfg.banks:
        bad("words", f"must be a multiple of banks ({cfg.banks})")
    if not (cfg.banks * 2 <= cfg.words <= 1 << (FIELD - 1)):
        bad("words", f"must be in {cfg.banks * 2}..{1 << (FIELD - 1)}")
    if cfg.word_bits % 8 or cfg.word_bits < 64:
        bad("word_bits", "must be a multiple of 8 and >= 64 (headers are 34 bits)")
    for name in ("node_mesh_x", "node_mesh_y", "chiplet_mesh_x", "chiplet_mesh_y"):
        if not 1 <= getattr(cfg, name) <= MAX_MESH_CHECK:
            bad(name, f"must be in 1..{MAX_MESH_CHECK}")
    if not 1 <= cfg.groups <= 8:
        bad("groups", "must be in 1..8")
    if not 1 <= cfg.credit_window <= 255:
        bad("credit_window", "must be in 1..255")
    if not 1 <= cfg.recv_slots <= 4:
        bad("recv_slots", "must be in 1..4")
    if not 1 <= cfg.send_slots <= 8:
        bad("send_slots", "must be in 1..8")
    if not 1 <= cfg.ucast_lanes <= 4:
        bad("ucast_lanes", "must be in 1..4")
    if not 1 <= cfg.max_tile <= 255:
        bad("max_tile", "must be in 1..255")
    if cfg.read_latency not in (1, 2):
        bad("read_latency", "must be 1 or 2")
    if cfg.ewise_stages not in EWISE_STAGES:
        bad("ewise_stages", f"must be one of {', '.join(map(str, EWISE_STAGES))}")
    if cfg.mult_impl not in MULT_IMPLS:
        bad("mult_impl", f"must be one of {', '.join(MULT_IMPLS)}")


class GlobalPE(wiring.Component):
    def __init__(self, **params):
        cfg = GpeConfig(**params)
        validate(cfg)
        self.cfg = cfg
        self.addr_bits = max(1, (cfg.words - 1).bit_length())
        super().__init__({
            "cmd": In(stream.Signature(command_layout(cfg))),
            "cpl": Out(stream.Signature(completion_layout())),
            "net_out": Out(stream.Signature(net_flit_layout(cfg))),
            "net_in": In(stream.Signature(net_flit_layout(cfg))),
            "node_id": In(node_address_layout(cfg)),
            "status": Out(status_layout()),
        })

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        rl2 = cfg.read_latency == 2
        m.submodules.buffer = buf = Buffer(cfg.words, cfg.word_bits, cfg.banks, n_read=3, n_write=2,
                                            wr_first=True, rd_first=rl2,
                                            read_latency=cfg.read_latency)
        m.submodules.decoder = dec = Decoder(cfg)
        m.submodules.mcast = mc = MulticastManager(cfg)
        m.submodules.send = snd = SendEngine(cfg, self.addr_bits)
        m.submodules.ewise = ew = EwiseUnit(cfg, self.addr_bits)
        m.submodules.recv = rcv = RecvUnit(cfg, self.addr_bits)

        connect(m, wiring.flipped(self.cmd), dec.cmd)
        connect(m, snd.out, wiring.flipped(self.net_out))
        connect(m, wiring.flipped(self.net_in), rcv.net_in)
        connect(m, snd.rd, buf.rd[0])
        if rl2:
            m.d.comb += buf.rd_hold.eq(snd.rd_hold)
        connect(m, ew.rda, buf.rd[1])
        connect(m, ew.rdb, buf.rd[2])
        connect(m, rcv.wr, buf.wr[0])
        connect(m, ew.wr, buf.wr[1])

        q = dec.q
        # multicast manager
        m.d.comb += [mc.tw_en.eq(dec.table_we), mc.tw_idx.eq(q.gidx), mc.tw_mask.eq(q.mask),
                     mc.cr_g_en.eq(rcv.cr_g_en),
                     mc.cons_en.eq(snd.cons_en), mc.cons_sel.eq(snd.cons_sel),
                     snd.lane_ready.eq(mc.lane_ready)]
        for g in range(cfg.groups):
            m.d.comb += [snd.table[g].eq(mc.table[g]), dec.table[g].eq(mc.table[g])]
        for u in range(cfg.ucast_lanes):
            m.d.comb += mc.uaddr[u].eq(snd.uaddr_next[u])
        for g in range(len(rcv.cr_g_local)):
            m.d.comb += [mc.cr_g_local[g].eq(rcv.cr_g_local[g]),
                         mc.cr_g_count[g].eq(rcv.cr_g_count[g])]

        # unit starts
        m.d.comb += [snd.start.eq(dec.start_send), snd.tag.eq(q.tag), snd.base.eq(q.a),
                     snd.span.eq(dec.span),
                     snd.cnt[0].eq(q.cnt0), snd.cnt[1].eq(q.cnt1), snd.cnt[2].eq(q.cnt2),
                     snd.stride[0].eq(q.stride0), snd.stride[1].eq(q.stride1),
                     snd.stride[2].eq(q.stride2), snd.tile.eq(q.tile), snd.groups.eq(q.groups),
                     snd.ucast.eq(q.ucast), snd.uaddr.eq(q.uaddr), snd.node_id.eq(self.node_id)]
        m.d.comb += [ew.start.eq(dec.start_ewise), ew.sub.eq(q.sub), ew.shift.eq(q.shift),
                     ew.a.eq(q.a), ew.b.eq(q.b), ew.c.eq(q.c), ew.n.eq(q.cnt0), ew.tag.eq(q.tag)]
        m.d.comb += [rcv.start.eq(dec.start_recv), rcv.a.eq(q.a), rcv.count.eq(q.cnt0),
                     rcv.mask.eq(q.mask)]

        # completions: one pending register per source (each RECV slot, each send
        # slot, EWISE, decoder); round-robin merge below
        S = cfg.recv_slots
        SS = cfg.send_slots
        srcs = ([f"recv{k}" for k in range(S)] + [f"send{k}" for k in range(SS)]
                + ["ewise", "dec"])
        pend = {s: Signal(name=f"cpl_{s}_pend") for s in srcs}
        ptag = {s: Signal(TAG_BITS, name=f"cpl_{s}_tag") for s in srcs}
        pstat = Signal(3, name="cpl_dec_status")
        units = srcs[:-1]
        utag = {s: Signal(TAG_BITS, name=f"{s}_tag") for s in units}
        done = {f"recv{k}": rcv.done[k] for k in range(S)}
        done.update({f"send{k}": snd.done & (snd.done_slot == k) for k in range(SS)})
        done.update(ewise=ew.done)

        def allocate(kind, n, busy, start, target):
            """The lowest slot of ``kind`` that is idle and has no completion waiting;
            its tag is latched when ``start`` dispatches a command into it."""
            free = [~busy[k] & ~pend[f"{kind}{k}"] for k in range(n)]
            slot = Signal(range(max(2, n)), name=f"{kind}_alloc")
            for k in reversed(range(n)):
                with m.If(free[k]):
                    m.d.comb += slot.eq(k)
            m.d.comb += target.eq(slot)
            for k in range(n):
                with m.If(start & (slot == k)):
                    m.d.sync += utag[f"{kind}{k}"].eq(q.tag)
            return free

        free = allocate("recv", S, rcv.active, dec.start_recv, rcv.start_slot)
        sfree = allocate("send", SS, snd.slot_busy, dec.start_send, snd.start_slot)
        with m.If(dec.start_ewise):
            m.d.sync += utag["ewise"].eq(q.tag)

        # EWISE destination vs. regions that SENDs in flight have yet to read
        # (registered: a SEND's reads can only stop between two cycles, and none can start
        # while this command is held, so the stale value is conservative)
        m.d.comb += [snd.chk_lo.eq(q.c), snd.chk_hi.eq(dec.c_last)]
        chk_hit = Signal(name="ewise_dest_hit")
        m.d.sync += chk_hit.eq(snd.chk_hit)
        gidx_busy = Signal()
        for g in range(cfg.groups):
            with m.If(q.gidx == g):
                m.d.comb += gidx_busy.eq(snd.lane_busy[g])
        m.d.comb += [dec.send_ok.eq(snd.can_start & Cat(*sfree).any() & ~ew.busy),
                     dec.ewise_ok.eq(~ew.busy & ~pend["ewise"] & ~chk_hit),
                     dec.group_ok.eq(~gidx_busy),
                     dec.recv_free.eq(Cat(*free).any()),
                     dec.own_free.eq(~pend["dec"])]

        # output register fed by a round-robin pick among the waiting completions: the
        # payload holds still while ``cpl`` is back-pressured, and no source starves
        out_v = Signal(name="cpl_out_valid")
        out_tag = Signal(TAG_BITS, name="cpl_out_tag")
        out_st = Signal(3, name="cpl_out_status")
        m.d.comb += [self.cpl.valid.eq(out_v), self.cpl.payload.tag.eq(out_tag),
                     self.cpl.payload.status.eq(out_st)]
        load = Signal(name="cpl_load")
        m.d.comb += load.eq(~out_v | self.cpl.ready)
        with m.If(out_v & self.cpl.ready):
            m.d.sync += out_v.eq(0)
        grants, any_g = round_robin(m, [pend[s] for s in srcs], "cpl", en=load)
        # the grants are one-hot: the winner's tag / status by AND-OR (not a chain of
        # multiplexers in source order: fewer LUT levels; the same values)
        g_tag = [Mux(grants[i], ptag[s], 0) for i, s in enumerate(srcs)]
        with m.If(any_g):
            m.d.sync += [out_v.eq(1), out_tag.eq(Cat(*[Cat(*[t[b] for t in g_tag]).any()
                                                       for b in range(TAG_BITS)])),
                         out_st.eq(Mux(grants[srcs.index("dec")], pstat, 0))]
        for i, s in enumerate(srcs):
            with m.If(grants[i]):
                m.d.sync += pend[s].eq(0)
        for s in units:
            with m.If(done[s]):
                m.d.sync += [pend[s].eq(1), ptag[s].eq(utag[s])]
        with m.If(dec.own_cpl):
            m.d.sync += [pend["dec"].eq(1), ptag["dec"].eq(q.tag), pstat.eq(dec.own_status)]

        m.d.comb += [self.status.credit_overflow.eq(mc.overflow),
                     self.status.stray_word.eq(rcv.stray_word),
                     self.status.bad_flit.eq(rcv.bad_flit)]
        rw_coll = Signal(name="rw_collision")
        with m.If(buf.collision):
            m.d.sync += rw_coll.eq(1)
        m.d.comb += self.status.rw_collision.eq(rw_coll)
        return m
