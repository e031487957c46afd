"""DMA trigger table RTL (``tessera.hdl.t3.dma_table``) in lock-step with ``DmaTableModel`` on
amaranth.sim: overlapping entry ranges (lowest index wins, in either half of the table), single-
and multi-tile blocks, store/update/none, misses, command back-pressure, reprogramming.  Fast (no
Verilator); the cocotb test ``tb/t3/test_dma_table.py`` is the verification of record."""
import random

import pytest
from amaranth.sim import Simulator

from tessera.golden.t3 import DmaEntry, DmaTableModel
from tessera.hdl.t3.dma_table import DmaTable


@pytest.mark.parametrize("entries", [1, 5, 8])
def test_dma_table_matches_golden_model(entries):
    wf_w, aw = 2, 16
    dut = DmaTable(entries=entries, wg_width=4, wf_width=wf_w, addr_width=aw, dev_width=2,
                   tiles_width=3)
    model = DmaTableModel(entries=entries, wf_width=wf_w, addr_width=aw)
    rng = random.Random(entries)

    def rand_entry():
        lo = rng.randrange(48)
        return DmaEntry(key_lo=lo, key_hi=lo + rng.randrange(24), base=rng.randrange(1 << aw),
                        dst_dev=rng.randrange(4), dst_addr=rng.randrange(1 << aw),
                        op=rng.randrange(3), tiles=rng.choice([1, 1, 2, 3]))

    async def bench(ctx):
        pend_cfg = [(i, rand_entry()) for i in range(entries)]
        issued = 0
        for n in range(3000):
            if n % 700 == 650:                               # reprogram a few entries
                pend_cfg += [(rng.randrange(entries), rand_entry()) for _ in range(2)]
            cfg = pend_cfg[0] if pend_cfg else None
            trig = None if cfg is not None or rng.random() < 0.2 else (
                rng.randrange(16), rng.randrange(4), rng.randrange(1 << aw))
            cmd_ready = rng.random() < 0.7
            ctx.set(dut.cfg.valid, cfg is not None)
            if cfg is not None:
                i, e = cfg
                ctx.set(dut.cfg.payload, {"index": i, "entry": {
                    "valid": 1, "key_lo": e.key_lo, "key_hi": e.key_hi, "base": e.base,
                    "dst_dev": e.dst_dev, "dst_addr": e.dst_addr, "op": e.op, "tiles": e.tiles}})
            ctx.set(dut.trig.valid, trig is not None)
            if trig is not None:
                ctx.set(dut.trig.payload, dict(zip(("wg", "wf", "addr"), trig)))
            ctx.set(dut.cmd.ready, cmd_ready)
            exp = model.step(trig is not None, trig, cmd_ready, cfg)
            got = {"trig_ready": ctx.get(dut.trig.ready), "cfg_ready": ctx.get(dut.cfg.ready),
                   "cmd_valid": ctx.get(dut.cmd.valid), "misses": ctx.get(dut.misses),
                   "done": ctx.get(dut.done), "issued": ctx.get(dut.issued)}
            for k, g in got.items():
                assert g == exp[k], (n, k, g, exp[k])
            if got["cmd_valid"]:
                c = ctx.get(dut.cmd.payload)
                e = exp["cmd"]
                assert {k: getattr(c, k) for k in e} == e, n
                issued += cmd_ready
            if cfg is not None and got["cfg_ready"]:
                pend_cfg.pop(0)
            await ctx.tick()
        assert issued > 50

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
