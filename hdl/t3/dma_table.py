"""T3 DMA trigger table (Pati et al., ASPLOS'24, §4.2.2, Fig 9(c); programmed by ``dma_map``, §4.4).

Pre-programmed DMA commands; a Tracker trigger ``(wg_id, wf_id, start address)`` looks up its entry
and, when the entry's DMA block is complete, emits a DMA command.

Entry: tile-id range ``key_lo..key_hi`` (inclusive; key = ``wg_id << wf_width | wf_id``), ``base``
(start VA of the entry's first WF tile), destination device and VA (``dst_addr`` corresponds to
``base``), operation (0 store, 1 update = near-memory op-and-store, 2 none = completion only, e.g.
the chunk that ends fully reduced on this device) and granularity ``tiles`` (WF tiles per DMA block).

Why tile ids and not an address range: with column-major outputs (BLAS) and row-major WG numbering
(the layout of ``sim_models/t3/address_space``) the WF tiles of a chunk or of a DMA block do not
form an address range (Fig 9(a)), while their tile ids are consecutive; the paper's trigger likewise
"marks the corresponding DMA entry ready and populates it with the wg_id and wf_id" (§4.2.2).

* ``tiles == 1``: every trigger in the range is its own block: command ``src`` = the trigger's start
  address, ``dst = dst_addr + (src - base)``, ids = the trigger's.  One entry can cover a chunk.
* ``tiles > 1``: the entry is one DMA block; its counter (the paper's "additional counter per DMA
  entry") counts triggers; the one completing the block emits ``src = base``, ``dst = dst_addr``,
  ids = ``key_lo`` (the DMA engine regenerates the tiles' addresses from the start address, the WF
  tile size and (M, N), §4.2.2); the counter restarts.
* No matching entry: the trigger is counted in ``misses`` and flagged (``error``); op none: counted
  in ``done``; issued commands in ``issued``.  Lowest-index matching entry wins.

Timing: a trigger accepted in cycle t presents its command in cycle t+1 (one output register;
``trig.ready = !cmd.valid | cmd.ready``, one trigger per cycle).  Configuration writes (``cfg``,
always ready) take effect at the end of their cycle and clear the entry's counter (a configuration
write wins over a same-cycle count).  Left out: the DMA engine itself (address generation,
transfers) -- modelled in Python by the ring testbench.
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .tracker import trigger_layout

OP_STORE, OP_UPDATE, OP_NONE = 0, 1, 2


def entry_layout(key_width, addr_width, dev_width, tiles_width) -> data.StructLayout:
    return data.StructLayout({"valid": 1, "key_lo": key_width, "key_hi": key_width,
                              "base": addr_width, "dst_dev": dev_width, "dst_addr": addr_width,
                              "op": 2, "tiles": tiles_width})


def cmd_layout(wg_width, wf_width, addr_width, dev_width, tiles_width) -> data.StructLayout:
    return data.StructLayout({"src": addr_width, "dst": addr_width, "dst_dev": dev_width,
                              "tiles": tiles_width, "op": 2, "wg": wg_width, "wf": wf_width})


class DmaTable(wiring.Component):
    def __init__(self, entries=16, wg_width=16, wf_width=3, addr_width=48, dev_width=4,
                 tiles_width=8):
        for name, v, lo in (("entries", entries, 1), ("wg_width", wg_width, 1),
                            ("wf_width", wf_width, 1), ("addr_width", addr_width, 1),
                            ("dev_width", dev_width, 1), ("tiles_width", tiles_width, 1)):
            if v < lo:
                raise ValueError(f"{name} must be >= {lo}, got {v}")
        self.n = entries
        self.wg_width, self.wf_width, self.addr_width = wg_width, wf_width, addr_width
        self.key_width = wg_width + wf_width
        self.elayout = entry_layout(self.key_width, addr_width, dev_width, tiles_width)
        self.clayout = cmd_layout(wg_width, wf_width, addr_width, dev_width, tiles_width)
        self.cfg_layout = data.StructLayout({"index": range(entries), "entry": self.elayout})
        super().__init__({
            "trig": In(stream.Signature(trigger_layout(wg_width, wf_width, addr_width))),
            "cmd": Out(stream.Signature(self.clayout)),
            "cfg": In(stream.Signature(self.cfg_layout)),
            "misses": Out(16),
            "error": Out(1),
            "done": Out(16),
            "issued": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        E = self.n
        ent = [Signal(self.elayout, name=f"entry{i}") for i in range(E)]
        cnt = [Signal.like(ent[0].tiles, name=f"count{i}") for i in range(E)]
        t = self.trig.payload
        key = Signal(self.key_width)
        m.d.comb += key.eq((t.wg << self.wf_width) | t.wf)
        hit_v = Signal(E)
        for i in range(E):
            m.d.comb += hit_v[i].eq(ent[i].valid & (ent[i].key_lo <= key) & (key <= ent[i].key_hi))
        hit = hit_v.any()
        h = Signal(range(E))
        h_1hot = Signal(E)        # lowest matching entry, one-hot
        for i in reversed(range(E)):
            with m.If(hit_v[i]):
                m.d.comb += [h.eq(i), h_1hot.eq(1 << i)]
        e = Signal(self.elayout)
        c_old = Signal.like(cnt[0])
        with m.Switch(h):
            for i in range(E):
                with m.Case(i):
                    m.d.comb += [e.eq(ent[i]), c_old.eq(cnt[i])]
        c_new = Signal(len(c_old) + 1)
        m.d.comb += c_new.eq(c_old + 1)
        complete = c_new >= e.tiles

        out_valid = Signal()
        out = Signal(self.clayout)
        m.d.comb += [self.cmd.valid.eq(out_valid), self.cmd.payload.eq(out),
                     self.trig.ready.eq(~out_valid | self.cmd.ready)]
        with m.If(self.cmd.ready):
            m.d.sync += out_valid.eq(0)
        accept = self.trig.valid & self.trig.ready
        single = e.tiles == 1
        src = Signal(self.addr_width)
        m.d.comb += src.eq(Mux(single, t.addr, e.base))
        misses, done, issued = Signal(16), Signal(16), Signal(16)
        with m.If(accept):
            with m.If(~hit):
                with m.If(misses != 0xFFFF):
                    m.d.sync += misses.eq(misses + 1)
            with m.Elif(complete):
                with m.If(e.op == OP_NONE):
                    with m.If(done != 0xFFFF):
                        m.d.sync += done.eq(done + 1)
                with m.Else():
                    with m.If(issued != 0xFFFF):
                        m.d.sync += issued.eq(issued + 1)
                    m.d.sync += [
                        out_valid.eq(1), out.src.eq(src),
                        out.dst.eq((e.dst_addr + src - e.base)[:self.addr_width]),
                        out.dst_dev.eq(e.dst_dev), out.tiles.eq(e.tiles), out.op.eq(e.op),
                        out.wg.eq(Mux(single, t.wg, e.key_lo[self.wf_width:])),
                        out.wf.eq(Mux(single, t.wf, e.key_lo[:self.wf_width])),
                    ]
        cfg_sel = Signal(E)
        with m.Switch(self.cfg.payload.index):
            for i in range(E):
                with m.Case(i):
                    m.d.comb += cfg_sel[i].eq(self.cfg.valid)
        for i in range(E):
            with m.If(cfg_sel[i]):
                m.d.sync += [ent[i].eq(self.cfg.payload.entry), cnt[i].eq(0)]
            with m.Elif(accept & h_1hot[i]):
                m.d.sync += cnt[i].eq(Mux(complete, 0, c_new))
        m.d.comb += [self.cfg.ready.eq(1), self.misses.eq(misses), self.error.eq(misses != 0),
                     self.done.eq(done), self.issued.eq(issued)]
        return m
