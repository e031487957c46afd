"""Package barrier agent: the controller's ``BAR`` over the NoP (Simba §3.2).

Simba's controllers synchronise through memory-mapped interrupts carried as
NoP packets.  One :class:`BarrierAgent` per chiplet sits between the
controller and its router port (node ``(1, ny)``):

* ``ctrl_out`` (the controller's ``net_out``) and the agent's own BARRIER
  flits merge into ``net_out`` flit by flit (all are one-flit packets; the
  agent's go first); ``net_in`` BARRIER flits (kind 0, ext 3) go to the agent,
  every other flit to ``ctrl_in`` (the controller's ``net_in``; both sinks are
  always ready, so ``net_in`` is too).
* ``barrier_req`` rising: one ARRIVE {id, chiplet} to the master's controller
  node ``master_addr`` (chiplet (0, 0)); a RELEASE with that id then pulses
  ``barrier_ack``.  ``barrier_req`` falling without ack (controller TIMEOUT)
  forgets the barrier.
* master (``chiplet_id`` = (0, 0)): ARRIVEs set bits of an arrival mask (the
  first one's id opens the barrier; another id -> ``err``); once every chiplet
  of ``bar_mask`` (0 = all) has arrived, the mask clears and one RELEASE flit
  goes out, multicast to the controller node of every chiplet in the mask.
* ``clear`` / ``start`` (pulses) forget everything (``err`` is cleared by
  ``clear``).

Packet encoding: :func:`tessera.hdl.chiplet.packets.barrier_layout`.
Left out: several open barriers, masters other than chiplet (0, 0).
"""
from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.hdl.chiplet.packets import (BAR_ARRIVE, BAR_RELEASE, EXT_BARRIER, KIND_EXT,
                                         barrier_layout, ctrl_class)
from tessera.hdl.global_pe.packets import node_address_layout


class BarrierAgent(wiring.Component):
    def __init__(self, cfg: ChipletConfig):
        self.cfg = cfg
        self.nm = node_map(cfg)
        self.C = cfg.chiplet_mesh_x * cfg.chiplet_mesh_y
        lay = cfg.flit_layout()
        addr = node_address_layout(cfg.gpe)
        super().__init__({
            "ctrl_out": In(stream.Signature(lay)),
            "ctrl_in": Out(stream.Signature(lay)),
            "net_out": Out(stream.Signature(lay)),
            "net_in": In(stream.Signature(lay)),
            "node_id": In(addr),
            "barrier_req": In(1), "barrier_id": In(8), "barrier_ack": Out(1),
            "bar_mask": In(self.C),
            "start": In(1), "clear": In(1),
            "err": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, C = self.cfg, self.C
        cm = (cfg.chiplet_mesh_x, cfg.chiplet_mesh_y)
        blay = barrier_layout(cm)
        mx, my = self.nm.mesh
        cx, cy = self.node_id.chiplet.x, self.node_id.chiplet.y
        is_master = (cx == 0) & (cy == 0)
        allc = (1 << C) - 1
        eff = Signal(C)
        m.d.comb += eff.eq(Mux(self.bar_mask.any(), self.bar_mask, allc))
        reset = self.start | self.clear

        # ---- input demux ----------------------------------------------------------------
        fi = self.net_in.payload
        bin_ = Signal(blay)
        m.d.comb += bin_.eq(fi.payload[:blay.size])
        is_bar = fi.head & (bin_.kind == KIND_EXT) & (bin_.ext == EXT_BARRIER)
        m.d.comb += [self.ctrl_in.payload.eq(fi),
                     self.ctrl_in.valid.eq(self.net_in.valid & ~is_bar),
                     self.net_in.ready.eq(Mux(is_bar, 1, self.ctrl_in.ready))]
        rx = self.net_in.valid & is_bar

        # ---- agent ---------------------------------------------------------------------------
        sent, rel = Signal(), Signal()
        arrive_pend = Signal()
        m.d.comb += arrive_pend.eq(self.barrier_req & ~sent)
        m.d.comb += self.barrier_ack.eq(self.barrier_req & rel)
        err = Signal()
        m.d.comb += self.err.eq(err)

        # ---- master --------------------------------------------------------------------------
        arrived = Signal(C)
        cur_id = Signal(8)
        rel_pend = Signal()
        rel_id = Signal(8)
        new = Signal(C)
        full = Signal()
        m.d.comb += full.eq(is_master & ((arrived & eff) == eff))

        # ---- output merge: release, arrive, controller --------------------------------------
        fo = self.net_out.payload
        bo = Signal(blay)
        take_rel, take_arr = Signal(), Signal()
        base = [fo.head.eq(1), fo.tail.eq(1), fo.mclass.eq(ctrl_class(cfg.classes)),
                fo.src.eq(self.node_id)]
        with m.If(rel_pend):
            m.d.comb += [*base, fo.mcast.eq(1), fo.dest.mcast.chiplets.eq(eff),
                         fo.dest.mcast.nodes.eq(Const(1 << self.nm.index(self.nm.ctrl), mx * my)),
                         bo.kind.eq(KIND_EXT), bo.ext.eq(EXT_BARRIER), bo.op.eq(BAR_RELEASE),
                         bo.id.eq(rel_id), bo.chiplet.eq(self.node_id.chiplet),
                         fo.payload.eq(bo), self.net_out.valid.eq(1),
                         take_rel.eq(self.net_out.ready)]
        with m.Elif(arrive_pend):
            m.d.comb += [*base, fo.mcast.eq(0), fo.dest.ucast.chiplet.x.eq(0),
                         fo.dest.ucast.chiplet.y.eq(0),
                         fo.dest.ucast.node.x.eq(self.nm.ctrl[0]),
                         fo.dest.ucast.node.y.eq(self.nm.ctrl[1]),
                         bo.kind.eq(KIND_EXT), bo.ext.eq(EXT_BARRIER), bo.op.eq(BAR_ARRIVE),
                         bo.id.eq(self.barrier_id), bo.chiplet.eq(self.node_id.chiplet),
                         fo.payload.eq(bo), self.net_out.valid.eq(1),
                         take_arr.eq(self.net_out.ready)]
        with m.Else():
            m.d.comb += [fo.eq(self.ctrl_out.payload), self.net_out.valid.eq(self.ctrl_out.valid),
                         self.ctrl_out.ready.eq(self.net_out.ready)]

        # ---- state ------------------------------------------------------------------------------
        with m.If(rx & (bin_.op == BAR_ARRIVE)):
            with m.If(~is_master):
                m.d.sync += err.eq(1)
            with m.Else():
                m.d.comb += new.eq(Const(1, C) << (bin_.chiplet.y * cfg.chiplet_mesh_x
                                                   + bin_.chiplet.x))
                with m.If(~arrived.any()):
                    m.d.sync += cur_id.eq(bin_.id)
                with m.Elif(bin_.id != cur_id):
                    m.d.sync += err.eq(1)
        with m.If(rx & (bin_.op == BAR_RELEASE)):
            with m.If(self.barrier_req & sent & (bin_.id == self.barrier_id)):
                m.d.sync += rel.eq(1)
            with m.Else():
                m.d.sync += err.eq(1)
        with m.If(rx & (bin_.op != BAR_ARRIVE) & (bin_.op != BAR_RELEASE)):
            m.d.sync += err.eq(1)

        with m.If(full & ~rel_pend):
            m.d.sync += [arrived.eq(new), rel_pend.eq(1), rel_id.eq(cur_id)]
            with m.If(new.any()):
                m.d.sync += cur_id.eq(bin_.id)
        with m.Else():
            m.d.sync += arrived.eq(arrived | new)
        with m.If(take_rel):
            m.d.sync += rel_pend.eq(0)
        with m.If(take_arr):
            m.d.sync += sent.eq(1)
        with m.If(~self.barrier_req | self.barrier_ack):
            m.d.sync += [sent.eq(0), rel.eq(0)]

        with m.If(reset):
            m.d.sync += [arrived.eq(0), rel_pend.eq(0), sent.eq(0), rel.eq(0)]
        with m.If(self.clear):
            m.d.sync += err.eq(0)
        return m
