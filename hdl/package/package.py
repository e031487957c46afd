"""Simba package: ``ckx x cky`` chiplets over the NoP mesh (block ``package``).

Simba §3.1 (Fig. 1(a): 36 chiplets joined by a mesh NoP of GRS links),
§4.4-4.5 (NoP latency, non-uniform chiplet distance) and §3.2 (the
controllers synchronise through memory-mapped interrupts).  Parameters and
the chiplet/NoP map: :class:`.config.PackageConfig`.

Structure
---------
* chiplet ``c = cy*ckx + cx`` is the ``chiplet`` block in hierarchical mode
  (``ChipletConfig.hier``): its routers are ``hier=True`` with the chiplet's
  coordinate (an input of the chiplet, ``chiplet_id``), a destination on
  another chiplet goes to the gateway node ``(2, ny)``, whose local port is
  the chiplet's NoP port (the chiplet's ``host_in`` / ``host_out`` ports);
* the NoP: a ``ckx x cky`` mesh of the NoC router (``level="nop"``, same flit
  layout), wired with :mod:`tessera.hdl.noc.mesh`'s link helper; each link =
  ``nop_link_latency`` register stages each way plus a serialiser that lets
  one flit onto the downstream router every ``nop_flit_cycles`` cycles
  (GRS link: latency + rate; ``nop_flit_cycles = 1`` adds nothing);
* the host's flit port is the local port of the host node
  ``PackageConfig.host_node`` (the chiplet's first router-only node: (2, 0) on
  a 2x2-PE chiplet, (3, 4) on the default 4x4) of chiplet (0, 0): address
  ``PackageConfig.host_addr``.  Every node of every chiplet is reachable from
  it by hierarchical address; packets to ``host_addr`` leave on ``host_out``;
* Verilog export: router, NoP router, pe_node and chiplet each emitted once
  (``package_router``, ``package_nop_router``, ``package_pe_node``,
  ``package_chiplet``) and instantiated with ``Instance``.

Ports (C = ckx*cky chiplets, arrays indexed by chiplet index c)
--------------------------------------------------------------------
====================  ====  ==================================================================
port                  dir   what
====================  ====  ==================================================================
host_in / host_out    in/o  flit streams (``PackageConfig.chiplet_cfg().flit_layout()``) of the
                            host node of chiplet (0, 0) (see above)
prog                  in    stream of 64-bit controller instruction words, to chiplet
                            ``prog_sel``'s controller (accepted while that one is not busy)
prog_sel              in    chiplet index the ``prog`` words go to (hold it while loading)
start                 in    pulse: start every chiplet's controller (and the cycle counters)
clear                 in    pulse: clear every controller (program + status) and sticky flags
bar_mask              in    C bits: chiplets taking part in barriers (0 = all)
busy done error       out   C bits each: chiplet c's controller status
timeout stray
err_code[c]           out   controller error code (``hdl/chiplet/isa.py`` ERR_*)
err_pc[c]             out   pc of the error
done_cycle[c]         out   32 bits: cycles from ``start`` to chiplet c's ``done`` (or error);
                            counts while chiplet c is busy, held after
gpe_status[c]         out   Global PE sticky flags (``status_layout``)
pe_error[c]           out   npes bits: PE node raised an ``err`` flag since ``clear``
pe_running[c]         out   npes bits: PE node running
noc_err[c]            out   mesh nodes bits: router dropped a flit / flit at an empty node
nop_err               out   C bits: NoP router c dropped a flit (sticky until ``clear``)
noc_flits[c]          out   32 bits: flits injected at chiplet c's local ports since ``start``
                            (the NoP port counts as a local port of the chiplet)
nop_flits             out   32 bits: flits sent on NoP links (one per flit per link hop) since
                            ``start``
bar_req               out   C bits: chiplet c's controller is in a ``BAR``
bar_id[c]             out   8 bits: the id of that ``BAR`` (host cue: every chiplet of
                            ``bar_mask`` showing ``bar_req`` with id i = all reached BAR i)
bar_err               out   1 bit, sticky until ``clear``: the master saw an ARRIVE whose id
                            differs from the open barrier's, or an agent a stray RELEASE
====================  ====  ==================================================================

Barrier (Simba's memory-mapped interrupts over the NoP)
-------------------------------------------------------
Each chiplet has a barrier agent sharing the controller's NoC port (node
``(1, ny)``; one-flit packets, so the two merge flit by flit; BARRIER packets
in to the agent, everything else to the controller).  ``BAR id`` in a program
raises the controller's ``barrier_req``; the agent sends one BARRIER ARRIVE
flit {id, its chiplet} to the master (the controller node of chiplet
``bar_master`` = (0, 0), its own agent included).  The master's agent collects
arrivals in a C-bit mask; when every chiplet of ``bar_mask`` has arrived it
clears the mask and sends ONE BARRIER RELEASE flit {id}, multicast to the
controller node of every chiplet in ``bar_mask``; an agent holding
``barrier_req`` with that id pulses ``barrier_ack`` and the BAR ends.  A
chiplet that is late holds only the barrier; a BAR that never completes ends
in the controller's ``TIMEOUT`` error (``TMO`` sets it).
Encoding (``hdl/chiplet/packets.py`` :func:`barrier_layout`, kind 0, ext 3,
control class): ``op`` [7:6] (1 ARRIVE, 2 RELEASE), ``id`` [15:8], chiplet x, y.

Layer flow: per chiplet a controller program (``prog_sel`` = c) and preload
packets into ``host_in`` (hierarchical destinations); ``start``; each program
ends with a ``BAR`` then, on the chiplets holding outputs, SEND to
``host_addr``; rtl_cycles = ``start`` -> last chiplet ``done``;
rtl_chiplet_cycles[c] = ``done_cycle[c]``.

Left out: per-chiplet clocks and reset, GRS clock recovery, link errors,
barrier masters other than chiplet (0, 0), more than one open barrier.
"""
from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.chiplet import isa
from tessera.hdl.chiplet.chiplet import Chiplet, _convert, _LeafPorts, pe_node_build
from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.global_pe.packets import node_address_layout, status_layout
from tessera.hdl.noc.mesh import _addr_value, _RouterPorts, _wire_grid
from tessera.hdl.noc.router import Router

from .config import PackageConfig

ROUTER_MODULE = "package_router"
NOP_ROUTER_MODULE = "package_nop_router"
PE_NODE_MODULE = "package_pe_node"
CHIPLET_MODULE = "package_chiplet"


class Package(wiring.Component):
    def __init__(self, cfg: PackageConfig | None = None, *, sim: bool = False, **params):
        if cfg is None:
            cfg = PackageConfig.from_params(params)
        elif params:
            raise TypeError("give either cfg or parameters")
        self.cfg = cfg.validate()
        self.ccfg = ccfg = cfg.chiplet_cfg()
        self.sim = sim
        self.nop_cfg = cfg.nop_router_config()
        C = cfg.nchiplets
        lay = ccfg.flit_layout()
        npes = ccfg.npes
        nodes = ccfg.mesh[0] * ccfg.mesh[1]
        pcbits = ccfg.prog_depth.bit_length()
        super().__init__({
            "host_in": In(stream.Signature(lay)),
            "host_out": Out(stream.Signature(lay)),
            "prog": In(stream.Signature(isa.INST_BITS)),
            "prog_sel": In(range(C)),
            "start": In(1), "clear": In(1),
            "bar_mask": In(C),
            "busy": Out(C), "done": Out(C), "error": Out(C), "timeout": Out(C),
            "stray": Out(C),
            "err_code": Out(isa.ERR_BITS).array(C),
            "err_pc": Out(pcbits).array(C),
            "done_cycle": Out(32).array(C),
            "gpe_status": Out(status_layout()).array(C),
            "pe_error": Out(npes).array(C),
            "pe_running": Out(npes).array(C),
            "noc_err": Out(nodes).array(C),
            "nop_err": Out(C),
            "noc_flits": Out(32).array(C),
            "nop_flits": Out(32),
            "bar_req": Out(C),
            "bar_id": Out(8).array(C),
            "bar_err": Out(1),
        })

    def chiplet_proto(self, sim=False) -> Chiplet:
        return Chiplet(self.ccfg, sim=sim, leaf_names=(ROUTER_MODULE, PE_NODE_MODULE))

    def elaborate(self, platform):
        m = Module()
        cfg, ccfg, nc = self.cfg, self.ccfg, self.nop_cfg
        C = cfg.nchiplets
        from tessera.hdl.chiplet.config import node_map
        gx, gy = node_map(ccfg).gateway
        clay = node_address_layout(ccfg.gpe).members["chiplet"]
        proto = self.chiplet_proto()
        proto._MustUse__silence = True
        nproto = Router(nc)
        nproto._MustUse__silence = True

        # ---- NoP routers and links ----------------------------------------------------------
        nop = []
        for c, (cx, cy) in enumerate(cfg.chiplets()):
            rp = _RouterPorts(nproto, f"p{cx}_{cy}")
            nop.append(rp)
            my = _addr_value(nc, (cx, cy), (gx, gy))
            m.submodules[f"p{cx}_{cy}"] = (rp.submodule(m, Router(nc), my) if self.sim
                                           else rp.instance(NOP_ROUTER_MODULE, my))
        links = _wire_grid(m, nop, nc, cfg.ckx, cfg.cky, cfg.nop_link_latency, "nop",
                           flit_cycles=cfg.nop_flit_cycles)

        # ---- chiplets -------------------------------------------------------------------------
        busy_all = Signal(C)
        ctl_start = self.start & ~busy_all.any()
        nop_sticky = Signal(C)
        nop_now = Signal(C)
        bar_err = Signal(C)
        for c, (cx, cy) in enumerate(cfg.chiplets()):
            t = f"c{cx}_{cy}"
            lp = _LeafPorts(proto, t, {"chiplet_id": Const(clay.const(
                {"x": cx, "y": cy}).as_value().value, clay.size)})
            m.submodules[t] = (lp.submodule(m, self.chiplet_proto(sim=True)) if self.sim
                               else lp.instance(CHIPLET_MODULE))
            s = lp.sig
            rp = nop[c]
            # gateway (endpoint layout) <-> NoP router local port (router layout)
            _convert(m, rp.sig["local_in__payload"], s["host_out__payload"])
            _convert(m, s["host_in__payload"], rp.sig["local_out__payload"])
            m.d.comb += [rp.sig["local_in__valid"].eq(s["host_out__valid"]),
                         s["host_out__ready"].eq(rp.sig["local_in__ready"]),
                         s["host_in__valid"].eq(rp.sig["local_out__valid"]),
                         rp.sig["local_out__ready"].eq(s["host_in__ready"])]
            # host port on chiplet (0, 0); elsewhere drained (a flit there is flagged)
            if c == 0:
                m.d.comb += [s["aux_in__valid"].eq(self.host_in.valid),
                             s["aux_in__payload"].eq(self.host_in.payload),
                             self.host_in.ready.eq(s["aux_in__ready"]),
                             self.host_out.valid.eq(s["aux_out__valid"]),
                             self.host_out.payload.eq(s["aux_out__payload"]),
                             s["aux_out__ready"].eq(self.host_out.ready)]
            else:
                m.d.comb += [s["aux_in__valid"].eq(0), s["aux_in__payload"].eq(0),
                             s["aux_out__ready"].eq(1)]
            m.d.comb += nop_now[c].eq(rp.sig["errors"].any()
                                      | (s["aux_out__valid"] if c else Const(0, 1)))
            # program, control, status
            m.d.comb += [s["prog__valid"].eq(self.prog.valid & (self.prog_sel == c)),
                         s["prog__payload"].eq(self.prog.payload),
                         s["start"].eq(self.start), s["clear"].eq(self.clear),
                         s["bar_mask"].eq(self.bar_mask)]
            with m.If(self.prog_sel == c):
                m.d.comb += self.prog.ready.eq(s["prog__ready"])
            m.d.comb += [busy_all[c].eq(s["busy"]),
                         self.busy[c].eq(s["busy"]), self.done[c].eq(s["done"]),
                         self.error[c].eq(s["error"]), self.timeout[c].eq(s["timeout"]),
                         self.stray[c].eq(s["stray"]), self.bar_req[c].eq(s["bar_req"]),
                         self.bar_id[c].eq(s["bar_id"]),
                         self.err_code[c].eq(s["err_code"]), self.err_pc[c].eq(s["err_pc"]),
                         self.gpe_status[c].eq(s["gpe_status"]),
                         self.pe_error[c].eq(s["pe_error"]),
                         self.pe_running[c].eq(s["pe_running"]),
                         self.noc_err[c].eq(s["noc_err"]),
                         self.noc_flits[c].eq(s["noc_flits"]), bar_err[c].eq(s["bar_err"])]
            # completion time: cycles chiplet c's controller is busy after start
            dc = Signal(32, name=f"done_cycle_{c}")
            with m.If(ctl_start):
                m.d.sync += dc.eq(0)
            with m.Elif(s["busy"] & (dc != 0xFFFF_FFFF)):
                m.d.sync += dc.eq(dc + 1)
            m.d.comb += self.done_cycle[c].eq(dc)
        m.d.comb += self.bar_err.eq(bar_err.any())

        with m.If(self.clear & ~busy_all.any()):
            m.d.sync += nop_sticky.eq(0)
        with m.Else():
            m.d.sync += nop_sticky.eq(nop_sticky | nop_now)
        m.d.comb += self.nop_err.eq(nop_sticky | nop_now)

        # flits on NoP links since start (saturating)
        cnt = Signal(32)
        inc = Signal(range(len(links) + 1))
        m.d.comb += inc.eq(sum(links) if links else 0)
        with m.If(ctl_start):
            m.d.sync += cnt.eq(0)
        with m.Elif(cnt < (1 << 32) - 1 - len(links)):
            m.d.sync += cnt.eq(cnt + inc)
        m.d.comb += self.nop_flits.eq(cnt)
        return m


def package_verilog(params: dict):
    """Router, NoP router, pe_node and chiplet each emitted once, then the package top."""
    top = Package(**params)
    ccfg = top.ccfg
    parts = [verilog.convert(Router(ccfg.router_config()), name=ROUTER_MODULE, emit_src=False),
             verilog.convert(Router(top.nop_cfg), name=NOP_ROUTER_MODULE, emit_src=False),
             verilog.convert(pe_node_build(ccfg), name=PE_NODE_MODULE, emit_src=False),
             verilog.convert(top.chiplet_proto(), name=CHIPLET_MODULE, emit_src=False),
             verilog.convert(top, name="package", emit_src=False)]
    return "\n".join(parts), top
