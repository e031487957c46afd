"""ResNet-50 layers on the Simba chiplet (issue 17; Simba §3.1 chiplet, §3.3 mapping): RTL
cycles vs the chiplet model for the same mapping, MAC utilisation, NoC flits, bit-exactness.

Layers (default 16-PE chiplet, mapping from the Simba mapper, ``tessera.run_layer``):
res2a_branch2b (3x3/1), res2b_branch2a (1x1), res3a_branch2b_s2 (3x3/2: ResNet-50 v1 has no
3x3 stride-2 layer, this is the v1.5 placement of res3a_branch2b), res3b_branch2b, res4b_branch2b
(weights exceed the chiplet: mapped as K slices), conv1 (7x7/2); the first and last pass of each
(``--passes`` to change; ``--all`` for every pass).

Writes ``build/bench/chiplet_layer.json``: ``entries`` [{layer, pass, bit_exact, rtl_cycles,
model_cycles, utilization, noc_flits, error, ...model_* and golden details}].  ``bit_exact``,
``rtl_cycles``, ``utilization`` (useful MACs / (rtl_cycles x 64 x PEs)), ``noc_flits`` and
``error`` ((model - rtl) / rtl) come from the RTL run only: null while the chiplet testbench
runner is not in the tree (never estimated).  ``golden_bit_exact``: the executable golden
model of the compiled pass against the numpy reference.  Targets (issue 17): bit-exact on all;
|error| <= 10 % on every entry; utilisation >= 70 % on res3[b-d]_branch2b-like passes.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.run_layer import ENTRY_KEYS, parse_pes, run_layer
from tessera.sim_models.simba.layers import Layer, load_network

LAYERS = ["res2a_branch2b", "res2b_branch2a", "res3a_branch2b_s2", "res3b_branch2b",
          "res4b_branch2b", "conv1"]


def layers():
    net = {l.name: l for l in load_network("resnet50")}
    net["res3a_branch2b_s2"] = Layer("res3a_branch2b_s2", 128, 128, 3, 3, 56, 56, 2, 1)
    return [net[n] for n in LAYERS]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pes", default="4x4")
    ap.add_argument("--passes", type=int, nargs="*", default=[0, -1])
    ap.add_argument("--all", action="store_true", help="every pass of every layer")
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--no-rtl", action="store_true")
    ap.add_argument("--sim", choices=("verilator", "amaranth"), default="verilator")
    a = ap.parse_args(argv)
    nx, ny = parse_pes(a.pes)
    cfg = ChipletConfig(nx=nx, ny=ny).validate()
    entries = []
    for L in layers():
        entries += run_layer(L, cfg, seed=0, samples=300, passes=None if a.all else a.passes,
                             out_dir=None, rtl=not a.no_rtl, sim=a.sim)
    print()
    print(f"{'layer':20s} {'pass':>4s} {'golden':>6s} {'bit_ex':>6s} {'rtl_cyc':>8s} {'model_cyc':>9s} "
          f"{'error':>7s} {'util':>6s} {'m_util':>6s} {'noc_fl':>7s} {'m_noc_fl':>8s}  bound")
    f = lambda v, fmt: "-" if v is None else format(v, fmt)
    for e in entries:
        print(f"{e['layer']:20s} {e['pass']:4d} {str(e['golden_bit_exact']):>6s} {f(e['bit_exact'], ''):>6s} "
              f"{f(e['rtl_cycles'], 'd'):>8s} {e['model_cycles']:9.0f} {f(e['error'], '+.1%'):>7s} "
              f"{f(e['utilization'], '.1%'):>6s} {e['model_utilization']:6.1%} {f(e['noc_flits'], 'd'):>7s} "
              f"{e['model_noc_flits']:8d}  {e['model_period_bound']}")
    rtl = [e for e in entries if e["rtl_cycles"] is not None]
    doc = {"doc": __doc__.strip().splitlines()[0], "pes": a.pes, "keys": list(ENTRY_KEYS),
           "rtl_run": bool(rtl), "entries": entries}
    if not rtl:
        doc["note"] = ("RTL not run (--no-rtl, or no chiplet RTL in the tree): bit_exact, rtl_cycles, "
                       "utilization, noc_flits, error are null")
        print("\n" + doc["note"])
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "chiplet_layer.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out / 'chiplet_layer.json'}")
    bad = [e for e in entries if not e["golden_bit_exact"] or e["bit_exact"] is False]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
