"""cocotb driver for TrafficTop runs (benchmark and soak): no per-cycle Python.

Env: NOC_POINTS = JSON list of {rate, mcast, sink_ready, warmup, cycles, drain}; NOC_OUT = JSON
file written with the counter deltas of each point.  Each point: reset, traffic on for
``warmup`` cycles, snapshot, ``cycles`` more, snapshot; with ``drain`` > 0 the generators are
then stopped and the network given ``drain`` cycles to empty (a deadlock leaves packets in it).
"""
import json
import os

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer

from tessera.tb.noc.harness import uval

NAMES = ["gen_pkts", "inj_pkts", "inj_flits", "rcv_flits", "rcv_pkts", "inflight_sum",
         "mcast_due", "mcast_rcv", "mc_inj", "seq_err", "mseq_err", "errors"]


def snap(dut):
    d = {k: uval(getattr(dut, k)) for k in NAMES}
    h = 0
    while hasattr(dut, f"lat_sum__{h}"):
        d[f"lat_sum_{h}"] = uval(getattr(dut, f"lat_sum__{h}"))
        d[f"lat_cnt_{h}"] = uval(getattr(dut, f"lat_cnt__{h}"))
        h += 1
    return d


@cocotb.test()
async def points(dut):
    cocotb.start_soon(Clock(dut.clk, 2, unit="ns").start())
    out = []
    for pt in json.loads(os.environ["NOC_POINTS"]):
        dut.rst.value = 1
        dut.enable.value = 0
        dut.rate.value = pt["rate"]
        dut.mcast.value = pt.get("mcast", 0)
        dut.sink_ready.value = pt.get("sink_ready", 256)
        dut.plen.value = pt.get("plen", 1)
        await Timer(10, unit="ns")
        await RisingEdge(dut.clk)
        dut.rst.value = 0
        dut.enable.value = 1
        await Timer(2 * pt["warmup"], unit="ns")
        a = snap(dut)
        await Timer(2 * pt["cycles"], unit="ns")
        b = snap(dut)
        rec = {"point": pt, "delta": {k: b[k] - a[k] for k in a}, "end": b}
        if pt.get("drain"):
            dut.enable.value = 0
            await Timer(2 * pt["drain"], unit="ns")
            rec["drained"] = snap(dut)
        out.append(rec)
    with open(os.environ["NOC_OUT"], "w") as fh:
        json.dump(out, fh)
