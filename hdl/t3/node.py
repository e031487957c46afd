"""T3 device node: Tracker -> DMA trigger table (Pati et al., ASPLOS'24, §4.2, Fig 9).

The memory controller's update stream feeds the Tracker; its triggers feed the DMA table, which
emits DMA commands for the device's DMA engine.  Exists so that the ring reduce-scatter testbench
runs one device's complete track & trigger path in RTL.  Left out: the DMA engine, NMC and the MCA
(the testbench models the memory system in Python).
"""
from __future__ import annotations

from amaranth import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .dma_table import DmaTable
from .tracker import Tracker


class T3Node(wiring.Component):
    def __init__(self, sets=256, ways=8, wg_width=16, wf_width=3, addr_width=48, count_width=16,
                 n_width=8, overflow=4, trig_depth=4, victims=4, entries=16, dev_width=4,
                 tiles_width=8, read_latency=2):
        self.tracker = Tracker(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                               overflow, trig_depth, victims, read_latency=read_latency)
        self.dma = DmaTable(entries, wg_width, wf_width, addr_width, dev_width, tiles_width)
        t, d = self.tracker, self.dma
        super().__init__({
            "upd": In(stream.Signature(t.ulayout)),
            "cmd": Out(stream.Signature(d.clayout)),
            "cfg": In(stream.Signature(d.cfg_layout)),
            "threshold": In(count_width),
            "err_count": Out(16), "conflicts": Out(16), "evictions": Out(16), "stall": Out(1),
            "busy": Out(1),
            "occupancy": Out(len(t.occupancy)),
            "misses": Out(16), "done": Out(16), "issued": Out(16), "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        t, d = self.tracker, self.dma
        m.submodules.tracker = t
        m.submodules.dma_table = d
        wiring.connect(m, wiring.flipped(self.upd), t.upd)
        wiring.connect(m, t.trig, d.trig)
        wiring.connect(m, d.cmd, wiring.flipped(self.cmd))
        wiring.connect(m, wiring.flipped(self.cfg), d.cfg)
        m.d.comb += [t.threshold.eq(self.threshold), self.err_count.eq(t.err_count),
                     self.conflicts.eq(t.conflicts), self.evictions.eq(t.evictions),
                     self.stall.eq(t.stall), self.busy.eq(t.busy),
                     self.occupancy.eq(t.occupancy), self.misses.eq(d.misses),
                     self.done.eq(d.done), self.issued.eq(d.issued),
                     self.error.eq(t.error | d.error)]
        return m
