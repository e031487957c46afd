"""Reproduce the Simba characterisation (seed paper Sec. 4-5) with the package model.

Prints every figure and writes build/bench/simba_repro.json plus PNG plots under build/bench/:
Fig 5 (latency vs chiplets), Fig 6 (NoP bandwidth), Fig 7 (NoP latency / chiplet placement),
Fig 10 (non-uniform partitioning), Fig 12 (data placement), headline TOPS and ResNet-50 latency.
Each entry: model value, paper value (where the paper gives one) and the difference.
Usage: .venv/bin/python bench/simba_repro.py [--samples N] [--jobs J]
"""
from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from tessera.sim_models.simba.arch import load_arch  # noqa: E402
from tessera.sim_models.simba.layers import load_network  # noqa: E402
from tessera.sim_models.simba.mapper import search  # noqa: E402
from tessera.sim_models.simba.model import evaluate  # noqa: E402
from tessera.sim_models.simba.network import run_network  # noqa: E402
from tessera.sim_models.simba.report import network_dict, plot_layers  # noqa: E402

OUT = Path("build/bench")
COUNTS = [1, 2, 4, 8, 16, 32]
entries = []


def entry(name, model, paper=None, unit="", note=""):
    e = {"name": name, "model": model, "paper": paper, "unit": unit}
    if isinstance(paper, (int, float)) and isinstance(model, (int, float)) and paper:
        e["diff"] = model - paper
        e["rel_diff"] = (model - paper) / paper
    if note:
        e["note"] = note
    entries.append(e)
    p = "" if paper is None else f"  paper {paper}"
    d = f"  diff {e['rel_diff']:+.1%}" if "rel_diff" in e else ""
    v = f"{model:.4g}" if isinstance(model, float) else str(model)
    print(f"  {name:48s} model {v} {unit}{p}{d}{'  (' + note + ')' if note else ''}")


def cpu_seconds() -> float:
    """User+system CPU of this process and its reaped workers (wall time is meaningless on a
    shared, loaded machine)."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    arch = load_arch(bench_dir=OUT)                       # Sec. 4.1 point: 1.03 GHz, 11 Gb/s
    net = {l.name: l for l in load_network("resnet50")}
    S = args.samples
    doc = {"samples_per_layer": S, "arch_provenance": {k: str(v) for k, v in arch.provenance.items()}}

    # ---------- Fig 5 ----------
    print("Fig 5: latency vs chiplets, normalised to the best tiling on the fewest chiplets that fit")
    fig5 = {}
    for name in ("res2a_branch1", "res2a_branch2b", "res5a_branch2b"):
        per = search(net[name], arch, COUNTS, S, seed=5, keep_per_count=True)
        ref_n = min(per)
        ref = per[ref_n].latency_cycles
        fig5[name] = {"reference_chiplets": ref_n,
                      "normalised": {n: per[n].latency_cycles / ref for n in sorted(per)},
                      "mapping": {n: per[n].mapping.short() for n in sorted(per)}}
        best_n = min(per, key=lambda n: per[n].latency_cycles)
        print(f"  {name}: " + " ".join(f"{n}:{v:.3f}" for n, v in fig5[name]["normalised"].items()))
        paper_best = {"res2a_branch1": "8-32 (flat beyond 8)", "res2a_branch2b": "8 (degrades at 32)",
                      "res5a_branch2b": "32"}[name]
        entry(f"fig5 {name} best chiplet count", best_n, paper_best)
        entry(f"fig5 {name} speedup 32 vs ref", ref / per[32].latency_cycles, None, "x",
              f"ref = {ref_n} chiplet(s)")
    doc["fig5"] = fig5
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, d in fig5.items():
        ax.plot(list(d["normalised"]), list(d["normalised"].values()), "o-",
                label=f"{name} (ref {d['reference_chiplets']})")
    ax.set_xscale("log", base=2); ax.set_xlabel("chiplets"); ax.set_ylabel("normalised latency")
    ax.set_title("Fig 5 (model)"); ax.legend(fontsize=7); fig.tight_layout()
    fig.savefig(OUT / "simba_fig5.png", dpi=110); plt.close(fig)

    # ---------- Fig 6 ----------
    print("Fig 6: NoP bandwidth sensitivity at 32 chiplets (GRS 11 -> 25 Gb/s per pin)")
    fig6 = {}
    rates = [11, 14, 18, 21, 25]
    for name, paper in (("res3a_branch1", 0.27), ("res3a_branch2b", 0.05)):
        lat = [search(net[name], arch.with_(grs_gbps=float(g)), 32, S, seed=6).latency_cycles for g in rates]
        fig6[name] = {"gbps": rates, "normalised": [x / lat[0] for x in lat]}
        entry(f"fig6 {name} latency decrease at 25 Gb/s", 1 - lat[-1] / lat[0], paper, "fraction")
    # sensitivity: other start states / dataflows (not the paper's baseline; see the note)
    for label, kw in (("distributed IA/OA start", {"placement": "distributed"}),
                      ("P/Q also spatial", {"spatial_pq": True})):
        for name in ("res3a_branch1", "res3a_branch2b"):
            lat = [search(net[name], arch.with_(grs_gbps=float(g)), 32, S, seed=6, **kw).latency_cycles
                   for g in (11, 25)]
            fig6[f"{name} ({label})"] = {"gbps": [11, 25], "normalised": [1.0, lat[1] / lat[0]]}
            print(f"  sensitivity ({label}): {name} latency decrease at 25 Gb/s {1 - lat[1] / lat[0]:.3f}")
    doc["fig6"] = fig6
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, d in fig6.items():
        if "(" in name:
            continue
        ax.plot([r / 11 for r in d["gbps"]], d["normalised"], "o-", label=name)
    ax.set_xlabel("NoP bandwidth (x 11 Gb/s)"); ax.set_ylabel("normalised latency")
    ax.set_title("Fig 6 (model), 32 chiplets"); ax.legend(); fig.tight_layout()
    fig.savefig(OUT / "simba_fig6.png", dpi=110); plt.close(fig)

    # ---------- Fig 7 ----------
    print("Fig 7: res4a_branch1 on 4 chiplets, same tiling, chiplets moved apart")
    configs = [(0, 1, 6, 7), (0, 1, 2, 3), (0, 2, 12, 14), (0, 3, 18, 21), (0, 4, 24, 28), (0, 5, 30, 35)]
    l = net["res4a_branch1"]
    base = search(l, arch, 4, S, seed=7, binding=configs[0])
    m = __import__("tessera.sim_models.simba.topology", fromlist=["mesh"]).mesh(6, 6)
    fig7 = []
    for cfg in configs:
        r = evaluate(l, arch, base.mapping, binding=cfg)
        far = int(max(m.hops[a, b] for a in cfg for b in cfg))
        fig7.append({"chiplets": list(cfg), "max_hops": far, "normalised": r.latency_cycles / base.latency_cycles})
        print(f"  {cfg} longest {far:2d} hops: {fig7[-1]['normalised']:.3f}")
    entry("fig7 res4a_branch1 slowdown at farthest placement", fig7[-1]["normalised"], 2.5, "x",
          f"{fig7[-1]['max_hops']} hops max on a 6x6 mesh; paper: 12 hops")
    sweep = []
    for hop in (20, 60, 120):
        a2 = arch.with_(nop_hop_cycles=hop)
        b2 = search(l, a2, 4, S, seed=7, binding=configs[0])
        norm = [evaluate(l, a2, b2.mapping, binding=cfg).latency_cycles / b2.latency_cycles for cfg in configs]
        sweep.append({"nop_hop_cycles": hop, "mapping": b2.mapping.short(), "normalised": norm,
                      "normalised_far": norm[-1]})
        print(f"  sensitivity: nop_hop_cycles={hop}: " + " ".join(f"{x:.3f}" for x in norm))
    doc["fig7"] = {"mapping": base.mapping.short(), "bars": fig7, "hop_latency_sweep": sweep}
    fig, ax = plt.subplots(figsize=(7, 4))
    w = 0.8 / len(sweep)
    for k, sw in enumerate(sweep):
        ax.bar([i + (k - 1) * w for i in range(len(configs))], sw["normalised"], w,
               label=f"{sw['nop_hop_cycles']} cycles/NoP hop" + (" (default)" if k == 0 else ""))
    ax.set_xticks(range(len(configs)), [f"{f['max_hops']} hops" for f in fig7])
    ax.set_xlabel("active chiplets' longest distance"); ax.set_ylabel("latency / adjacent")
    ax.set_title("Fig 7 (model): res4a_branch1 on 4 chiplets (paper: up to 2.5x)"); ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "simba_fig7.png", dpi=110); plt.close(fig)

    # ---------- whole network, Fig 10 / 12 ----------
    print(f"ResNet-50 at 32 chiplets, all optimisations, {S} samples/layer, {args.jobs} jobs")
    t0, c0 = time.time(), cpu_seconds()
    run = run_network(list(net.values()), arch, 32, "all", S, seed=0, jobs=args.jobs)
    t_all, c_all = time.time() - t0, cpu_seconds() - c0
    nd = network_dict(run, arch)
    nd["search_seconds"] = t_all
    doc["network_1p03GHz"] = nd
    plot_layers(nd, OUT / "simba_resnet50_layers.png")
    sp_nu = {l["name"]: l["uniform"]["latency_cycles"] / l["nonuniform"]["latency_cycles"] for l in nd["layers"]}
    sp_pl = {l["name"]: l["uniform"]["latency_cycles"] / l["placement"]["latency_cycles"] for l in nd["layers"]}
    doc["fig10_nonuniform_speedup"] = sp_nu
    doc["fig12_placement_speedup"] = sp_pl
    top_nu = max(sp_nu, key=sp_nu.get)
    top_pl = max(sp_pl, key=sp_pl.get)
    entry("fig10 max non-uniform partitioning speedup", sp_nu[top_nu] - 1, 0.15, "fraction", top_nu)
    entry("fig10 layers improved >1%", sum(v > 1.01 for v in sp_nu.values()), None, "layers")
    entry("fig12 max data placement speedup", sp_pl[top_pl] - 1, 0.15, "fraction", top_pl)
    entry("fig12 res4a_branch1 placement speedup", sp_pl["res4a_branch1"] - 1, 0.05, "fraction")
    entry("fig12 median placement speedup", sorted(sp_pl.values())[len(sp_pl) // 2] - 1, None, "fraction")
    fig, ax = plt.subplots(figsize=(14, 4))
    names = list(sp_nu)
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], [sp_nu[n] for n in names], 0.4, label="non-uniform partitioning (Fig 10)")
    ax.bar([i + 0.2 for i in x], [sp_pl[n] for n in names], 0.4, label="data placement (Fig 12)")
    ax.axhline(1.0, color="k", lw=0.5); ax.set_xticks(list(x), names, rotation=90, fontsize=6)
    ax.set_ylabel("speedup vs best uniform tiling"); ax.legend(); fig.tight_layout()
    fig.savefig(OUT / "simba_fig10_fig12.png", dpi=110); plt.close(fig)
    entry("search CPU time, ResNet-50 'all' (54 layers)", c_all, None, "s",
          f"{S} samples/layer; wall {t_all:.1f} s with {args.jobs} processes on a shared machine")
    t0, c0 = time.time(), cpu_seconds()
    run_u = run_network(list(net.values()), arch, 32, "uniform", S, seed=0, jobs=args.jobs)
    entry("search CPU time, ResNet-50 'uniform'", cpu_seconds() - c0, None, "s",
          f"wall {time.time() - t0:.1f} s with {args.jobs} processes")
    assert abs(run_u["total_cycles"] - run["total_uniform_cycles"]) < 1e-6 * run_u["total_cycles"]

    # ---------- headline ----------
    print("Headline")
    entry("peak TOPS, 1 chiplet @ 2.0 GHz", arch.peak_tops(1, 2.0), 4.01, "TOPS")
    entry("peak TOPS, 36 chiplets @ 1.8 GHz", arch.peak_tops(36, 1.8), 127.8, "TOPS")
    f = arch.pe_clock_ghz * 1e3
    entry("ResNet-50 latency, uniform, 1.03 GHz / 11 Gb/s", run["total_uniform_cycles"] / f / 1e3, None, "ms")
    for key, label in (("nonuniform", "non-uniform partitioning only"), ("placement", "data placement only"),
                       ("best", "partitioning + placement (no pipelining)")):
        entry(f"ResNet-50 latency, {label}, 1.03 GHz", sum(l[key]["latency_us"] for l in nd["layers"]) / 1e3,
              None, "ms")
    entry("ResNet-50 latency, all opts, 1.03 GHz / 11 Gb/s", nd["total_us"] / 1e3, 0.50, "ms")
    run_pq = run_network(list(net.values()), arch, 32, "all", S, seed=0, jobs=args.jobs, spatial_pq=True)
    doc["network_1p03GHz_spatial_pq"] = network_dict(run_pq, arch)
    entry("ResNet-50 latency, all opts, 1.03 GHz, P/Q also spatial", run_pq["total_cycles"] / f / 1e3, 0.50,
          "ms", "issue option --spatial-pq; Listing 1 keeps P/Q temporal")
    fast = load_arch(bench_dir=OUT, pe_clock_ghz=1.8, grs_gbps=25.0)
    run_f = run_network(list(net.values()), fast, 32, "all", S, seed=0, jobs=args.jobs)
    ndf = network_dict(run_f, fast)
    doc["network_1p8GHz"] = ndf
    entry("ResNet-50 latency, all opts, 1.8 GHz / 25 Gb/s", ndf["total_us"] / 1e3, 0.50, "ms")
    entry("ResNet-50 images/s, all opts, 1.8 GHz / 25 Gb/s", ndf["images_per_s"], 1988, "images/s")
    entry("ResNet-50 images/s, all opts, 1.03 GHz / 11 Gb/s", nd["images_per_s"], 1988, "images/s")
    entry("ResNet-50 energy per image, 1.03 GHz / 0.72 V", nd["energy_uj"], None, "uJ")
    entry("ResNet-50 effective TOPS/W, 1.03 GHz / 0.72 V",
          2 * sum(l["macs"] for l in nd["layers"]) / (nd["energy_uj"] * 1e-6) / 1e12, None, "TOPS/W",
          "paper: up to 6.1 TOPS/W for the package, operating point not stated")
    doc["entries"] = entries
    doc["note"] = NOTE
    (OUT / "simba_repro.json").write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {OUT / 'simba_repro.json'} and simba_fig5/6/7/fig10_fig12/resnet50_layers.png")


NOTE = """Differences from the paper and why:
- The paper measures silicon; this is an analytical model whose NoP/NoC hop latencies, NoC width,
  sync cost and energy split are stated assumptions (data/simba_arch.json).  PEs are ideal apart from
  buffer-bounded tiling and padding (pe_utilization 1.0 unless the RTL bench provides one), so
  communication is the dominant non-ideal term at 32 chiplets.
- Dataflow: the mapper follows Listing 1 (Simba's baseline dataflow): K and C are parallel_for across
  chiplets and PEs, P and Q temporal (p3, q3, p2, q2).  `--spatial-pq` (the issue's "optionally P and
  Q") is reported as a sensitivity: it gives 0.56 ms at 1.03 GHz but lets 32-chiplet layers keep
  their traffic local, which contradicts the paper's broadcast / reduction-group narrative (Sec. 5.2).
- Fig 5: res5[a-c]_branch2b needs 2.36 MB of weights; with weights preloaded in 32 KB PE buffers (as
  measured, Sec. 4.1) it fits on >= 8 chiplets only, so its curve is normalised to 8 chiplets.
  With K/C-only tilings the 11 Gb/s NoP limits res2a_branch1/branch2b to ~2x (paper: gains to 8).
- Fig 6: at 32 chiplets every K/C tiling of both layers is NoP-bandwidth bound: a K split broadcasts
  the whole IA (~100 KB, one 5.34 B/cycle link into each receiver at 11 Gb/s), a C split sends 24-bit
  partial sums chiplet to chiplet.  So both gain ~50 % from 11 -> 25 Gb/s; neither a distributed start
  state nor P/Q splits change that (printed sensitivities).  The link bandwidth follows Sec. 3.2
  exactly (4 TX macros x 4 lanes per chiplet, one per mesh direction = 100 GB/s at 25 Gb/s).  The
  paper's x-axis range is not in the text; a fully bandwidth-bound layer gaining 27 % would mean a
  ~1.4x bandwidth step, so the 11 -> 25 Gb/s sweep here is an assumption.
- Fig 7: a 6x6 mesh has at most 10 hops between chiplets (the paper quotes 12).  The Listing 1 tiling
  of res4a_branch1 on 4 chiplets moves its IA and OA over the NoP, so moving the chiplets apart costs
  hop latency per tile credit round trip and more shared links: 1.84x at 20 cycles/hop (assumption;
  60 cycles/hop gives 2.4x), paper 2.5x.
- Fig 10: the K/C tilings at 32 chiplets are bound by delivering the same IA to every chiplet, which
  shifting K work cannot shorten; non-uniform partitioning gains < 1 % (paper up to 15 %).  With P/Q
  splits (previous default) it reached ~12 %.
- Fig 12: the sequential baseline fills the first Global PEs (Fig 11b: ~400 KB fills the top row); the
  greedy placement moves IA homes to the centre and spreads OA: median 13 %, max ~60 % (paper <= 15 %),
  res4a_branch1 8 % (paper 5 %).
- Headline: the paper does not give the operating point of its 0.50 ms / 1988 images/s; both the
  Sec. 4.1 point and the 1.8 GHz / 25 Gb/s point are reported.  Per-layer runs are summed (plus the
  pipelined blocks); inter-layer activation movement and pooling are not modelled."""



if __name__ == "__main__":
    main()
