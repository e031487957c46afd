"""Result FIFO of the Simba PE on an :class:`~tessera.hdl.sram.SRAM` (issue 20:
no memory above 1 kbit as flip-flops; Simba §3.1's PE buffers its results
before the PPU / partial-sum hand-off).

First-word-fall-through: ``r_rdy``/``r_data`` show the head, ``r_en`` pops
it; ``w_en``/``w_data`` push (the caller guarantees space: the PE issues a
result only with a credit, so there is no ``w_rdy``).  The SRAM is read
every cycle at the address of the head after this cycle's pop (read latency
1), so ``r_data`` comes straight from the SRAM; a write to that address in
the same cycle (the FIFO was empty or about to be: an undefined-collision
SRAM) is bypassed through one register.  A pushed word is visible at the
head the cycle after its write.
Left out: ``w_rdy``/overflow checking, a registered ``r_data`` (the PE
registers it behind the FIFO).
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM


class SramFIFO(wiring.Component):
    def __init__(self, width: int, depth: int):
        if depth < 2 or depth & (depth - 1):
            raise ValueError(f"SramFIFO depth must be a power of two >= 2, got {depth}")
        self.width, self.depth = width, depth
        super().__init__({
            "w_en": In(1), "w_data": In(width),
            "r_en": In(1), "r_rdy": Out(1), "r_data": Out(width),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.depth
        m.submodules.mem = mem = SRAM(n, self.width)
        AB = (n - 1).bit_length()
        wptr, rptr = Signal(AB), Signal(AB)
        pop = self.r_en & self.r_rdy
        r_next = Signal(AB)
        m.d.comb += r_next.eq(rptr + pop)
        byp, byp_data = Signal(), Signal(self.width)
        m.d.comb += [mem.w_en.eq(self.w_en), mem.w_addr.eq(wptr), mem.w_data.eq(self.w_data),
                     mem.r_en.eq(1), mem.r_addr.eq(r_next),
                     self.r_rdy.eq(self.level != 0),
                     self.r_data.eq(Mux(byp, byp_data, mem.r_data))]
        m.d.sync += [byp.eq(self.w_en & (wptr == r_next)), byp_data.eq(self.w_data),
                     wptr.eq(wptr + self.w_en), rptr.eq(r_next),
                     self.level.eq(self.level + self.w_en - pop)]
        return m
