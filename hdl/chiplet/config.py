"""Chiplet parameters and node map (data definitions only, no logic the RTL relies on).

Simba §3.1 (Fig. 1(b)): one chiplet = a 4 x 4 array of PEs, a Global PE, a
RISC-V controller and a NoP router, all on one NoC mesh.  Tessera's chiplet
(issue 17, :mod:`.chiplet`) places them on a ``(max(nx, 3), ny + 1)`` mesh:

* PE ``i = y*nx + x`` at node ``(x, y)`` for ``x < nx, y < ny``;
* last row ``y = ny``: Global PE at ``(0, ny)``, controller at ``(1, ny)``,
  gateway at ``(2, ny)`` (the NoP gateway; on a single chiplet its local port
  is the host's flit port ``host_in`` / ``host_out``);
* other nodes (``x >= nx`` in a PE row, ``x >= 3`` in the last row) have a
  router with nothing attached.

:func:`node_map` returns these positions; every other file imports it and
nobody re-derives it.  :class:`ChipletConfig` holds every parameter of the
chiplet (PE, Global PE, NoC routers, controller) and validates them with
one-line :class:`~tessera.params.ParamError`\\ s.

Flit layouts: every endpoint (PE node, Global PE, controller, host port)
speaks :meth:`ChipletConfig.flit_layout` (the Global PE's ``net_flit_layout``
for a ``mesh_x x mesh_y`` node mesh; mask bit of node (x, y) = ``y*mesh_x + x``).
The routers are square (``max_node = max(mesh_x, mesh_y)``) and use
:meth:`ChipletConfig.router_config`'s layout; the chiplet top converts between
the two at each local port (pure wiring; the mask bit order is the same, only
coordinate and mask widths differ).

Package mode (``hier=True``, set by :class:`tessera.hdl.package.config.PackageConfig`):
``chiplet_mesh_x/y`` are the package's ``ckx/cky``, the routers are ``hier=True``
(a destination on another chiplet goes to the gateway, whose local port is the NoP port),
:meth:`ChipletConfig.nop_router_config` gives the NoP routers.  Default ``hier=False``:
one chiplet, as before.

Left out: per-node clocking.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from tessera.hdl.global_pe.packets import GpeConfig, net_flit_layout
from tessera.hdl.noc.flit import MAX_MESH
from tessera.hdl.pe.config import PEParams
from tessera.params import ParamError

from . import isa

#: Global PE knobs of the chiplet (names of :class:`GpeConfig`, prefixed ``gpe_`` where
#: they would be ambiguous); the mesh fields of GpeConfig are derived from the node map.
_GPE_KEYS = ("words", "banks", "groups", "credit_window", "max_tile", "recv_slots",
             "send_slots", "ucast_lanes")


@dataclass(frozen=True)
class NodeMap:
    """Node positions of one chiplet (see the module docstring)."""
    mesh: tuple            # (mesh_x, mesh_y) routers
    pes: tuple             # pes[i] = (x, y) of PE i = y*nx + x
    gpe: tuple             # (0, ny)
    ctrl: tuple            # (1, ny)
    gateway: tuple         # (2, ny)
    empty: tuple           # router-only nodes, row-major

    def index(self, xy) -> int:
        """Mask bit / consumer index of node (x, y): y*mesh_x + x."""
        x, y = xy
        return y * self.mesh[0] + x

    def mask(self, nodes) -> int:
        """Node mask (bit order of hdl/noc/flit.py) of an iterable of (x, y)."""
        out = 0
        for xy in nodes:
            out |= 1 << self.index(xy)
        return out

    def kind(self, xy) -> str:
        """'pe', 'gpe', 'ctrl', 'gateway' or 'empty'."""
        xy = tuple(xy)
        if xy in self.pes:
            return "pe"
        for k in ("gpe", "ctrl", "gateway"):
            if xy == getattr(self, k):
                return k
        if xy in self.empty:
            return "empty"
        raise ValueError(f"node {xy} outside the {self.mesh[0]}x{self.mesh[1]} mesh")

    def pe_index(self, xy) -> int:
        return self.pes.index(tuple(xy))


#: Block-parameter help and bounds of the :class:`ChipletConfig` fields (``pe`` excepted: the
#: PE block's own Params); the chiplet's Param list is derived from the dataclass fields
#: (names, defaults) plus this table (hdl/chiplet/__init__.py).
#: ChipletConfig fields that only the package sets (hdl/package/config.py): not parameters of
#: the standalone ``chiplet`` block (its export has no NoP port to use them).
PACKAGE_FIELDS = ("hier",)

FIELD_PARAMS = {
    "nx": ("PE columns (mesh width max(nx, 3))", dict(min=1, max=8)),
    "ny": ("PE rows (mesh height ny + 1)", dict(min=1, max=7)),
    "word_bits": ("NoC flit payload = Global PE word = 8*C0 = 8*K0", dict(min=64, max=1024)),
    "words": ("Global PE buffer words (64 KB at 64 bit)", dict(min=8, max=1 << 15)),
    "banks": ("Global PE SRAM banks", dict(min=1, max=16, power_of_two=True)),
    "groups": ("Global PE multicast groups", dict(min=1, max=8)),
    "credit_window": ("DATA packets outstanding per consumer", dict(min=1, max=255)),
    "max_tile": ("max words per DATA packet", dict(min=1, max=255)),
    "recv_slots": ("Global PE RECV windows", dict(min=1, max=4)),
    "send_slots": ("Global PE SENDs in flight", dict(min=1, max=8)),
    "ucast_lanes": ("Global PE unicast lanes", dict(min=1, max=4)),
    "psum_window": ("PSUM packets a PE node reserves (credits)", dict(min=1, max=255)),
    "credit_batch": ("DATA packets a PE node acknowledges per CREDIT packet (0: 4; 1 in a package)",
                     dict(min=0, max=64)),
    "psum_beats": ("beats per PSUM packet", dict(min=1, max=255)),
    "out_words": ("beats per OUT packet", dict(min=1, max=255)),
    "classes": ("NoC message classes", dict(min=2, max=8)),
    "vcs": ("virtual channels per port", dict(min=1, max=4)),
    "buffer_flits": ("router buffer flits per VC (0: the smallest power of two > max_packet_flits)",
                     dict(min=0, max=64)),
    "link_latency": ("register stages per NoC link", dict(min=1, max=4)),
    "err_width": ("router error counter width", dict(min=4, max=32)),
    "chiplet_mesh_x": ("package mesh width (address fields)", dict(min=1, max=8)),
    "chiplet_mesh_y": ("package mesh height (address fields)", dict(min=1, max=8)),
    "prog_depth": ("controller instruction memory depth", dict(min=2, max=4096)),
    "timeout_bits": ("controller WAIT timeout counter width", dict(min=4, max=32)),
}


def mesh_dims(nx: int, ny: int) -> tuple:
    return (max(nx, 3), ny + 1)


def node_map(cfg: "ChipletConfig") -> NodeMap:
    nx, ny = cfg.nx, cfg.ny
    mx, my = mesh_dims(nx, ny)
    pes = tuple((i % nx, i // nx) for i in range(nx * ny))
    special = {(0, ny), (1, ny), (2, ny)}
    empty = tuple((x, y) for y in range(my) for x in range(mx)
                  if (x, y) not in special and not (x < nx and y < ny))
    return NodeMap(mesh=(mx, my), pes=pes, gpe=(0, ny), ctrl=(1, ny), gateway=(2, ny),
                   empty=empty)


@dataclass(frozen=True)
class ChipletConfig:
    """Every parameter of one chiplet.  Construct, then :meth:`validate` (the chiplet top
    does it).  ``word_bits`` is the NoC flit payload = one Global PE word = one PE input
    word (C0 int8) = one PE output beat (K0 int8)."""
    nx: int = 4                       # PE columns
    ny: int = 4                       # PE rows
    pe: PEParams = field(default_factory=PEParams)
    # Global PE (Simba: 64 KB); the mesh fields of its GpeConfig come from the node map
    word_bits: int = 64
    words: int = 8192
    banks: int = 4
    groups: int = 4
    credit_window: int = 32           # DATA packets in flight per consumer (4x4 credit loop:
                                      # 16 left res3b's 16-member multicast credit-bound, 59 %)
    max_tile: int = 16
    recv_slots: int = 2
    send_slots: int = 4
    ucast_lanes: int = 2
    # PE node network interface (hdl/chiplet/pe_node.py, PeNodeConfig)
    psum_window: int = 2              # PSUM packets a receiver reserves (credits)
    psum_beats: int = 5               # beats per PSUM packet (psum_flits flits each)
    out_words: int = 16               # beats per OUT packet
    credit_batch: int = 0             # DATA packets per CREDIT packet (pe_node: coalesced, flushed
                                      # after CREDIT_FLUSH_CYCLES idle; 1 = one per packet);
                                      # 0: node_credit_batch (4, or 1 in package mode)
    # NoC
    classes: int = 2
    vcs: int = 2
    buffer_flits: int = 0             # 0: smallest power of two > max_packet_flits (32 at the
                                      # defaults; see router_buffer_flits)
    link_latency: int = 1
    err_width: int = 16
    chiplet_mesh_x: int = 1           # address fields only (package issue)
    chiplet_mesh_y: int = 1
    hier: bool = False                # package mode (hdl/package): routers hier=True with
                                      # the chiplet's coordinate, gateway = NoP port
    # controller
    prog_depth: int = 1024
    timeout_bits: int = 24

    # ---- derived -----------------------------------------------------------------
    @property
    def mesh(self) -> tuple:
        return mesh_dims(self.nx, self.ny)

    @property
    def npes(self) -> int:
        return self.nx * self.ny

    @property
    def psum_flits(self) -> int:
        """Payload flits per partial-sum beat (K0 x acc_width bits)."""
        return -(-self.pe.K0 * self.pe.acc_width // self.word_bits)

    @property
    def max_packet_flits(self) -> int:
        """Longest packet on the NoC: head + the longest of a DATA packet (max_tile
        words), an OUT packet (out_words beats), a PSUM packet (psum_beats beats)."""
        return 1 + max(self.max_tile, self.out_words, self.psum_beats * self.psum_flits)

    @property
    def router_buffer_flits(self) -> int:
        """Router input buffer per VC: ``buffer_flits``, or by default the smallest power of two
        greater than ``max_packet_flits`` (32 at the defaults).  The router starts a multicast
        only when every branch's downstream VC has room for a max-length packet, so with a
        buffer of one max packet (17) the next multicast packet waits until the previous one
        has left the downstream buffer (measured: 17.1 cycles per 5-flit DATA packet on the
        4x4 chiplet); the LUT RAM holding the buffer is a power of two deep anyway (17 entries
        use a 32-deep RAM, hdl/noc/router.py ``aw``), so the extra depth costs only a wider
        occupancy/credit counter."""
        return self.buffer_flits or 1 << self.max_packet_flits.bit_length()

    @property
    def node_credit_batch(self) -> int:
        """DATA packets a PE node acknowledges per CREDIT packet: ``credit_batch``, or by default
        4 on a chiplet (a 16-member multicast of 5-flit packets otherwise returns 16 credit
        flits per 5 flits to the Global PE's one ejection port; 4 leaves 4 per 5) and 1 in
        package mode (``hier``: the package model counts one CREDIT per packet on the NoP)."""
        return self.credit_batch or (1 if self.hier else 4)

    @property
    def max_node(self) -> int:
        return max(self.mesh)

    @property
    def gpe(self) -> GpeConfig:
        mx, my = self.mesh
        return GpeConfig(word_bits=self.word_bits, node_mesh_x=mx, node_mesh_y=my,
                         chiplet_mesh_x=self.chiplet_mesh_x, chiplet_mesh_y=self.chiplet_mesh_y,
                         classes=self.classes, **{k: getattr(self, k) for k in _GPE_KEYS})

    def gpe_params(self) -> dict:
        """Keyword arguments of :class:`~tessera.hdl.global_pe.global_pe.GlobalPE`."""
        g = self.gpe
        return {f.name: getattr(g, f.name) for f in fields(GpeConfig)}

    def controller_params(self) -> dict:
        """Keyword arguments of :class:`~tessera.hdl.chiplet.controller.Controller`."""
        mx, my = self.mesh
        return dict(prog_depth=self.prog_depth, node_mesh_x=mx, node_mesh_y=my,
                    chiplet_mesh_x=self.chiplet_mesh_x, chiplet_mesh_y=self.chiplet_mesh_y,
                    word_bits=self.word_bits, classes=self.classes, groups=self.groups,
                    timeout_bits=self.timeout_bits)

    def router_params(self) -> dict:
        """Keyword arguments of :class:`~tessera.hdl.noc.router.RouterConfig`."""
        mx, my = self.mesh
        extra = {}
        if self.hier:
            gx, gy = node_map(self).gateway
            extra = dict(level="noc", hier=True, ckx=self.chiplet_mesh_x,
                         cky=self.chiplet_mesh_y, gw_x=gx, gw_y=gy)
        return dict(kx=mx, ky=my, vcs=self.vcs, buffer_flits=self.router_buffer_flits,
                    max_packet_flits=self.max_packet_flits, payload_width=self.word_bits,
                    classes=self.classes, max_node=self.max_node,
                    max_chiplet=max(self.chiplet_mesh_x, self.chiplet_mesh_y),
                    err_width=self.err_width, **extra)

    def router_config(self):
        from tessera.hdl.noc.router import RouterConfig
        try:
            return RouterConfig(**self.router_params())
        except ParamError:
            raise
        except ValueError as err:
            raise ParamError(getattr(err, "param", "router"), str(err)) from None

    def nop_router_config(self, buffer_flits: int):
        """RouterConfig of the package's NoP routers (``hier`` mode; same flit layout as
        :meth:`router_config`)."""
        from tessera.hdl.noc.router import RouterConfig
        p = dict(self.router_params(), level="nop", buffer_flits=buffer_flits)
        try:
            return RouterConfig(**p)
        except ValueError as err:
            raise ParamError(getattr(err, "param", "router"), str(err)) from None

    def flit_layout(self):
        """The endpoints' flit layout (Global PE, controller, PE nodes, host ports)."""
        return net_flit_layout(self.gpe)

    def pe_params(self) -> dict:
        return {f.name: getattr(self.pe, f.name) for f in fields(self.pe)}

    def pe_node_params(self) -> dict:
        """Keyword arguments of :class:`~tessera.hdl.chiplet.pe_node.PeNode` (its
        PeNodeConfig: the PE's parameters plus the NI's)."""
        mx, my = self.mesh
        return dict(self.pe_params(), word_bits=self.word_bits, node_mesh_x=mx, node_mesh_y=my,
                    chiplet_mesh_x=self.chiplet_mesh_x, chiplet_mesh_y=self.chiplet_mesh_y,
                    classes=self.classes, credit_window=self.credit_window,
                    max_tile=self.max_tile, psum_window=self.psum_window,
                    psum_beats=self.psum_beats, out_words=self.out_words,
                    credit_batch=self.node_credit_batch)

    @classmethod
    def from_params(cls, params: dict) -> "ChipletConfig":
        """Flat dict (block parameters: chiplet fields + PEParams fields) -> config."""
        own = {f.name for f in fields(cls)} - {"pe"}
        pe_keys = {f.name for f in fields(PEParams)}
        unknown = set(params) - own - pe_keys
        if unknown:
            name = sorted(unknown)[0]
            raise ParamError(name, "unknown chiplet parameter")
        pe = PEParams(**{k: v for k, v in params.items() if k in pe_keys})
        return cls(pe=pe, **{k: v for k, v in params.items() if k in own})

    def with_(self, **kw) -> "ChipletConfig":
        return replace(self, **kw)

    # ---- validation ----------------------------------------------------------------
    def validate(self) -> "ChipletConfig":
        def bad(name, msg):
            raise ParamError(name, msg)
        for name in ("nx", "ny"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                bad(name, f"must be an integer >= 1, got {v!r}")
        mx, my = self.mesh
        if mx > MAX_MESH:
            bad("nx", f"mesh width max(nx, 3) = {mx} exceeds the flit address range "
                f"(1..{MAX_MESH} nodes per row)")
        if my > MAX_MESH:
            bad("ny", f"mesh height ny + 1 = {my} exceeds the flit address range "
                f"(1..{MAX_MESH} rows), so ny <= {MAX_MESH - 1}")
        if mx * my > isa.MAX_NODES:
            bad("ny", f"mesh {mx}x{my} = {mx * my} nodes exceeds the controller's "
                f"{isa.MAX_NODES}-bit WAIT mask")
        p = self.pe
        if self.word_bits != 8 * p.C0 or self.word_bits != 8 * p.K0:
            bad("word_bits", f"must equal 8*C0 = {8 * p.C0} and 8*K0 = {8 * p.K0} (one Global "
                f"PE word = one PE input word = one output beat), got {self.word_bits}")
        if self.vcs < self.classes:
            bad("vcs", f"{self.vcs} VCs < {self.classes} message classes (protocol deadlock)")
        if self.classes < 2:
            bad("classes", "must be >= 2 (DATA and control/credit traffic on separate classes)")
        for name in ("psum_window", "psum_beats", "out_words"):
            if not 1 <= getattr(self, name) <= 255:
                bad(name, f"must be in 1..255, got {getattr(self, name)}")
        if self.link_latency < 1:
            bad("link_latency", f"must be >= 1, got {self.link_latency}")
        if self.buffer_flits and self.buffer_flits < self.max_packet_flits:
            bad("buffer_flits", f"{self.buffer_flits} < max_packet_flits = "
                f"{self.max_packet_flits} (a multicast packet must fit a router buffer)")
        rtt = 2 * self.link_latency + 2
        if self.router_buffer_flits < rtt:
            bad("buffer_flits", f"{self.router_buffer_flits} flits do not cover the credit "
                f"round trip 2*link_latency+2 = {rtt}")
        from tessera.hdl.pe.pe import validate_params
        validate_params(p)
        from tessera.hdl.global_pe.global_pe import validate as gpe_validate
        gpe_validate(self.gpe)
        from .controller import validate as ctrl_validate
        ctrl_validate(self.controller_params())
        self.router_config()
        try:
            from .packets import PeNodeConfig
            from .pe_node import validate as node_validate
        except ImportError:            # before the NI's pe_node exists
            return self
        node_validate(PeNodeConfig(**self.pe_node_params()))
        return self
