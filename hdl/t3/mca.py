"""T3 memory-controller arbitration between compute and communication (Pati et al., ASPLOS'24, §4.5).

Two request streams (``comp``: the producer kernel's accesses, ``comm``: the collective's / DMA
accesses) share one DRAM command queue (``out``; ``out.ready`` = the queue can take a command;
``occupancy`` = its current fill, an input).  One grant per cycle, in a cycle with ``out.ready``
high (as before); the granted request goes into an output register that drives ``out`` in the
next cycle, so no combinational path runs from the request inputs to ``out`` (only ``out.ready``
gates the grant).  A grant pops the register in the same cycle (``out.ready`` is high), so it
never overflows and the arbiter still grants one request per cycle.  ``policy`` selects:

* 0 round-robin with fall-back (the paper's baseline): alternate between the streams, granting
  the other one when the preferred one is empty;
* 1 compute-first: compute whenever it has a request, else communication;
* 2 MCA (T3-MCA): compute first; communication only while ``occupancy < threshold``; a
  communication request that has waited ``starve_limit`` cycles or more goes first regardless of
  compute and of the threshold (otherwise the starvation limit could not be honoured); while
  ``drain`` is high (producer kernel boundary) communication goes first with no threshold.

Threshold: ``threshold`` (programmed) or, with ``dynamic`` set and once learned, one of
``table0..3`` (the paper uses 5, 10, 30, no limit) chosen from the mean queue occupancy over the
first ``2**learn_log2`` cycles during which ``learn`` is high (the isolated-compute stage, Fig 7):
mean >= ``bin0`` -> table0, >= ``bin1`` -> table1, >= ``bin2`` -> table2, else table3.  ``learn``
low restarts the window; a new window overwrites the learned value.  "No limit" is any table value
above the queue depth.

The starvation counter counts cycles during which a communication request is offered and not
granted (the paper counts cycles since the last communication issue; both agree while
communication is backlogged) and saturates.  Decisions (threshold, starvation, drain) use the inputs
of the grant cycle; a communication request is granted at most ``starve_limit`` cycles after it
starts waiting, not counting cycles with ``out.ready`` low.  Left out: DRAM bank/row scheduling
(FR-FCFS) inside the queue; read/write split.
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

POLICY_RR, POLICY_COMPUTE_FIRST, POLICY_MCA = 0, 1, 2


def out_layout(req_width: int) -> data.StructLayout:
    return data.StructLayout({"src": 1, "req": req_width})


class MCA(wiring.Component):
    def __init__(self, req_width=32, occ_width=6, wait_width=10, learn_log2=4):
        for name, v, lo, hi in (("req_width", req_width, 1, 512), ("occ_width", occ_width, 1, 16),
                                ("wait_width", wait_width, 1, 24), ("learn_log2", learn_log2, 0, 16)):
            if not lo <= v <= hi:
                raise ValueError(f"{name} must be in [{lo}, {hi}], got {v}")
        self.req_width, self.occ_width = req_width, occ_width
        self.wait_width, self.learn_log2 = wait_width, learn_log2
        tw = occ_width + 1
        super().__init__({
            "comp": In(stream.Signature(req_width)),
            "comm": In(stream.Signature(req_width)),
            "out": Out(stream.Signature(out_layout(req_width))),
            "occupancy": In(occ_width),
            "policy": In(2),
            "threshold": In(tw),
            "starve_limit": In(wait_width),
            "dynamic": In(1),
            "table0": In(tw), "table1": In(tw), "table2": In(tw), "table3": In(tw),
            "bin0": In(occ_width), "bin1": In(occ_width), "bin2": In(occ_width),
            "drain": In(1),
            "learn": In(1),
            "eff_threshold": Out(tw),
            "starving": Out(1),
            "dyn_valid": Out(1),
        })
        self.f_wait = Signal(wait_width)     # starvation counter, for the formal harness

    def elaborate(self, platform):
        m = Module()
        c, k, o = self.comp, self.comm, self.out
        last_comm = Signal(init=1)
        wait = Signal(self.wait_width)
        dyn_thr = Signal(self.occ_width + 1)
        dyn_valid = Signal()
        learn_cnt = Signal(range((1 << self.learn_log2) + 1))
        learn_sum = Signal(self.occ_width + self.learn_log2 + 1)

        thr = Signal(self.occ_width + 1)
        m.d.comb += thr.eq(Mux(self.dynamic & dyn_valid, dyn_thr, self.threshold))
        starving = Signal()
        m.d.comb += starving.eq(k.valid & (wait >= self.starve_limit))
        sel_comm = Signal()
        valid = Signal()
        # output (grant) register
        buf = Signal(out_layout(self.req_width))
        buf_valid = Signal()
        with m.Switch(self.policy):
            with m.Case(POLICY_RR):
                m.d.comb += [sel_comm.eq(Mux(last_comm, k.valid & ~c.valid, k.valid)),
                             valid.eq(c.valid | k.valid)]
            with m.Case(POLICY_COMPUTE_FIRST):
                m.d.comb += [sel_comm.eq(k.valid & ~c.valid), valid.eq(c.valid | k.valid)]
            with m.Default():
                comm_ok = k.valid & (self.occupancy < thr)
                with m.If(self.drain):
                    m.d.comb += sel_comm.eq(k.valid)
                with m.Elif(starving):
                    m.d.comb += sel_comm.eq(1)
                with m.Else():
                    m.d.comb += sel_comm.eq(comm_ok & ~c.valid)
                m.d.comb += valid.eq(c.valid | sel_comm)
        grant = Signal()
        word = Signal(out_layout(self.req_width))
        m.d.comb += [
            grant.eq(o.ready & valid),
            word.src.eq(sel_comm),
            word.req.eq(Mux(sel_comm, k.payload, c.payload)),
            c.ready.eq(grant & ~sel_comm),
            k.ready.eq(grant & sel_comm),
            o.valid.eq(buf_valid),
            o.payload.eq(buf),
            self.eff_threshold.eq(thr),
            self.starving.eq(starving),
            self.dyn_valid.eq(dyn_valid),
        ]
        with m.If(grant):
            m.d.sync += [buf.eq(word), buf_valid.eq(1)]
        with m.Elif(o.ready):
            m.d.sync += buf_valid.eq(0)
        with m.If(c.ready & c.valid):
            m.d.sync += last_comm.eq(0)
        with m.If(k.ready):
            m.d.sync += [last_comm.eq(1), wait.eq(0)]
        with m.Elif(k.valid & (wait != (1 << self.wait_width) - 1)):
            m.d.sync += wait.eq(wait + 1)

        m.d.comb += self.f_wait.eq(wait)
        full = 1 << self.learn_log2
        with m.If(self.learn):
            with m.If(learn_cnt < full):
                m.d.sync += [learn_sum.eq(learn_sum + self.occupancy), learn_cnt.eq(learn_cnt + 1)]
                with m.If(learn_cnt == full - 1):
                    mean = ((learn_sum + self.occupancy) >> self.learn_log2)[:self.occ_width + 1]
                    m.d.sync += dyn_valid.eq(1)
                    with m.If(mean >= self.bin0):
                        m.d.sync += dyn_thr.eq(self.table0)
                    with m.Elif(mean >= self.bin1):
                        m.d.sync += dyn_thr.eq(self.table1)
                    with m.Elif(mean >= self.bin2):
                        m.d.sync += dyn_thr.eq(self.table2)
                    with m.Else():
                        m.d.sync += dyn_thr.eq(self.table3)
        with m.Else():
            m.d.sync += [learn_cnt.eq(0), learn_sum.eq(0)]
        return m
