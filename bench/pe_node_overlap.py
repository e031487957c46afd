"""pe_node: cycles of a multi-tile run and what the input overlap saves (issue 17).

Runs the pe_node RTL (amaranth.sim, the small test configuration of
``tb/chiplet/pe_node_env.py``: ibuf 128 words, credit_window 2 x max_tile 8)
on ONLY runs of ``ntiles`` tiles, the input words arriving as fast as the
Global PE's credits allow (no gaps, no output back-pressure), checks every
packet against the golden model, and reports per case:

* ``run_cycles``: from the cycle the node starts running (``running``
  rises, 4 cycles after the ``start`` write) to the cycle its DONE flit
  leaves ``net_out``;
* ``pe_busy_cycles``: cycles the PE computes;
* ``overlap``: whether the tile fits half the input buffer (double buffering);
* ``overhead_per_tile`` = (run_cycles - pe_busy_cycles) / ntiles.

Writes build/bench/pe_node_overlap.json.  Usage: python bench/pe_node_overlap.py
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from amaranth.sim import Simulator

from tessera.hdl.chiplet import packets as P
from tessera.hdl.chiplet.pe_node import PeNode
from tessera.hdl.pe.config import PEConfig, Role
from tessera.tb.chiplet import pe_node_env as E

OUT = Path(__file__).resolve().parents[1] / "build" / "bench" / "pe_node_overlap.json"
CASES = [
    ("3x3 s1, 36-word tile (fits a half)",
     PEConfig(R=3, S=3, C1=1, K1=2, P1=4, Q1=4, H_in=6, W_in=6, role=Role.ONLY)),
    ("1x1, 72-word tile (whole buffer)",
     PEConfig(R=1, S=1, C1=2, K1=1, P1=6, Q1=6, H_in=6, W_in=6, role=Role.ONLY)),
    ("1x1, 64-word tile (fits a half)",
     PEConfig(R=1, S=1, C1=1, K1=1, P1=8, Q1=8, H_in=8, W_in=8, role=Role.ONLY)),
]


def measure(cfg: PEConfig, ntiles=4, seed=1) -> dict:
    c = P.PeNodeConfig(**E.SMALL)
    run = E.build_run(c, np.random.default_rng(seed), cfg=cfg, ntiles=ntiles)
    env = E.Env(c, [run], seed=seed, in_gap=0.0, out_stall=0.0)
    dut = PeNode(**E.SMALL)
    st = {"start": None, "end": None, "busy": 0}

    async def tb(ctx):
        ctx.set(dut.node_id, dut.node_id.shape().const({"node": {"x": E.ME[0], "y": E.ME[1]}}))
        for cyc in range(100000):
            v, fl, rdy = env.drive()
            ctx.set(dut.net_in.valid, v)
            ctx.set(dut.net_in.payload.as_value(), fl)
            ctx.set(dut.net_out.ready, rdy)
            taken = v and ctx.get(dut.net_in.ready)
            fire = ctx.get(dut.net_out.valid) and rdy
            of = ctx.get(dut.net_out.payload.as_value()) if fire else 0
            if ctx.get(dut.pe_busy):
                st["busy"] += 1
            await ctx.tick()
            env.sample(taken, fire, of)
            if st["start"] is None and ctx.get(dut.running):
                st["start"] = cyc + 1
            if env.dones and st["end"] is None:
                st["end"] = cyc
            if env.finished():
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    errs = env.check()
    assert env.finished() and not errs, errs[:3]
    tw = cfg.C1 * cfg.H_in * cfg.W_in
    run_cycles = st["end"] - st["start"] + 1
    return {"tile_words": tw, "overlap": tw <= c.pe.ibuf_words // 2, "ntiles": ntiles,
            "run_cycles": run_cycles, "pe_busy_cycles": st["busy"],
            "overhead_per_tile": round((run_cycles - st["busy"]) / ntiles, 1),
            "bit_exact": True}


def main() -> int:
    rows = []
    for name, cfg in CASES:
        r = {"case": name, **measure(cfg)}
        rows.append(r)
        print(f"{name:38s} words {r['tile_words']:3d} overlap {str(r['overlap']):5s} "
              f"run {r['run_cycles']:5d}  PE busy {r['pe_busy_cycles']:5d}  "
              f"overhead/tile {r['overhead_per_tile']:6.1f}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"entries": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
