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
* ``BARRIER`` (reserved for the package issue: chiplet-to-chiplet barrier).

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


def done_layout(node_mesh=(8, 8)) -> data.StructLayout:
    return data.StructLayout({"kind": KIND_BITS, "ext": EXT_BITS,
                              "node": coord_layout(*node_mesh), "code": CODE_BITS})
