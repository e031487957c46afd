"""Why the Simba model keeps gaining past 8 chiplets (issue 14; seed paper Sec. 4.3, Fig. 5).

For res2a_branch2b and res2a_branch1 at 1/2/4/8/16/32 chiplets, the best tiling the mapper finds
(runtime placement, premise of the headline) is taken apart on its critical reduction chain:

  latency = own(slowest member) + chain psum hops + tail (PE-chain drain + output delivery)
            + sync + setup
  own     = first-tile latency + (t_in + comp)/steps + (steps - 1) x period
  period  = max(comp, t_in, t_ps, t_oa, t_pechain, ctrl) / steps, credit loops

and each term is printed in PE cycles (compute = RTL tile cycles; t_in = Global PE -> PE
activation multicast over NoP/NoC; t_ps = cross-chiplet partial sums; t_oa = output activations
to their Global PE homes; sync/setup = package barrier and controller configuration).  Weights
are preloaded (Sec. 4.1), so no weight-load term exists.
Three premise views by default (VIEWS): ``free@local`` (the headline's), ``chip-kc@local``
(chiplets split K/C, i.e. weights, as Sec. 4.3's explanation implies) and ``free@row`` (inputs
preloaded per Fig. 11b, Sec. 4.1's measurement start); ``--dataflow/--placement`` picks one.
``--arch k=v``: Arch overrides.  ``--figures S``: the take-apart of every figure entry
(simba_premises.figures, premise ``free``) with each stop-22 term switched on alone
(TERM_ROWS: nop_port_shared, barrier_arrive_serial, psum_chain_serial), S samples per layer.
Writes build/bench/simba_scaling.json.  Run: ``.venv/bin/python bench/simba_scaling.py
[--samples N] [--figures S] [--dataflow D --placement P] [--arch name=value ...]``.
Left out: res5a_branch2b (scales to 32 in model and paper alike).
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import binding_for, dataflow_kwargs, search
from tessera.sim_models.simba.model import build_structure, evaluate_batch

OUT = Path(os.environ.get("TESSERA_BUILD", Path(__file__).resolve().parent.parent / "build")) / "bench"
COUNTS = [1, 2, 4, 8, 16, 32]
LAYERS = ("res2a_branch2b", "res2a_branch1")


def decompose(layer, arch, res) -> dict:
    """Critical-path terms (PE cycles) of one LayerResult's mapping."""
    mp = res.mapping
    st = build_structure(layer, arch, mp.kc, mp.cc, mp.pc, mp.qc, binding_for(res.binding, mp.n_chiplets),
                         res.placement, mp.k_ext, mp.p_ext)
    r = evaluate_batch(st, arch, [mp.kp], [mp.cp], [mp.pp], [mp.qp], [mp.p1], [mp.q1])
    t = r.terms
    tot = t["chain_max"][0] + t["chain_ps"][0] + t["tail"][0]
    g = int(np.argmax(tot))                                  # critical chain
    members = np.flatnonzero(t["groups"][g])
    i = int(members[np.argmax(t["own"][0, members])])        # its slowest member
    steps = float(t["steps"][0, i])
    per = {k: float(t[k][0, i]) / steps for k in ("comp", "t_in", "t_ps", "t_oa", "t_port", "t_pechain", "ctrl")}
    bound = max(per, key=per.get)
    d = {"mapping": mp.short(), "latency": float(r.latency[0]), "steps": steps,
         **{f"{k}/step": v for k, v in per.items()}, "period": float(t["period"][0, i]), "period_bound": bound,
         "first_tile": float(t["lat_first"][i]) if np.ndim(t["lat_first"]) == 1 else float(t["lat_first"][0, i]),
         "own": float(t["own"][0, i]), "chain_psum": float(t["chain_ps"][0, g]), "tail": float(t["tail"][0, g]),
         "sync": float(t["sync"]), "setup": float(t["setup"][0]), "comp_total": float(t["comp"][0, i]),
         "nop_kB": float(r.link_bytes[0].sum()) / 1e3}
    return d


COLS = ("latency", "steps", "comp/step", "t_in/step", "t_ps/step", "t_oa/step", "t_port/step", "ctrl/step", "period",
        "first_tile", "own", "chain_psum", "tail", "sync", "setup", "nop_kB")


def table(arch, net, samples, dataflow, layers=LAYERS, counts=COUNTS, placement="local") -> dict:
    out = {}
    for name in layers:
        per = search(net[name], arch, counts, samples, seed=5, keep_per_count=True, placement=placement,
                     **dataflow_kwargs(dataflow))
        rows = {n: decompose(net[name], arch, per[n]) for n in sorted(per)}
        out[name] = rows
        print(f"{name} [{dataflow}, {placement} placement]  (PE cycles; latency normalised to 1 chiplet in 'norm')")
        print("   N  norm  " + " ".join(f"{c:>10s}" for c in COLS) + "  bound  mapping")
        for n, d in rows.items():
            print(f"  {n:2d} {d['latency'] / rows[min(rows)]['latency']:.3f} "
                  + " ".join(f"{d[c]:10.1f}" for c in COLS) + f"  {d['period_bound']:8s} {d['mapping']}")
    return out


#: the take-apart (one term at a time from today's model; each switch in simba_arch.json)
TERM_ROWS = [
    ("today (new terms off)", {}),
    ("+ NoP router port shared by all NoP traffic (nop_port_shared)", {"nop_port_shared": 1}),
    ("+ barrier ARRIVEs one per NoC cycle at the master (barrier_arrive_serial)", {"barrier_arrive_serial": 1}),
    ("+ reduction chain in lock-step per tile (psum_chain_serial; experiment)", {"psum_chain_serial": 1}),
    ("all three", {"nop_port_shared": 1, "barrier_arrive_serial": 1, "psum_chain_serial": 1}),
]


def figure_takeapart(base, net, samples: int, jobs: int, rows=TERM_ROWS) -> list:
    """Every figure of simba_premises.figures (premise ``free``, runtime baseline) per term row,
    plus Fig 5 res2a_branch2b under the chip-kc premise (chiplets split weights, Sec. 4.3's
    reading) and under the Fig. 11b start (free@row)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import simba_premises as SP
    out = []
    for label, kw in rows:
        arch = base.with_(**kw) if kw else base
        r = SP.figures("free", arch, net, samples, jobs)
        f5 = {}
        for df, start in (("chip-kc", "local"), ("free", "row")):
            per = search(net["res2a_branch2b"], arch, COUNTS, samples, seed=5, keep_per_count=True,
                         placement=start, **dataflow_kwargs(df))
            t = {n: per[n].latency_cycles for n in per}
            f5[f"{df}@{start}"] = [min(t, key=t.get), round(t[32] / t[8], 3)]
        row = {"row": label, "headline ms": round(r["headline ms"], 4), "uniform ms": round(r["uniform ms"], 4),
               "F5 r2a_b2b best n; t32/t8": [r["fig5 res2a_branch2b"]["best_n"], round(r["fig5 res2a_branch2b"]["t32/t8"], 3)],
               "F5 r2a_b1 best n; t32/t8": [r["fig5 res2a_branch1"]["best_n"], round(r["fig5 res2a_branch1"]["t32/t8"], 3)],
               "F5 r5a_b2b best n; t32/t8": [r["fig5 res5a_branch2b"]["best_n"], round(r["fig5 res5a_branch2b"]["t32/t8"], 3)],
               "F5 r2a_b2b chip-kc": f5["chip-kc@local"], "F5 r2a_b2b free@row": f5["free@row"],
               "F6 1x1 / 3x3": [round(r["fig6 res3a_branch1"], 4), round(r["fig6 res3a_branch2b"], 4)],
               "F7": round(r["fig7 res4a_branch1"], 3),
               "F10": [r["fig10 max"][0], round(r["fig10 max"][1], 4)],
               "F12 seq": [r["fig12 max"][0], round(r["fig12 max"][1], 3)],
               "F12 r4a_b1 K/32": None if r["fig12 res4a_branch1 (K over 32)"] is None
               else round(r["fig12 res4a_branch1 (K over 32)"], 4),
               "search s": round(r["search_seconds"], 1)}
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def parse_over(items):
    kw = {}
    for it in items or []:
        k, v = it.split("=", 1)
        kw[k] = float(v) if "." in v else int(v)
    return kw


#: premise views of the decomposition: (dataflow, placement)
VIEWS = [("free", "local"), ("chip-kc", "local"), ("free", "row")]

FINDING = (
    "Under the headline premise (free dataflow, runtime 'local' homes) every best tiling of res2a_branch2b and "
    "res2a_branch1 on 2..32 chiplets splits only P/Q across chiplets (kc = cc = 1): weights are replicated, no "
    "partial sum crosses a chiplet (t_ps = 0).  On few chiplets the activations do not fit the used chiplets' "
    "Global PEs (64 KB each) and spill to neighbours over the NoP (nop_kB: res2a_branch2b 727 kB on 1 chiplet, 0 "
    "from 8; res2a_branch1 2724 kB on 1, 885 kB on 8, 0 from 16), which slows small counts and steepens the curve "
    "(res2a_branch1 8 -> 16 chiplets: 4.4x when its 802 kB of outputs start to fit).  From 8 / 16 chiplets on, "
    "each chiplet's input slice is in its own Global PE and its outputs stay there: nothing crosses the NoP, "
    "compute per chiplet falls as 1/N and the only terms that grow with N "
    "are sync (0 -> ~400 cycles at 32) and the barrier.  The paper's communication mechanisms (PE-to-PE psum "
    "chain, Global PE multicast trees, shared GRS links, the NoP router port) have no traffic to act on.  For "
    "t32 > t8 an N-proportional cost of ~0.4 us per chiplet per layer would be needed (experiment below: "
    "chiplet_sync_ns 450 gives t32/t8 ~1.04, but the best count is then 16, not 8; the sourced barrier ARRIVE "
    "serialisation is 1 NoC cycle, ~1 ns, per chiplet).  Fig 5's turn-over appears only when "
    "bandwidth stops growing with N: inputs starting in a fixed set of Global PEs (Fig. 11b: free@row gives "
    "res2a_branch2b best at 8, t32/t8 ~1.12, limited by t_in / t_oa of the top-row homes); with chiplets "
    "splitting weights (chip-kc, Sec. 4.3's 'number of weights ... so small') the model is NoP-bound but still "
    "gains past 8 because psum and multicast load spread over more links as N grows.")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--dataflow", default=None, help="one premise only (default: the VIEWS)")
    ap.add_argument("--placement", default="local", help="data homes with --dataflow (model.py): local, sequential, row")
    ap.add_argument("--arch", nargs="*", metavar="NAME=VALUE")
    ap.add_argument("--figures", type=int, default=0, metavar="SAMPLES",
                    help="also the figure take-apart per term (TERM_ROWS), SAMPLES per layer")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(OUT / "simba_scaling.json"))
    a = ap.parse_args(argv)
    arch = load_arch(bench_dir=OUT)
    over = parse_over(a.arch)
    if over:
        arch = arch.with_(**over)
    net = {l.name: l for l in load_network("resnet50")}
    views = [(a.dataflow, a.placement)] if a.dataflow else VIEWS
    doc = {"samples": a.samples, "overrides": over, "columns": list(COLS), "finding": FINDING,
           "views": {f"{df}@{pl}": table(arch, net, a.samples, df, placement=pl) for df, pl in views}}
    if not a.dataflow:
        # what it would take (experiment, NOT a model term): an N-proportional per-layer cost under
        # the headline premise, via the unsourced chiplet_sync_ns (0 in simba_arch.json)
        sweep = {}
        for ns in (0.0, 300.0, 450.0, 600.0):
            per = search(net["res2a_branch2b"], arch.with_(chiplet_sync_ns=ns), COUNTS, a.samples, seed=5,
                         keep_per_count=True)
            t = {n: per[n].latency_cycles for n in per}
            sweep[ns] = {"best_n": min(t, key=t.get), "t32/t8": t[32] / t[8],
                         "norm": {n: round(t[n] / t[1], 4) for n in sorted(t)}}
            print(f"experiment chiplet_sync_ns={ns:g}: res2a_branch2b best {sweep[ns]['best_n']}, "
                  f"t32/t8 {sweep[ns]['t32/t8']:.3f}, " + " ".join(f"{n}:{v:.3f}" for n, v in sweep[ns]["norm"].items()))
        doc["what_it_would_take (chiplet_sync_ns, unsourced)"] = sweep
    if a.figures:
        doc["takeapart"] = figure_takeapart(arch, net, a.figures, a.jobs)
    if not a.dataflow:
        print("finding:", FINDING)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, indent=1))
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
