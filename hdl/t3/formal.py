"""Formal proofs of the T3 blocks (T3 §4.2.1 Tracker, §4.5 MCA), run by ``tessera.formal``.

* ``mca_starvation_bound``: with the MCA policy, a communication request that keeps being offered
  waits at most ``starve_limit`` cycles with ``out.ready`` high before it is granted;
  communication granted without starving and outside a drain never finds the queue at or above
  the effective threshold (k-induction).
* ``tracker_exactly_once``: a small Tracker (1 set x 1 way, 1 overflow entry, 1 victim slot,
  4 tiles, 2-bit counts) -- the same RTL as the default one, only its parameters are small --
  under any legal update stream (a tile's updates sum to at most the threshold), any
  ``trig.ready`` (trigger-FIFO back-pressure, which gates S0) and any ``src``: a watched tile
  (any wg/wf) triggers at most once, only once all of its elements are in, with its smallest
  address, and when the Tracker is idle with all of them in, it has triggered -- through set
  conflicts, overflow allocation, evictions and victim re-entry.  Unbounded: k-induction with
  the invariant of :func:`_invariant` (a conservation law over every place a tile's elements
  can be, plus the FIFOs' structure); it closes at depth 5 at the default read latency 2 (depth 4
  fails; with ``read_latency=1`` it closed at 4; depth 3 there: the induction
  counterexample starts from pipeline registers with no real history -- a set word in S2's
  read register the memory never held, an S4 overflow write with no entry selected -- and
  breaks the conservation law at step 3; 4 steps rebuild every such register from the state
  the invariant constrains).  The invariant is written for any ways / overflow entries, but
  with 2 ways induction does not close (depth 6 and 10): its counterexample ends with one tile
  in a way and in the overflow entry at once -- a start state not excluded yet.  Replaces the
  BMC runs of earlier (depth 20 with
  ``trig.ready`` high, 268 s; depth 15 with it free and ``src`` 0, 127 s).
* ``tracker_bounded_response``: with ``trig.ready`` high, every accepted update is applied in S3
  exactly ``read_latency`` + 2 cycles later (4 at the default read latency 2; was 3; the
  pipeline never stalls), a victim record waits at most 3 cycles at the head of its FIFO, and ``upd.ready`` is low for at most 2 cycles in a row unless the
  victim FIFO is full (``stall``); k-induction with the same invariant (closes at depth 5, 4
  with read latency 1;
  without it, not at depth 20).

Left out: the DMA table (covered by cocotb tests against the golden model and by mutations).
"""
from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.hdl import Assert, Assume, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from tessera.formal import Proof

from .mca import MCA, POLICY_MCA
from .tracker import Tracker


def _reset_first_cycle(m):
    init_done = Signal(reset_less=True)     # not reset by the reset it drives
    m.d.sync += init_done.eq(1)
    m.d.comb += Assume(ResetSignal() == ~init_done)
    return init_done


class MCAHarness(wiring.Component):
    def __init__(self):
        self.dut = MCA(req_width=2, occ_width=3, wait_width=3, learn_log2=1)
        super().__init__(dict(self.dut.signature.members))

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = d = self.dut
        # drive the DUT from the harness's free inputs
        ins = ["occupancy", "policy", "threshold", "starve_limit", "dynamic", "table0", "table1",
               "table2", "table3", "bin0", "bin1", "bin2", "drain", "learn"]
        for n in ins:
            m.d.comb += getattr(d, n).eq(getattr(self, n))
        for s in ("comp", "comm"):
            m.d.comb += [getattr(d, s).valid.eq(getattr(self, s).valid),
                         getattr(d, s).payload.eq(getattr(self, s).payload),
                         getattr(self, s).ready.eq(getattr(d, s).ready)]
        m.d.comb += [self.out.valid.eq(d.out.valid), self.out.payload.eq(d.out.payload),
                     d.out.ready.eq(self.out.ready), self.eff_threshold.eq(d.eff_threshold),
                     self.starving.eq(d.starving), self.dyn_valid.eq(d.dyn_valid)]
        init = _reset_first_cycle(m)
        k = d.comm
        limit = Signal.like(d.starve_limit, reset_less=True)    # any value, fixed after cycle 0
        with m.If(~init):
            m.d.sync += limit.eq(d.starve_limit)
        ghost = Signal(8)                # cycles the offered comm request waited, out.ready high
        with m.If(k.valid & ~k.ready & d.out.ready):
            m.d.sync += ghost.eq(ghost + 1)
        with m.Elif(k.ready):
            m.d.sync += ghost.eq(0)
        prev_kv, prev_kr = Signal(), Signal()
        m.d.sync += [prev_kv.eq(k.valid), prev_kr.eq(k.ready)]
        with m.If(init):
            m.d.comb += [Assume(d.policy == POLICY_MCA), Assume(d.starve_limit == limit)]
            # stream rule: an offered request stays offered until granted
            with m.If(prev_kv & ~prev_kr):
                m.d.comb += Assume(k.valid)
            m.d.comb += [Assert(ghost <= limit), Assert(ghost <= d.f_wait)]
            with m.If(k.ready & ~d.starving & ~d.drain):
                m.d.comb += Assert(d.occupancy < d.eff_threshold)
        with m.Else():
            m.d.comb += Assume(ghost == 0)
        return m


TR_SMALL = dict(sets=1, ways=1, wg_width=1, wf_width=1, addr_width=1, count_width=2, n_width=2,
                overflow=1, trig_depth=1, victims=1)


class TrackerHarness(wiring.Component):
    """Free update stream and trigger ready into a small Tracker, with ghost state for one watched
    tile.  ``which`` selects the property set."""

    def __init__(self, which, trig_ready=False, src0=False, inv=False, **cfg):
        self.which = which
        self.force_ready = trig_ready        # trig.ready held high (else free)
        self.src0 = src0                     # input src fixed to 0 (see PROOFS)
        self.inv = inv                       # assert the inductive invariant (_invariant)
        self.dut = Tracker(**{**TR_SMALL, **cfg})
        super().__init__({"upd_valid": In(1), "upd_payload": In(self.dut.ulayout),
                          "trig_ready": In(1), "threshold": In(2), "watch_wg": In(1),
                          "watch_wf": In(1)})

    def elaborate(self, platform):
        m = Module()
        d = self.dut
        # elaborated here (not by the converter) so that its state (d.fv) can be named
        m.submodules.dut = d.elaborate(platform)
        d._MustUse__silence = True           # (the component itself is not converted)
        init = _reset_first_cycle(m)
        u = self.upd_payload
        m.d.comb += [d.upd.valid.eq(self.upd_valid), d.upd.payload.eq(u),
                     d.trig.ready.eq(self.trig_ready), d.threshold.eq(self.threshold)]
        thr, wwg, wwf = (Signal(2, reset_less=True), Signal(1, reset_less=True),
                         Signal(1, reset_less=True))      # any value, fixed after cycle 0
        with m.If(~init):
            m.d.sync += [thr.eq(self.threshold), wwg.eq(self.watch_wg), wwf.eq(self.watch_wf)]
        acc = Signal(6)                   # elements of the watched tile accepted so far
        amin = Signal(1, init=1)          # its smallest address so far
        ntrig = Signal(2)
        accept = d.upd.valid & d.upd.ready
        watched = accept & (u.wg == wwg) & (u.wf == wwf)
        with m.If(watched):
            m.d.sync += acc.eq(acc + u.n)
            with m.If(u.addr < amin):
                m.d.sync += amin.eq(u.addr)
        t = d.trig.payload
        fired = d.trig.valid & d.trig.ready & (t.wg == wwg) & (t.wf == wwf)
        with m.If(fired):
            m.d.sync += ntrig.eq(ntrig + 1)
        with m.If(init):
            m.d.comb += [Assume(self.threshold == thr), Assume(thr >= 1),
                         Assume(self.watch_wg == wwg), Assume(self.watch_wf == wwf)]
            with m.If(accept):
                m.d.comb += Assume(u.n >= 1)
            # legal producer: the watched tile never receives more than the threshold
            m.d.comb += Assume(acc <= thr)
            with m.If(watched):
                m.d.comb += Assume(acc + u.n <= thr)
        with m.Else():
            m.d.comb += [Assume(acc == 0), Assume(ntrig == 0), Assume(amin == 1)]
        if self.which == "once":
            if self.force_ready:
                m.d.comb += Assume(self.trig_ready)
            if self.src0:
                m.d.comb += Assume(u.src == 0)
            with m.If(init):
                m.d.comb += Assert(ntrig <= 1)
                with m.If(fired):
                    m.d.comb += [Assert(ntrig == 0), Assert(acc == thr), Assert(t.addr == amin)]
                with m.If(d.f_idle & (acc == thr) & ~d.busy):
                    m.d.comb += Assert(ntrig == 1)
        else:
            m.d.comb += Assume(self.trig_ready)
            # accepted in cycle t -> applied in S3 in t + read_latency + 2
            past = [Signal(name=f"past_acc{k + 1}") for k in range(d.read_latency + 2)]
            m.d.sync += past[0].eq(accept & init)
            m.d.sync += [past[k + 1].eq(past[k]) for k in range(len(past) - 1)]
            vwait = Signal(4)
            with m.If(d.f_vfifo_level.any() & ~d.f_vfifo_pop):
                m.d.sync += vwait.eq(vwait + 1)
            with m.Else():
                m.d.sync += vwait.eq(0)
            nready = Signal(4)
            with m.If(~d.upd.ready & ~d.stall & ~d.busy):
                m.d.sync += nready.eq(nready + 1)
            with m.Else():
                m.d.sync += nready.eq(0)
            with m.If(init):
                with m.If(past[-1]):
                    m.d.comb += Assert(d.f_apply_valid)
                m.d.comb += [Assert(vwait <= 3), Assert(nready <= 2)]
            with m.Else():
                m.d.comb += [Assume(vwait == 0), Assume(nready == 0)]
        if self.inv:
            with m.If(init):
                _invariant(m, d, thr, wwg, wwf, acc, amin, ntrig)
        return m


def _invariant(m, d, thr, wwg, wwf, acc, amin, ntrig):
    """The inductive invariant of ``tracker_exactly_once`` (asserted; k-induction then assumes
    it in the steps before the one it checks).  It links the watched tile's ghost state to every
    place the Tracker can hold its elements -- the architectural set word and overflow entry
    (memory / registers with this cycle's S4 write applied), the items in (SA,) S1..S3, the record S4
    pushes, the victim FIFO's slots and its landing push -- and its triggers (S4's, the trigger
    FIFO's, fired): ``acc == held + thr * triggers``; a live entry holds 1..thr-1 elements and
    the tile is in at most one entry; every place has the tile's elements >= 1 and address >=
    ``amin``, and one of them has ``amin`` (until it triggers, with ``amin``).  Structure: the
    victim FIFO is a ring (``used`` contiguous valid slots from ``head``) of distinct tiles, its
    registered push's match bits and address compares agree with the slots, its head ``wg``
    register with the head slot; both FIFOs have room for every item in flight; the victim
    pointer is one-hot; during the clear sweep nothing is in."""
    f = d.fv
    W, P = d.ways, d.n_ovf
    vf, tf = f.vf, f.tf
    tagT = Cat(wwf, wwg[d.set_bits:])
    idxT = wwg[:d.set_bits] if d.set_bits else Const(0, 1)

    def is_t(it):
        return (it.wg == wwg) & (it.wf == wwf)

    def amt(c, n):
        return Mux(c, n, 0)

    places = []                          # (holds the tile, elements, address)
    # set word of the tile's set, with this cycle's S4 write applied
    regs = f.mem.regs
    word = regs[0]
    for k in range(1, len(regs)):
        word = Mux(idxT == k, regs[k], word)
    arch = f.set_layout(Mux(f.w4_set_wr & (f.w4_idx == idxT), f.full4.as_value(), word))
    ent_t = []
    for i in range(W):
        e = arch[i]
        ent_t.append(e.valid & (e.tag == tagT))
        places.append((ent_t[-1], e.count, e.addr))
    for i in range(W):                   # no tile in two ways of its set
        for k in range(i + 1, W):
            a, b = arch[i], arch[k]
            m.d.comb += Assert(~(a.valid & b.valid & (a.tag == b.tag)))
    for j in range(P):
        o = f.ovf[j]
        wr = f.w4_ovf_wr & f.w4_ovf[j]
        ov = Mux(wr, f.w4_ent.valid, o.valid)
        os_ = Mux(wr, f.w4_idx, o.set)
        ot = Mux(wr, f.w4_ent.tag, o.tag)
        oc = Mux(wr, f.w4_ent.count, o.count)
        oa = Mux(wr, f.w4_ent.addr, o.addr)
        ent_t.append(ov & (os_ == idxT) & (ot == tagT))
        places.append((ent_t[-1], oc, oa))
        # no other tile in a way of its set and in an overflow entry at once
        for i in range(W):
            e = arch[i]
            m.d.comb += Assert(~(ov & e.valid & (os_ == idxT) & (ot == e.tag)))
    n_ent = len(ent_t)
    for vi, si in zip(f.v[:-1], f.s):      # (SA,) S1, S2, S3
        places.append((vi & is_t(si), si.n, si.addr))
    rec = f.w4_vrec
    places.append(((f.w4_evict | f.w4_requeue) & is_t(rec), rec.n, rec.addr))
    D = vf.depth
    for i in range(D):
        places.append((vf.valid[i] & is_t(vf.q[i]), vf.q[i].n, vf.q[i].addr))
    places.append((vf.pe & is_t(vf.pd), vf.pd.n, vf.pd.addr))

    trigs = [(f.w4_trig & is_t(f.w4_tword), f.w4_tword.addr)]
    tl = d.tlayout
    for i in range(tf.depth):
        tq = tl(tf.q[i])
        trigs.append(((i < tf.level) & is_t(tq), tq.addr))

    held = Const(0, 8)
    for c, n, _a in places:
        held = held + amt(c, n)
    ntr = ntrig.as_unsigned() + sum(c.as_unsigned() for c, _a in trigs)
    some_min = Const(0, 1)
    for c, _n, a in places:
        some_min = some_min | (c & (a == amin))

    def inv(e):                              # asserted at the caller's line (in the log)
        m.d.comb += Assert(f.clearing | e, src_loc_at=1)   # (memory unswept: anything)
    inv(acc == held + thr * ntr)
    inv(sum(c.as_unsigned() for c in ent_t) <= 1)
    for c, n, a in places[:n_ent]:
        inv(~c | ((n >= 1) & (n < thr)))
    for c, n, a in places:
        inv(~c | ((n >= 1) & (a >= amin)))
    for c, a in trigs:
        inv(~c | (a == amin))
    inv((acc == 0) | (ntr != 0) | some_min)
    inv((acc != 0) | (amin == 1))
    # victim FIFO structure
    inv(vf.head < D)
    inv(vf.tail < D)
    inv(vf.used <= D)
    inv(vf.used == sum(vf.valid[i].as_unsigned() for i in range(D)))
    for j in range(D):
        for i in range(D):
            with m.If(vf.head == i):
                m.d.comb += Assert(vf.valid[(i + j) % D] == (vf.used > j))
    for i in range(D):
        with m.If(vf.head == i):
            m.d.comb += Assert(vf.tail == (i + vf.used) % D)
            with m.If(vf.used != 0):
                m.d.comb += Assert(vf.hwg == vf.q[i].wg)

    def same(a, b):
        return (a.wg == b.wg) & (a.wf == b.wf)
    for i in range(D):
        for k in range(i + 1, D):
            inv(~(vf.valid[i] & vf.valid[k] & same(vf.q[i], vf.q[k])))
        inv(vf.plt[i] == (vf.pd.addr < vf.q[i].addr))
        with m.If(vf.pe):
            m.d.comb += Assert(vf.pm[i] == (vf.valid[i] & same(vf.q[i], vf.pd)))
    with m.If(vf.pe):
        m.d.comb += Assert(vf.pa == ~vf.pm.any())
    if f.sa_vic is not None:             # a record in SA: its slot, popped, is not written
        va = f.v[0]
        with m.If(va & f.sa_vic):
            m.d.comb += Assert((f.sa_1h & (f.sa_1h - 1)) == 0)
            m.d.comb += Assert(f.sa_1h.any())
            for i in range(D):
                with m.If(f.sa_1h[i]):
                    m.d.comb += [Assert(~vf.valid[i]), Assert(~(vf.pe & vf.pm[i])),
                                 Assert(~(vf.pe & vf.pa & (vf.tail == i)))]
    # the registered count compares: the operands are threshold - n of the stage items, the
    # compare bits are S3's decision compares (hit count + n vs threshold; the forwarded count
    # when the item ahead left the tile live in S4)
    s2, s3, v3 = f.s[-2], f.s[-1], f.v[-2]
    cw = len(f.room2)
    inv(f.room2 == (thr - s2.n)[:cw])
    inv(f.s3_room0 == (s3.n == thr))
    NW = len(f.pr) + 1
    t_s, n2_s, n3_s = Signal(signed(NW)), Signal(signed(NW)), Signal(signed(NW))
    m.d.comb += [t_s.eq(thr), n2_s.eq(s2.n), n3_s.eq(s3.n)]
    inv(~v3 | (s3.n > thr) | (f.pr == t_s - n3_s - n2_s))     # (room2 wraps when n > thr)
    # the registered kok is what S3 would compute from v3 and s3_n_over
    inv(f.s3_kok == (v3 & ~f.s3_n_over))
    # the S2 / S3 items' set and tile matches, registered in S1
    inv(f.p_set == (v3 & (f.set_index(s3.wg) == f.set_index(s2.wg))))
    inv(~f.p_set | (f.p_tag == (f.tag_of(s3) == f.tag_of(s2))))
    c_f = f.w4_ent.count + s3.n
    inv(~(v3 & f.s3_fwd) | ((f.s3_fgt == (c_f > thr)) & (f.s3_feq == (c_f == thr))))
    c_s = f.s3_count + s3.n
    inv(~(v3 & f.s3_hit_any & ~f.s3_fwd & (s3.n <= thr)) | ((f.s3_gt == (c_s > thr)) & (f.s3_eq == (c_s == thr))))
    inflight = sum(v.as_unsigned() for v in f.v)
    inv(tf.level + inflight <= tf.depth)
    inv(vf.level + inflight <= D)
    inv(f.vptr.any() & ((f.vptr & (f.vptr - 1)) == 0))
    with m.If(f.clearing):
        m.d.comb += [Assert(acc == 0), Assert(ntrig == 0), Assert(vf.used == 0),
                     Assert(~vf.pe), Assert(tf.level == 0), Assert(inflight == 0)]


PROOFS = [
    Proof(name="mca_starvation_bound", build=MCAHarness, depth=20, mode="prove", fast=True,
          doc="MCA: offered communication waits <= starve_limit cycles with out.ready high; no "
              "non-starving grant at/above the threshold"),
    Proof(name="tracker_exactly_once", build=lambda: TrackerHarness("once", inv=True),
          depth=6, mode="prove", fast=True,
          doc="Tracker (1 set x 1 way, 1 overflow, 1 victim, 4 tiles), any trig.ready and src: a "
              "watched tile triggers at most once, only with all elements in, with its smallest "
              "address, and has triggered when the Tracker is idle with all elements in "
              "(k-induction with the conservation invariant; closes at depth 5)"),
    Proof(name="tracker_bounded_response", build=lambda: TrackerHarness("response", inv=True),
          depth=6, mode="prove", fast=True,
          doc="Tracker with trig.ready high: accepted update applied read_latency + 2 cycles later, victim "
              "record re-enters within 3 cycles, upd.ready low <= 2 cycles in a row unless victims full"),
]
