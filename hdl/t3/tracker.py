"""T3 wavefront Tracker (Pati et al., ASPLOS'24, §4.2.1; Fig 9(a)(b)).

Counts local, remote and DMA updates per wavefront (WF) output tile at the memory controller and,
when a tile has received ``threshold`` element-updates (``wf_tile_size x updates_per_element``, 2 for
ring reduce-scatter), emits a trigger ``(wg_id, wf_id, start address)`` and frees the entry.

Organisation (§4.2.1): ``sets`` sets indexed by the low bits of ``wg_id`` (wg_lsb), ``ways`` ways per
set, tagged by ``(wg_msb, wf_id)``; each way holds the smallest address seen (the tile's start
address; column-major tiles are not contiguous, so it is a running minimum) and an element counter.
The default 256 sets x 8 ways x 76 bits (48-bit VA, 16-bit counter, 8+3-bit tag, valid) is the
paper's 19 KB Tracker.

Micro-architecture (the golden model ``tessera.golden.t3.TrackerModel`` implements the same cycle
behaviour from this description).  The set memory is one :class:`tessera.hdl.sram.SRAM` word per
set (all ways; read latency 1), so it maps to block RAM; three pipeline stages, one item per cycle:

* After reset a sweep clears the set memory, one set per cycle (``upd.ready`` low for ``sets``
  cycles).
* S0: an *item* -- an input update or a victim record (below) -- enters and its set is read.
* S1: the set word arrives (a read that collided with the write of that cycle takes the written
  set from a register instead); the tile's tag is compared with every way and with ``overflow``
  fully-associative overflow entries (registers shared by all sets, tagged by set index and tag),
  and the hit entry's count and address are selected.
* S2: the result is corrected for the write of the item one ahead (same set / same tile, from
  registers), then: hit -> add the element count; the count reaching ``threshold`` pushes a
  trigger and frees the entry; exceeding it is an over-count: the item is discarded, the error
  counter/flag is raised and the entry is unchanged.  Miss -> an item that alone reaches the
  threshold triggers without allocating, one that exceeds it is an over-count; otherwise it
  allocates the lowest free way of its set, else the lowest free overflow entry (``conflicts``
  counts these), else it *evicts* a victim way (round-robin pointer, ``evictions``): the item
  takes the way and the victim's tile leaves as a record ``(wg, wf, start address, count)`` that
  re-enters at S0 like an update carrying ``count`` elements.

Progress guarantee (a set conflict never blocks): nothing in the pipeline ever stalls -- every item
leaves S2 two cycles after S0, applied -- because space is reserved at S0: an item enters only if
the trigger FIFO (``trig_depth`` + 2 entries) and, for an input update, the victim FIFO
(``victims`` + 2 entries) have room for every item in flight.  Victim records re-enter every other
cycle (alternating with the input), so each is absorbed within 2 x its FIFO position + 2 cycles
while ``trig.ready`` is high.  Element counts are conserved (a tile's count may be split between
an entry and victim records; the merge that reaches the threshold triggers it), so every tile
still triggers exactly once, with its smallest address, after all its updates.  The input is held
(``stall``) only while the victim FIFO is full, i.e. while the producer keeps more live tiles in
one set than ``ways`` + ``overflow`` + ``victims`` can hold -- a finite Tracker must refuse input
then (it cannot store more partial counts than it has entries) -- and with at most ``ways`` live
tiles per set no eviction happens at all.  Evictions, overflow entries and the victim FIFO are our
additions, not in the paper (which sizes the Tracker for a GEMM stage, §4.2.1).

Latency: an update accepted in cycle t that completes its tile makes ``trig.valid`` rise in cycle
t+3.  Left out: address translation, per-entry thresholds (one programmable threshold; clipped edge
tiles need per-entry thresholds), and the source field is carried but not used (all sources count
the same, §4.2.1); over-count detection sees only the entry, not a tile's victim records.
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.hdl.sram import SRAM

SRC_LOCAL, SRC_REMOTE, SRC_DMA = 0, 1, 2
SRC_VICTIM = 3          # internal: a victim record re-entering


def update_layout(wg_width=16, wf_width=3, addr_width=48, n_width=8) -> data.StructLayout:
    return data.StructLayout({"wg": wg_width, "wf": wf_width, "addr": addr_width, "n": n_width,
                              "src": 2})


def trigger_layout(wg_width=16, wf_width=3, addr_width=48) -> data.StructLayout:
    return data.StructLayout({"wg": wg_width, "wf": wf_width, "addr": addr_width})


def _log2(x: int) -> int:
    return (x - 1).bit_length()


def check_tracker_params(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                         overflow, trig_depth, victims=4):
    if sets < 1 or sets & (sets - 1):
        raise ValueError(f"sets must be a power of two, got {sets}")
    if _log2(sets) > wg_width:
        raise ValueError(f"sets={sets} needs more wg_id bits than wg_width={wg_width}")
    for name, v, lo in (("ways", ways, 1), ("wf_width", wf_width, 1), ("addr_width", addr_width, 1),
                        ("count_width", count_width, 1), ("n_width", n_width, 1),
                        ("overflow", overflow, 0), ("trig_depth", trig_depth, 1),
                        ("victims", victims, 1)):
        if v < lo:
            raise ValueError(f"{name} must be >= {lo}, got {v}")


class _RegSets(wiring.Component):
    """Register file with the :class:`SRAM` ports (read latency 1; a same-cycle write is not
    seen), for set memories of 1 kbit or less."""

    def __init__(self, depth, width):
        self.depth = depth
        ab = max(1, (max(2, depth) - 1).bit_length())
        super().__init__({"w_en": In(1), "w_addr": In(ab), "w_data": In(width), "r_en": In(1),
                          "r_addr": In(ab), "r_data": Out(width)})

    def elaborate(self, platform):
        m = Module()
        regs = [Signal(len(self.w_data), name=f"set{i}", reset_less=True) for i in range(self.depth)]
        with m.If(self.r_en):
            with m.Switch(self.r_addr):
                for i, r in enumerate(regs):
                    with m.Case(i):
                        m.d.sync += self.r_data.eq(r)
        for i, r in enumerate(regs):
            with m.If(self.w_en & (self.w_addr == i)):
                m.d.sync += r.eq(self.w_data)
        return m


class _RegFIFO(wiring.Component):
    """First-word-fall-through FIFO in registers, the :class:`amaranth.lib.fifo.SyncFIFO` ports
    used here (``w_en``/``w_data``, ``r_en``/``r_data``/``r_rdy``, ``level``); for tiny depths."""

    def __init__(self, width, depth):
        self.width, self.depth = width, depth
        super().__init__({"w_en": In(1), "w_data": In(width), "r_en": In(1), "r_data": Out(width),
                          "r_rdy": Out(1), "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        q = [Signal(self.width, name=f"q{i}") for i in range(self.depth)]
        pop = self.r_en & self.r_rdy
        m.d.comb += [self.r_rdy.eq(self.level != 0), self.r_data.eq(q[0])]
        after = self.level - pop                 # entries kept
        for i in range(self.depth):
            nxt = q[i + 1] if i + 1 < self.depth else q[i]
            with m.If(self.w_en & (after == i)):
                m.d.sync += q[i].eq(self.w_data)
            with m.Elif(pop):
                m.d.sync += q[i].eq(nxt)
        m.d.sync += self.level.eq(self.level + self.w_en - pop)
        return m


def _fifo(width, depth):
    return _RegFIFO(width, depth) if depth <= 4 else fifo.SyncFIFO(width=width, depth=depth)


class Tracker(wiring.Component):
    """See module docstring.  Ports: ``upd`` (sink), ``trig`` (source), ``threshold`` (config),
    ``err_count``/``error`` (over-counts), ``conflicts`` (overflow allocations), ``evictions``
    (victim evictions), ``stall`` (input held because the victim FIFO has no room),
    ``occupancy`` (valid entries), ``busy`` (clear sweep running)."""

    def __init__(self, sets=256, ways=8, wg_width=16, wf_width=3, addr_width=48, count_width=16,
                 n_width=8, overflow=4, trig_depth=4, victims=4):
        check_tracker_params(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                             overflow, trig_depth, victims)
        self.sets, self.ways, self.n_ovf, self.trig_depth = sets, ways, overflow, trig_depth
        self.victims = victims
        self.wg_width, self.wf_width, self.addr_width = wg_width, wf_width, addr_width
        self.count_width, self.n_width = count_width, n_width
        self.set_bits = _log2(sets)
        self.tag_width = wg_width - self.set_bits + wf_width
        self.entry_layout = data.StructLayout({"valid": 1, "tag": self.tag_width,
                                               "addr": addr_width, "count": count_width})
        self.ovf_layout = data.StructLayout({"valid": 1, "set": max(1, self.set_bits),
                                             "tag": self.tag_width, "addr": addr_width,
                                             "count": count_width})
        self.ulayout = update_layout(wg_width, wf_width, addr_width, n_width)
        self.tlayout = trigger_layout(wg_width, wf_width, addr_width)
        # internal item: an input update or a victim record (n = the victim's count)
        self.ilayout = update_layout(wg_width, wf_width, addr_width, max(n_width, count_width))
        super().__init__({
            "upd": In(stream.Signature(self.ulayout)),
            "trig": Out(stream.Signature(self.tlayout)),
            "threshold": In(count_width),
            "err_count": Out(16),
            "error": Out(1),
            "conflicts": Out(16),
            "evictions": Out(16),
            "stall": Out(1),
            "occupancy": Out(range(sets * ways + overflow + 1)),
            "busy": Out(1),
        })
        # observation points for the formal harness (not ports)
        self.f_idle = Signal()               # nothing in flight, both FIFOs empty
        self.f_s2_valid = Signal()
        self.f_vfifo_level = Signal(range(victims + 3))
        self.f_vfifo_pop = Signal()

    def elaborate(self, platform):
        m = Module()
        W, P, sb = self.ways, self.n_ovf, self.set_bits
        Pv = max(P, 1)
        E = self.entry_layout
        if self.sets * E.size * W > 1024:
            m.submodules.sets = mem = SRAM(max(2, self.sets), E.size * W)
        else:                                # small: registers, same ports and read latency
            m.submodules.sets = mem = _RegSets(self.sets, E.size * W)
        set_layout = data.ArrayLayout(E, W)
        TD, VD = self.trig_depth + 2, self.victims + 2
        m.submodules.tfifo = tf = _fifo(self.tlayout.size, TD)
        m.submodules.vfifo = vf = _fifo(self.ilayout.size, VD)
        ovf = [Signal(self.ovf_layout, name=f"ovf{j}") for j in range(P)]

        def set_index(wg):
            return wg[:sb] if sb else Const(0, 1)

        def tag_of(it):
            return Cat(it.wf, it.wg[sb:])

        # ---- reset sweep -------------------------------------------------------------------
        clearing = Signal(init=1)
        clr_idx = Signal(range(self.sets))
        with m.If(clearing):
            m.d.sync += clr_idx.eq(clr_idx + 1)
            with m.If(clr_idx == self.sets - 1):
                m.d.sync += clearing.eq(0)
        m.d.comb += self.busy.eq(clearing)

        # ---- pipeline registers --------------------------------------------------------------
        s1_valid, s2_valid = Signal(), Signal()
        s1, s2 = Signal(self.ilayout), Signal(self.ilayout)
        # write of the previous cycle (by the item then in S2), registered
        wb_set_wr = Signal()                 # a set way was written
        wb_idx = Signal(max(1, sb))
        wb_data = Signal(set_layout)         # the whole set as written
        wb_way = Signal(W)                   # which way (one-hot)
        wb_ovf_wr = Signal()                 # an overflow entry was written
        wb_ovf = Signal(Pv)                  # which (one-hot)
        wb_live = Signal()                   # the written entry is valid (not freed)
        wb_count = Signal(self.count_width)
        wb_addr = Signal(self.addr_width)

        # ---- S0: input or victim re-entry, set read ---------------------------------------
        inflight = s1_valid.as_unsigned() + s2_valid
        trig_ok = (tf.level + inflight) < TD
        vic_ok = (vf.level + inflight) < VD
        vturn = Signal()                     # victim FIFO gets every other cycle
        m.d.sync += vturn.eq(~vturn)
        vic_turn = vf.r_rdy & vturn
        take_vic = Signal()
        m.d.comb += [take_vic.eq(~clearing & vic_turn & trig_ok),
                     self.upd.ready.eq(~clearing & trig_ok & vic_ok & ~vic_turn),
                     self.stall.eq(~clearing & ~vic_ok),
                     vf.r_en.eq(take_vic)]
        s0 = Signal(self.ilayout)
        with m.If(take_vic):
            m.d.comb += s0.eq(vf.r_data)
        with m.Else():
            m.d.comb += [s0.wg.eq(self.upd.payload.wg), s0.wf.eq(self.upd.payload.wf),
                         s0.addr.eq(self.upd.payload.addr), s0.n.eq(self.upd.payload.n),
                         s0.src.eq(self.upd.payload.src)]
        m.d.sync += [s1_valid.eq(take_vic | (self.upd.valid & self.upd.ready)), s1.eq(s0)]
        m.d.comb += [mem.r_en.eq(1), mem.r_addr.eq(set_index(s0.wg))]

        # ---- S1: set data (collision forwarding), tag compare, hit selection ------------------
        idx1, tag1 = set_index(s1.wg), tag_of(s1)
        d1 = Signal(set_layout)
        with m.If(wb_set_wr & (wb_idx == idx1)):
            m.d.comb += d1.eq(wb_data)       # read collided with that write: take the written set
        with m.Else():
            m.d.comb += d1.eq(mem.r_data)
        hit1, free1 = Signal(W), Signal(W)
        ohit1, ofree1 = Signal(Pv), Signal(Pv)
        for i in range(W):
            m.d.comb += [hit1[i].eq(d1[i].valid & (d1[i].tag == tag1)), free1[i].eq(~d1[i].valid)]
        for j in range(P):
            m.d.comb += [ohit1[j].eq(ovf[j].valid & (ovf[j].set == idx1) & (ovf[j].tag == tag1)),
                         ofree1[j].eq(~ovf[j].valid)]
        sel_count, sel_addr = Const(0, self.count_width), Const(0, self.addr_width)
        for i in range(W):
            sel_count = sel_count | Mux(hit1[i], d1[i].count, 0)
            sel_addr = sel_addr | Mux(hit1[i], d1[i].addr, 0)
        for j in range(P):
            sel_count = sel_count | Mux(ohit1[j], ovf[j].count, 0)
            sel_addr = sel_addr | Mux(ohit1[j], ovf[j].addr, 0)
        # the item ahead (in S2 now) writes at the end of this cycle: flags for S2's correction
        same_set1 = s2_valid & (set_index(s2.wg) == idx1)
        same_tile1 = same_set1 & (tag_of(s2) == tag1)

        s2_d = Signal(set_layout)
        s2_hit, s2_free = Signal(W), Signal(W)
        s2_ohit, s2_ofree = Signal(Pv), Signal(Pv)
        s2_count, s2_addr = Signal(self.count_width), Signal(self.addr_width)
        s2_same_set, s2_same_tile = Signal(), Signal()
        # threshold - n, so that S2 compares the old count instead of adding first
        s2_room = Signal(self.count_width)          # threshold - n (when n <= threshold)
        s2_n_over = Signal()                        # n > threshold: over-count even on a miss
        m.d.sync += [s2_room.eq(self.threshold - s1.n), s2_n_over.eq(s1.n > self.threshold)]
        m.d.sync += [s2_valid.eq(s1_valid & ~clearing), s2.eq(s1), s2_d.eq(d1), s2_hit.eq(hit1),
                     s2_free.eq(free1), s2_ohit.eq(ohit1), s2_ofree.eq(ofree1),
                     s2_count.eq(sel_count), s2_addr.eq(sel_addr),
                     s2_same_set.eq(same_set1), s2_same_tile.eq(same_tile1)]

        # ---- S2: correct for the write of the item ahead, count, write back -------------------
        idx2, tag2 = set_index(s2.wg), tag_of(s2)
        ss = s2_same_set & wb_set_wr
        fwd = s2_same_tile & (wb_set_wr | wb_ovf_wr) & wb_live     # ahead left this tile live
        hit_v, free_v = Signal(W), Signal(W)
        ohit_v, ofree_v = Signal(Pv), Signal(Pv)
        with m.If(ss):
            m.d.comb += [hit_v.eq((s2_hit & ~wb_way) | Mux(s2_same_tile & wb_live, wb_way, 0)),
                         free_v.eq((s2_free & ~wb_way) | Mux(wb_live, 0, wb_way))]
        with m.Else():
            m.d.comb += [hit_v.eq(s2_hit), free_v.eq(s2_free)]
        if P:
            with m.If(wb_ovf_wr):
                m.d.comb += [ohit_v.eq((s2_ohit & ~wb_ovf) | Mux(s2_same_tile & wb_live, wb_ovf, 0)),
                             ofree_v.eq((s2_ofree & ~wb_ovf) | Mux(wb_live, 0, wb_ovf))]
            with m.Else():
                m.d.comb += [ohit_v.eq(s2_ohit), ofree_v.eq(s2_ofree)]
        base = Signal(set_layout)            # the set as it is now
        m.d.comb += base.eq(Mux(ss, wb_data, s2_d))
        shit, ohit = hit_v.any(), ohit_v.any()
        hit = shit | ohit
        old_count = Mux(fwd, wb_count, s2_count)
        old_addr = Mux(fwd, wb_addr, s2_addr)
        cnt_old = Mux(hit, old_count, 0)
        min_old = Mux(hit, old_addr, s2.addr)
        new_cnt = Signal(len(s2.n) + 1)
        new_min = Signal(self.addr_width)
        m.d.comb += [new_cnt.eq(cnt_old + s2.n),
                     new_min.eq(Mux(s2.addr < min_old, s2.addr, min_old))]
        over = s2_n_over | (cnt_old > s2_room)       # cnt_old + n > threshold
        done = ~s2_n_over & (cnt_old == s2_room)      # cnt_old + n == threshold
        free_1h = Signal(W)
        m.d.comb += free_1h.eq(free_v & -free_v)            # lowest free way
        ofree_1h = Signal(Pv)
        m.d.comb += ofree_1h.eq(ofree_v & -ofree_v)
        vptr = Signal(W, init=1)             # round-robin victim way (one-hot)
        act_trig, act_err, act_free, act_upd = Signal(), Signal(), Signal(), Signal()
        act_alloc, act_oalloc, act_evict = Signal(), Signal(), Signal()
        with m.If(s2_valid):
            with m.If(over):
                m.d.comb += act_err.eq(1)
            with m.Elif(done):
                m.d.comb += [act_trig.eq(1), act_free.eq(hit)]
            with m.Elif(hit):
                m.d.comb += act_upd.eq(1)
            with m.Elif(free_v.any()):
                m.d.comb += act_alloc.eq(1)
            with m.Elif(ofree_v.any() & (P > 0)):
                m.d.comb += act_oalloc.eq(1)
            with m.Else():
                m.d.comb += act_evict.eq(1)
        # which slot this item writes
        way_1h = Signal(W)
        ovf_1h = Signal(Pv)
        # (from the hit/free vectors only: no dependence on the count arithmetic; the victim way
        # when no way is free -- written only on an eviction)
        m.d.comb += [way_1h.eq(Mux(shit, hit_v, Mux(free_v.any(), free_1h, vptr))),
                     ovf_1h.eq(Mux(ohit, ohit_v, ofree_1h))]
        set_wr = ((act_free | act_upd) & shit) | act_alloc | act_evict
        ovf_wr = ((act_free | act_upd) & ohit & ~shit) | act_oalloc
        live = ~act_free
        new_entry = Signal(E)
        m.d.comb += [new_entry.valid.eq(live), new_entry.tag.eq(tag2),
                     new_entry.addr.eq(new_min), new_entry.count.eq(new_cnt)]
        new_set = Signal(set_layout)
        for i in range(W):
            m.d.comb += new_set[i].eq(Mux(way_1h[i], new_entry, base[i]))
        with m.If(clearing):
            m.d.comb += [mem.w_addr.eq(clr_idx), mem.w_data.eq(0), mem.w_en.eq(1)]
        with m.Else():
            m.d.comb += [mem.w_addr.eq(idx2), mem.w_data.eq(new_set), mem.w_en.eq(set_wr)]
        m.d.sync += [wb_set_wr.eq(set_wr & ~clearing), wb_idx.eq(idx2), wb_data.eq(new_set),
                     wb_way.eq(way_1h), wb_ovf_wr.eq(ovf_wr & ~clearing), wb_ovf.eq(ovf_1h),
                     wb_live.eq(live), wb_count.eq(new_cnt), wb_addr.eq(new_min)]
        for j in range(P):
            with m.If(clearing):
                m.d.sync += ovf[j].valid.eq(0)
            with m.Elif(ovf_wr & ovf_1h[j]):
                m.d.sync += [ovf[j].valid.eq(live), ovf[j].set.eq(idx2), ovf[j].tag.eq(tag2),
                             ovf[j].addr.eq(new_min), ovf[j].count.eq(new_cnt)]
        # eviction: the victim way's tile leaves as a record that re-enters through S0
        victim = Signal(E)
        vacc = Const(0, E.size)
        for i in range(W):
            vacc = vacc | Mux(vptr[i], base[i].as_value(), 0)
        m.d.comb += victim.eq(vacc)
        vrec = Signal(self.ilayout)
        m.d.comb += [vrec.wf.eq(victim.tag[:self.wf_width]),
                     vrec.wg.eq(Cat(idx2[:sb], victim.tag[self.wf_width:]) if sb
                                else victim.tag[self.wf_width:]),
                     vrec.addr.eq(victim.addr), vrec.n.eq(victim.count), vrec.src.eq(SRC_VICTIM),
                     vf.w_data.eq(vrec), vf.w_en.eq(act_evict)]
        with m.If(act_evict):
            m.d.sync += vptr.eq(Cat(vptr[-1], vptr[:-1]) if W > 1 else vptr)

        # trigger FIFO
        trig_word = Signal(self.tlayout)
        m.d.comb += [trig_word.wg.eq(s2.wg), trig_word.wf.eq(s2.wf), trig_word.addr.eq(new_min),
                     tf.w_data.eq(trig_word), tf.w_en.eq(act_trig)]
        m.d.comb += [self.trig.valid.eq(tf.r_rdy), self.trig.payload.eq(tf.r_data),
                     tf.r_en.eq(self.trig.ready)]

        # counters
        err, conf, evc = Signal(16), Signal(16), Signal(16)
        occ = Signal(range(self.sets * W + P + 1))
        with m.If(act_err & (err != 0xFFFF)):
            m.d.sync += err.eq(err + 1)
        with m.If(act_oalloc & (conf != 0xFFFF)):
            m.d.sync += conf.eq(conf + 1)
        with m.If(act_evict & (evc != 0xFFFF)):
            m.d.sync += evc.eq(evc + 1)
        with m.If(act_alloc | act_oalloc):
            m.d.sync += occ.eq(occ + 1)
        with m.Elif(act_free):
            m.d.sync += occ.eq(occ - 1)
        m.d.comb += [self.err_count.eq(err), self.error.eq(err != 0), self.conflicts.eq(conf),
                     self.evictions.eq(evc), self.occupancy.eq(occ)]
        m.d.comb += [self.f_idle.eq(~s1_valid & ~s2_valid & ~tf.r_rdy & ~vf.r_rdy),
                     self.f_s2_valid.eq(s2_valid), self.f_vfifo_level.eq(vf.level),
                     self.f_vfifo_pop.eq(take_vic)]
        return m
