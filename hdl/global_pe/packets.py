"""Global PE command, completion and packet formats (data definitions only).

Simba §3.1 "Simba global PE": the Global PE talks to the chiplet controller
(commands in, completions out) and speaks the NoC packet format of
:mod:`tessera.hdl.noc.flit` directly.  This file fixes how buffer addresses,
tile data and credits map onto flits.  It is shared by the RTL, the golden
model (:mod:`tessera.golden.global_pe`) and the testbench; it holds no logic.

Packets (``flit.payload`` is ``word_bits`` wide; a header occupies its low bits):

* ``DATA`` (Global PE -> PE, SEND): head flit = :func:`data_header_layout`
  (kind, command tag, tile sequence number within the destination lane,
  number of data words), then ``nwords`` body flits, one buffer word each;
  the last one has ``tail``.  ``mclass`` = :data:`DATA_CLASS`.  Multicast
  packets use ``dest.mcast`` (chiplet mask x node mask), unicast ``dest.ucast``.
* ``OUT`` (PE -> Global PE, output activations for RECV): head flit =
  :func:`out_header_layout` (kind, buffer word address, nwords), then
  ``nwords`` data flits written to ``addr, addr+1, ...``.
* ``CREDIT`` (consumer -> Global PE): one flit (head = tail = 1),
  :func:`credit_layout` (kind, count of tiles freed).  The consumer is the
  flit's ``src`` address.

Consumer numbering (credit counters, masks): consumer index
``chiplet * nodes_per_chiplet + node`` with chiplet = ``cy * chiplet_mesh_x + cx``
and node = ``ny * node_mesh_x + nx`` (the bit order of ``flit.py``).

Left out: ECC, packet CRC, per-packet priorities.
"""
from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Shape
from amaranth.lib import data

from tessera.hdl.noc.flit import MAX_MESH, address_layout, flit_layout

MAX_MESH_CHECK = MAX_MESH

# --- opcodes and statuses -------------------------------------------------
OP_SEND, OP_RECV, OP_EWISE, OP_GROUP = 0, 1, 2, 3
OPCODES = {"SEND": OP_SEND, "RECV": OP_RECV, "EWISE": OP_EWISE, "GROUP": OP_GROUP}
OP_BITS = 3                      # opcodes 4..7 are illegal (status BAD_OP)

ST_OK, ST_BAD_OP, ST_BAD_REGION, ST_EMPTY_SET, ST_BAD_ARG = 0, 1, 2, 3, 4
STATUS_NAMES = {ST_OK: "OK", ST_BAD_OP: "BAD_OP", ST_BAD_REGION: "BAD_REGION",
                ST_EMPTY_SET: "EMPTY_SET", ST_BAD_ARG: "BAD_ARG"}

EW_ADD, EW_MUL, EW_MAX = 0, 1, 2  # EWISE function; 3 is illegal (BAD_ARG)

# --- packet kinds -----------------------------------------------------------
KIND_DATA, KIND_OUT, KIND_CREDIT = 1, 2, 3   # 0 is never valid
KIND_BITS = 2
DATA_CLASS = 0                   # mclass of DATA packets sent by the Global PE

FIELD = 16                       # width of address / count / stride command fields
TAG_BITS = 8
TILE_BITS = 8
SEQ_BITS = 16
SHIFT_BITS = 4


@dataclass(frozen=True)
class GpeConfig:
    """Parameters shared by RTL, golden model and testbench (validated by the RTL top)."""
    words: int = 2048
    word_bits: int = 256
    banks: int = 4
    node_mesh_x: int = 4
    node_mesh_y: int = 5
    chiplet_mesh_x: int = 2
    chiplet_mesh_y: int = 2
    groups: int = 4
    credit_window: int = 4
    max_tile: int = 16
    classes: int = 2
    recv_slots: int = 2
    send_slots: int = 4
    ucast_lanes: int = 2
    read_latency: int = 1       # buffer banks' SRAM read latency (1 or 2), see buffer.py
    ewise_stages: int = 3       # EWISE pipeline stages (3 or 4: shift registered), ewise.py
    mult_impl: str = "generic"  # EWISE / decoder multiplier cells (tessera.hdl.pe.mult)

    @property
    def nodes(self):
        return self.node_mesh_x * self.node_mesh_y

    @property
    def chiplets(self):
        return self.chiplet_mesh_x * self.chiplet_mesh_y

    @property
    def consumers(self):
        return self.nodes * self.chiplets

    @property
    def lanes(self):             # one lane per multicast group + the unicast lanes
        return self.groups + self.ucast_lanes

    @property
    def lanes_int8(self):
        return self.word_bits // 8

    @classmethod
    def from_params(cls, params: dict) -> "GpeConfig":
        return cls(**{k: v for k, v in params.items() if k in cls.__dataclass_fields__})


def node_mesh(cfg: GpeConfig):
    return (cfg.node_mesh_x, cfg.node_mesh_y)


def chiplet_mesh(cfg: GpeConfig):
    return (cfg.chiplet_mesh_x, cfg.chiplet_mesh_y)


def net_flit_layout(cfg: GpeConfig) -> data.StructLayout:
    return flit_layout(payload_width=cfg.word_bits, classes=cfg.classes,
                       max_node_mesh=node_mesh(cfg), max_chiplet_mesh=chiplet_mesh(cfg))


def node_address_layout(cfg: GpeConfig) -> data.StructLayout:
    return address_layout(node_mesh(cfg), chiplet_mesh(cfg))


def mask_layout(cfg: GpeConfig) -> data.StructLayout:
    """A multicast / producer set: the same node set on every chiplet of the chiplet set."""
    return data.StructLayout({"chiplets": cfg.chiplets, "nodes": cfg.nodes})


def command_layout(cfg: GpeConfig) -> data.StructLayout:
    """One command (one stream transfer).  Field use per opcode:

    * SEND: ``a`` base; ``cnt0..2``/``stride0..2`` address levels (level 0
      innermost); ``tile`` words per packet; ``groups`` bit g = multicast
      to group g of the group table; ``ucast`` + ``uaddr`` = also unicast to
      that node.  Address of element (i2, i1, i0) = a + i2*stride2 +
      i1*stride1 + i0*stride0, i0 fastest; each level-0 row (``cnt0`` words)
      is cut into tiles of ``tile`` words (the last of a row may be
      shorter); each destination receives every tile, in order.
    * RECV: window ``a`` .. ``a + cnt0 - 1``; expect ``cnt0`` words from
      producers in ``mask``.
    * EWISE: ``c[i] = f(a[i], b[i])`` for ``cnt0`` words; ``sub`` = function,
      ``shift`` = requantisation shift.
    * GROUP: group table entry ``gidx`` := ``mask``.
    """
    return data.StructLayout({
        "op": OP_BITS, "tag": TAG_BITS, "sub": 2, "shift": SHIFT_BITS,
        "a": FIELD, "b": FIELD, "c": FIELD,
        "cnt0": FIELD, "cnt1": FIELD, "cnt2": FIELD,
        "stride0": FIELD, "stride1": FIELD, "stride2": FIELD,
        "tile": TILE_BITS, "groups": cfg.groups, "ucast": 1,
        "uaddr": node_address_layout(cfg),
        "mask": mask_layout(cfg),
        "gidx": max(1, (cfg.groups - 1).bit_length()),
    })


def completion_layout() -> data.StructLayout:
    return data.StructLayout({"tag": TAG_BITS, "status": 3})


def status_layout() -> data.StructLayout:
    """Sticky error flags (cleared by reset only)."""
    return data.StructLayout({
        "credit_overflow": 1,    # a consumer returned more credits than its window
        "stray_word": 1,         # an OUT word with no matching RECV (dropped)
        "bad_flit": 1,           # unknown packet kind / body flit without head (dropped)
        "rw_collision": 1,       # a read and a write of one word in one cycle (read undefined)
    })


def data_header_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "tag": TAG_BITS, "seq": SEQ_BITS,
                              "nwords": TILE_BITS})


def out_header_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "addr": FIELD, "nwords": TILE_BITS})


def credit_layout() -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "count": TILE_BITS})


def consumer_index(cfg: GpeConfig, chiplet_xy, node_xy) -> int:
    cx, cy = chiplet_xy
    nx, ny = node_xy
    return (cy * cfg.chiplet_mesh_x + cx) * cfg.nodes + ny * cfg.node_mesh_x + nx


def field_bits(layout: data.StructLayout) -> dict:
    """{name: (offset, width)} for the top-level fields of a layout (for Python packing)."""
    return {name: (f.offset, Shape.cast(f.shape).width) for name, f in layout}


def pack_fields(layout: data.StructLayout, **values) -> int:
    """Pack top-level fields of ``layout`` into an int (unknown names raise)."""
    bits = field_bits(layout)
    word = 0
    for name, v in values.items():
        off, width = bits[name]
        word |= (int(v) & ((1 << width) - 1)) << off
    return word


def unpack_fields(layout: data.StructLayout, word: int) -> dict:
    return {name: (word >> off) & ((1 << width) - 1)
            for name, (off, width) in field_bits(layout).items()}
