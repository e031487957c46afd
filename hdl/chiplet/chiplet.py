"""Simba chiplet top: PE nodes, Global PE, controller and host gateway on one NoC mesh.

Simba §3.1 (Fig. 1(b)): a chiplet is a 4 x 4 PE array, a Global PE, a RISC-V
controller and a NoP router on a mesh NoC.  Here (node positions:
:func:`.config.node_map`, all parameters: :class:`.config.ChipletConfig`):

* a ``mesh_x x mesh_y`` mesh of :class:`~tessera.hdl.noc.router.Router`
  (wired with :mod:`tessera.hdl.noc.mesh`'s link helper, ``link_latency``
  register stages per link);
* a ``pe_node`` (PE + network interface, :mod:`.pe_node`) at every PE
  position, its ``node_id`` a constant;
* the Global PE (:class:`~tessera.hdl.global_pe.global_pe.GlobalPE`,
  ``word_bits`` = 64, ``words`` = 8192) at ``(0, ny)``, commands and
  completions wired to the controller;
* the controller (:class:`.controller.Controller`) at ``(1, ny)``;
* the gateway ``(2, ny)``: its router's local port is the host's flit port
  ``host_in`` / ``host_out`` (the package issue puts the NoP router there);
* routers with nothing attached elsewhere (their local output is drained and
  flagged in ``noc_err``).

Endpoints speak :meth:`.config.ChipletConfig.flit_layout` (the Global PE's
flit layout for this mesh); the routers are square (``max_node``) and speak
:meth:`~.config.ChipletConfig.router_config`'s layout: every local port has a
pure-wiring converter (coordinates and masks zero-extended / truncated; the
mask bit order ``y*mesh_x + x`` is the same on both sides).

Host ports: ``host_in`` / ``host_out`` (flits), ``prog``, ``start``, ``clear``
and the controller status (``busy``, ``done``, ``error``, ``timeout``,
``err_code``, ``err_pc``, ``stray``), the controller's barrier hook
``bar_req`` / ``bar_id`` / ``bar_ack`` (on a single chiplet the host is the
barrier: a program opens its RECV windows, then ``BAR`` tells the host to
stream its preload; the package issue joins it to the cross-chiplet
barrier), ``gpe_status`` (the Global PE's sticky
flags), ``pe_error`` (bit i: PE node i raised one of its ``err`` flags since the
last ``clear``; sticky), ``pe_running`` (bit i: PE node i is running tiles), ``pe_busy`` (bit i: PE i is
computing a tile; for utilisation counters), ``noc_err`` (bit n:
router n counted a dropped flit, or a flit reached the empty node n; sticky
until ``clear``), ``noc_flits`` (flits injected at all local ports since the
last ``start``, saturating 32 bits).

Package mode (``cfg.hier``, :mod:`tessera.hdl.package`): the routers are ``hier=True``
and take the chiplet's coordinate from the input ``chiplet_id`` (as do every node's
address), ``host_in`` / ``host_out`` carry the gateway's NoP traffic, the host's port
moves to the first router-only node (``aux_in`` / ``aux_out``), and the controller's
``BAR`` goes through a :class:`tessera.hdl.package.barrier.BarrierAgent` sharing its
NoC port (``bar_mask`` in, ``bar_err`` out; no ``bar_ack`` input).

Verilog export (:func:`chiplet_verilog`): the router and the PE node are each
emitted ONCE (``chiplet_router``, ``chiplet_pe_node``) and instantiated per
node with ``amaranth.hdl.Instance`` (constant ``my`` / ``node_id`` inputs);
the Global PE and the controller are ordinary submodules (one of each).
``sim=True`` builds every leaf as an Amaranth submodule instead (for
amaranth.sim).

Left out: the NoP router (host port in its place), clock/power domains,
a debug read-back path into PEs.
"""
from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Const, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.global_pe.global_pe import GlobalPE
from tessera.hdl.global_pe.packets import node_address_layout, status_layout
from tessera.hdl.noc.mesh import _addr_value, _RouterPorts, _wire_grid
from tessera.hdl.noc.router import Router

from . import isa
from .config import ChipletConfig, node_map
from .controller import Controller

ROUTER_MODULE = "chiplet_router"
PE_NODE_MODULE = "chiplet_pe_node"


def pe_node_build(cfg: ChipletConfig):
    """The PE node leaf: :class:`.pe_node.PeNode` when it exists, else the stand-in."""
    try:
        from .pe_node import PeNode
    except ImportError:
        return PeNodeStandIn(cfg)
    return PeNode(**cfg.pe_node_params())


class PeNodeStandIn(wiring.Component):
    """Placeholder for ``pe_node`` (same ports) until the NI lands: sinks every flit,
    sends nothing, never running, never in error (no DONE ever comes)."""

    def __init__(self, cfg: ChipletConfig):
        self.cfg = cfg
        lay = cfg.flit_layout()
        super().__init__({
            "net_in": In(stream.Signature(lay)),
            "net_out": Out(stream.Signature(lay)),
            "node_id": In(node_address_layout(cfg.gpe)),
            "running": Out(1), "err": Out(7), "done_code": Out(8), "tiles": Out(16),
            "pe_busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.net_in.ready.eq(1)
        return m


def _const_of(layout, value: dict) -> Const:
    return Const(layout.const(value).as_value().value, layout.size)


def _copy_struct(m, dst, src, layout):
    """dst := src field by field (nested StructLayouts; widths zero-extend / truncate)."""
    for name, fld in layout:
        if isinstance(fld.shape, data.StructLayout):
            _copy_struct(m, dst[name], src[name], fld.shape)
        else:
            m.d.comb += dst[name].eq(src[name])


def _convert(m, dst_sig, src_sig):
    """Flit conversion between the endpoint and router layouts (same field names)."""
    lay = dst_sig.shape()
    for name, fld in lay:
        if name == "dest":
            with m.If(src_sig.mcast):
                _copy_struct(m, dst_sig.dest.mcast, src_sig.dest.mcast, dst_sig.dest.mcast.shape())
            with m.Else():
                _copy_struct(m, dst_sig.dest.ucast, src_sig.dest.ucast, dst_sig.dest.ucast.shape())
        elif isinstance(fld.shape, data.StructLayout):
            _copy_struct(m, dst_sig[name], src_sig[name], fld.shape)
        else:
            m.d.comb += dst_sig[name].eq(src_sig[name])


class _LeafPorts:
    """Plain signals for every flattened port of one leaf instance (``consts``: inputs tied
    to constants, e.g. the node address)."""

    def __init__(self, proto, tag: str, consts: dict):
        self.sig, self.dirs, self.consts = {}, {}, consts
        for path, member, _ in proto.signature.flatten(proto):
            name = "__".join(str(p) for p in path)
            self.dirs[name] = member.flow
            if name not in consts:
                self.sig[name] = Signal(member.shape, name=f"{tag}__{name}")

    def submodule(self, m, leaf):
        for path, member, value in leaf.signature.flatten(leaf):
            name = "__".join(str(p) for p in path)
            if name in self.consts:
                m.d.comb += value.eq(self.consts[name])
            elif member.flow is In:
                m.d.comb += value.eq(self.sig[name])
            else:
                m.d.comb += self.sig[name].eq(value)
        return leaf

    def instance(self, module_name: str) -> Instance:
        kw = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for name, c in self.consts.items():
            kw[f"i_{name}"] = c
        for name, s in self.sig.items():
            kw[("i_" if self.dirs[name] is In else "o_") + name] = s
        return Instance(module_name, **kw)


class Chiplet(wiring.Component):
    def __init__(self, cfg: ChipletConfig | None = None, *, sim: bool = False,
                 leaf_names=(ROUTER_MODULE, PE_NODE_MODULE), **params):
        if cfg is None:
            cfg = ChipletConfig.from_params(params)
        elif params:
            raise TypeError("give either cfg or parameters")
        self.cfg = cfg.validate()
        self.nmap = node_map(cfg)
        self.sim = sim
        self.router_module, self.pe_node_module = leaf_names
        self.rcfg = cfg.router_config()
        self.gcfg = cfg.gpe
        lay = cfg.flit_layout()
        n = cfg.npes
        nodes = cfg.mesh[0] * cfg.mesh[1]
        cp = cfg.controller_params()
        members = {
            "host_in": In(stream.Signature(lay)),
            "host_out": Out(stream.Signature(lay)),
            "prog": In(stream.Signature(isa.INST_BITS)),
            "start": In(1), "clear": In(1),
            "busy": Out(1), "done": Out(1), "error": Out(1), "timeout": Out(1),
            "err_code": Out(isa.ERR_BITS), "err_pc": Out(cp["prog_depth"].bit_length()),
            "stray": Out(1),
            "bar_req": Out(1), "bar_id": Out(8), "bar_ack": In(1),
            "gpe_status": Out(status_layout()),
            "pe_error": Out(n), "pe_running": Out(n), "pe_busy": Out(n),
            "noc_err": Out(nodes),
            "noc_flits": Out(32),
        }
        if cfg.hier:
            # package mode (hdl/package): the gateway port (host_in/host_out) is the NoP
            # port, the host port moves to the first router-only node (aux_in/aux_out);
            # the barrier agent acks BAR (no bar_ack input)
            del members["bar_ack"]
            members |= {
                "chiplet_id": In(node_address_layout(self.gcfg).members["chiplet"]),
                "aux_in": In(stream.Signature(lay)),
                "aux_out": Out(stream.Signature(lay)),
                "bar_mask": In(cfg.chiplet_mesh_x * cfg.chiplet_mesh_y),
                "bar_err": Out(1),
            }
        super().__init__(members)

    # ---- addresses ------------------------------------------------------------------------
    def _ep_addr(self, xy) -> dict:
        return {"chiplet": {"x": 0, "y": 0}, "node": {"x": xy[0], "y": xy[1]}}

    def _ep_id(self, m, xy, lay, tag):
        """A node's address: a constant, or (hier) the node with the chiplet_id input."""
        if not self.cfg.hier:
            return _const_of(lay, self._ep_addr(xy))
        a = Signal(lay, name=f"{tag}_addr")
        # field by field: the routers' chiplet field and the endpoint's may differ in
        # width (ckx < cky): a flat assignment put chiplet (0, 1) at (2, 0) (1xN hang)
        m.d.comb += [a.chiplet.x.eq(self.chiplet_id.x), a.chiplet.y.eq(self.chiplet_id.y),
                     a.node.x.eq(xy[0]), a.node.y.eq(xy[1])]
        return Value.cast(a)

    def elaborate(self, platform):
        m = Module()
        cfg, nm, rc = self.cfg, self.nmap, self.rcfg
        mx, my = nm.mesh
        ep_lay = cfg.flit_layout()
        addr_lay = node_address_layout(self.gcfg)
        rproto = Router(rc)
        rproto._MustUse__silence = True

        # ---- routers ---------------------------------------------------------------------
        ports = []
        for y in range(my):
            for x in range(mx):
                rp = _RouterPorts(rproto, f"r{x}_{y}")
                ports.append(rp)
                my_addr = _addr_value(rc, (0, 0), (x, y))
                if cfg.hier:
                    my_addr = self._ep_id(m, (x, y), rc.addr, f"r{x}_{y}")
                m.submodules[f"r{x}_{y}"] = (rp.submodule(m, Router(rc), my_addr) if self.sim
                                             else rp.instance(self.router_module, my_addr))
        _wire_grid(m, ports, rc, mx, my, cfg.link_latency, "noc")

        # per node: endpoint-side streams in the endpoint layout
        ep_in, ep_out = {}, {}          # (x,y) -> (valid, ready, payload) signals
        inj = []
        for y in range(my):
            for x in range(mx):
                rp = ports[y * mx + x]
                t = f"n{x}_{y}"
                iv, ir = Signal(name=f"{t}_in_valid"), Signal(name=f"{t}_in_ready")
                ip = Signal(ep_lay, name=f"{t}_in_payload")
                ov, orr = Signal(name=f"{t}_out_valid"), Signal(name=f"{t}_out_ready")
                op = Signal(ep_lay, name=f"{t}_out_payload")
                _convert(m, rp.sig["local_in__payload"], ip)
                _convert(m, op, rp.sig["local_out__payload"])
                m.d.comb += [rp.sig["local_in__valid"].eq(iv), ir.eq(rp.sig["local_in__ready"]),
                             ov.eq(rp.sig["local_out__valid"]), rp.sig["local_out__ready"].eq(orr)]
                ep_in[(x, y)] = (iv, ir, ip)
                ep_out[(x, y)] = (ov, orr, op)
                inj.append(iv & ir)

        def attach(xy, sink, source):
            """endpoint stream ``source`` (its net_out) -> router; router -> ``sink``."""
            iv, ir, ip = ep_in[xy]
            ov, orr, op = ep_out[xy]
            m.d.comb += [iv.eq(source.valid), ip.eq(source.payload), source.ready.eq(ir),
                         sink.valid.eq(ov), sink.payload.eq(op), orr.eq(sink.ready)]

        # ---- Global PE and controller ----------------------------------------------------
        m.submodules.gpe = gpe = GlobalPE(**cfg.gpe_params())
        m.submodules.ctrl = ctrl = Controller(**cfg.controller_params())
        ctrl_id = self._ep_id(m, nm.ctrl, addr_lay, "ctrl")
        m.d.comb += [gpe.node_id.eq(self._ep_id(m, nm.gpe, addr_lay, "gpe")),
                     ctrl.node_id.eq(ctrl_id)]
        attach(nm.gpe, gpe.net_in, gpe.net_out)
        if cfg.hier:
            from tessera.hdl.package.barrier import BarrierAgent
            m.submodules.bar = bar = BarrierAgent(cfg)
            attach(nm.ctrl, bar.net_in, bar.net_out)
            wiring.connect(m, ctrl.net_out, bar.ctrl_out)
            wiring.connect(m, bar.ctrl_in, ctrl.net_in)
            m.d.comb += [bar.node_id.eq(ctrl_id), bar.barrier_req.eq(ctrl.barrier_req),
                         bar.barrier_id.eq(ctrl.barrier_id), ctrl.barrier_ack.eq(bar.barrier_ack),
                         bar.bar_mask.eq(self.bar_mask), bar.start.eq(self.start & ~ctrl.busy),
                         bar.clear.eq(self.clear & ~ctrl.busy), self.bar_err.eq(bar.err)]
        else:
            attach(nm.ctrl, ctrl.net_in, ctrl.net_out)
            m.d.comb += ctrl.barrier_ack.eq(self.bar_ack)
        wiring.connect(m, ctrl.gpe_cmd, gpe.cmd)
        wiring.connect(m, gpe.cpl, ctrl.gpe_cpl)
        wiring.connect(m, wiring.flipped(self.prog), ctrl.prog)
        m.d.comb += [ctrl.start.eq(self.start), ctrl.clear.eq(self.clear),
                     self.bar_req.eq(ctrl.barrier_req),
                     self.bar_id.eq(ctrl.barrier_id),
                     self.busy.eq(ctrl.busy), self.done.eq(ctrl.done), self.error.eq(ctrl.error),
                     self.timeout.eq(ctrl.timeout), self.err_code.eq(ctrl.err_code),
                     self.err_pc.eq(ctrl.err_pc), self.stray.eq(ctrl.stray),
                     self.gpe_status.eq(gpe.status)]

        # ---- host gateway ----------------------------------------------------------------
        attach(nm.gateway, wiring.flipped(self.host_out), wiring.flipped(self.host_in))

        # ---- PE nodes (one leaf module, Instance per position) ---------------------------
        pproto = pe_node_build(cfg)
        for obj in (pproto, getattr(pproto, "pe", None)):
            if obj is not None:
                obj._MustUse__silence = True
        pe_err = Signal(cfg.npes)
        for i, xy in enumerate(nm.pes):
            t = f"pe{xy[0]}_{xy[1]}"
            lp = _LeafPorts(pproto, t, {"node_id": self._ep_id(m, xy, addr_lay, t)})
            m.submodules[t] = (lp.submodule(m, pe_node_build(cfg)) if self.sim
                               else lp.instance(self.pe_node_module))
            s = lp.sig
            iv, ir, ip = ep_in[xy]
            ov, orr, op = ep_out[xy]
            m.d.comb += [iv.eq(s["net_out__valid"]), ip.eq(s["net_out__payload"]),
                         s["net_out__ready"].eq(ir),
                         s["net_in__valid"].eq(ov), s["net_in__payload"].eq(op),
                         orr.eq(s["net_in__ready"])]
            m.d.comb += [pe_err[i].eq(Value.cast(s["err"]).any()),
                         self.pe_running[i].eq(s["running"]), self.pe_busy[i].eq(s["pe_busy"])]

        # ---- status summaries --------------------------------------------------------------
        pe_sticky = Signal(cfg.npes)
        noc_sticky = Signal(mx * my)
        noc_now = Signal(mx * my)
        for y in range(my):
            for x in range(mx):
                k = y * mx + x
                m.d.comb += noc_now[k].eq(ports[k].sig["errors"].any())
        if cfg.hier:            # the package host port at the first router-only node
            attach(nm.empty[0], wiring.flipped(self.aux_out), wiring.flipped(self.aux_in))
        for xy in nm.empty[1 if cfg.hier else 0:]:
            iv, ir, ip = ep_in[xy]
            ov, orr, op = ep_out[xy]
            k = nm.index(xy)
            m.d.comb += [iv.eq(0), ip.eq(0), orr.eq(1)]
            with m.If(ov):
                m.d.comb += noc_now[k].eq(1)
        with m.If(self.clear & ~ctrl.busy):
            m.d.sync += [pe_sticky.eq(0), noc_sticky.eq(0)]
        with m.Else():
            m.d.sync += [pe_sticky.eq(pe_sticky | pe_err), noc_sticky.eq(noc_sticky | noc_now)]
        m.d.comb += [self.pe_error.eq(pe_sticky | pe_err), self.noc_err.eq(noc_sticky | noc_now)]

        # flits injected at every local port since the last start (saturating)
        cnt = Signal(32)
        inc = Signal(range(len(inj) + 1))
        m.d.comb += inc.eq(sum(inj))
        with m.If(self.start & ~ctrl.busy):
            m.d.sync += cnt.eq(0)
        with m.Elif(cnt < (1 << 32) - 1 - len(inj)):
            m.d.sync += cnt.eq(cnt + inc)
        m.d.comb += self.noc_flits.eq(cnt)
        return m


def chiplet_verilog(params: dict):
    """Router and PE node emitted once each, then the chiplet top that instantiates them."""
    top = Chiplet(**params)
    router_v = verilog.convert(Router(top.rcfg), name=ROUTER_MODULE, emit_src=False)
    pe_v = verilog.convert(pe_node_build(top.cfg), name=PE_NODE_MODULE, emit_src=False)
    top_v = verilog.convert(top, name="chiplet", emit_src=False)
    return router_v + "\n" + pe_v + "\n" + top_v, top
