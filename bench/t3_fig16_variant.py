"""T3 (Pati et al., ASPLOS'24) Fig 16 set under one System variant: take-apart helper for §6.1.

    python bench/t3_fig16_variant.py [name=value ...]     e.g.  wg_retire=True mca_starve_limit=64

Each ``name=value`` overrides a ``config.System`` field (value parsed as a Python literal, else kept as
a string).  Prints every sub-layer's T3 / T3-MCA / Ideal-GEMM-RS-Overlap speedup and the geomean/max
next to the paper's, and writes ``build/bench/t3_fig16_variant.json``.  The reference run of the model
is ``bench/t3_repro.py``; this script only answers "what does the set look like if X changes".
"""
from __future__ import annotations

import ast
import json
import sys
import time
from pathlib import Path

from tessera.sim_models.t3 import config, study

CFGS = ("t3", "t3-mca", "ideal")
PAPER = {"t3": ("fig16_t3_geomean", "fig16_t3_max"), "t3-mca": ("fig16_t3mca_geomean", "fig16_t3mca_max"),
         "ideal": ("fig16_ideal_geomean", "fig16_ideal_max")}


def parse(argv) -> dict:
    kw = {}
    for a in argv:
        if "=" not in a:
            raise SystemExit(f"t3_fig16_variant: expected name=value, got {a!r}")
        k, v = a.split("=", 1)
        try:
            kw[k] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            kw[k] = v
    return kw


def main(argv) -> int:
    kw = parse(argv)
    sysm = config.system(**kw)
    P = config.paper()
    t0 = time.time()
    rows = [study.evaluate(sysm, config.model(k), tp, sl, configs=CFGS)
            for k in ("mega-gpt-2", "t-nlg") for tp in config.model(k).tp for sl in config.SUBLAYERS]
    print(f"Fig 16 set with {kw or 'the model defaults'} (speedup over Sequential)")
    for r in rows:
        print(f"  {r.model:10s} TP{r.tp:<3d} {r.sublayer:5s} " + "  ".join(f"{c} {r.speedup(c):.3f}" for c in CFGS))
    summ = {}
    for c in CFGS:
        sp = [r.speedup(c) for r in rows]
        g, m = 100 * (study.geomean(sp) - 1), 100 * (max(sp) - 1)
        pg, pm = (100 * P[k] for k in PAPER[c])
        summ[c] = dict(geomean=g, max=m, paper_geomean=pg, paper_max=pm)
        print(f"  {c:7s} geomean {g:5.1f}% (paper {pg:4.1f})  max {m:5.1f}% (paper {pm:4.1f})")
    dt = time.time() - t0
    print(f"  T3-MCA - T3 geomean {summ['t3-mca']['geomean'] - summ['t3']['geomean']:.1f} points; {dt:.1f} s")
    out = Path("build/bench")
    out.mkdir(parents=True, exist_ok=True)
    (out / "t3_fig16_variant.json").write_text(json.dumps(
        dict(overrides={k: repr(v) for k, v in kw.items()}, summary=summ, runtime_s=dt,
             rows=[dict(model=r.model, tp=r.tp, sublayer=r.sublayer, speedup={c: r.speedup(c) for c in CFGS})
                   for r in rows]), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
