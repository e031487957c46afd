"""Which latency does Fig 8 use?  Monad §III-C (Lat = max over paths of sum D(v), "the
delay to produce an outcome") vs the model's former default (that path + (steps - 1) x the
longest stage: the makespan of all ``pipeline_steps`` chunks of the Transformer block).

Three questions, one experiment each, seeds 0-2, short Fig 8 search (8 BO x 20 SA,
latency objective, every setting; bench/monad_repro.fig8_seed):

1. Per chunk or per layer: under the path rule, is D(v) that of one chunk (compute and
   transfer volumes / steps, the model) or of the whole layer?  Row ``path_whole_layer``
   runs the Transformer as one chunk (steps = 1, where both rules coincide) and is compared
   with ``path`` (8 chunks, per-chunk D(v)).
2. Same rule for the objective and the figure: every best design's latency is recomputed
   from its stage delays (system.latency_of) under the rule it was optimised with (must equal
   the optimiser's value: the workers saw the rule) and under the other rule (``cross``: the
   figure measured under one rule on designs optimised under the other).
3. The Fig 8 latency bars under each consistent rule, Co-opt vs the best separate, and the
   share of Rand's / Arch's latency spent in transfer stages (DRAM and die-to-die) on the path
   (1 - latency with transfer stages zeroed / latency).

    nice -n 10 .venv/bin/python bench/monad_latency_rule.py [--only KEY]    # ~6 min on 2 cores

A fourth row (``path_rand_2x2``) reruns the former Rand on 2x2 chiplets per op (20; the used
Rand is 2x3 = 30 of Simba's 36, hardware.json ``simba_like.fig8_rand_chip_grid``, since s22).

Prints the table and writes build/bench/monad_latency_rule.json.  Energy bars do not depend
on the rule (energy counts all chunks either way) and are not rerun."""
from __future__ import annotations

import json
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import monad_repro as mr  # noqa: E402

from tessera.sim_models.monad import perf, system  # noqa: E402
from tessera.sim_models.monad.executor import make_executor  # noqa: E402
from tessera.sim_models.monad.perf import hardware_overrides, load_workload  # noqa: E402

SEEDS = (0, 1, 2)
BUDGET, SA = 8, 20
NAMES = ("Rand",) + mr.FIG8_SETTINGS


@contextmanager
def pipeline_steps(n):
    """The Transformer's chunk count for everything forked inside the block."""
    wl = perf._load("workloads.json")["workloads"]["transformer"]
    old = wl["pipeline_steps"]
    if n is not None:
        wl["pipeline_steps"] = n
    try:
        yield
    finally:
        wl["pipeline_steps"] = old


@contextmanager
def rand_chips(grid):
    """Rand (and so every frozen field of the partial settings) with ``grid`` chiplets per op
    instead of hardware.json's ``fig8_rand_chip_grid`` (None: unchanged); same random draws."""
    if grid is None:
        yield
        return
    orig = mr.random_reference
    mr.random_reference = lambda wl, pe, seed: orig(wl, pe, seed, chips=grid)
    try:
        yield
    finally:
        mr.random_reference = orig


# (key, description, latency rule, chunks (None: workloads.json's 8), Rand's chiplet grid per op (None: hardware.json's fig8_rand_chip_grid, 2x3))
CONFIGS = [
    ("pipelined", "all 8 chunks: path + 7 x longest stage (former default)", "pipelined", None, None),
    ("path", "§III-C Lat: longest path of one chunk, D(v) per chunk (compute and volumes / 8)", "path", None, None),
    ("path_whole_layer", "longest path with D(v) of the whole layer (1 chunk; both rules coincide)", "path", 1, None),
    ("path_rand_2x2", "path latency, Rand on 2x2 chiplets per op (20; the former default)",
     "path", None, (2, 2)),
]


def lat(wl, res, rule, transfers=True):
    st = {k: v for k, v in res["stage_delays_ns"].items()}
    if not transfers:
        st = {k: (v if k.startswith("v:") else 0.0) for k, v in st.items()}
    return system.latency_of(wl, st, rule)


def run(key, rule, steps, grid=None):
    per = {}
    with pipeline_steps(steps), rand_chips(grid), hardware_overrides(latency_rule=rule), \
            make_executor(None, 2) as ex:
        wl = load_workload("transformer")
        for s in SEEDS:
            res = {}
            out = mr.fig8_seed(ex, BUDGET, SA, s, objectives=("latency",), results=res)
            r = res["latency"]
            other = "path" if rule == "pipelined" else "pipelined"
            recomputed = {n: lat(wl, r[n], rule) for n in NAMES}
            values = {n: r[n]["latency_ns"] for n in NAMES}
            cross = {n: recomputed_other for n, recomputed_other in
                     ((n, lat(wl, r[n], other)) for n in NAMES)}
            per[s] = {
                "bars_x": out["latency"],
                "objective_equals_recomputed": all(abs(recomputed[n] / values[n] - 1) < 1e-9 for n in NAMES),
                "cross_rule": other,
                "bars_x_measured_under_cross_rule": {n: cross["Rand"] / cross[n] for n in NAMES},
                "transfer_share_on_path": {n: 1 - lat(wl, r[n], rule, False) / recomputed[n] for n in ("Rand", "Arch", "Co-opt")},
                "coopt_vs_best_separate": 1 - max(out["latency"]["Arch"], out["latency"]["Inte"]) / out["latency"]["Co-opt"],
            }
    return per


def main(argv=None):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", help="run one config and update it in an existing JSON")
    only = ap.parse_args(argv).only
    t0 = time.time()
    path = Path("build/bench/monad_latency_rule.json")
    old = json.loads(path.read_text()) if only and path.exists() else None
    doc = {"search": {"bo_points": BUDGET, "sa_steps": SA, "seeds": list(SEEDS), "objective": "latency"},
           "paper": {"Arch": 6.1, "Inte": 1.3, "Co-opt": 8.1, "coopt_vs_best_separate": 0.24},
           "targets": {"Inte": 1.2, "Co-opt": 6.0, "coopt_vs_best_separate": 0.15}, "configs": {}}
    if old:
        doc["configs"] = old["configs"]
    for key, desc, rule, steps, grid in CONFIGS:
        if only and key != only:
            continue
        per = run(key, rule, steps, grid)
        row = {"description": desc, "latency_rule": rule, "pipeline_steps": steps or 8, "per_seed": per,
               "rand_chiplets_per_op": list(grid or (2, 2))}
        row["median_x"] = {n: statistics.median(per[s]["bars_x"][n] for s in SEEDS) for n in NAMES}
        row["coopt_vs_best_separate_median"] = statistics.median(per[s]["coopt_vs_best_separate"] for s in SEEDS)
        row["median_x_cross_rule"] = {n: statistics.median(per[s]["bars_x_measured_under_cross_rule"][n] for s in SEEDS)
                                      for n in NAMES}
        doc["configs"][key] = row
        print(f"{key}: {desc}")
        for s in SEEDS:
            p = per[s]
            print(f"  seed {s}: " + " ".join(f"{n} {p['bars_x'][n]:.2f}" for n in NAMES[1:])
                  + f"  Co-opt vs best sep {p['coopt_vs_best_separate']:.1%}  objective==figure "
                  f"{p['objective_equals_recomputed']}  transfer share on path "
                  + "/".join(f"{n} {v:.0%}" for n, v in p["transfer_share_on_path"].items()))
            print(f"     same designs measured {p['cross_rule']}: "
                  + " ".join(f"{n} {p['bars_x_measured_under_cross_rule'][n]:.2f}" for n in NAMES[1:]))
        print(f"  median: " + " ".join(f"{n} {row['median_x'][n]:.2f}" for n in NAMES[1:])
              + f"  Co-opt vs best sep {row['coopt_vs_best_separate_median']:.1%}", flush=True)
    doc["wall_s"] = time.time() - t0
    Path("build/bench").mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    print(f"wrote build/bench/monad_latency_rule.json ({doc['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
