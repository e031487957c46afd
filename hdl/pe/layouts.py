"""Port layouts of the Simba PE (``lib.data``): configuration word, load beats,
partial sums and output activations.  Data definitions only; see config.py
for their meaning."""
from __future__ import annotations

from amaranth.hdl import signed, unsigned
from amaranth.lib import data

from .config import CFG_FIELDS, PEParams


BIAS_WIDTH = 24     # config.py: per-channel bias is int24 whatever acc_width is


def bits_for(n: int) -> int:
    """Address bits for n entries (at least 1)."""
    return max(1, (n - 1).bit_length())


def cfg_layout() -> data.StructLayout:
    return data.StructLayout({k: unsigned(w) for k, w in CFG_FIELDS.items()})


def lanes(width: int, n: int) -> data.ArrayLayout:
    return data.ArrayLayout(signed(width), n)


def wload_layout(p: PEParams) -> data.StructLayout:
    return data.StructLayout({"addr": bits_for(p.wbuf_entries), "row": bits_for(p.K0),
                              "data": lanes(8, p.C0)})


def iload_layout(p: PEParams) -> data.StructLayout:
    return data.StructLayout({"addr": bits_for(p.ibuf_words), "data": lanes(8, p.C0)})


def pload_layout(p: PEParams) -> data.StructLayout:
    return data.StructLayout({"addr": bits_for(p.ppu_depth), "row": bits_for(p.K0),
                              "bias": signed(BIAS_WIDTH), "scale": signed(16)})


def psum_layout(p: PEParams) -> data.ArrayLayout:
    return lanes(p.acc_width, p.K0)


def act_layout(p: PEParams) -> data.ArrayLayout:
    return lanes(8, p.K0)
