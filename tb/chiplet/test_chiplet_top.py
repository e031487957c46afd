"""cocotb (Verilator) test of the exported chiplet: the scenarios of :mod:`.chiplet`
(CFG + WAIT ending in TIMEOUT; data round trip host_in -> Global PE -> host_out under
random gaps and back-pressure) through :class:`~.chiplet.ChipletTB` with the cocotb adapter,
with the same checks as the amaranth.sim test (tests/test_chiplet_top.py)."""
from __future__ import annotations

import json
import os

import cocotb

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.tb.chiplet.chiplet import (ChipletTB, CocotbIO, check_round_trip, check_timeout,
                                       run_round_trip, run_timeout)


@cocotb.test()
async def smoke(dut):
    params = json.loads(os.environ.get("TESSERA_PARAMS", "{}"))
    seed = int(os.environ.get("TESSERA_SEED", "1"))
    cfg = ChipletConfig.from_params(params)
    tb = ChipletTB(CocotbIO(dut), cfg, seed=seed)
    await tb.setup()
    check_timeout(await run_timeout(tb))
    for s in (seed, seed + 1):
        r = await run_round_trip(tb, s)
        check_round_trip(r, cfg.max_tile)
        dut._log.info(f"round trip seed {s}: {r['status']['cycles']} cycles, "
                      f"{r['in_flits']} flits in, {r['out_flits']} out")
