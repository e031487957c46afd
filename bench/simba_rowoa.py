"""Issue 14, stop 31 (lead 1): the runtime baseline with each layer's outputs written to the Fig. 11b
output row ('local-row-oa': inputs on their consumers, outputs spread over the row below the first
row of used chiplets), measured under today's defaults (X5r runtime control) on every figure, one
assumption at a time, against the model default ('local': outputs stay on their producer).

Paper: Sec. 5.2 / Fig. 11b "a naive data placement with a sequential allocation of input activations to
the chiplets on the top row and output activations in the next six chiplets"; Sec. 3.1 "The final output
activation is sent to the target Global PE for computation of the next layer"; Sec. 4.1 measurements
start with the inputs in the Global PEs.

Variants (--only, comma list):
  L   'local' (today's default): every figure
  R   'local-row-oa' as the start state of every figure (Fig 5/6/7 searches, the network, Fig 10/12)
  Rp  'local-row-oa' with the Sec. 5.2 placement optimisation restricted to the IA homes (the OA
      homes stay in the Fig. 11b row; the greedy/local OA re-homing is what the optimisation adds)
  Rq  'local-row-oa' with the placement optimisation moving the OA only as Fig. 11d draws it: spread
      evenly over the periphery's Global PEs ('local-periphery-oa'), not back onto their producers
  Rr  (stop 32) 'local-row-oa' with the placement optimisation choosing the OA row (any package row,
      'local-row-oa@r') or the periphery: the baseline's own output-home rule, not the producers
  E   (stop 32) 'local-even-oa': outputs spread evenly over the used chiplets' Global PEs
Each variant: headline all / uniform / gain, max per-layer gain of non-uniform + placement, Fig 5
(res2a_branch2b, res2a_branch1, res5a_branch2b: best count, t32/t8), Fig 6 (11 -> 25 Gb/s), Fig 7
(res4a_branch1 far / adjacent, headline premise and K/C chiplet split), Fig 10 / Fig 12 best layer on
the 32-chiplet premise (Fig 12 from the Fig. 11b sequential fill and from the variant's own baseline),
res4a_branch1 placement with the paper's broadcast tiling.

Usage: nice -n 10 .venv/bin/python bench/simba_rowoa.py [--samples 300] [--net-samples 250] [--only L,R]
Writes build/bench/simba_rowoa[_<only>].json.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import search
from tessera.sim_models.simba.model import evaluate
from tessera.sim_models.simba.network import run_network
from tessera.sim_models.simba.optim import BINDINGS, nonuniform, placement

OUT = Path("build/bench")
COUNTS = [1, 2, 4, 8, 16, 32]
FIG7_CFG = [(0, 1, 6, 7), (0, 5, 30, 35)]


def fig5(net, arch, S, pl):
    out = {}
    for name in ("res2a_branch2b", "res2a_branch1", "res5a_branch2b"):
        per = search(net[name], arch, COUNTS, S, seed=5, keep_per_count=True, placement=pl)
        t = {n: per[n].latency_cycles for n in per}
        b = min(t, key=t.get)
        out[name] = {"best_n": b, "t32/t8": t[32] / t[8], "norm": {n: round(t[n] / t[b], 4) for n in sorted(t)},
                     "map8": per[8].mapping.short(), "map32": per[32].mapping.short()}
    return out


def fig6(net, arch, S, pl):
    out = {}
    for name in ("res3a_branch1", "res3a_branch2b"):
        lat = [search(net[name], arch.with_(grs_gbps=g), 32, S, seed=6, placement=pl).latency_cycles
               for g in (11.0, 25.0)]
        out[name] = 1 - lat[1] / lat[0]
    return out


def fig7(net, arch, S, pl):
    l = net["res4a_branch1"]
    out = {}
    for label, chip_pq in (("headline premise", True), ("chiplets split K/C", False)):
        b = search(l, arch, 4, S, seed=7, binding=FIG7_CFG[0], chip_pq=chip_pq, placement=pl)
        far = evaluate(l, arch, b.mapping, binding=FIG7_CFG[-1], placement=pl).latency_cycles / b.latency_cycles
        out[label] = {"far/adjacent": far, "mapping": b.mapping.short()}
    return out


def _best_placement(layer, arch, base, homes):
    """Sec. 5.2 placement search over every binding x ``homes`` (placement names), keeping the
    baseline's mapping; the baseline itself when nothing is faster."""
    best = base
    for b in BINDINGS:
        for p in homes:
            try:
                r = evaluate(layer, arch, base.mapping, b, p)
            except Exception:
                continue
            if r.latency_cycles < best.latency_cycles - 1e-9:
                best = r
    best.samples = base.samples
    return best


def place_ia_only(layer, arch, base):
    """Sec. 5.2 placement with the OA homes kept where the baseline writes them: only the
    binding and the IA homes change ('local-row-oa' keeps IA local, so only the binding)."""
    return _best_placement(layer, arch, base, (base.placement,))


def place_periphery(layer, arch, base):
    """Sec. 5.2 placement of the 'local-row-oa' start as Fig. 11d draws it: the baseline's homes or the
    OA spread evenly over the package periphery ('local-periphery-oa'), every binding."""
    return _best_placement(layer, arch, base, (base.placement, "local-periphery-oa"))


def place_rows(layer, arch, base):
    """Sec. 5.2 placement under the baseline's own output-home rule (stop 32): the OA go to one of the
    package's six rows (Fig. 11b, 'local-row-oa@r') or the periphery (Fig. 11d), never back onto their
    producers; every binding."""
    return _best_placement(layer, arch, base, tuple(f"local-row-oa@{r}" for r in range(arch.mesh_rows))
                           + ("local-periphery-oa",))


def network(layers, net, arch, NS, jobs, pl, ia_only=False):
    import tessera.sim_models.simba.network as nw
    if ia_only:
        nw.placement = place_ia_only if ia_only is True else ia_only
    try:
        run = run_network(layers, arch, 32, "all", NS, seed=0, jobs=jobs, placement_start=pl)   # fork: workers see the patch
    finally:
        nw.placement = placement
    f = arch.pe_clock_ghz * 1e6
    gains = {r["layer"].name: r["uniform"].latency_cycles / r["best"].latency_cycles - 1 for r in run["rows"]}
    top = max(gains, key=gains.get)
    h = {"all_ms": run["total_cycles"] / f, "uniform_ms": run["total_uniform_cycles"] / f,
         "gain": run["total_uniform_cycles"] / run["total_cycles"] - 1,
         "moves_uniform_ms": run["move_uniform_cycles"] / f, "moves_best_ms": run["move_best_cycles"] / f,
         "max_layer_gain": (top, gains[top]), "layers_over_20pct": sorted(k for k, v in gains.items() if v > 0.20),
         "pipelined_blocks": len(run["pipelined_blocks"]),
         "layer_sum_best_ms": sum(r["best"].latency_cycles + r["move_best"] for r in run["rows"]) / f}
    # Fig 10 / Fig 12 on the 32-chiplet premise (as bench/simba_repro.py)
    nu, seq, own = {}, {}, {}
    popt = (place_ia_only if ia_only is True else ia_only) if ia_only else placement
    for row in run["rows"]:
        L, b32 = row["layer"], row["per_count"].get(32)
        if b32 is None:
            continue
        nu[L.name] = b32.latency_cycles / nonuniform(L, arch, b32).latency_cycles - 1
        s = evaluate(L, arch, b32.mapping, placement="sequential")
        seq[L.name] = s.latency_cycles / placement(L, arch, s).latency_cycles - 1
        own[L.name] = b32.latency_cycles / popt(L, arch, b32).latency_cycles - 1
    t = lambda d: (max(d, key=d.get), max(d.values()))
    l4 = net["res4a_branch1"]
    b4 = search(l4, arch, 32, 300, seed=0, placement="sequential", splits=[(32, 1, 1, 1)])
    h["fig10_best"] = t(nu)
    h["fig10_res5a_branch1"] = nu.get("res5a_branch1")
    h["fig10_layers_over_1pct"] = sum(v > 0.01 for v in nu.values())
    h["fig12_best_from_sequential"] = t(seq)
    h["fig12_best_from_own_baseline"] = t(own)
    h["fig12_res4a_branch1_from_own_baseline"] = own.get("res4a_branch1")
    h["fig12_res4a_branch1_paper_tiling"] = b4.latency_cycles / placement(l4, arch, b4).latency_cycles - 1
    h["fig10"], h["fig12_own"] = nu, own
    return h


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=300)
    ap.add_argument("--net-samples", type=int, default=250)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default="L,R,Rp")
    ap.add_argument("--skip-net", action="store_true")
    ap.add_argument("--set", default="", help="arch overrides key=value,... (e.g. ctrl_irq_barrier=0: the "
                    "stop-29 defaults) -- one assumption of today's defaults at a time")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    arch = load_arch(bench_dir=OUT)
    sets = dict(kv.split("=") for kv in args.set.split(",") if kv)
    if sets:
        arch = arch.with_(**{k: type(getattr(arch, k))(float(v)) for k, v in sets.items()})
    layers = load_network("resnet50")
    net = {l.name: l for l in layers}
    V = {"L": ("local (today's default)", "local", False), "R": ("local-row-oa", "local-row-oa", False),
         "Rp": ("local-row-oa, placement keeps the OA row", "local-row-oa", True),
         "Rq": ("local-row-oa, placement moves the OA to the periphery (Fig. 11d)", "local-row-oa", place_periphery),
         "Rr": ("local-row-oa, placement chooses the OA row or the periphery (same rule as the baseline)",
                "local-row-oa", place_rows),
         "E": ("local-even-oa (outputs spread evenly over the used chiplets' Global PEs)", "local-even-oa", False)}
    doc = {"samples": args.samples, "net_samples": args.net_samples, "arch_overrides": sets, "note": __doc__,
           "variants": {}}
    t0 = time.time()
    for key in args.only.split(","):
        label, pl, ia_only = V[key]
        v = {}
        if not ia_only:
            v["fig5"] = fig5(net, arch, args.samples, pl)
            v["fig6"] = fig6(net, arch, args.samples, pl)
            v["fig7"] = fig7(net, arch, args.samples, pl)
            print(f"[{time.time() - t0:5.0f}s] {label}: F5 " + " ".join(
                f"{k} best {x['best_n']} t32/t8 {x['t32/t8']:.3f};" for k, x in v["fig5"].items())
                + f" F6 {v['fig6']['res3a_branch1']:.3f}/{v['fig6']['res3a_branch2b']:.3f}"
                + " F7 " + " ".join(f"{k} {x['far/adjacent']:.3f}" for k, x in v["fig7"].items()), flush=True)
        if not args.skip_net:
            h = network(layers, net, arch, args.net_samples, args.jobs, pl, ia_only)
            v["network"] = h
            print(f"[{time.time() - t0:5.0f}s] {label}: all {h['all_ms']:.4f} uniform {h['uniform_ms']:.4f} ms "
                  f"gain {h['gain']:.3f} max layer {h['max_layer_gain'][0]} {h['max_layer_gain'][1]:.3f} "
                  f">20%: {len(h['layers_over_20pct'])} | F10 {h['fig10_best'][0]} {h['fig10_best'][1]:.3f} | "
                  f"F12 seq {h['fig12_best_from_sequential'][0]} {h['fig12_best_from_sequential'][1]:.3f} own "
                  f"{h['fig12_best_from_own_baseline'][0]} {h['fig12_best_from_own_baseline'][1]:.3f} r4a "
                  f"{h['fig12_res4a_branch1_from_own_baseline']:.3f} / paper tiling "
                  f"{h['fig12_res4a_branch1_paper_tiling']:.3f}", flush=True)
        doc["variants"][label] = v
        p = OUT / (f"simba_rowoa_{args.only.replace(',', '_')}" + "".join(f"_{k}{v}" for k, v in sets.items())
                   + ".json")
        p.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {p} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
