"""Fig 8 Inte take-apart (Monad §III-C, §IV-B, §V-C): what sets the transfer share of Rand's latency.

Inte (network + placement + packaging + I/O area on Rand's own chiplets) can at most
remove Rand's die-to-die transfer time, so Inte <= 1 / (1 - share), share = 1 -
latency(links unlimited) / latency.  The paper's 1.3x needs share >= 23 %.  One
assumption changed at a time (hardware overrides or Rand's draw), Rand = the median
of 9 draws per seed as in bench/monad_repro.py; per seed: the transfer share (links;
links + DRAM), the ceiling 1 / (1 - share), the share of (steps - 1) x the longest stage (0 under the path latency; the
streaming of the other chunks, into which transfers enter only if a transfer stage is
the longest), the best of an exhaustive grid over
packaging x I/O area x network (identity placement), and for the rows marked
``search`` Inte from a short Fig 8 search (8 BO points x 20 SA steps, seeds 0-2;
``--all-settings``: every Fig 8 bar, to show what else moves).  Latency is §III-C's
path of one outcome (hardware.json ``latency_rule``); the former default, the makespan of
all 8 chunks, is the row ``pipelined``.

    nice -n 10 .venv/bin/python bench/monad_fig8_takeapart.py [--all-settings]   # ~1 min (+4 min) on 2 cores

Prints the table and writes build/bench/monad_fig8_takeapart.json.  Left out: a
Rand whose I/O area is drawn is shown only statically (no search)."""
from __future__ import annotations

import dataclasses
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import monad_repro as mr  # noqa: E402

from tessera.sim_models.monad import system  # noqa: E402
from tessera.sim_models.monad.executor import make_executor  # noqa: E402
from tessera.sim_models.monad.optimizer import anneal  # noqa: E402
from tessera.sim_models.monad.perf import hardware, hardware_overrides, load_workload  # noqa: E402

SEEDS = (0, 1, 2)
WL = load_workload("transformer")
PE = mr.default_pe_total("transformer", len(WL.ops))


def rand_ref(wl, seed, chips=None, max_pe=False, io=None, anneal_steps=0):
    """``mr.random_reference`` with one of its assumptions changed (None: unchanged), its
    mapping optionally annealed for latency."""
    sp, low, high = mr.random_reference(wl, PE, seed, chips=chips, io=io, max_pe=max_pe)
    if anneal_steps:
        high = anneal(sp, low, "latency", anneal_steps, random.Random(seed), start=high)[1]
    return sp.decode(low, high)


def measure(wl, d):
    res = system.evaluate(wl, d)
    lat = res.latency_ns
    longest = max(res.stages, key=res.stages.get)
    stream = (wl.pipeline_steps - 1) * res.stages[longest] if hardware().get("latency_rule", "pipelined") == "pipelined" else 0.0
    inf = system.evaluate(wl, dataclasses.replace(d, link_bw=1e4)).latency_ns
    with hardware_overrides(dram_bw_bytes_per_cycle=1e6):
        inf_all = system.evaluate(wl, dataclasses.replace(d, link_bw=1e4)).latency_ns
    best = lat
    for pkg in (0, 1, 2):
        for io in (0.25, 0.5, 1.0, 2.0):
            for net in range(6):
                try:
                    r = system.evaluate(wl, dataclasses.replace(d, packaging=pkg, io_mm2=io, network=net,
                                                                placement=()))
                except Exception:       # a network with more nodes than §IV-C allows
                    continue
                best = min(best, r.latency_ns)
    return {"latency_ns": lat, "link_share": 1 - inf / lat, "link_dram_share": 1 - inf_all / lat,
            "ceiling_x": lat / inf, "grid_x": lat / best, "longest_stage": longest,
            "streaming_share": stream / lat}     # (steps - 1) x longest stage: transfers enter only the rest


def rand_design(wl, seed, **kw):
    draws = []
    for s in range(9):
        d = rand_ref(wl, seed * 100 + s, **kw)
        draws.append((system.evaluate(wl, d).latency_ns, s, d))
    draws.sort(key=lambda t: t[:2])
    return draws[len(draws) // 2][2]


# (key, description, paper basis, hardware overrides, workload pipeline steps, Rand draw changes, search)
ROWS = [
    ("used", "used model: §III-C path latency, I/O-area links (0.5 mm^2, organic mesh), Rand 2x3 chiplets per op", "-", {}, None, {}, True),
    ("rand_io_0.25", "Rand I/O area 0.25 mm^2 (the smallest io value)", "none: io is an integration field, Rand keeps Simba-like", {}, None, {"io": 0}, False),
    ("dram_32", "DRAM 32 B/cycle per controller (was 64)", "none (assumption)", {"dram_bw_bytes_per_cycle": 32}, None, {}, False),
    ("psum_on_package", "partial sums reduced on the package", "§III-A", {"psum_reduction": "on_package"}, None, {}, False),
    ("rand_1x2_chiplets", "Rand 1x2 chiplets per op (10)", "none", {}, None, {"chips": (1, 2)}, False),
    ("rand_2x2_chiplets", "Rand 2x2 chiplets per op (20; former default)", "none (scaled-down Simba package)", {}, None, {"chips": (2, 2)}, False),
    ("rand_max_pe", "Rand PE use >= 90 % of the largest shape", "none: Rand's parameters are random", {}, None, {"max_pe": True}, False),
    ("rand_annealed", "Rand order/tiling annealed 200 steps (a better-mapped Rand)", "none: Rand's parameters are random", {}, None, {"anneal_steps": 200}, False),
    ("steps_32", "32 chunks (was 8)", "none (workload assumption)", {}, 32, {}, False),
    ("steps_1", "1 chunk (whole ops, §III-C's example)", "§III-C 'the whole MMs are pipelined'", {}, 1, {}, False),
    ("hotspot", "links sized to the hotspot (§IV-B sizing): the paper's two rules", "§III-C + §IV-B (sizing replaced by I/O-area links, issue 16 item 3)", {"link_bw_rule": "hotspot"}, None, {}, True),
    ("pipelined", "former default: makespan of all 8 chunks (path + 7 x longest stage)", "none (§III-C defines Lat as the path)", {"latency_rule": "pipelined"}, None, {}, True),
    ("pipelined_hotspot", "makespan of all 8 chunks + hotspot sizing", "§IV-B", {"latency_rule": "pipelined", "link_bw_rule": "hotspot"}, None, {}, True),
]


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--all-settings", action="store_true",
                    help="for the searched rows run every Fig 8 setting, not only Inte (~5 more min)")
    all_settings = ap.parse_args(argv).all_settings
    t0 = time.time()
    out = {"definition": "share = 1 - latency(links unlimited) / latency of Rand (median of 9 draws); ceiling = "
                         "1 / (1 - share); grid = best latency over packaging x I/O area x network (identity "
                         "placement); inte = Fig 8 Inte from bench/monad_repro.fig8_seed at 8 BO x 20 SA",
           "paper_inte_x": 1.3, "target_inte_x": 1.2, "rows": {}}
    print(f"{'change':62s} {'link share % (s0/s1/s2)':>24s} {'+DRAM %':>16s} {'ceiling x':>16s} {'grid x':>16s} {'Inte x':>16s}  longest stage, streaming %")
    for key, desc, basis, hw, steps, draw, search in ROWS:
        wl = WL if steps is None else dataclasses.replace(WL, pipeline_steps=steps)
        with hardware_overrides(**hw):
            per = [measure(wl, rand_design(wl, s, **draw)) for s in SEEDS]
            inte = None
            bars = None
            if search:
                only = None if all_settings else ("Inte",)
                with make_executor(None, 2) as ex:
                    bars = [mr.fig8_seed(ex, 8, 20, s, objectives=("latency",), only=only)["latency"] for s in SEEDS]
                inte = [b["Inte"] for b in bars]
        row = {"description": desc, "paper_basis": basis, "hardware_overrides": hw, "pipeline_steps": wl.pipeline_steps,
               "rand_draw": {k: list(v) if isinstance(v, tuple) else v for k, v in draw.items()}, "per_seed": per}
        for k in ("link_share", "link_dram_share", "ceiling_x", "grid_x", "streaming_share"):
            row[k + "_median"] = statistics.median(p[k] for p in per)
        if inte:
            row["inte_x"] = inte
            if len(bars[0]) > 2:          # every Fig 8 bar (--all-settings)
                row["fig8_latency_bars_x"] = bars
            row["inte_x_median"] = statistics.median(inte)

        def f(k, pct=False):
            return "/".join(f"{p[k] * 100:.1f}" if pct else f"{p[k]:.2f}" for p in per)
        print(f"{desc[:62]:62s} {f('link_share', True):>24s} {f('link_dram_share', True):>16s} {f('ceiling_x'):>16s} "
              f"{f('grid_x'):>16s} {'/'.join(f'{v:.2f}' for v in inte) if inte else '-':>16s}  "
              f"{','.join(p['longest_stage'] for p in per)} {f('streaming_share', True)}", flush=True)
        out["rows"][key] = row
    out["wall_s"] = time.time() - t0
    Path("build/bench").mkdir(parents=True, exist_ok=True)
    Path("build/bench/monad_fig8_takeapart.json").write_text(json.dumps(out, indent=1))
    print(f"wrote build/bench/monad_fig8_takeapart.json ({out['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
