"""RTL Tracker vs the T3 system model's update stream (T3 §4.2.1; issue 7 "Cross-check with the RTL").

Device 0's update stream of the small fused GEMM-RS instance (``tessera.tb.t3.xcheck``) drives the
RTL Tracker: each update offered from its model cycle on, one per cycle when back-to-back, trigger
output ready.  The RTL trigger sequence (cycle, wg, wf, start address) and acceptance cycles must
equal ``golden.t3.TrackerModel``'s on the same stream exactly, and pass ``xcheck.check`` (each tile
once, model order, timing).  Cycle 0 is the first cycle after the reset clear sweep.

Idle gaps between model events (tens of thousands of cycles) are skipped with the update input
idle and ``trig.ready`` low: the Tracker is empty then (4 cycles after the last accepted update),
and a spurious trigger would stay in the FIFO and show up, late, at the end of the gap.
"""
from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from tessera.tb.common import TBBase, load_manifest, pack, unpack
from tessera.tb.t3 import xcheck as X


@cocotb.test()
async def tracker_xcheck(dut):
    tb = TBBase(dut)
    p = tb.params
    st = {s["name"]: s for s in load_manifest()["streams"]}
    uf, tf = st["upd"]["payload_fields"], st["trig"]["payload_fields"]
    inst = X.small_instance()
    timed = X.tracker_stream(inst)
    thr = X.threshold(inst)
    gold = X.run_golden(timed, thr, p)
    dut.threshold.value = thr
    dut.upd__valid.value = 0
    dut.trig__ready.value = 1
    await tb.reset()
    while int(dut.busy.value):
        await RisingEdge(tb.clk)
    drv = X.StreamDriver(timed)
    # a trigger leaves LATENCY cycles after its completing update is accepted: keep the
    # trigger side open that long before skipping an idle gap or ending
    DRAIN = X.LATENCY + 1
    trigs, cycle, last_acc, skipped = [], 0, -10, 0
    while not (drv.done() and cycle >= last_acc + DRAIN):
        assert cycle < gold["cycles"] + 1000, "RTL did not finish the stream"
        if drv.cur is None and cycle >= last_acc + DRAIN and drv.next_cycle() is not None \
                and drv.next_cycle() > cycle:
            gap = drv.next_cycle() - cycle
            dut.upd__valid.value = 0
            dut.trig__ready.value = 0
            await ClockCycles(tb.clk, gap)
            dut.trig__ready.value = 1
            cycle += gap
            skipped += gap
            continue
        v, u = drv.inputs(cycle)
        dut.upd__valid.value = int(v)
        if v:
            dut.upd__payload.value = pack(uf, dict(zip(("wg", "wf", "addr", "n", "src"), u)))
        await ReadOnly()
        if int(dut.trig__valid.value):
            t = unpack(tf, dut.trig__payload.value.to_unsigned())
            trigs.append((cycle, t["wg"], t["wf"], t["addr"]))
        rdy = bool(dut.upd__ready.value)
        if v and rdy:
            last_acc = cycle
        drv.observe(cycle, v, rdy)
        await RisingEdge(tb.clk)
        cycle += 1
    tb.cycles = cycle
    rtl = dict(triggers=trigs, accepted=drv.accepted, cycles=cycle,
               err=dut.err_count.value.to_unsigned(), conflicts=dut.conflicts.value.to_unsigned(),
               occupancy=dut.occupancy.value.to_unsigned())
    tb.check_equal(len(trigs), len(gold["triggers"]), "trigger count RTL vs golden")
    for k, (a, b) in enumerate(zip(trigs, gold["triggers"])):
        tb.check_equal(a, b, f"trigger {k} (cycle, wg, wf, addr) RTL vs golden")
    tb.check_equal(rtl["accepted"], gold["accepted"], "update acceptance cycles RTL vs golden")
    for k in ("err", "conflicts", "occupancy"):
        tb.check_equal(rtl[k], gold[k], f"{k} RTL vs golden")
    rep = X.check(inst, timed, rtl)
    tb.check_equal(rep["problems"], [], "model assumptions on the RTL trigger sequence")
    tb.report("tracker_xcheck", triggers=rep["triggers"], updates=rep["updates"],
              max_lateness=rep["max_lateness"], late_triggers=rep["late_triggers"],
              simulated_cycles=cycle - skipped, skipped_cycles=skipped)
