"""ResNet-50 layers on the Simba chiplet (issue 17; Simba §3.1 chiplet, §3.3 mapping): RTL
cycles vs the chiplet model for the same mapping, MAC utilisation, NoC flits, bit-exactness.

Layers (default 16-PE chiplet, mapping from the Simba mapper, ``tessera.run_layer``):
res2a_branch2b (3x3/1), res2b_branch2a (1x1), res3a_branch2b_s2 (3x3/2: ResNet-50 v1 has no
3x3 stride-2 layer, this is the v1.5 placement of res3a_branch2b), res3b_branch2b, res4b_branch2b
(weights exceed the chiplet: mapped as K slices), conv1 (7x7/2).  Default plan (:data:`PLAN`):
pass 0 of each; res3b_branch2b whole (the utilisation target's pass) and as a 2-row slice, the
others as P slices (the pass's first output rows, ``slice`` in the entry says which: same
mapping, PE configs and multicast sets, fewer tiles per PE) so that the bench runs in about an
hour of -O0 simulation (``--rows N`` / ``--passes`` / ``--all`` override the plan; ``--layers``
runs part of it, e.g. in two processes merged with ``--rtl-from``).  Verilator model at ``-O0``
(``--opt``): the 4x4 chiplet's -O0 build takes ~6-8 min wall at load 5-13 on the 2 shared
cores (the -O2 build had not finished after 85 min); the model then simulates ~30 cycles/s
at that load (res3b_branch2b pass 0, 37959 cycles: 21 min).

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
import time
from pathlib import Path

from tessera.hdl.chiplet.config import ChipletConfig
from tessera.run_layer import ENTRY_KEYS, parse_pes, run_layer
from tessera.sim_models.simba.layers import Layer, load_network

LAYERS = ["res2a_branch2b", "res2b_branch2a", "res3a_branch2b_s2", "res3b_branch2b",
          "res4b_branch2b", "conv1"]


#: (layer, pass, output rows of the pass to run: None = the whole pass)
PLAN = [("res3b_branch2b", 0, None), ("res3b_branch2b", 0, 2), ("res3a_branch2b_s2", 0, 1), ("res4b_branch2b", 0, 1),
        ("conv1", 0, 1), ("res2b_branch2a", 0, 2), ("res2a_branch2b", 0, 2)]


def layers():
    net = {l.name: l for l in load_network("resnet50")}
    net["res3a_branch2b_s2"] = Layer("res3a_branch2b_s2", 128, 128, 3, 3, 56, 56, 2, 1)
    return [net[n] for n in LAYERS]


SMALL_CFG = dict(nx=2, ny=2, words=512, banks=2, max_tile=8, out_words=8, psum_beats=2, prog_depth=512,
                 timeout_bits=16)
SMALL_PE = dict(wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=32, ppu_depth=4)


def small_cases():
    from tessera.hdl.chiplet.compiler import ConvLayer as CL, PEMapping as PM
    return {
        "chain_mcast_3x3": (CL("a", 16, 16, 3, 3, 8, 8, 1, 1), PM(2, 2, 1, 1, 2, 4)),
        "only_3x3": (CL("b", 8, 32, 3, 3, 8, 8, 1, 1), PM(4, 1, 1, 1, 2, 4)),
        "only_1x1": (CL("c", 16, 32, 1, 1, 8, 8), PM(2, 1, 2, 1, 2, 8)),
        "chain4_3x3": (CL("d", 32, 8, 3, 3, 6, 6, 1, 1), PM(1, 4, 1, 1, 2, 3)),
        "s2_3x3": (CL("e", 8, 16, 3, 3, 9, 9, 2, 1), PM(2, 1, 2, 1, 2, 2)),
        "s2_3x3_1set": (CL("f", 8, 32, 3, 3, 9, 9, 2, 1), PM(4, 1, 1, 1, 2, 2)),
        "s2_3x3_p1": (CL("g", 8, 16, 3, 3, 9, 9, 2, 1), PM(2, 1, 2, 1, 1, 2)),
        "s1_3x3_5x5in": (CL("h", 8, 16, 3, 3, 6, 6, 1, 1), PM(2, 1, 2, 1, 3, 3)),
    }


def run_small(sim: str) -> list:
    """Small-buffer 2x2 passes on the RTL (the model's calibration set): bit-exact, cycles vs model."""
    from tessera.golden import chiplet as gc
    from tessera.hdl.chiplet.compiler import compile_layer
    from tessera.hdl.pe.config import PEParams
    from tessera.sim_models.simba.chiplet_cycles import pass_cycles
    from tessera.tb.chiplet.run_layer import run_pass
    cfg = ChipletConfig(pe=PEParams(**SMALL_PE), **SMALL_CFG).validate()
    out = []
    for name, (L, m) in small_cases().items():
        T = gc.layer_tensors(L, 2)
        ref = gc.reference(L, T)
        ps = compile_layer(L, m, cfg, T)[0]
        vals, valid = gc.expected_words(ps, ref)
        r = run_pass(ps, cfg, sim=sim, opt="-O0")
        mc = pass_cycles(ps, cfg)
        got = r["words"]
        out.append({"layer": name, "pass": 0, "pes": "2x2",
                    "bit_exact": bool(got.shape == vals.shape and (got[valid] == vals[valid]).all()),
                    "rtl_cycles": r["cycles"], "model_cycles": round(mc["cycles"], 1),
                    "error": round((mc["cycles"] - r["cycles"]) / r["cycles"], 4),
                    "utilization": round(ps.useful_macs / (r["cycles"] * 4 * 64), 4),
                    "noc_flits": r["noc_flits"], "model_noc_flits": mc["noc_flits"],
                    "model_terms": {k: round(v, 1) for k, v in mc["terms"].items()},
                    "model_cycles_one_input_region": round(pass_cycles(ps, cfg, slots=1)["cycles"], 1),
                    "rtl_events": r["events"], "mapping": m.short(), "summary": ps.summary()})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pes", default="4x4")
    ap.add_argument("--passes", type=int, nargs="*", default=None,
                    help="these passes of every layer (whole, unless --rows); default: PLAN")
    ap.add_argument("--rows", type=int, default=None, help="run the first N output rows of each pass")
    ap.add_argument("--all", action="store_true", help="every pass of every layer")
    ap.add_argument("--layers", nargs="*", default=None,
                    help="only these layers of the plan (e.g. to split the RTL runs over two processes "
                         "and merge them with --rtl-from)")
    ap.add_argument("--opt", default="-O0", help="C++ optimisation of the Verilator model (-O0 builds "
                    "several times faster, runs slower)")
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--no-rtl", action="store_true")
    ap.add_argument("--sim", choices=("verilator", "amaranth"), default="verilator")
    ap.add_argument("--rtl-from", nargs="*", default=[], metavar="JSON",
                    help="run_layer.json files of earlier RTL runs (tessera run-layer): their RTL fields "
                         "fill the entries with the same layer, pass, PEs and mapping")
    ap.add_argument("--small", action="store_true",
                    help="also run the 2x2 small-buffer calibration passes on the RTL (Verilator)")
    a = ap.parse_args(argv)
    nx, ny = parse_pes(a.pes)
    cfg = ChipletConfig(nx=nx, ny=ny).validate()
    entries = []
    t0 = time.time()
    byname = {L.name: L for L in layers()}
    if a.all or a.passes is not None or a.rows is not None:
        plan = [(n, None if a.all else (a.passes or [0, -1]), a.rows) for n in LAYERS]
    else:
        plan = [(n, [p], rows) for n, p, rows in PLAN]
    if a.layers:
        plan = [x for x in plan if x[0] in a.layers]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, passes, rows in plan:
        entries += run_layer(byname[name], cfg, seed=0, samples=300, passes=passes, out_dir=None,
                             rtl=not a.no_rtl, sim=a.sim, opt=a.opt, rows=rows)
        # progress file (a long RTL bench keeps what it has measured)
        (out / "chiplet_layer.partial.json").write_text(json.dumps(
            {"entries": entries, "seconds": round(time.time() - t0, 1)}, indent=1) + "\n")
    merged = 0
    rtl_walls = {}
    for f in a.rtl_from:
        src = json.loads(Path(f).read_text())
        if "wall_seconds" in src or "seconds" in src:     # a bench JSON or its progress file
            rtl_walls[str(f)] = {"wall_seconds": src.get("wall_seconds", src.get("seconds")),
                                 "command": src.get("command")}
        for r in src["entries"]:
            if r.get("rtl_cycles") is None:
                continue
            for e in entries:
                if all(e.get(k) == r.get(k) for k in ("layer", "pass", "pes", "mapping", "p_range",
                                                       "k_range", "useful_macs")):
                    for k in ("bit_exact", "rtl_cycles", "utilization", "noc_flits",
                              "rtl_status", "rtl_events", "rtl_seconds", "rtl_command"):
                        if k in r:
                            e[k] = r[k]
                    # the same RTL run against this model (the model may have moved since)
                    e["error"] = round((e["model_cycles"] - e["rtl_cycles"]) / e["rtl_cycles"], 4)
                    e["rtl_source"] = str(f)
                    merged += 1
    small = run_small(a.sim) if a.small else []
    print()
    print(f"{'layer':20s} {'pass':>4s} {'golden':>6s} {'bit_ex':>6s} {'rtl_cyc':>8s} {'model_cyc':>9s} "
          f"{'error':>7s} {'util':>6s} {'m_util':>6s} {'noc_fl':>7s} {'m_noc_fl':>8s}  bound")
    f = lambda v, fmt: "-" if v is None else format(v, fmt)
    for e in entries:
        print(f"{e['layer']:20s} {e['pass']:4d} {str(e['golden_bit_exact']):>6s} {f(e['bit_exact'], ''):>6s} "
              f"{f(e['rtl_cycles'], 'd'):>8s} {e['model_cycles']:9.0f} {f(e['error'], '+.1%'):>7s} "
              f"{f(e['utilization'], '.1%'):>6s} {e['model_utilization']:6.1%} {f(e['noc_flits'], 'd'):>7s} "
              f"{e['model_noc_flits']:8d}  {e['model_period_bound']:8s} "
              f"{'slice P[%d:%d)' % tuple(e['p_range']) if e['slice'] else 'whole pass'}")
    rtl = [e for e in entries if e["rtl_cycles"] is not None]
    for e in small:
        print(f"2x2 {e['layer']:16s} {e['pass']:4d} {str(e['bit_exact']):>6s} {e['rtl_cycles']:8d} "
              f"{e['model_cycles']:9.0f} {e['error']:+7.1%} {e['utilization']:6.1%} noc {e['noc_flits']} "
              f"(model {e['model_noc_flits']}); one input region: {e['model_cycles_one_input_region']:.0f} "
              f"({(e['model_cycles_one_input_region'] - e['rtl_cycles']) / e['rtl_cycles']:+.1%})")
    wall = round(time.time() - t0, 1)
    doc = {"doc": __doc__.strip().splitlines()[0], "pes": a.pes, "keys": list(ENTRY_KEYS),
           "rtl_run": bool(rtl), "opt": a.opt, "wall_seconds": wall,
           "command": "python bench/chiplet_layer.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "entries": entries, "small_2x2": small}
    if rtl_walls:
        doc["rtl_benches"] = rtl_walls         # the RTL runs merged here: their own bench wall times
    if not rtl:
        doc["note"] = ("RTL not run (--no-rtl, or no chiplet RTL in the tree): bit_exact, rtl_cycles, "
                       "utilization, noc_flits, error are null")
        print("\n" + doc["note"])
    (out / "chiplet_layer.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out / 'chiplet_layer.json'} ({wall:.0f} s wall)")
    bad = [e for e in entries if not e["golden_bit_exact"] or e["bit_exact"] is False] + \
        [e for e in small if not e["bit_exact"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
