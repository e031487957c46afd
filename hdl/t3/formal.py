"""Formal proofs of the T3 blocks (T3 §4.2.1 Tracker, §4.5 MCA), run by ``tessera.formal``.

* ``mca_starvation_bound``: with the MCA policy, a communication request that keeps being offered
  waits at most ``starve_limit`` cycles with ``out.ready`` high before it is granted;
  communication granted without starving and outside a drain never finds the queue at or above
  the effective threshold (k-induction).
* ``tracker_exactly_once``: a small Tracker (1 set x 1 way, 1 overflow entry, 1 victim slot,
  4 tiles, 2-bit counts) -- the same RTL as the default one, only its parameters are small --
  under any legal update stream (a tile's updates sum to at most the threshold) with
  ``trig.ready`` high: a watched tile (any wg/wf) triggers at most once, only once all of its
  elements are in, with its smallest address, and when the Tracker is idle with all of them in,
  it has triggered -- through set conflicts, overflow allocation, evictions and victim re-entry
  (BMC, depth 20: ~12 min on the shared machine; with ``trig.ready`` free it did not reach depth
  17 in 24 min, each step ~3x the one before).
* ``tracker_exactly_once_bp``: the same properties with ``trig.ready`` free (trigger-FIFO
  back-pressure, which gates S0), input ``src`` fixed to 0 (the RTL tests ``src`` only against
  ``SRC_VICTIM``, reserved for its own records; local/remote/DMA count alike), BMC depth 15.
  Neither closes by k-induction (unreachable pipeline / FIFO / ghost-count combinations would
  need a hand-written conservation invariant over every place a tile's elements can be).
* ``tracker_bounded_response``: with ``trig.ready`` high, every accepted update is applied in S3
  exactly three cycles later (the pipeline never stalls), a victim record waits at most 3 cycles
  at the head of its FIFO, and ``upd.ready`` is low for at most 2 cycles in a row unless the
  victim FIFO is full (``stall``) (BMC; k-induction at depth 20 does not close: unreachable FIFO
  level / in-flight combinations would need hand-written invariants).

Left out: the DMA table (covered by cocotb tests against the golden model and by mutations).
"""
from __future__ import annotations

from amaranth import Module, Signal
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

    def __init__(self, which, trig_ready=False, src0=False, **cfg):
        self.which = which
        self.force_ready = trig_ready        # trig.ready held high (else free)
        self.src0 = src0                     # input src fixed to 0 (see PROOFS)
        self.dut = Tracker(**{**TR_SMALL, **cfg})
        super().__init__({"upd_valid": In(1), "upd_payload": In(self.dut.ulayout),
                          "trig_ready": In(1), "threshold": In(2), "watch_wg": In(1),
                          "watch_wf": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = d = self.dut
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
            past_acc1, past_acc2, past_acc3 = Signal(), Signal(), Signal()
            m.d.sync += [past_acc1.eq(accept & init), past_acc2.eq(past_acc1),
                         past_acc3.eq(past_acc2)]
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
                with m.If(past_acc3):
                    m.d.comb += Assert(d.f_apply_valid)
                m.d.comb += [Assert(vwait <= 3), Assert(nready <= 2)]
            with m.Else():
                m.d.comb += [Assume(vwait == 0), Assume(nready == 0)]
        return m


PROOFS = [
    Proof(name="mca_starvation_bound", build=MCAHarness, depth=20, mode="prove", fast=True,
          doc="MCA: offered communication waits <= starve_limit cycles with out.ready high; no "
              "non-starving grant at/above the threshold"),
    Proof(name="tracker_exactly_once", build=lambda: TrackerHarness("once", trig_ready=True),
          depth=20, mode="bmc", fast=False,
          doc="Tracker (1 set x 1 way, 1 overflow, 1 victim, 4 tiles), trig.ready high: a watched "
              "tile triggers at most once, only with all elements in, with its smallest address, "
              "and has triggered when the Tracker is idle with all elements in"),
    Proof(name="tracker_exactly_once_bp", build=lambda: TrackerHarness("once", src0=True),
          depth=15, mode="bmc", fast=False,
          doc="tracker_exactly_once with trig.ready free (trigger back-pressure), src 0"),
    Proof(name="tracker_bounded_response", build=lambda: TrackerHarness("response"), depth=20,
          mode="bmc", fast=True,
          doc="Tracker with trig.ready high: accepted update applied 3 cycles later, victim "
              "record re-enters within 3 cycles, upd.ready low <= 2 cycles in a row unless victims full"),
]
