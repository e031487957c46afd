"""Issue 14, stop 32: take the per-layer gains of 'local-row-oa' (R: a layer's outputs written to the
Fig. 11b output row) apart, one assumption at a time, over all 54 ResNet-50 layers at 32 chiplets.

Per layer and variant, as network.run_layer(opt="all") does: the uniform baseline is the best tiling
searched under the variant's baseline homes (chiplet counts 1..32); the optimised result is the best of
the baseline, Sec. 5.1 non-uniform partitioning, the variant's Sec. 5.2 placement, and placement after
non-uniform.  Gain = uniform / optimised - 1 (the layer alone, no inter-layer moves), the quantity the
issue bounds at <= 20 % per layer.  Recorded per layer: the baseline's critical chiplet terms (compute,
input delivery, output delivery t_oa, sync) and what the optimised result changed (binding, homes).

Variants (--only, comma list):
  R        R as stop 31 measured it (baseline local-row-oa; placement may choose local / sequential / greedy homes)
  Rnop4    R with the NoP links 4x wider (GRS 44 Gb/s per lane)     -- NoP width
  Rnop100  R with the NoP links 100x wider
  Rport4   R with the NoC links / Global PE ports 4x wider         -- port width
  Rrow2    R with the output row at package row 2 (middle)         -- where the output row is
  Rrow3    R with the output row at package row 3
  Reven    R with the outputs spread evenly over the used chiplets' Global PEs (no row)
  Rp       R, placement keeps the baseline's output homes (bindings and IA only)
  Rpo      Rp with the output homes following the binding ('local-order-oa': the 7th-12th chiplets of the
           binding's order), so re-binding moves the output row with the chiplets
  Rrows    R, placement may choose the output row (any of the 6 rows, the same Fig. 11b rule) or the
           periphery (Fig. 11d), not the producer-local homes
  Ub       the uniform baseline may choose its output homes as the optimisation does ("same data
           placement rules"): baseline = best of the searches under local-row-oa and local

Usage: nice -n 10 .venv/bin/python bench/simba_rowoa_takeapart.py [--samples 250] [--only R,Rp] [--layers a,b]
Writes build/bench/simba_rowoa_takeapart[_<only>].json.
"""
from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import chiplet_counts, search
from tessera.sim_models.simba.model import build_structure, evaluate_batch
from tessera.sim_models.simba.optim import nonuniform, placement

from simba_rowoa import _best_placement     # (bench/ is on sys.path when a bench script runs)

OUT = Path("build/bench")


def _homes_placement(homes):
    def opt(layer, arch, base):
        return _best_placement(layer, arch, base, homes(base))
    return opt


place_keep = _homes_placement(lambda base: (base.placement,))
place_order = _homes_placement(lambda base: ("local-order-oa",))
place_rows = _homes_placement(lambda base: tuple(f"local-row-oa@{r}" for r in range(6)) + ("local-periphery-oa",))

VARIANTS = {
    "R": ({}, ("local-row-oa",), placement),
    "Rnop4": ({"grs_gbps": 44.0}, ("local-row-oa",), placement),
    "Rnop100": ({"grs_gbps": 1100.0}, ("local-row-oa",), placement),
    "Rport4": ({"noc_link_bytes_per_cycle": 64.0}, ("local-row-oa",), placement),
    "Rrow2": ({}, ("local-row-oa@2",), placement),
    "Rrow3": ({}, ("local-row-oa@3",), placement),
    "Reven": ({}, ("local-even-oa",), placement),
    "Rp": ({}, ("local-row-oa",), place_keep),
    "Rpo": ({}, ("local-row-oa",), place_order),
    "Rrows": ({}, ("local-row-oa",), place_rows),
    "Ub": ({}, ("local-row-oa", "local"), placement),
    "L": ({}, ("local",), placement),
}


def terms(layer, arch, r):
    mp = r.mapping
    st = build_structure(layer, arch, mp.kc, mp.cc, mp.pc, mp.qc, r.binding, r.placement, mp.k_ext, mp.p_ext)
    b = evaluate_batch(st, arch, [mp.kp], [mp.cp], [mp.pp], [mp.qp], [mp.p1], [mp.q1])
    t = b.terms
    own = np.asarray(b.own[0])
    crit = int(np.argmax(own))
    pick = lambda k: float(np.asarray(t[k])[0, crit]) if np.ndim(t[k]) == 2 else float(np.ravel(t[k])[0])
    return {k: round(pick(k)) for k in ("comp", "t_in", "t_oa", "period", "own", "sync", "setup")}


def one(args):
    key, i, layer, samples = args
    sets, bases, opt = VARIANTS[key]
    arch = load_arch(bench_dir=OUT)
    if sets:
        arch = arch.with_(**sets)
    cands = []
    for pl in bases:
        per = search(layer, arch, chiplet_counts(32), samples, i, keep_per_count=True, placement=pl)
        cands.append(min(per.values(), key=lambda r: (r.latency_cycles, r.energy_pj)))
    base = min(cands, key=lambda r: r.latency_cycles)
    nu = nonuniform(layer, arch, base)
    res = {"uniform": base, "nonuniform": nu, "placement": opt(layer, arch, base), "all": opt(layer, arch, nu)}
    best = min(res.values(), key=lambda r: r.latency_cycles)
    g = lambda r: base.latency_cycles / r.latency_cycles - 1
    return key, layer.name, {
        "uniform_cycles": round(base.latency_cycles), "best_cycles": round(best.latency_cycles),
        "gain": g(best), "gain_nonuniform": g(nu), "gain_placement": g(res["placement"]),
        "uniform": {"chiplets": base.n_chiplets, "mapping": base.mapping.short(), "placement": base.placement,
                    "terms": terms(layer, arch, base)},
        "best": {"chiplets": best.n_chiplets, "mapping": best.mapping.short(), "binding": str(best.binding),
                 "placement": best.placement, "terms": terms(layer, arch, best)}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=250)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="R")
    ap.add_argument("--layers", default="")
    args = ap.parse_args()
    layers = load_network("resnet50")
    idx = {l.name: i for i, l in enumerate(layers)}       # network.run_network seeds layer i with i
    sel = [l for l in layers if not args.layers or l.name in args.layers.split(",")]
    keys = args.only.split(",")
    doc = {"samples": args.samples, "note": __doc__, "variants": {}}
    p = OUT / f"simba_rowoa_takeapart_{args.only.replace(',', '_')}{'_sel' if args.layers else ''}.json"
    t0 = time.time()
    for k in keys:
        v = doc["variants"][k] = {"arch": VARIANTS[k][0], "baseline_homes": VARIANTS[k][1], "layers": {}}
        with ProcessPoolExecutor(max_workers=args.jobs) as ex:
            for _, name, r in ex.map(one, [(k, idx[l.name], l, args.samples) for l in sel]):
                v["layers"][name] = r
        g = {n: r["gain"] for n, r in v["layers"].items()}
        top = max(g, key=g.get)
        v["max_layer_gain"] = (top, g[top])
        v["layers_over_20pct"] = sorted(n for n, x in g.items() if x > 0.20)
        v["sum_uniform_cycles"] = sum(r["uniform_cycles"] for r in v["layers"].values())
        v["sum_best_cycles"] = sum(r["best_cycles"] for r in v["layers"].values())
        print(f"{k:8s} sum uniform {v['sum_uniform_cycles'] / 1030:.1f} us best {v['sum_best_cycles'] / 1030:.1f} us "
              f"max {top} {g[top]:.3f}  >20%: {len(v['layers_over_20pct'])}  median {np.median(list(g.values())):.3f}"
              f"  [{time.time() - t0:.0f} s]", flush=True)
        p.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {p} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
