"""One dataflow premise for all Simba figures (issue 14): figure x premise table.

What the seed paper says the levels partition (Shao et al., CACM'21):
* Listing 1: package level ``for p3, for q3`` (temporal) and ``parallel_for k3, c3`` (across
  chiplets); chiplet level ``for p2, q2`` (temporal) and ``parallel_for k2, c2`` (across PEs); PE
  level R, S, K1, C1, P1, Q1 temporal; vector MAC K0 x C0 spatial.
* Sec. 3.3: "the default dataflow uniformly partitions weights along C and K, as noted in the
  parallel_for loops.  In addition, Simba can also uniformly partition along the height (P) and
  width (Q) ... across chiplets and PEs to support flexible tiling" -- P/Q splits are an option at
  both levels; the text never says which figure used them.
* Sec. 4.1: 32 chiplets "as it is easier to partition computation by powers of two because the
  number of input channels (C) and output channels (K) are typically powers of two" -- the
  measured chiplet splits are over C and K.
* Sec. 5.2: res4a_branch1 "must broadcast from a single chiplet to all 32 chiplets" (K over 32).

Premises (mapper.DATAFLOWS): free (Sec. 3.3 full space), chip-kc (chiplets K/C, PEs free),
pe-kc (chiplets free, PEs K/C), kc-only (Listing 1 literally).  Every figure of simba_repro.py is
evaluated under each, same runtime baseline ("local" homes, moves between layers charged),
same searches; ``name@start`` runs a premise from another data start state (e.g. ``@row``: inputs
preloaded per Fig. 11b, read literally, Sec. 4.1's measurement start).  Prints the table and writes build/bench/simba_premises.json.
Usage: .venv/bin/python bench/simba_premises.py [--samples N] [--jobs J] [--dataflows a,b] [--takeapart]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import DATAFLOWS, dataflow_kwargs, search
from tessera.sim_models.simba.model import MappingError, evaluate
from tessera.sim_models.simba.network import run_network
from tessera.sim_models.simba.optim import nonuniform, placement

OUT = Path("build/bench")
COUNTS = [1, 2, 4, 8, 16, 32]
DEFAULT = ",".join(list(DATAFLOWS) + ["free@row", "chip-kc@row"])
FIG7 = [(0, 1, 6, 7), (0, 5, 30, 35)]          # adjacent, the four corners (simba_repro.py)


def figures(df: str, arch, net, S: int, jobs: int, start: str = "local") -> dict:
    kw = dataflow_kwargs(df) | {"placement": start}
    out = {}
    # Fig 5: latency vs chiplets, normalised to the fewest chiplets that hold the weights
    for name in ("res2a_branch2b", "res2a_branch1", "res5a_branch2b"):
        per = search(net[name], arch, COUNTS, S, seed=5, keep_per_count=True, **kw)
        t = {n: per[n].latency_cycles for n in per}
        out[f"fig5 {name}"] = {"best_n": min(t, key=t.get), "t8/t1": t[8] / t[min(t)],
                               "t32/t8": t[32] / t[8], "norm": {n: t[n] / t[min(t)] for n in sorted(t)}}
    # Fig 6: 11 -> 25 Gb/s on 32 chiplets
    for name in ("res3a_branch1", "res3a_branch2b"):
        lat = [search(net[name], arch.with_(grs_gbps=g), 32, S, seed=6, **kw).latency_cycles for g in (11.0, 25.0)]
        out[f"fig6 {name}"] = 1 - lat[1] / lat[0]
    # Fig 7: res4a_branch1 on 4 chiplets, tiling found adjacent and kept
    l = net["res4a_branch1"]
    b = search(l, arch, 4, max(S, 1000), seed=7, binding=FIG7[0], **kw)
    out["fig7 res4a_branch1"] = evaluate(l, arch, b.mapping, binding=FIG7[1],
                                         placement=start).latency_cycles / b.latency_cycles
    out["fig7 mapping"] = b.mapping.short()
    # headline + Fig 10 / 12 (every layer on 32 chiplets)
    layers = list(net.values())
    t0 = time.time()
    run = run_network(layers, arch, 32, "all", S, seed=0, jobs=jobs, dataflow=df, placement_start=start)
    out["search_seconds"] = time.time() - t0
    f = arch.pe_clock_ghz * 1e6
    out["headline ms"] = run["total_cycles"] / f
    out["uniform ms"] = run["total_uniform_cycles"] / f
    out["chiplets used"] = {r["layer"].name: r["uniform"].n_chiplets for r in run["rows"]}
    nu, pl = {}, {}
    for row in run["rows"]:
        L, b32 = row["layer"], row["per_count"].get(32)
        if b32 is None:
            continue
        n = row["nonuniform"] if row["uniform"] is b32 else nonuniform(L, arch, b32)
        nu[L.name] = b32.latency_cycles / n.latency_cycles - 1
        seq = evaluate(L, arch, b32.mapping, placement="sequential")
        pl[L.name] = seq.latency_cycles / placement(L, arch, seq).latency_cycles - 1
    top_nu, top_pl = max(nu, key=nu.get), max(pl, key=pl.get)
    out["fig10 max"] = (top_nu, nu[top_nu])
    out["fig12 max"] = (top_pl, pl[top_pl])
    out["fig12 median"] = sorted(pl.values())[len(pl) // 2]
    out["fig12 res4a_branch1 (model tiling)"] = pl.get("res4a_branch1")
    try:
        b4 = search(l, arch, 32, S, seed=0, splits=[(32, 1, 1, 1)], **(kw | {"placement": "sequential"}))
        out["fig12 res4a_branch1 (K over 32)"] = b4.latency_cycles / placement(l, arch, b4).latency_cycles - 1
    except MappingError:
        out["fig12 res4a_branch1 (K over 32)"] = None
    return out


def takeapart(arch, net, S: int, jobs: int) -> dict:
    """Why the premise that gives Fig 7 (chip-kc) misses the headline and Fig 6: one term at a time."""
    out = {}
    layers = list(net.values())
    f = arch.pe_clock_ghz * 1e6
    S4 = max(100, S // 4)
    print(f"take-apart of chip-kc ({S4} samples/layer for the network runs)")
    for opt in ("nonuniform", "placement", "pipeline", "all"):
        r = run_network(layers, arch, 32, opt, S4, seed=0, jobs=jobs, dataflow="chip-kc")
        out[f"opt {opt}"] = {"uniform_ms": r["total_uniform_cycles"] / f, "opt_ms": r["total_cycles"] / f}
        print(f"  chip-kc {opt:10s} alone: uniform {r['total_uniform_cycles'] / f:.3f} -> {r['total_cycles'] / f:.3f} ms")
    for g in (25.0, 50.0, 100.0):
        r = run_network(layers, arch.with_(grs_gbps=g), 32, "all", S4, seed=0, jobs=jobs, dataflow="chip-kc")
        out[f"grs {g:g}"] = {"uniform_ms": r["total_uniform_cycles"] / f, "all_ms": r["total_cycles"] / f}
        print(f"  chip-kc at {g:g} Gb/s: uniform {r['total_uniform_cycles'] / f:.3f}, all {r['total_cycles'] / f:.3f} ms")
    for name, n, binding, seed in (("res4a_branch1", 4, FIG7[0], 7), ("res3a_branch1", 32, "row-major", 6),
                                   ("res3a_branch2b", 32, "row-major", 6)):
        fr = search(net[name], arch, n, S, seed=seed, binding=binding)
        kc = search(net[name], arch, n, S, seed=seed, binding=binding, chip_pq=False)
        out[f"{name} on {n}: chip-kc / free latency"] = kc.latency_cycles / fr.latency_cycles
        print(f"  {name} on {n} chiplets: best K/C-split tiling / best tiling = {kc.latency_cycles / fr.latency_cycles:.3f}"
              f" ({kc.mapping.short()} vs {fr.mapping.short()})")
    return out


ROWS = [  # (label, key, paper, formatter)
    ("headline all opts (ms)", "headline ms", "0.50 (0.425-0.575)", lambda v: f"{v:.3f}"),
    ("uniform baseline (ms)", "uniform ms", "-", lambda v: f"{v:.3f}"),
    ("Fig5 res2a_branch2b best n; t32/t8", "fig5 res2a_branch2b", "8; >1",
     lambda v: f"{v['best_n']}; {v['t32/t8']:.2f}"),
    ("Fig5 res2a_branch1 best n; t8/t1; t32/t8", "fig5 res2a_branch1", "8-32; <1; ~1",
     lambda v: f"{v['best_n']}; {v['t8/t1']:.2f}; {v['t32/t8']:.2f}"),
    ("Fig5 res5a_branch2b best n; t32/t8", "fig5 res5a_branch2b", "32; <1",
     lambda v: f"{v['best_n']}; {v['t32/t8']:.2f}"),
    ("Fig6 res3a_branch1 decrease", "fig6 res3a_branch1", "0.27", lambda v: f"{v:.3f}"),
    ("Fig6 res3a_branch2b decrease", "fig6 res3a_branch2b", "0.05", lambda v: f"{v:.3f}"),
    ("Fig7 far / adjacent", "fig7 res4a_branch1", "2.5 (2.0-3.0)", lambda v: f"{v:.3f}"),
    ("Fig10 max nonuniform gain", "fig10 max", "0.15 (0.08-0.20)", lambda v: f"{v[1]:.3f} {v[0]}"),
    ("Fig12 max placement gain (seq fill)", "fig12 max", "0.15 (0.08-0.20)", lambda v: f"{v[1]:.3f} {v[0]}"),
    ("Fig12 median placement gain", "fig12 median", "-", lambda v: f"{v:.3f}"),
    ("Fig12 res4a_branch1, K over 32", "fig12 res4a_branch1 (K over 32)", "0.05 (0.03-0.08)",
     lambda v: "n/a" if v is None else f"{v:.3f}"),
    ("search seconds (wall, whole net)", "search_seconds", "< 60 CPU", lambda v: f"{v:.1f}"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--takeapart", action="store_true",
                    help="also the chip-kc take-apart: each optimisation alone, NoP rate sweep, K/C vs P/Q "
                         "chiplet splits on 4 and 32 chiplets (S/4 samples for the network runs)")
    ap.add_argument("--dataflows", default=DEFAULT,
                    help="comma list of premises; 'name@start' runs it from another data start state "
                         "(model.py homes, e.g. free@row = Fig 11b read literally)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    arch = load_arch(bench_dir=OUT)
    net = {l.name: l for l in load_network("resnet50")}
    dfs = args.dataflows.split(",")
    res = {}
    for df in dfs:
        print(f"[{df}] ...", flush=True)
        name, _, start = df.partition("@")
        res[df] = figures(name, arch, net, args.samples, args.jobs, start or "local")
    w = 40
    print(f"\n{'figure':{w}s} {'paper':>20s} " + " ".join(f"{d:>22s}" for d in dfs))
    table = []
    for label, key, paper, fmt in ROWS:
        cells = [fmt(res[d][key]) for d in dfs]
        table.append({"figure": label, "paper": paper, **dict(zip(dfs, cells))})
        print(f"{label:{w}s} {paper:>20s} " + " ".join(f"{c:>22s}" for c in cells))
    if args.takeapart:
        doc_ta = takeapart(arch, net, args.samples, args.jobs)
    doc = {"samples_per_layer": args.samples, "dataflows": {d: DATAFLOWS[d.partition("@")[0]] for d in dfs}, "table": table,
           "results": res, "note": __doc__}
    if args.takeapart:
        doc["takeapart_chip_kc"] = doc_ta
    tag = "" if args.samples >= 1000 else f"_s{args.samples}"
    tag += "" if args.dataflows == DEFAULT else "_" + args.dataflows.replace(",", "_").replace("@", "-")
    p = OUT / f"simba_premises{tag}.json"
    p.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {p}")


if __name__ == "__main__":
    main()
