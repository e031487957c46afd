"""Package parameters and chiplet/NoP map (data definitions only, no logic the RTL relies on).

Simba §3.1 (Fig. 1(a)) and §4.4-4.5: a package is a ``ckx x cky`` mesh of
chiplets joined by the NoP (Network-on-Package, GRS links) through each
chiplet's NoP router.  Tessera's package (issue 18, block ``package``,
:mod:`.package`):

* chiplet index ``c = cy*ckx + cx`` (also the chiplet mask bit of
  :mod:`tessera.hdl.noc.flit`);
* every chiplet is the ``chiplet`` block (:mod:`tessera.hdl.chiplet.chiplet`)
  in hierarchical mode (:attr:`ChipletConfig.hier`): its routers route a
  destination on another chiplet to the gateway node ``(2, ny)``, whose local
  port is the chiplet's NoP router port;
* the NoP is a ``ckx x cky`` mesh of :class:`tessera.hdl.noc.router.Router`
  (``level="nop"``); each NoP link = ``nop_link_latency`` register stages and
  a serialisation rate of one flit per ``nop_flit_cycles`` cycles (Simba's GRS
  links modelled as registers + rate);
* the host's flit port (``host_in`` / ``host_out``) is the local port of the
  *host node* :attr:`PackageConfig.host_node` of chiplet :attr:`host_chiplet`
  ``(0, 0)`` (the first router-only node of the chiplet's node map; on a
  single chiplet the gateway is the host port, in a package the gateway is
  the NoP port).  Its hierarchical address is :attr:`PackageConfig.host_addr`;
* the barrier master is the controller of chiplet :attr:`bar_master` ``(0, 0)``.

Addresses (all destinations are hierarchical, {chiplet (x, y), node (x, y)}):
pe_node destination registers take :func:`tessera.hdl.chiplet.packets.dest_value`
with a ``chiplet`` argument (bit 31 = chiplet given, chiplet x [19:16],
y [23:20]; bit 31 clear = this chiplet, the single-chiplet encoding).

Left out: non-mesh NoP topologies, per-chiplet clocks, link errors / retry.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.params import ParamError

MAX_CHIPLETS = 6          # ckx, cky <= 6 (export / lint); the flit format allows 8


def chiplet_index(ckx: int, cxy) -> int:
    cx, cy = cxy
    return cy * ckx + cx


@dataclass(frozen=True)
class PackageConfig:
    """Every parameter of a package.  ``chiplet`` is the per-chiplet configuration as for
    a single chiplet; :meth:`chiplet_cfg` derives the hierarchical one the package uses
    (``hier=True``, ``chiplet_mesh_x/y = ckx/cky``)."""
    chiplet: ChipletConfig = field(default_factory=ChipletConfig)
    ckx: int = 2                       # chiplet columns
    cky: int = 2                       # chiplet rows
    nop_link_latency: int = 4          # register stages per NoP link (each way)
    nop_flit_cycles: int = 1           # a flit occupies a NoP link this many cycles (>= 1)
    nop_buffer_flits: int = 0          # NoP router input buffer per VC; 0: the minimum
                                       # max(max_packet_flits, 2*nop_link_latency + 2)

    # ---- derived ---------------------------------------------------------------------
    @property
    def nchiplets(self) -> int:
        return self.ckx * self.cky

    def chiplets(self) -> list:
        """Chiplet coordinates in index order (c = cy*ckx + cx)."""
        return [(c % self.ckx, c // self.ckx) for c in range(self.nchiplets)]

    def index(self, cxy) -> int:
        return chiplet_index(self.ckx, cxy)

    def chiplet_cfg(self) -> ChipletConfig:
        """The chiplet configuration in hierarchical mode for this package."""
        return replace(self.chiplet, hier=True, chiplet_mesh_x=self.ckx,
                       chiplet_mesh_y=self.cky)

    @property
    def host_chiplet(self) -> tuple:
        return (0, 0)

    @property
    def bar_master(self) -> tuple:
        return (0, 0)

    @property
    def host_node(self) -> tuple:
        """Node (x, y) of the host port on chiplet (0, 0): the first router-only node."""
        nm = node_map(self.chiplet)
        if not nm.empty:
            raise ParamError("nx", f"the chiplet mesh {nm.mesh[0]}x{nm.mesh[1]} has no "
                             "router-only node for the package host port (nx = 3)")
        return nm.empty[0]

    @property
    def host_addr(self) -> tuple:
        """(chiplet (x, y), node (x, y)) of the host port."""
        return (self.host_chiplet, self.host_node)

    @property
    def nop_router_buffer_flits(self) -> int:
        return self.nop_buffer_flits or max(self.chiplet.max_packet_flits,
                                            2 * self.nop_link_latency + 2)

    def nop_router_config(self):
        """RouterConfig of the NoP routers (same flit layout as the chiplet routers)."""
        return self.chiplet_cfg().nop_router_config(self.nop_router_buffer_flits)

    @classmethod
    def from_params(cls, params: dict) -> "PackageConfig":
        """Flat dict (block parameters: package fields + chiplet fields) -> config."""
        own = {"ckx", "cky", "nop_link_latency", "nop_flit_cycles", "nop_buffer_flits"}
        ch = {k: v for k, v in params.items() if k not in own}
        for k in ("hier", "chiplet_mesh_x", "chiplet_mesh_y"):
            if k in ch:
                raise ParamError(k, "set by the package (use ckx / cky)")
        return cls(chiplet=ChipletConfig.from_params(ch),
                   **{k: v for k, v in params.items() if k in own})

    def with_(self, **kw) -> "PackageConfig":
        return replace(self, **kw)

    # ---- validation --------------------------------------------------------------------
    def validate(self) -> "PackageConfig":
        def bad(name, msg):
            raise ParamError(name, msg)
        for name in ("ckx", "cky"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v <= MAX_CHIPLETS:
                bad(name, f"must be an integer in 1..{MAX_CHIPLETS}, got {v!r}")
        if self.nop_link_latency < 1:
            bad("nop_link_latency", f"must be >= 1, got {self.nop_link_latency}")
        if not 1 <= self.nop_flit_cycles <= 64:
            bad("nop_flit_cycles", f"must be in 1..64, got {self.nop_flit_cycles}")
        mp = self.chiplet.max_packet_flits
        if self.nop_buffer_flits and self.nop_buffer_flits < mp:
            bad("nop_buffer_flits", f"{self.nop_buffer_flits} < max_packet_flits = {mp} "
                "(a multicast packet must fit a router buffer)")
        rtt = 2 * self.nop_link_latency + 2
        if self.nop_router_buffer_flits < rtt:
            bad("nop_buffer_flits", f"{self.nop_router_buffer_flits} flits do not cover the "
                f"NoP credit round trip 2*nop_link_latency+2 = {rtt}")
        self.host_node                                   # a host node exists
        self.chiplet_cfg().validate()
        self.nop_router_config()
        return self
