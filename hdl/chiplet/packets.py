"""Chiplet control packets: configuration writes and done notifications
(data definitions only, shared by RTL, golden model and testbenches).

Simba §3.1 (the RISC-V controller writes memory-mapped registers of every
node and waits for done interrupts); here both travel as NoC packets in the
flit format of :mod:`tessera.hdl.noc.flit`.  The Global PE packet kinds of
:mod:`tessera.hdl.global_pe.packets` (``kind`` 1..3 in the low
``KIND_BITS`` of the payload) are unchanged; control packets use the kind
value those leave unused, :data:`KIND_EXT` = 0, followed by a 4-bit ``ext``
sub-kind.  A Global PE receiving one drops it as a bad flit.

* ``CFG`` (controller -> node): one flit (head = tail = 1),
  :func:`cfg_layout`: register ``reg`` of the destination node := ``value``.
* ``DONE`` (node -> controller): one flit, :func:`done_layout`: the node
  ``node`` (its (x, y) on the chiplet; equal to ``flit.src.node``) finished
  the work it was configured for; ``code`` is node-defined (0 = OK).
* ``BARRIER`` (package, :mod:`tessera.hdl.package`): one flit,
  :func:`barrier_layout`: ``op`` ARRIVE (a chiplet's barrier agent -> the
  master's controller node) or RELEASE (master -> the controller node of every
  participating chiplet, one multicast), barrier ``id``, arriving ``chiplet``.

Control packets travel in message class :func:`ctrl_class` (the highest
class, apart from the Global PE's ``DATA_CLASS`` 0 when there are two).

Left out: register reads (no read-back packet), multicast configuration.
"""
from __future__ import annotations

from amaranth.lib import data

from tessera.hdl.global_pe.packets import KIND_BITS
from tessera.hdl.noc.flit import coord_layout

KIND_EXT = 0
EXT_BITS = 4
EXT_CFG, EXT_DONE, EXT_BARRIER = 1, 2, 3
REG_BITS = 16
VALUE_BITS = 32
CODE_BITS = 8


def ctrl_class(classes: int) -> int:
    return classes - 1


def cfg_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS,
                              "reg": REG_BITS, "value": VALUE_BITS})


BAR_ARRIVE, BAR_RELEASE = 1, 2


def barrier_layout(chiplet_mesh=(8, 8)) -> data.StructLayout:
    """BARRIER (kind 0, ext 3) payload: op (BAR_ARRIVE / BAR_RELEASE), id, chiplet."""
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS, "op": 2, "id": 8,
                              "chiplet": coord_layout(*chiplet_mesh)})


def done_layout(node_mesh=(8, 8)) -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS,
                              "node": coord_layout(*node_mesh), "code": CODE_BITS})


# ============================================================================
# pe_node (PE + network interface, :mod:`.pe_node`): packets, register map and
# pure packing helpers.  Data definitions only (shared by the RTL, the golden
# model ``tessera.golden.pe_node``, the testbenches and the layer compiler).
#
# Packets a PE node sinks (every one is sunk at once or into space reserved
# for it by credits, so a node never stalls its router's ejection port):
#   CFG    kind 0 ext 1  (controller) one flit: register write (map below)
#   WLOAD  kind 0 ext 4  (host)  head :func:`load_head_layout` {addr, row, count}
#                        + ``count`` flits, one PE ``w_load`` beat's data each
#                        (C0 int8, lane c0 at bits 8*c0); (addr, row) auto-
#                        increments row-fastest (row 0..K0-1, then addr+1)
#   PLOAD  kind 0 ext 5  (host)  same head; body flit = :func:`pload_body_layout`
#                        {bias int24, scale int16}; addr = k1, row = k0
#   DATA   kind 1        (Global PE SEND) header of global_pe.packets, body words
#                        -> PE input buffer (one CREDIT per packet back to src)
#   PSUM   kind 0 ext 6  (upstream PE of the chain) head :func:`psum_head_layout`
#                        {nbeats} + ``psum_flits`` flits per beat (the K0 x
#                        acc_width beat, lanes packed at acc_width*k0, cut into
#                        word_bits slices, low slice first)
#   PCREDIT kind 0 ext 7 (downstream PE) one flit {count}: psum packets freed
# Packets a PE node sends: PSUM (to psum_dest), PCREDIT (to a PSUM's src),
# CREDIT (kind 3, count 1, to a DATA packet's src), OUT (kind 2, to out_dest:
# head {addr, nwords} + nwords output beats), DONE (to done_dest: node, code).
# ============================================================================

from dataclasses import dataclass, fields as _dc_fields

from tessera.hdl.pe.config import CFG_FIELDS, PEConfig, PEParams

EXT_WLOAD, EXT_PLOAD, EXT_PSUM, EXT_PCREDIT = 4, 5, 6, 7

COUNT_BITS = 16        # WLOAD / PLOAD body flits per packet (head field)
ADDR_BITS = 16         # WLOAD / PLOAD first address
ROW_BITS = 4           # WLOAD / PLOAD first row (k0 < 16)
NBEATS_BITS = 8        # PSUM beats per packet
CREDIT_BITS = 8        # PCREDIT count

# message classes (see :func:`node_class`)
DATA_KINDS = ("DATA", "PSUM", "OUT", "WLOAD", "PLOAD")
CTRL_KINDS = ("CFG", "DONE", "CREDIT", "PCREDIT")


def node_class(name: str, classes: int) -> int:
    """Message class of a pe_node packet: bulk data (DATA, PSUM, OUT, WLOAD,
    PLOAD) in class 0 (the Global PE's ``DATA_CLASS``), one-flit control
    (CFG, DONE, CREDIT, PCREDIT) in :func:`ctrl_class`."""
    if name in DATA_KINDS:
        return 0
    if name in CTRL_KINDS:
        return ctrl_class(classes)
    raise ValueError(f"unknown pe_node packet {name!r}")


def load_head_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS, "addr": ADDR_BITS,
                              "row": ROW_BITS, "count": COUNT_BITS})


def pload_body_layout() -> data.StructLayout:
    return data.StructLayout({"bias": 24, "scale": 16})


def psum_head_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS, "nbeats": NBEATS_BITS})


def pcredit_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS, "count": CREDIT_BITS})


# ---- DONE codes -------------------------------------------------------------------
# 0 = the ntiles tiles ran; 1..8 = the PE refused the tile configuration
# (hdl/pe/config.py ErrorCause, checked at START: nothing runs).
DONE_OK = 0


# ---- register map (CFG ``reg``; ``value`` is 32 bits) -------------------------------
# The PE tile configuration is the 15 PEConfig fields packed little-endian in
# this order (84 bits) and cut into three 32-bit registers.
PE_CFG_FIELDS = ("R", "S", "C1", "K1", "P1", "Q1", "H_in", "W_in", "stride", "pad_top",
                 "pad_left", "role", "relu", "pool", "shift")

REGS = {
    "pe_cfg0": 0,          # PE tile config bits [31:0]
    "pe_cfg1": 1,          #                     [63:32]
    "pe_cfg2": 2,          #                     [83:64]
    "ntiles": 3,           # spatial tiles to run with that config (16 bits)
    "psum_dest": 4,        # downstream PE: x [7:0], y [15:8]; bit 31: chiplet [19:16],[23:20]
    "out_dest": 5,         # node of the Global PE receiving OUT packets
    "out_base": 6,         # GPE word address of output beat 0 of tile 0 (16 bits)
    "out_tile_stride": 7,  # GPE word address step per tile (16 bits)
    "done_dest": 8,        # node of the controller
    "start": 9,            # any value: run ntiles tiles
    "clear": 10,           # any value: clear the sticky error flags
}
NREGS = 11


def pe_cfg_bits() -> int:
    return sum(CFG_FIELDS[f] for f in PE_CFG_FIELDS)


def pack_pe_cfg(cfg: PEConfig) -> int:
    d = cfg.as_dict()
    word, off = 0, 0
    for f in PE_CFG_FIELDS:
        w = CFG_FIELDS[f]
        v = int(d[f])
        if not 0 <= v < (1 << w):
            raise ValueError(f"PEConfig.{f} = {v} does not fit {w} bits")
        word |= v << off
        off += w
    return word


def unpack_pe_cfg(word: int) -> PEConfig:
    d, off = {}, 0
    for f in PE_CFG_FIELDS:
        w = CFG_FIELDS[f]
        d[f] = (word >> off) & ((1 << w) - 1)
        off += w
    d["relu"], d["pool"] = bool(d["relu"]), bool(d["pool"])
    return PEConfig(**d)


def dest_value(xy, chiplet=None) -> int:
    """Register value naming node (x, y) of this chiplet, or (package, hdl/package) of
    chiplet ``chiplet`` = (cx, cy): bit 31 set, cx [19:16], cy [23:20].  ``xy`` may also
    be a hierarchical ((cx, cy), (x, y)) (what pe_node_registers' dests accept)."""
    if isinstance(xy[0], (tuple, list)):
        chiplet, xy = xy
    x, y = xy
    if not (0 <= x < 256 and 0 <= y < 256):
        raise ValueError(f"node {xy} outside 0..255")
    if chiplet is None:
        return x | y << 8
    cx, cy = chiplet
    if not (0 <= cx < 16 and 0 <= cy < 16):
        raise ValueError(f"chiplet {chiplet} outside 0..15")
    return x | y << 8 | cx << 16 | cy << 20 | 1 << DEST_REMOTE_BIT


#: pe_node destination registers: bit 31 = the chiplet coordinate in [23:16] is given
DEST_REMOTE_BIT = 31


def pe_node_registers(pe_cfg: PEConfig, ntiles: int, psum_dest=(0, 0), out_dest=(0, 0),
                      out_base: int = 0, out_tile_stride: int = 0, done_dest=(0, 0),
                      start: bool = True) -> list[tuple[int, int]]:
    """The CFG writes (reg, value) that program a pe_node for one run, START last."""
    if not 0 <= ntiles < 1 << 16:
        raise ValueError(f"ntiles = {ntiles} outside 0..65535")
    for name, v in (("out_base", out_base), ("out_tile_stride", out_tile_stride)):
        if not 0 <= v < 1 << 16:
            raise ValueError(f"{name} = {v} outside 0..65535")
    word = pack_pe_cfg(pe_cfg)
    regs = [(REGS["pe_cfg0"], word & 0xFFFFFFFF), (REGS["pe_cfg1"], (word >> 32) & 0xFFFFFFFF),
            (REGS["pe_cfg2"], word >> 64), (REGS["ntiles"], ntiles),
            (REGS["psum_dest"], dest_value(psum_dest)), (REGS["out_dest"], dest_value(out_dest)),
            (REGS["out_base"], out_base), (REGS["out_tile_stride"], out_tile_stride),
            (REGS["done_dest"], dest_value(done_dest))]
    if start:
        regs.append((REGS["start"], 1))
    return regs


def cfg_payload(reg: int, value: int) -> int:
    """Payload of a CFG flit."""
    from tessera.hdl.global_pe.packets import pack_fields
    return pack_fields(cfg_layout(), kind=KIND_EXT, ext=EXT_CFG, reg=reg, value=value)


@dataclass(frozen=True)
class PeNodeConfig(PEParams):
    """Parameters of a pe_node (constructor arguments of the RTL), shared with
    the golden model and the testbench: the PE's fields and defaults are
    :class:`PEParams`' own (inherited, so the node builds the PE the PE block
    defines), followed by the NI's.  ``credit_window``/``max_tile`` are the
    Global PE's (receive FIFO = credit_window x max_tile words; one CREDIT packet per
    ``credit_batch`` DATA packets, see pe_node); ``psum_window``
    psum packets of at most ``psum_beats`` beats each fit the psum receive FIFO;
    OUT packets carry at most ``out_words`` beats."""
    word_bits: int = 64
    node_mesh_x: int = 4
    node_mesh_y: int = 5
    chiplet_mesh_x: int = 1
    chiplet_mesh_y: int = 1
    classes: int = 2
    credit_window: int = 4
    max_tile: int = 16
    psum_window: int = 2
    psum_beats: int = 5
    out_words: int = 16
    credit_batch: int = 1      # DATA packets acknowledged per CREDIT packet (pe_node docstring)

    @property
    def pe(self) -> PEParams:
        return PEParams(**{f.name: getattr(self, f.name) for f in _dc_fields(PEParams)})

    @property
    def psum_flits(self) -> int:
        """Payload flits per partial-sum beat (K0 x acc_width bits)."""
        return -(-self.K0 * self.acc_width // self.word_bits)

    @property
    def max_packet_flits(self) -> int:
        """Longest packet the node sends (the routers must allow it)."""
        return 1 + max(self.out_words, self.psum_beats * self.psum_flits)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in _dc_fields(self)}


def _chunks(seq, n):
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _load_packets(ext, beats, K0, max_body, body) -> list[list[int]]:
    """Group beats (dicts with addr, row) into runs that auto-increment
    row-fastest, each cut into packets of <= max_body body flits."""
    from tessera.hdl.global_pe.packets import pack_fields
    if max_body < 1:
        raise ValueError("max_body must be >= 1")
    runs, cur = [], []
    for b in beats:
        if cur:
            pa, pr = cur[-1]["addr"], cur[-1]["row"]
            nxt = (pa, pr + 1) if pr + 1 < K0 else (pa + 1, 0)
            if (b["addr"], b["row"]) != nxt:
                runs.append(cur)
                cur = []
        cur.append(b)
    if cur:
        runs.append(cur)
    pkts = []
    for run in runs:
        for part in _chunks(run, max_body):
            head = pack_fields(load_head_layout(), kind=KIND_EXT, ext=ext, addr=part[0]["addr"],
                               row=part[0]["row"], count=len(part))
            pkts.append([head] + [body(b) for b in part])
    return pkts


def wload_packets(beats, K0: int = 8, max_body: int = 16) -> list[list[int]]:
    """WLOAD packets (lists of flit payloads, head first) for PE ``w_load``
    beats ``{addr, row, data[C0]}`` (e.g. ``golden.pe.weight_beats``)."""
    def body(b):
        return sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(b["data"]))
    return _load_packets(EXT_WLOAD, beats, K0, max_body, body)


def pload_packets(beats, K0: int = 8, max_body: int = 16) -> list[list[int]]:
    """PLOAD packets for PE ``p_load`` beats ``{addr, row, bias, scale}``
    (e.g. ``golden.pe.ppu_beats``)."""
    from tessera.hdl.global_pe.packets import pack_fields

    def body(b):
        return pack_fields(pload_body_layout(), bias=b["bias"], scale=b["scale"])
    return _load_packets(EXT_PLOAD, beats, K0, max_body, body)


def psum_packet(beats, K0: int = 8, acc_width: int = 24, word_bits: int = 64) -> list[int]:
    """One PSUM packet (flit payloads) carrying ``beats`` (lists of K0 signed values)."""
    from tessera.hdl.global_pe.packets import pack_fields
    nf = -(-K0 * acc_width // word_bits)
    flits = [pack_fields(psum_head_layout(), kind=KIND_EXT, ext=EXT_PSUM, nbeats=len(beats))]
    mask = (1 << acc_width) - 1
    for b in beats:
        v = sum((int(x) & mask) << (acc_width * k) for k, x in enumerate(b))
        flits += [(v >> (word_bits * j)) & ((1 << word_bits) - 1) for j in range(nf)]
    return flits
