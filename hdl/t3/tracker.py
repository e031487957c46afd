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
behaviour from this description):

* After reset a sweep clears the set memory, one set per cycle (``upd.ready`` low for ``sets``
  cycles).
* S0: an update is accepted and its set is read (synchronous read, transparent to the S1 write of
  the same cycle).  One update per cycle.
* S1: the tile is looked up in its set and in ``overflow`` fully-associative overflow entries
  (registers shared by all sets, tagged by set index and tag).  Hit -> add the element count; the
  count reaching ``threshold`` pushes a trigger into the trigger FIFO and frees the entry;
  exceeding it is an over-count: the update is discarded, the error counter/flag is raised and the
  entry is unchanged.  Miss -> an update that alone reaches the threshold triggers without
  allocating, one that exceeds it is an over-count; otherwise it allocates the lowest free way of
  its set, or, when every way is held by other tags (set conflict), the lowest free overflow entry
  (``conflicts`` counts these).
* Back-pressure: S1 holds (and ``upd.ready`` drops) when its trigger finds the trigger FIFO full,
  or on a set conflict with no free overflow entry (``stall``); the update is retried every cycle
  and never dropped.  A conflict stall clears only when an entry of that set or an overflow entry
  is freed, which needs updates queued behind it: with one in-order update stream it lasts until
  reset.  A producer must therefore keep at most ``ways`` live tiles per set plus ``overflow`` in
  total (the paper sizes the Tracker for a GEMM stage, §4.2.1; the overflow entries are our
  addition, not in the paper, to absorb occasional conflicts without stalling).

Latency: an update accepted in cycle t that completes its tile makes ``trig.valid`` rise in cycle
t+2.  Left out: address translation, per-entry thresholds (one programmable threshold; clipped edge
tiles need per-entry thresholds), and the source field is carried but not used (all sources count
the same, §4.2.1).
"""
from __future__ import annotations

from amaranth import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

SRC_LOCAL, SRC_REMOTE, SRC_DMA = 0, 1, 2


def update_layout(wg_width=16, wf_width=3, addr_width=48, n_width=8) -> data.StructLayout:
    return data.StructLayout({"wg": wg_width, "wf": wf_width, "addr": addr_width, "n": n_width,
                              "src": 2})


def trigger_layout(wg_width=16, wf_width=3, addr_width=48) -> data.StructLayout:
    return data.StructLayout({"wg": wg_width, "wf": wf_width, "addr": addr_width})


def _log2(x: int) -> int:
    return (x - 1).bit_length()


def check_tracker_params(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                         overflow, trig_depth):
    if sets < 1 or sets & (sets - 1):
        raise ValueError(f"sets must be a power of two, got {sets}")
    if _log2(sets) > wg_width:
        raise ValueError(f"sets={sets} needs more wg_id bits than wg_width={wg_width}")
    for name, v, lo in (("ways", ways, 1), ("wf_width", wf_width, 1), ("addr_width", addr_width, 1),
                        ("count_width", count_width, 1), ("n_width", n_width, 1),
                        ("overflow", overflow, 0), ("trig_depth", trig_depth, 1)):
        if v < lo:
            raise ValueError(f"{name} must be >= {lo}, got {v}")


class Tracker(wiring.Component):
    """See module docstring.  Ports: ``upd`` (sink), ``trig`` (source), ``threshold`` (config),
    ``err_count``/``error`` (over-counts), ``conflicts`` (overflow allocations), ``stall`` (S1 held
    on a set conflict), ``occupancy`` (valid entries), ``busy`` (clear sweep running)."""

    def __init__(self, sets=256, ways=8, wg_width=16, wf_width=3, addr_width=48, count_width=16,
                 n_width=8, overflow=4, trig_depth=4):
        check_tracker_params(sets, ways, wg_width, wf_width, addr_width, count_width, n_width,
                             overflow, trig_depth)
        self.sets, self.ways, self.n_ovf, self.trig_depth = sets, ways, overflow, trig_depth
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
        super().__init__({
            "upd": In(stream.Signature(self.ulayout)),
            "trig": Out(stream.Signature(self.tlayout)),
            "threshold": In(count_width),
            "err_count": Out(16),
            "error": Out(1),
            "conflicts": Out(16),
            "stall": Out(1),
            "occupancy": Out(range(sets * ways + overflow + 1)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        W, P = self.ways, self.n_ovf
        sb = self.set_bits
        mem = Memory(shape=data.ArrayLayout(self.entry_layout, W), depth=self.sets, init=[])
        m.submodules.mem = mem
        wp = mem.write_port()
        rp = mem.read_port(transparent_for=(wp,))
        m.submodules.tfifo = tf = fifo.SyncFIFO(width=self.tlayout.size, depth=self.trig_depth)
        ovf = [Signal(self.ovf_layout, name=f"ovf{j}") for j in range(P)]

        # ---- reset sweep -------------------------------------------------------------------
        clearing = Signal(init=1)
        clr_idx = Signal(range(self.sets))
        with m.If(clearing):
            m.d.sync += clr_idx.eq(clr_idx + 1)
            with m.If(clr_idx == self.sets - 1):
                m.d.sync += clearing.eq(0)
        m.d.comb += self.busy.eq(clearing)

        def set_index(wg):
            return wg[:sb] if sb else Const(0, 1)

        # ---- S1 ---------------------------------------------------------------------------
        s1_valid = Signal()
        s1 = Signal(self.ulayout)
        ways = rp.data
        idx = set_index(s1.wg)
        tag = Cat(s1.wf, s1.wg[sb:])
        hit_v, free_v = Signal(W), Signal(W)
        for i in range(W):
            m.d.comb += [hit_v[i].eq(ways[i].valid & (ways[i].tag == tag)),
                         free_v[i].eq(~ways[i].valid)]
        ohit_v, ofree_v = Signal(max(P, 1)), Signal(max(P, 1))
        for j in range(P):
            m.d.comb += [ohit_v[j].eq(ovf[j].valid & (ovf[j].set == idx) & (ovf[j].tag == tag)),
                         ofree_v[j].eq(~ovf[j].valid)]
        shit, ohit = hit_v.any(), ohit_v.any()
        hit_way, free_way = Signal(range(W)), Signal(range(W))
        ohit_j, ofree_j = Signal(range(max(P, 1))), Signal(range(max(P, 1)))
        for i in reversed(range(W)):        # lowest index wins
            with m.If(hit_v[i]):
                m.d.comb += hit_way.eq(i)
            with m.If(free_v[i]):
                m.d.comb += free_way.eq(i)
        ohit_1h, ofree_1h = Signal(max(P, 1)), Signal(max(P, 1))   # one-hot of the above
        for j in reversed(range(P)):
            with m.If(ohit_v[j]):
                m.d.comb += [ohit_j.eq(j), ohit_1h.eq(1 << j)]
            with m.If(ofree_v[j]):
                m.d.comb += [ofree_j.eq(j), ofree_1h.eq(1 << j)]
        old = Signal(self.entry_layout)
        with m.If(shit):
            m.d.comb += old.eq(Array(ways[i] for i in range(W))[hit_way])
        with m.Elif(ohit & (P > 0)):
            oarr = Array(ovf) if P else None
            if P:
                m.d.comb += [old.valid.eq(1), old.tag.eq(oarr[ohit_j].tag),
                             old.addr.eq(oarr[ohit_j].addr), old.count.eq(oarr[ohit_j].count)]
        hit = shit | ohit
        cnt_old = Mux(hit, old.count, 0)
        min_old = Mux(hit, old.addr, s1.addr)
        new_cnt = Signal(max(self.count_width, self.n_width) + 1)
        new_min = Signal(self.addr_width)
        m.d.comb += [new_cnt.eq(cnt_old + s1.n),
                     new_min.eq(Mux(s1.addr < min_old, s1.addr, min_old))]
        over = new_cnt > self.threshold
        done = new_cnt == self.threshold
        act_trig, act_err, act_conf = Signal(), Signal(), Signal()
        act_free = Signal()       # hit that completes: invalidate the entry
        act_alloc = Signal()      # miss below the threshold: allocate a set way / overflow entry
        act_upd = Signal()        # hit that stays below the threshold
        to_ovf = Signal()         # the entry written/freed is an overflow entry
        with m.If(s1_valid):
            with m.If(over):
                m.d.comb += act_err.eq(1)
            with m.Elif(done):
                m.d.comb += [act_trig.eq(1), act_free.eq(hit), to_ovf.eq(~shit & ohit)]
            with m.Elif(hit):
                m.d.comb += [act_upd.eq(1), to_ovf.eq(~shit & ohit)]
            with m.Elif(free_v.any()):
                m.d.comb += act_alloc.eq(1)
            with m.Elif(ofree_v.any() & (P > 0)):
                m.d.comb += [act_alloc.eq(1), to_ovf.eq(1)]
            with m.Else():
                m.d.comb += act_conf.eq(1)
        hold = (act_trig & ~tf.w_rdy) | act_conf
        go = s1_valid & ~hold
        m.d.comb += self.stall.eq(act_conf)

        # write-back of the whole set
        new_set = Signal(data.ArrayLayout(self.entry_layout, W))
        m.d.comb += new_set.eq(ways)
        wr_way = Mux(shit, hit_way, free_way)
        with m.Switch(wr_way):
            for i in range(W):
                with m.Case(i):
                    with m.If(act_free):
                        m.d.comb += new_set[i].valid.eq(0)
                    with m.Else():
                        m.d.comb += [new_set[i].valid.eq(1), new_set[i].tag.eq(tag),
                                     new_set[i].addr.eq(new_min), new_set[i].count.eq(new_cnt)]
        with m.If(clearing):
            m.d.comb += [wp.addr.eq(clr_idx), wp.data.eq(0), wp.en.eq(1)]
        with m.Else():
            m.d.comb += [wp.addr.eq(idx), wp.data.eq(new_set),
                         wp.en.eq(go & ~to_ovf & (act_free | act_alloc | act_upd))]
        # overflow entries
        wr_1h = Mux(ohit, ohit_1h, ofree_1h)
        for j in range(P):
            with m.If(clearing):
                m.d.sync += ovf[j].valid.eq(0)
            with m.Elif(go & to_ovf & wr_1h[j]):
                with m.If(act_free):
                    m.d.sync += ovf[j].valid.eq(0)
                with m.Else():
                    m.d.sync += [ovf[j].valid.eq(1), ovf[j].set.eq(idx), ovf[j].tag.eq(tag),
                                 ovf[j].addr.eq(new_min), ovf[j].count.eq(new_cnt)]

        # trigger FIFO
        trig_word = Signal(self.tlayout)
        m.d.comb += [trig_word.wg.eq(s1.wg), trig_word.wf.eq(s1.wf), trig_word.addr.eq(new_min),
                     tf.w_data.eq(trig_word), tf.w_en.eq(go & act_trig)]
        m.d.comb += [self.trig.valid.eq(tf.r_rdy), self.trig.payload.eq(tf.r_data),
                     tf.r_en.eq(self.trig.ready)]

        # counters
        err = Signal(16)
        conf = Signal(16)
        occ = Signal(range(self.sets * W + P + 1))
        with m.If(go & act_err & (err != 0xFFFF)):
            m.d.sync += err.eq(err + 1)
        with m.If(go & act_alloc & to_ovf & (conf != 0xFFFF)):
            m.d.sync += conf.eq(conf + 1)
        with m.If(go & act_alloc):
            m.d.sync += occ.eq(occ + 1)
        with m.Elif(go & act_free):
            m.d.sync += occ.eq(occ - 1)
        m.d.comb += [self.err_count.eq(err), self.error.eq(err != 0), self.conflicts.eq(conf),
                     self.occupancy.eq(occ)]

        # ---- S0 ---------------------------------------------------------------------------
        s0_free = ~s1_valid | ~hold
        m.d.comb += self.upd.ready.eq(~clearing & s0_free)
        with m.If(s0_free):
            m.d.sync += [s1_valid.eq(self.upd.valid & self.upd.ready), s1.eq(self.upd.payload)]
        with m.If(~s0_free):
            m.d.comb += rp.addr.eq(idx)
        with m.Else():
            m.d.comb += rp.addr.eq(set_index(self.upd.payload.wg))
        return m
