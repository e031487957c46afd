"""cocotb (Verilator) test of the exported ``package`` block (issue 18): the scenarios of
:mod:`.scenarios` through :class:`~.package.PackageTB`, back to back on one build (the
host pulses ``clear`` between runs):

* cross-chiplet pass: a Global PE multicasts one input stream to PEs on three chiplets,
  a psum chain crosses the NoP, every OUT packet goes to another chiplet's Global PE,
  which sends the window to the host: bit-exact against the pe_node golden model, random
  gaps on ``host_in`` and back-pressure on ``host_out``;
* data round trip to the far chiplet with a late chiplet at BAR 2 (holds the barrier,
  nothing else); barrier cost = last arrival -> last release;
* bad cross-chiplet programs end in error + timeout, never a hang;
* reset in the middle of the cross-chiplet pass, then the pass again: bit-exact.

Measured figures go to ``$PACKAGE_OUT`` (JSON) for tests/test_package.py.
"""
from __future__ import annotations

import json
import os

import cocotb

from tessera.hdl.package.config import PackageConfig
from tessera.tb.chiplet.chiplet import CocotbIO
from tessera.tb.package.package import PackageTB
from tessera.tb.package.scenarios import (bad_programs, check_bad, check_round_trip,
                                          check_xchip, run_bad, run_round_trip, run_xchip,
                                          xchip_scenario)


@cocotb.test()
async def package(dut):
    params = json.loads(os.environ.get("TESSERA_PARAMS", "{}"))
    seed = int(os.environ.get("TESSERA_SEED", "1"))
    pcfg = PackageConfig.from_params(params)
    tb = PackageTB(CocotbIO(dut), pcfg, seed=seed, in_gap=0.2, out_ready=0.6)
    await tb.setup()
    out = {"params": params, "seed": seed}

    sc = xchip_scenario(pcfg, seed)
    r = await run_xchip(tb, sc)
    check_xchip(r, sc)
    xc_cycles = r["status"]["cycles"]
    out["xchip"] = {"cycles": r["status"]["cycles"], "done_cycle": r["status"]["done_cycle"],
                    "nop_flits": r["status"]["nop_flits"],
                    "noc_flits": r["status"]["noc_flits"], "bar_cost": r["bar_cost"]}
    dut._log.info(f"xchip: {out['xchip']}")

    late = {2: 40}
    r = await run_round_trip(tb, late=late, seed=seed)
    check_round_trip(r)
    out["round_trip"] = {"cycles": r["status"]["cycles"], "bar_cost": r["bar_cost"],
                         "bar_events": {str(b): {k: {str(c): v for c, v in d.items()}
                                                 for k, d in ev.items()}
                                        for b, ev in r["bar_events"].items()},
                         "done_cycle": r["status"]["done_cycle"]}
    dut._log.info(f"round trip: {out['round_trip']}")

    for name, (progs, exp) in bad_programs(pcfg).items():
        st = await run_bad(tb, progs)
        check_bad(st, exp, name)
        out[name] = {"error": st["error"], "timeout": st["timeout"], "cycles": st["cycles"]}

    # reset in the middle of the cross-chiplet pass, then run it again
    tb.new_run()
    for c, w in enumerate(sc["programs"]):
        tb.load_program(w, c)
    tb.start()
    tb.on_barrier(1, lambda t: t.send_packets(t.out_packets(sc["inputs"], 0)))
    for _ in range(xc_cycles // 2):
        await tb.step()
    await tb.reset_mid_run()
    r = await run_xchip(tb, sc)
    check_xchip(r, sc)
    out["after_reset"] = {"cycles": r["status"]["cycles"]}

    path = os.environ.get("PACKAGE_OUT")
    if path:
        with open(path, "w") as fh:
            json.dump(out, fh, indent=1)
