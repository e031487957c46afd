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

Pipeline (one trigger per cycle; a trigger accepted in cycle t presents its command in cycle t+3):

* accept (t): the trigger's key is compared with every entry's range (two comparators per entry,
  in parallel) -> hit vector register;
* S1 (t+1): lowest-index hit (priority encoder) selects the entry's fields -> register (per half
  of the table: each half's lowest hit selects its fields, S2 takes the lower half's if it has a
  hit -- the priority and a 16-way select in one cycle limited the table to 94 MHz);
* S2 (t+2): the entry's block counter decides whether the block is complete (each entry keeps a
  "next trigger completes" flag beside its counter, updated with it, so S2 only ANDs it with the
  one-hot entry; counters are read and written only here, so back-to-back triggers of one entry
  need no forwarding),
  ``dst = src + (dst_addr - base)`` (the difference is stored when the entry is written) -> the
  command register, which drives ``cmd`` in t+3.

Back-pressure runs from ``cmd.ready`` through the stages (``trig.ready`` high when S1 can move).
Configuration writes (``cfg``) are serialised with triggers: ``cfg.ready`` is high only while no
trigger is in S1 or S2, and a trigger is not accepted in a cycle with ``cfg.valid`` high, so a
trigger always sees one table.  A write takes effect at the end of its cycle and clears the
entry's counter.  Left out: the DMA engine itself (address generation, transfers) -- modelled in
Python by the ring testbench.
"""
from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
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
        E, aw = self.n, self.addr_width
        ent = [Signal(self.elayout, name=f"entry{i}") for i in range(E)]
        delta = [Signal(aw, name=f"delta{i}") for i in range(E)]     # dst_addr - base
        cnt = [Signal.like(ent[0].tiles, name=f"count{i}") for i in range(E)]
        single_e = [Signal(name=f"single{i}") for i in range(E)]       # tiles == 1, kept with it
        tlay = trigger_layout(self.wg_width, self.wf_width, aw)
        sel_layout = data.StructLayout({"key_lo": self.key_width, "base": aw, "delta": aw,
                                        "dst_dev": len(ent[0].dst_dev), "op": 2,
                                        "tiles": len(ent[0].tiles)})

        # ---- handshake -------------------------------------------------------------------
        s1_valid, s2_valid, out_valid = Signal(), Signal(), Signal()
        s1_t, s2_t = Signal(tlay), Signal(tlay)
        s1_hit = Signal(E)
        s2_hit, s2_1h = Signal(), Signal(E)
        s2_e = Signal(sel_layout)
        out = Signal(self.clayout)
        adv2 = ~out_valid | self.cmd.ready          # S2 can retire (command register free)
        s2_free = ~s2_valid | adv2
        s1_free = ~s1_valid | s2_free
        accept = Signal()
        m.d.comb += [self.trig.ready.eq(s1_free & ~self.cfg.valid),
                     accept.eq(self.trig.valid & self.trig.ready),
                     self.cfg.ready.eq(~s1_valid & ~s2_valid),
                     self.cmd.valid.eq(out_valid), self.cmd.payload.eq(out)]

        # ---- accept: range compare -----------------------------------------------------------
        t = self.trig.payload
        key = Signal(self.key_width)
        m.d.comb += key.eq((t.wg << self.wf_width) | t.wf)
        hit_v = Signal(E)
        for i in range(E):
            m.d.comb += hit_v[i].eq(ent[i].valid & (ent[i].key_lo <= key) & (key <= ent[i].key_hi))
        with m.If(s1_free):
            m.d.sync += [s1_valid.eq(accept), s1_t.eq(t), s1_hit.eq(hit_v)]

        # ---- S1: priority select, per half of the table ----------------------------------------
        # (the lowest hit of each half selects that half's fields; S2 takes the lower half's
        # when it has a hit: two short one-hot selects instead of one long priority + select)
        H = (E + 1) // 2
        lo_hit, hi_hit = s1_hit[:H], s1_hit[H:]
        lo_any = lo_hit.any()
        lo_1h = Signal(H)
        m.d.comb += lo_1h.eq(lo_hit & -lo_hit)
        h_1hot = Signal(E)        # lowest matching entry, one-hot
        if E > H:
            hi_1h = Signal(E - H)
            m.d.comb += [hi_1h.eq(hi_hit & -hi_hit),
                         h_1hot.eq(Cat(lo_1h, Mux(lo_any, 0, hi_1h)))]
        else:
            hi_1h = Signal(1)
            m.d.comb += h_1hot.eq(lo_1h)
        fields = []
        for i in range(E):
            f = Signal(sel_layout, name=f"sel{i}")
            m.d.comb += [f.key_lo.eq(ent[i].key_lo), f.base.eq(ent[i].base), f.delta.eq(delta[i]),
                         f.dst_dev.eq(ent[i].dst_dev), f.op.eq(ent[i].op), f.tiles.eq(ent[i].tiles)]
            fields.append(Mux(lo_1h[i] if i < H else hi_1h[i - H], f.as_value(), 0))
        e_lo, e_hi = Signal(sel_layout), Signal(sel_layout)
        acc = fields[0]
        for f in fields[1:H]:
            acc = acc | f
        m.d.comb += e_lo.eq(acc)
        if E > H:
            acc = fields[H]
            for f in fields[H + 1:]:
                acc = acc | f
            m.d.comb += e_hi.eq(acc)
        s2_single = Signal()
        s2_e_lo, s2_e_hi, s2_lo = Signal(sel_layout), Signal(sel_layout), Signal()
        with m.If(s2_free):
            m.d.sync += [s2_valid.eq(s1_valid), s2_t.eq(s1_t), s2_hit.eq(s1_hit.any()),
                         s2_1h.eq(h_1hot), s2_e_lo.eq(e_lo), s2_e_hi.eq(e_hi), s2_lo.eq(lo_any),
                         s2_single.eq((h_1hot & Cat(*single_e)).any())]
        m.d.comb += s2_e.eq(Mux(s2_lo, s2_e_lo, s2_e_hi))

        # ---- S2: block counter, command ------------------------------------------------------
        # last[i]: the next trigger of entry i completes its block (cnt[i] + 1 >= tiles), kept
        # up to date with the counter so S2 needs no counter multiplexer and comparator
        last = [Signal(name=f"last{i}") for i in range(E)]
        complete = Signal()
        m.d.comb += complete.eq((s2_1h & Cat(*last)).any())
        single = s2_single
        src = Signal(aw)
        m.d.comb += src.eq(Mux(single, s2_t.addr, s2_e.base))
        retire = s2_valid & adv2
        with m.If(self.cmd.ready):
            m.d.sync += out_valid.eq(0)
        misses, done, issued = Signal(16), Signal(16), Signal(16)
        with m.If(retire):
            with m.If(~s2_hit):
                with m.If(misses != 0xFFFF):
                    m.d.sync += misses.eq(misses + 1)
            with m.Elif(complete):
                with m.If(s2_e.op == OP_NONE):
                    with m.If(done != 0xFFFF):
                        m.d.sync += done.eq(done + 1)
                with m.Else():
                    with m.If(issued != 0xFFFF):
                        m.d.sync += issued.eq(issued + 1)
                    m.d.sync += [
                        out_valid.eq(1), out.src.eq(src),
                        out.dst.eq((src + s2_e.delta)[:aw]),
                        out.dst_dev.eq(s2_e.dst_dev), out.tiles.eq(s2_e.tiles), out.op.eq(s2_e.op),
                        out.wg.eq(Mux(single, s2_t.wg, s2_e.key_lo[self.wf_width:])),
                        out.wf.eq(Mux(single, s2_t.wf, s2_e.key_lo[:self.wf_width])),
                    ]
        cfg_sel = Signal(E)
        cfg_do = self.cfg.valid & self.cfg.ready
        with m.Switch(self.cfg.payload.index):
            for i in range(E):
                with m.Case(i):
                    m.d.comb += cfg_sel[i].eq(cfg_do)
        ce = self.cfg.payload.entry
        for i in range(E):
            with m.If(cfg_sel[i]):
                m.d.sync += [ent[i].eq(ce), cnt[i].eq(0), last[i].eq(ce.tiles <= 1),
                             single_e[i].eq(ce.tiles == 1),
                             delta[i].eq((ce.dst_addr - ce.base)[:aw])]
            with m.Elif(retire & s2_1h[i]):
                with m.If(last[i]):
                    m.d.sync += [cnt[i].eq(0), last[i].eq(ent[i].tiles <= 1)]
                with m.Else():
                    m.d.sync += [cnt[i].eq(cnt[i] + 1), last[i].eq(cnt[i] + 2 >= ent[i].tiles)]
        m.d.comb += [self.misses.eq(misses), self.error.eq(misses != 0),
                     self.done.eq(done), self.issued.eq(issued)]
        return m
