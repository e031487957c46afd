"""Flit and packet layout shared by the Simba NoC (on chiplet) and NoP (package).

Simba §3.1 "Simba interconnect": one packet format on both levels; hierarchical
destinations (chiplet x,y + node x,y).  A multicast names a set of nodes (a
bit mask over a mesh of up to ``max_node_mesh``) and a set of chiplets (mask
over ``max_chiplet_mesh``) with the same node set on each (the Global PE
multicasting a tile to PEs on several chiplets).

Every flit carries the full header (``head``/``tail`` marks, class, type,
destination, source) next to its payload.  Routers only *act* on the header
of head flits (body/tail flits follow the head's route) and store it once per
packet: a body flit's header bits are don't-care on a router input, and on a
router output they repeat the packet head's header (monitors may read them).
A one-flit packet has ``head = tail = 1``.

This file is a data definition (shared by RTL, golden models and testbenches);
it holds no logic.  Left out: ECC/parity, flit compression.

Mask bit order: node (x, y) of a ``kx``-wide mesh is bit ``y * kx + x`` (same
for chiplets).
"""
from __future__ import annotations

from amaranth.lib import data

MAX_MESH = 8


def coord_layout(max_x: int = MAX_MESH, max_y: int = MAX_MESH) -> data.StructLayout:
    return data.StructLayout({"x": max(1, (max_x - 1).bit_length()),
                              "y": max(1, (max_y - 1).bit_length())})


def address_layout(max_node_mesh=(MAX_MESH, MAX_MESH), max_chiplet_mesh=(MAX_MESH, MAX_MESH)):
    """A hierarchical node address: chiplet (x, y) and node (x, y) on that chiplet."""
    return data.StructLayout({"chiplet": coord_layout(*max_chiplet_mesh),
                              "node": coord_layout(*max_node_mesh)})


def flit_layout(payload_width: int = 64, classes: int = 2,
                max_node_mesh=(MAX_MESH, MAX_MESH),
                max_chiplet_mesh=(MAX_MESH, MAX_MESH)) -> data.StructLayout:
    """Fields:

    * ``head``, ``tail``: packet framing (both set on a one-flit packet);
    * ``mclass``: message class (mapped to a virtual channel by the router);
    * ``mcast``: 0 unicast (wormhole), 1 multicast (cut-through);
    * ``dest.ucast``: unicast destination address;
    * ``dest.mcast``: ``chiplets`` mask and ``nodes`` mask (same node set on
      every chiplet in the chiplet mask);
    * ``src``: source address (for replies, credits, error reports);
    * ``payload``: data, ``payload_width`` bits.
    """
    if payload_width < 1:
        raise ValueError("payload_width must be >= 1")
    if classes < 1:
        raise ValueError("classes must be >= 1")
    for kx, ky in (max_node_mesh, max_chiplet_mesh):
        if not (1 <= kx <= MAX_MESH and 1 <= ky <= MAX_MESH):
            raise ValueError(f"mesh dimensions must be in 1..{MAX_MESH}")
    addr = address_layout(max_node_mesh, max_chiplet_mesh)
    dest = data.UnionLayout({
        "ucast": addr,
        "mcast": data.StructLayout({
            "chiplets": max_chiplet_mesh[0] * max_chiplet_mesh[1],
            "nodes": max_node_mesh[0] * max_node_mesh[1],
        }),
    })
    return data.StructLayout({
        "head": 1,
        "tail": 1,
        "mclass": max(1, (classes - 1).bit_length()),
        "mcast": 1,
        "dest": dest,
        "src": addr,
        "payload": payload_width,
    })
