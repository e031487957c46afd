"""cocotb (Verilator) run of one compiled package pass on the exported ``package`` block
(issue 18): :func:`tessera.tb.package.run_package.drive_pass` through the RTL's
:class:`~.package.PackageTB` with the cocotb adapter.  Input ``RUN_PACKAGE_PASS`` (pickle of
``pass_payload``); output ``RUN_PACKAGE_OUT`` (JSON)."""
from __future__ import annotations

import json
import os
import pickle

import cocotb

from tessera.hdl.package.config import PackageConfig
from tessera.tb.chiplet.chiplet import CocotbIO
from tessera.tb.package.package import PackageTB
from tessera.tb.package.run_package import drive_pass


@cocotb.test()
async def run_pass_file(dut):
    params = json.loads(os.environ.get("TESSERA_PARAMS", "{}"))
    seed = int(os.environ.get("TESSERA_SEED", "1"))
    pcfg = PackageConfig.from_params(params)
    with open(os.environ["RUN_PACKAGE_PASS"], "rb") as fh:
        pl = pickle.load(fh)
    tb = PackageTB(CocotbIO(dut), pcfg, seed=seed, in_gap=pl.get("in_gap", 0.0),
                   out_ready=pl.get("out_ready", 1.0))
    await tb.setup()
    try:
        res = await drive_pass(tb, pl, max_cycles=int(os.environ.get("RUN_PACKAGE_MAX_CYCLES", 2_000_000)))
    except AssertionError as err:            # a hang: what the host saw, for the caller
        st = tb.read_status()
        with open(os.environ["RUN_PACKAGE_OUT"], "w") as fh:
            json.dump({"hang": str(err), "status": st, "cycle": tb.cycle, "bar_events": tb.bar_events,
                       "host_in_left": len(tb.tx) + (tb.cur is not None), "rx_packets": len(tb.rx_packets)},
                      fh, default=str)
        raise
    with open(os.environ["RUN_PACKAGE_OUT"], "w") as fh:
        json.dump(res, fh)
    dut._log.info(f"package pass: {res['cycles']} cycles, per chiplet {res['chiplet_cycles']}")
