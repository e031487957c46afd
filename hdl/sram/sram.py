"""The one memory primitive of every Tessera block: a synchronous 1-write 1-read SRAM.

Every buffer above 1 kbit in Tessera's RTL (PE weight/input/accumulation
buffers, PPU tables, Global PE banks, router input buffers, tracker sets)
is an :class:`SRAM`, so that one documented interface can be swapped for a
compiled SRAM macro in an ASIC flow, and an FPGA flow maps it to block RAM
(ECP5 DP16KD) or distributed RAM (DPR16X4) instead of flip-flops.

Ports (``clk`` is the block's ``sync`` domain; there is no reset: contents are
undefined after power-up, as in a real macro):

========== ===== =====================================================
``w_en``   in    write this cycle (per ``granularity`` lane: ``w_en`` is
                 ``width // granularity`` bits wide)
``w_addr`` in    write address
``w_data`` in    write data
``r_en``   in    read this cycle (``r_data`` updates on the next edge)
``r_addr`` in    read address
``r_data`` out   data of the address presented with ``r_en`` one cycle
                 earlier (read latency 1; 2 with ``read_latency=2``,
                 below); held while ``r_en`` is low
========== ===== =====================================================

``read_latency=2``: the read data passes one more register (``r_data`` is the word of
the address presented with ``r_en`` two cycles earlier; the second register loads every
cycle, so with ``r_en`` low ``r_data`` holds from the cycle after).  It is the output
register of a block RAM (ECP5 DP16KD ``REGMODE="OUTREG"``; an SRAM macro's output latch
stage): the RAM's slow clock-to-output then ends in a register instead of in the logic
that uses the word.  FPGA caveat: Yosys's ECP5 block-RAM library maps only the first
register into the DP16KD (``REGMODE="NOREG"``); the second stays flip-flops in the fabric,
placed next to it -- the same cycle behaviour, ``width`` more FFs.

``read_latency=0`` (small buffers only, e.g. router input FIFOs): an
asynchronous read, ``r_data = cells[r_addr]`` in the same cycle, no ``r_en``
port; a write is visible from the next cycle.  FPGA: distributed RAM (ECP5
DPR16X4); ASIC: a flip-flop/latch register-file macro.

Same-address read and write in one cycle (``collision``):

* ``"undefined"`` (default): ``r_data`` is undefined.  Yosys gets the
  ``no_rw_check`` attribute, so no bypass logic is built (the block must not
  rely on the value; Amaranth's simulator returns the old word).
* ``"old"``: the old word (read-before-write); FPGA block RAM needs emulation
  logic for this, so use it only where a block needs it.
* ``"new"``: the written word (write-first, transparent read).

The behavioural model for simulation is the Amaranth memory itself (the
Verilog export keeps each :class:`SRAM` as its own module, named by its place
in the hierarchy; :func:`srams_of` lists them for the port manifest).

Left out: multiple read ports (blocks that need them bank or replicate),
ECC, power gating, initial contents.
"""
from __future__ import annotations

from amaranth.hdl import Fragment, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

COLLISIONS = ("undefined", "old", "new")


class SRAM(wiring.Component):
    def __init__(self, depth: int, width: int, *, granularity: int | None = None,
                 collision: str = "undefined", read_latency: int = 1):
        if read_latency not in (0, 1, 2):
            raise ValueError(f"SRAM read_latency must be 0, 1 or 2, got {read_latency}")
        if depth < 2:
            raise ValueError(f"SRAM depth must be >= 2, got {depth}")
        if width < 1:
            raise ValueError(f"SRAM width must be >= 1, got {width}")
        granularity = granularity or width
        if width % granularity:
            raise ValueError(f"SRAM width {width} is not a multiple of granularity {granularity}")
        if collision not in COLLISIONS:
            raise ValueError(f"SRAM collision must be one of {COLLISIONS}, got {collision!r}")
        self.depth, self.width, self.granularity, self.collision = depth, width, granularity, collision
        self.read_latency = read_latency
        abits = max(1, (depth - 1).bit_length())
        ports = {"w_en": In(width // granularity), "w_addr": In(abits), "w_data": In(width),
                 "r_en": In(1), "r_addr": In(abits), "r_data": Out(width)}
        if read_latency == 0:
            del ports["r_en"]
        super().__init__(ports)

    @property
    def bits(self) -> int:
        return self.depth * self.width

    def describe(self) -> dict:
        return {"depth": self.depth, "width": self.width, "bits": self.bits,
                "ports": "1w1r", "read_latency": self.read_latency, "write_granularity": self.granularity,
                "collision": self.collision}

    def elaborate(self, platform):
        m = Module()
        attrs = {"no_rw_check": 1} if self.collision == "undefined" else {}
        # "cells", not "mem": blocks often name the SRAM itself "mem", and Verilator -Wall
        # (VARHIDDEN) rejects a memory named like the instance that holds it.
        m.submodules.cells = mem = memory.Memory(shape=self.width, depth=self.depth, init=[],
                                               attrs=attrs)
        g = None if self.granularity == self.width else self.granularity
        wp = mem.write_port(granularity=g)
        m.d.comb += [wp.en.eq(self.w_en), wp.addr.eq(self.w_addr), wp.data.eq(self.w_data)]
        if self.read_latency == 0:
            rp = mem.read_port(domain="comb")
        else:
            rp = mem.read_port(transparent_for=(wp,) if self.collision == "new" else ())
            m.d.comb += rp.en.eq(self.r_en)
        m.d.comb += rp.addr.eq(self.r_addr)
        if self.read_latency == 2:
            # the output register (no reset, like the array; loads every cycle)
            oreg = Signal(self.width, name="r_data_reg", reset_less=True)
            m.d.sync += oreg.eq(rp.data)
            m.d.comb += self.r_data.eq(oreg)
        else:
            m.d.comb += self.r_data.eq(rp.data)
        return m


def srams_of(top, top_name: str) -> list[dict]:
    """Every :class:`SRAM` below ``top`` with its Verilog module name (Amaranth
    names a submodule's module by its hierarchy path) and its description."""
    out = []

    def walk(frag, path):
        for sub, name, _loc in frag.subfragments:
            p = path + (name or "U$",)
            if any(isinstance(o, SRAM) for o in (sub.origins or ())):
                sram = next(o for o in sub.origins if isinstance(o, SRAM))
                out.append({"module": ".".join(p), **sram.describe()})
            walk(sub, p)

    walk(Fragment.get(top, None), (top_name,))
    return out
