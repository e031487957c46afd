"""cocotb (Verilator) run of one compiled layer pass on the exported chiplet (issue 17):
:func:`tessera.tb.chiplet.run_layer.drive_pass` through :class:`~.chiplet.ChipletTB` with the
cocotb adapter.  Input: ``RUN_LAYER_PASS`` (a pickle of :func:`~.run_layer.pass_payload`);
output: ``RUN_LAYER_OUT`` (JSON: words read back, cycles, phase events, status)."""
from __future__ import annotations

import json
import os
import pickle

import cocotb

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.tb.chiplet.chiplet import ChipletTB, CocotbIO
from tessera.tb.chiplet.run_layer import drive_pass


@cocotb.test()
async def run_pass_file(dut):
    params = json.loads(os.environ.get("TESSERA_PARAMS", "{}"))
    seed = int(os.environ.get("TESSERA_SEED", "1"))
    cfg = ChipletConfig.from_params(params)
    with open(os.environ["RUN_LAYER_PASS"], "rb") as fh:
        pl = pickle.load(fh)
    tb = ChipletTB(CocotbIO(dut), cfg, seed=seed, in_gap=pl.get("in_gap", 0.0),
                   out_ready=pl.get("out_ready", 1.0))
    await tb.setup()
    res = await drive_pass(tb, pl)
    with open(os.environ["RUN_LAYER_OUT"], "w") as fh:
        json.dump(res, fh)
    dut._log.info(f"pass: {res['cycles']} cycles, {len(res['words'])} words read back, "
                  f"status {res['status']}")
