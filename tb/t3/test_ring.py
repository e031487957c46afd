"""Ring reduce-scatter on the T3 RTL (§2.3, §4.1 Fig 7, §4.4): four devices, device
``TESSERA_RING_RTL_DEV`` (default 0) is the RTL ``t3_node`` (Tracker -> DMA table), the others are
golden nodes; memory, GEMM, DMA engines and links are modelled in ``tessera.tb.t3.ring``.

Checked: the RTL device's outputs equal a shadow golden node cycle by cycle; after all stages each
device's final chunk equals the numpy sum of the four partial outputs; DMA command count; no
tracker error, no DMA-table miss, all Tracker entries freed.
"""
from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from tessera.tb.common import TBBase, load_manifest, pack, unpack
from tessera.tb.t3.ring import GoldenNode, RingRS


@cocotb.test()
async def ring_reduce_scatter(dut):
    tb = TBBase(dut)
    p = tb.params
    rtl = int(os.environ.get("TESSERA_RING_RTL_DEV", "0"))
    gran = int(os.environ.get("TESSERA_RING_GRANULARITY", "1"))
    man = load_manifest()
    st = {s["name"]: s for s in man["streams"]}
    uf, cf, gf = (st[n]["payload_fields"] for n in ("upd", "cmd", "cfg"))
    sim = RingRS(seed=tb.seed, tracker_sets=p["sets"], entries=p["entries"],
                 wf_width=p["wf_width"], addr_width=p["addr_width"], dma_granularity=gran)
    tp = {k: p[k] for k in ("sets", "ways", "overflow", "trig_depth", "victims")}
    tp["read_latency"] = p.get("read_latency", 2)
    nodes = [GoldenNode(tp, p["entries"], p["wf_width"], p["addr_width"], prog)
             for prog in sim.programs]
    shadow = nodes[rtl]
    prog = sim.programs[rtl]
    dut.upd__valid.value = 0
    dut.cmd__ready.value = 0
    dut.cfg__valid.value = 0
    dut.threshold.value = prog.threshold
    await tb.reset()
    # program the DMA table while the Tracker's clear sweep runs
    for i, e in enumerate(prog.entries):
        dut.cfg__valid.value = 1
        dut.cfg__payload.value = pack(gf, {"index": i, "entry.valid": 1, "entry.key_lo": e.key_lo,
                                           "entry.key_hi": e.key_hi, "entry.base": e.base,
                                           "entry.dst_dev": e.dst_dev,
                                           "entry.dst_addr": e.dst_addr, "entry.op": e.op,
                                           "entry.tiles": e.tiles})
        await RisingEdge(tb.clk)
    dut.cfg__valid.value = 0
    while int(dut.busy.value):
        await RisingEdge(tb.clk)
    while not sim.finished():
        for d in range(sim.nd):
            v, u, cr = sim.inputs(d)
            if d != rtl:
                sim.outputs(d, nodes[d].step(v, u, cr))
                continue
            dut.upd__valid.value = int(v)
            if v:
                dut.upd__payload.value = pack(uf, dict(zip(("wg", "wf", "addr", "n", "src"), u)))
            dut.cmd__ready.value = int(cr)
            await ReadOnly()
            exp = shadow.step(v, u, cr)
            o = {"upd_ready": bool(dut.upd__ready.value), "cmd_valid": bool(dut.cmd__valid.value),
                 "err_count": dut.err_count.value.to_unsigned(),
                 "occupancy": dut.occupancy.value.to_unsigned(),
                 "conflicts": dut.conflicts.value.to_unsigned(),
                 "misses": dut.misses.value.to_unsigned(), "done": dut.done.value.to_unsigned(),
                 "issued": dut.issued.value.to_unsigned(), "cmd": None}
            if o["cmd_valid"]:
                o["cmd"] = unpack(cf, dut.cmd__payload.value.to_unsigned())
            for k, val in o.items():
                tb.check_equal(val, exp[k], f"cycle {sim.cycle} device {d} {k}")
            sim.outputs(d, o)
        sim.advance()
        tb.cycles += 1
        await RisingEdge(tb.clk)
        assert sim.cycle < 20000, "ring reduce-scatter did not finish"
    for d, c, got, want in sim.final_chunk_check():
        tb.check(np.array_equal(got, want), f"device {d} chunk {c} != numpy sum of partials")
    tiles_per_chunk = [int((dv.tracker.chunk == dv.final_chunk).sum()) for dv in sim.cfg.devices]
    n_cmds = [len(c) for c in sim.commands]
    want_cmds = [len(dv.dma_table) for dv in sim.cfg.devices]
    tb.check_equal(n_cmds, want_cmds, "DMA commands per device")
    for d, s in enumerate(sim.status):
        tb.check_equal((s["err_count"], s["misses"], s["occupancy"]), (0, 0, 0),
                       f"device {d} errors/misses/leftover entries")
        tb.check_equal(s["done"], tiles_per_chunk[d], f"device {d} completed tiles")
    tb.report("ring_reduce_scatter", rs_cycles=sim.cycle, gemm_cycles=sim.gemm_cycles, dma_commands=sum(n_cmds),
              rtl_device=rtl, rtl_dma_commands=n_cmds[rtl], granularity=gran,
              what=f"{len(n_cmds)}-device ring reduce-scatter fused with a GEMM ({sum(n_cmds)} DMAs): "
                   f"device {rtl} RTL vs golden node every cycle, final chunks vs numpy sums")
