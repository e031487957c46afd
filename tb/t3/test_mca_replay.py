"""cocotb: replay a window of the T3 system model's arbiter inputs through the RTL MCA
(``tessera.tb.t3.mca_replay``); the RTL's grant sequence must equal the model's, cycle by cycle,
for MCA, round-robin and compute-first."""
from __future__ import annotations

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from tessera.tb.common import TBBase
from tessera.tb.t3 import mca_replay as R


@cocotb.test()
async def mca_replay(dut):
    tb = TBBase(dut)
    for name in ("comp__valid", "comm__valid", "out__ready", "occupancy", "drain", "learn", "dynamic"):
        getattr(dut, name).value = 0
    dut.comp__payload.value = 1
    dut.comm__payload.value = 2
    total = 0
    for pol in ("mca", "rr", "compute_first"):
        tr = R.model_window(pol)
        dut.policy.value = tr["policy"]
        dut.threshold.value = tr["threshold"]
        dut.starve_limit.value = tr["starve_limit"]
        for name in ("comp__valid", "comm__valid", "out__ready", "drain"):
            getattr(dut, name).value = 0          # no state change on the edge leaving reset
        await tb.reset()
        for k in range(len(tr["occ"])):
            dut.comp__valid.value = tr["c_valid"][k]
            dut.comm__valid.value = tr["m_valid"][k]
            dut.out__ready.value = tr["out_ready"][k]
            dut.occupancy.value = tr["occ"][k]
            dut.drain.value = tr["drain"][k]
            await ReadOnly()
            g = 2 if int(dut.comm__ready.value) else 1 if int(dut.comp__ready.value) else 0
            tb.check_equal(g, tr["grant"][k], f"{pol} cycle {k} grant")
            await RisingEdge(tb.clk)
            tb.cycles += 1
        total += len(tr["occ"])
    tb.report("mca_replay", cycles_compared=total)
