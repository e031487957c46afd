"""kx x ky mesh of routers and the two-level chiplet/NoP system (Simba §3.1, §4.4-4.5).

* :class:`Mesh`: a kx x ky mesh of :class:`~.router.Router` with the local
  ports exposed (``local_in[i]`` / ``local_out[i]``, node ``i = y*kx + x``) and
  ``link_latency`` register stages on every link, flits one way and credits the
  other way.  Boundary ports are tied off.
* :class:`TwoLevel`: ``ckx x cky`` chiplets, each a kx x ky NoC (routers with
  ``hier=True``) whose gateway node's local port is the chiplet's NoP router;
  the NoP routers form a ckx x cky mesh with ``nop_link_latency`` stages.
  Exposed local ports are every non-gateway node of every chiplet, in
  (chiplet index, node index) order (see the manifest's ``local_ports``).

In the Verilog export the router is ONE module (``<top>_router``, plus
``<top>_nop_router`` for the NoP) instantiated once per node with
``amaranth.hdl.Instance``; its position is a constant on its ``my`` input.
The buffers must cover the credit round trip ``2*link_latency + 1 + sa_stages``
(``2*link_latency + 2`` for the chiplet's one-cycle allocation) so a single flow
keeps 1 flit/cycle; this is checked (``full_rate_check=False`` turns it off, for
measuring a mesh at smaller buffers, e.g. against BookSim at equal buffers).  Left out: clock-domain crossings and
SerDes of the package links (modelled as pure latency).

With ``alloc_stages=2`` the mesh turns on the routers' ``link_lookahead`` (``link_lookahead=None``
follows ``alloc_stages``): each link also carries, through the same link registers, the
receiving router's route and destination check of the flit, computed by the sender (issue 20:
the receiver's write side then starts from the link register's decoded bits; cycles unchanged).
P&R of a 2x2 mesh (ECP5-85k, grade 6): 84.5 MHz with it (75.1 without, stop 31), path the
credit link register -> acceptance -> output arbiter (see ``router.py``).
"""
from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, ResetSignal, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .router import E, N, PORTS, S, W, Router, RouterConfig

DIRS = {N: (0, -1), E: (1, 0), S: (0, 1), W: (-1, 0)}
OPP = {N: S, S: N, E: W, W: E}


def _check_rtt(name, buffer_flits, link_latency, sa_stages=1):
    rtt = 2 * link_latency + 1 + sa_stages
    if buffer_flits < rtt:
        err = ValueError(f"{name}: {buffer_flits} flits do not cover the credit round trip "
                         f"2*link_latency+{1 + sa_stages} = {rtt} cycles"
                         + (f" (sa_stages={sa_stages})" if sa_stages != 1 else ""))
        err.param = name
        raise err


class _RouterPorts:
    """Plain signals for every flattened port of one router instance."""

    def __init__(self, proto: Router, tag: str):
        self.sig = {}
        self.dirs = {}
        for path, member, _ in proto.signature.flatten(proto):
            name = "__".join(str(p) for p in path)
            self.sig[name] = Signal(member.shape, name=f"{tag}__{name}")
            self.dirs[name] = member.flow

    def submodule(self, m, router: Router, my_value: int):
        """Direct Amaranth submodule (for amaranth.sim); same wiring as :meth:`instance`."""
        for path, member, value in router.signature.flatten(router):
            name = "__".join(str(p) for p in path)
            if name == "my":
                m.d.comb += value.eq(my_value)
            elif member.flow is In:
                m.d.comb += value.eq(self.sig[name])
            else:
                m.d.comb += self.sig[name].eq(value)
        return router

    def instance(self, module_name: str, my_value: int) -> Instance:
        kw = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
        for name, s in self.sig.items():
            if name == "my":      # a constant, or a Value (a chiplet's coordinate input)
                kw["i_my"] = (my_value if isinstance(my_value, Value)
                              else Const(my_value, len(Value.cast(s))))
                continue
            kw[("i_" if self.dirs[name] is In else "o_") + name] = s
        return Instance(module_name, **kw)


def _addr_value(cfg: RouterConfig, chiplet, node) -> int:
    """Pack an address (chiplet(x,y), node(x,y)) with the cfg.addr layout."""
    val = 0
    for fname, (x, y) in (("chiplet", chiplet), ("node", node)):
        fld = cfg.addr[fname]
        sub = fld.shape
        val |= (x << (fld.offset + sub["x"].offset)) | (y << (fld.offset + sub["y"].offset))
    return val


def _serialise(m, v, c, f, depth, cycles, tag):
    """Link rate: flits (valid, vc, flit) queue in a FIFO of ``depth`` (the downstream
    buffer space the upstream holds credits for, so it never overflows) and leave one per
    ``cycles`` cycles.  Returns the (valid, vc, flit) seen by the downstream router."""
    from amaranth.lib.fifo import SyncFIFO
    fw = len(Value.cast(f))
    q = SyncFIFO(width=len(c) + fw, depth=depth)
    m.submodules[f"{tag}_ser"] = q
    gap = Signal(range(cycles), name=f"{tag}_gap")
    ov = Signal(name=f"{tag}_sv")
    oc = Signal(len(c), name=f"{tag}_sc")
    of = Signal(fw, name=f"{tag}_sf")
    m.d.comb += [q.w_en.eq(v), q.w_data.eq(Cat(c, f)),
                 ov.eq(q.r_rdy & (gap == 0)), q.r_en.eq(ov),
                 oc.eq(q.r_data[:len(c)]), of.eq(q.r_data[len(c):])]
    with m.If(ov):
        m.d.sync += gap.eq(cycles - 1)
    with m.Elif(gap != 0):
        m.d.sync += gap.eq(gap - 1)
    return ov, oc, of


def _wire_grid(m, ports, cfg: RouterConfig, kx, ky, latency, tag, flit_cycles=1):
    """Connect a kx*ky grid of router port bundles with ``latency`` stages per link (and,
    if ``flit_cycles`` > 1, a serialiser per link: one flit per ``flit_cycles`` cycles).
    Returns the ``valid`` of every link's sending end (one flit on a link per cycle)."""
    V = cfg.vcs
    links = []
    for y in range(ky):
        for x in range(kx):
            a = ports[y * kx + x]
            for d, (dx, dy) in DIRS.items():
                nx, ny = x + dx, y + dy
                o = f"out_{PORTS[d]}"
                if not (0 <= nx < kx and 0 <= ny < ky):
                    # boundary: nothing arrives, no credits come back
                    i = f"in_{PORTS[d]}"
                    m.d.comb += [a.sig[f"{i}__valid"].eq(0), a.sig[f"{i}__vc"].eq(0),
                                 a.sig[f"{i}__flit"].eq(0), a.sig[f"{o}__credit"].eq(0)]
                    if cfg.link_lookahead:
                        m.d.comb += a.sig[f"{i}__la"].eq(0)
                    continue
                b = ports[ny * kx + nx]
                i = f"in_{PORTS[OPP[d]]}"
                # flit path a.out_d -> b.in_opp, latency stages
                v, c, f = a.sig[f"{o}__valid"], a.sig[f"{o}__vc"], a.sig[f"{o}__flit"]
                la = a.sig[f"{o}__la"] if cfg.link_lookahead else None
                links.append(v)
                cr = b.sig[f"{i}__credit"]
                for k in range(latency):
                    nv = Signal(name=f"{tag}_l{x}_{y}_{d}_v{k}")
                    nc = Signal(len(c), name=f"{tag}_l{x}_{y}_{d}_c{k}")
                    nf = Signal(len(Value.cast(f)), name=f"{tag}_l{x}_{y}_{d}_f{k}")
                    ncr = Signal(V, name=f"{tag}_l{x}_{y}_{d}_cr{k}")
                    m.d.sync += [nv.eq(v), nc.eq(c), nf.eq(f), ncr.eq(cr)]
                    v, c, f, cr = nv, nc, nf, ncr
                    if la is not None:
                        nla = Signal(len(la), name=f"{tag}_l{x}_{y}_{d}_la{k}")
                        m.d.sync += nla.eq(la)
                        la = nla
                if flit_cycles > 1:
                    assert la is None, "link_lookahead over a serialised link"
                    v, c, f = _serialise(m, v, c, f, V * cfg.depth, flit_cycles,
                                         f"{tag}_l{x}_{y}_{d}")
                m.d.comb += [b.sig[f"{i}__valid"].eq(v), b.sig[f"{i}__vc"].eq(c),
                             b.sig[f"{i}__flit"].eq(f), a.sig[f"{o}__credit"].eq(cr)]
                if la is not None:
                    m.d.comb += b.sig[f"{i}__la"].eq(la)
    return links


class Mesh(wiring.Component):
    def __init__(self, kx=4, ky=4, vcs=2, buffer_flits=4, max_packet_flits=4, payload_width=64,
                 classes=2, link_latency=1, max_node=8, err_width=16, name="mesh", sim=False,
                 sa_stages=1, full_rate_check=True, alloc_stages=1, link_lookahead=None):
        if full_rate_check:
            _check_rtt("buffer_flits", buffer_flits, link_latency, sa_stages)
        if link_latency < 1:
            err = ValueError("link_latency: must be >= 1")
            err.param = "link_latency"
            raise err
        self.cfg = RouterConfig(kx=kx, ky=ky, vcs=vcs, buffer_flits=buffer_flits,
                                max_packet_flits=max_packet_flits, payload_width=payload_width,
                                classes=classes, max_node=max_node, max_chiplet=1,
                                err_width=err_width, sa_stages=sa_stages,
                                alloc_stages=alloc_stages,
                                link_lookahead=(alloc_stages == 2 if link_lookahead is None
                                                else link_lookahead))
        self.kx, self.ky, self.link_latency, self.top = kx, ky, link_latency, name
        self.sim = sim      # True: routers as Amaranth submodules (amaranth.sim), not Instances
        n = kx * ky
        super().__init__({
            "local_in": In(stream.Signature(self.cfg.flit)).array(n),
            "local_out": Out(stream.Signature(self.cfg.flit)).array(n),
            "errors": Out(err_width).array(n),
        })

    @property
    def router_module(self):
        return f"{self.top}_router"

    def elaborate(self, platform):
        m = Module()
        c = self.cfg
        proto = Router(c)
        proto._MustUse__silence = True
        ports = []
        for y in range(self.ky):
            for x in range(self.kx):
                i = y * self.kx + x
                rp = _RouterPorts(proto, f"r{x}_{y}")
                ports.append(rp)
                my = _addr_value(c, (0, 0), (x, y))
                m.submodules[f"r{x}_{y}"] = (rp.submodule(m, Router(c), my) if self.sim
                                             else rp.instance(self.router_module, my))
                li, lo = self.local_in[i], self.local_out[i]
                m.d.comb += [rp.sig["local_in__valid"].eq(li.valid),
                             rp.sig["local_in__payload"].eq(li.payload),
                             li.ready.eq(rp.sig["local_in__ready"]),
                             lo.valid.eq(rp.sig["local_out__valid"]),
                             lo.payload.eq(rp.sig["local_out__payload"]),
                             rp.sig["local_out__ready"].eq(lo.ready),
                             self.errors[i].eq(rp.sig["errors"])]
        _wire_grid(m, ports, c, self.kx, self.ky, self.link_latency, "noc")
        return m

    def verilog(self):
        router_v = verilog.convert(Router(self.cfg), name=self.router_module, emit_src=False)
        top_v = verilog.convert(self, name=self.top, emit_src=False)
        return router_v + "\n" + top_v


class TwoLevel(wiring.Component):
    def __init__(self, kx=2, ky=2, ckx=2, cky=2, gw_x=0, gw_y=0, vcs=2, buffer_flits=4,
                 nop_buffer_flits=10, max_packet_flits=4, payload_width=64, classes=2,
                 link_latency=1, nop_link_latency=4, max_node=8, max_chiplet=8, err_width=16,
                 name="nocsys", sa_stages=1):
        _check_rtt("buffer_flits", buffer_flits, link_latency, sa_stages)
        _check_rtt("nop_buffer_flits", nop_buffer_flits, nop_link_latency, sa_stages)
        if kx * ky < 2:
            err = ValueError("kx: a chiplet needs the gateway and at least one other node")
            err.param = "kx"
            raise err
        common = dict(kx=kx, ky=ky, vcs=vcs, max_packet_flits=max_packet_flits,
                      payload_width=payload_width, classes=classes, ckx=ckx, cky=cky,
                      gw_x=gw_x, gw_y=gw_y, max_node=max_node, max_chiplet=max_chiplet,
                      err_width=err_width, hier=True, sa_stages=sa_stages)
        self.noc = RouterConfig(level="noc", buffer_flits=buffer_flits, **common)
        self.nop = RouterConfig(level="nop", buffer_flits=nop_buffer_flits, **common)
        self.kx, self.ky, self.ckx, self.cky = kx, ky, ckx, cky
        self.gw = (gw_x, gw_y)
        self.L, self.Lp, self.top = link_latency, nop_link_latency, name
        self.local_ports = [((cx, cy), (x, y)) for cy in range(cky) for cx in range(ckx)
                            for y in range(ky) for x in range(kx) if (x, y) != self.gw]
        n = len(self.local_ports)
        super().__init__({
            "local_in": In(stream.Signature(self.noc.flit)).array(n),
            "local_out": Out(stream.Signature(self.noc.flit)).array(n),
            "errors": Out(err_width).array(ckx * cky * (kx * ky + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        noc_proto, nop_proto = Router(self.noc), Router(self.nop)
        noc_proto._MustUse__silence = nop_proto._MustUse__silence = True
        nop_ports = []
        err_i = 0
        for cy in range(self.cky):
            for cx in range(self.ckx):
                rp = _RouterPorts(nop_proto, f"p{cx}_{cy}")
                nop_ports.append(rp)
                m.submodules[f"p{cx}_{cy}"] = rp.instance(f"{self.top}_nop_router",
                                                          _addr_value(self.nop, (cx, cy), self.gw))
        _wire_grid(m, nop_ports, self.nop, self.ckx, self.cky, self.Lp, "nop")
        exposed = 0
        for ci, (cx, cy) in enumerate((cx, cy) for cy in range(self.cky) for cx in range(self.ckx)):
            ports = []
            for y in range(self.ky):
                for x in range(self.kx):
                    tag = f"c{cx}_{cy}_r{x}_{y}"
                    rp = _RouterPorts(noc_proto, tag)
                    ports.append(rp)
                    m.submodules[tag] = rp.instance(f"{self.top}_router",
                                                    _addr_value(self.noc, (cx, cy), (x, y)))
                    m.d.comb += self.errors[err_i].eq(rp.sig["errors"])
                    err_i += 1
                    if (x, y) == self.gw:
                        nop = nop_ports[ci]
                        for a, b in ((rp, nop), (nop, rp)):
                            m.d.comb += [b.sig["local_in__valid"].eq(a.sig["local_out__valid"]),
                                         b.sig["local_in__payload"].eq(a.sig["local_out__payload"]),
                                         a.sig["local_out__ready"].eq(b.sig["local_in__ready"])]
                        m.d.comb += self.errors[err_i].eq(nop.sig["errors"])
                        err_i += 1
                    else:
                        li, lo = self.local_in[exposed], self.local_out[exposed]
                        exposed += 1
                        m.d.comb += [rp.sig["local_in__valid"].eq(li.valid),
                                     rp.sig["local_in__payload"].eq(li.payload),
                                     li.ready.eq(rp.sig["local_in__ready"]),
                                     lo.valid.eq(rp.sig["local_out__valid"]),
                                     lo.payload.eq(rp.sig["local_out__payload"]),
                                     rp.sig["local_out__ready"].eq(lo.ready)]
            _wire_grid(m, ports, self.noc, self.kx, self.ky, self.L, f"noc{cx}_{cy}")
        return m

    def verilog(self):
        a = verilog.convert(Router(self.noc), name=f"{self.top}_router", emit_src=False)
        b = verilog.convert(Router(self.nop), name=f"{self.top}_nop_router", emit_src=False)
        top_v = verilog.convert(self, name=self.top, emit_src=False)
        return a + "\n" + b + "\n" + top_v
