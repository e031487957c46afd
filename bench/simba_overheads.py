"""Simba system model's per-layer overheads against the package RTL, term by term (issue 14;
seed paper §3 controller: PE configuration over memory-mapped registers, package
synchronisation by interrupts; §4.3 communication costs).

For every RTL run of ``build/bench/package_layer.json`` (layer slices on 2x2 / 1x4 packages of
2x2-PE chiplets, Fig. 7's 4x4 package of one-PE chiplets) the same slice, mapping and binding
are evaluated three ways, phase by phase:

* **RTL**: the package RTL's events (barrier ARRIVE / RELEASE per chiplet, last PE done);
* **package model** (``sim_models/simba/package_cycles.py``, within 10 % of the RTL on every
  run, no term fitted on these runs);
* **Simba model** (``sim_models/simba/model.py``), on the package's Arch with the NoP set to the
  RTL's (hop = measured ``nop_hop_cycles``, link = one 8-B flit per ``nop_flit_cycles``), with
  the stop-21 RTL terms off (``before``), as committed (``after``) and with the two terms that
  are committed off as experiments (``exp``: DATA packet heads, CREDIT flits at the Global PE).

Phases (a layer on resident data: the RTL runs' host input and read-back are left out, as the
Simba model has no host traffic between layers): ``config`` = controller words from BAR 1's
release to BAR 2's ARRIVE on a chiplet without host input (the Simba model's ``setup``);
``barrier`` = last ARRIVE of BAR 2 to the last RELEASE (Simba: ``sync``); ``window`` = BAR 2's
last release to the last PE done (Simba: first tile + steady state + chain / output tail);
``layer`` = the three together.  Per run, the package model's period bound names the limit
(PE tile, NoP multicast rule, credit window, psum window).  ``operating_point`` evaluates the
RTL rules that are not in the Simba model at the Simba operating point (16-PE chiplets, 1.03 GHz,
11 Gb/s GRS, 20 ns NoP hop): the NoP multicast router rule with the RTL's minimum NoP buffer.

``--figures N``: the take-apart of the figures (premise ``free``, ``simba_premises.figures``:
headline, Fig 5/6/7/10/12) with the stop-21 terms off, each alone, all on, N samples per layer.
Writes ``build/bench/simba_overheads.json``.  Run: ``.venv/bin/python bench/simba_overheads.py
[--package-json PATH] [--figures N]`` (a few seconds without ``--figures``; no RTL run, it
reads the RTL results).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import package_layer as PL  # noqa: E402

from tessera.golden import chiplet as gc  # noqa: E402
from tessera.hdl.package.compiler import compile_package, small_package  # noqa: E402
from tessera.run_package import parse_slice  # noqa: E402
from tessera.sim_models.simba.arch import load_arch  # noqa: E402
from tessera.sim_models.simba.chiplet_cycles import PRE_STOP21_TERMS, mcast_hop_cycles  # noqa: E402
from tessera.sim_models.simba.model import (Mapping, _prepare, build_structure,  # noqa: E402
                                            controller_setup_words, evaluate_batch)
from tessera.sim_models.simba.package_cycles import (_op_words, default_constants,  # noqa: E402
                                                     package_arch, package_cycles)

OUT = Path(os.environ.get("TESSERA_BUILD", Path(__file__).resolve().parent.parent / "build")) / "bench"
#: the stop-21 RTL terms of the Simba model, switched off for the "before" column
#: packet_heads / credit_batch are committed off (experiments): "before" has them off too
#: (the same values the chiplet/package RTL benches map with: chiplet_cycles.PRE_STOP21_TERMS;
#: this bench's "after" column uses package_arch(..., rtl_terms=True))
TERMS_OFF = dict(PRE_STOP21_TERMS)


def parse_mapping(text: str, e: dict) -> Mapping:
    m = re.match(r"chip K(\d+)C(\d+)P(\d+)Q(\d+) pe K(\d+)C(\d+)P(\d+)Q(\d+) P1=(\d+) Q1=(\d+)", text)
    return Mapping(*map(int, m.groups()), k_ext=tuple(e.get("k_ext") or ()) or None,
                   p_ext=tuple(e.get("p_ext") or ()) or None)


def rtl_matched_arch(pcfg, nop_hop_cycles: float):
    """The package's Arch (package_cycles.package_arch) with the NoP of the RTL: hop latency
    = the measured NoP hop, one 8-byte flit per ``nop_flit_cycles`` per link."""
    a = package_arch(pcfg, rtl_terms=True)
    flit_b = pcfg.chiplet.word_bits / 8
    gbps = flit_b / pcfg.nop_flit_cycles * 8 * a.pe_clock_ghz / a.nop_lanes_per_link
    return a.with_(nop_hop_ns=nop_hop_cycles / a.pe_clock_ghz, grs_gbps=gbps)


def simba_phases(L, arch, mp, binding) -> dict:
    st = build_structure(L, arch, mp.kc, mp.cc, mp.pc, mp.qc, binding, "local", mp.k_ext, mp.p_ext)
    pr = _prepare(st, arch)
    r = evaluate_batch(st, arch, [mp.kp], [mp.cp], [mp.pp], [mp.qp], [mp.p1], [mp.q1])
    setup = arch.ctrl_pe_cycles * controller_setup_words(arch, mp.kp, mp.cp, mp.pp, mp.qp)
    lat = float(r.latency[0])
    return {"config": float(setup), "barrier": float(pr["sync"]), "window": lat - float(setup) - float(pr["sync"]),
            "layer": lat, "comp_per_chiplet_max": float(r.comp[0].max())}


def package_phases(pp, pc) -> dict:
    """Phases of the package model's timeline (same definitions as the RTL's)."""
    m = package_cycles(pp, pc)
    te, tl = m["terms"], m["timeline"]
    ins = pc.instr_cycles
    chips = pp.chiplets
    cfg = pp.target.chiplet_cfg()
    r1 = {c: t["bar1_release"] for c, t in te.items()}
    cfg_words = {}
    for ch in chips:
        if ch.ps is None:
            continue
        bars = [i for i, o in enumerate(ch.ops) if o[0] == "bar"]
        w = _op_words(ch, cfg, None)
        # after BAR 1 (an input home's WAIT for the host's block left out) up to BAR 2's ARRIVE
        skip = [i for i in range(bars[0] + 1, bars[1]) if ch.ops[i][0] == "wait"]
        cfg_words[ch.chiplet] = sum(w[i] for i in range(bars[0] + 1, bars[1] + 1) if i not in skip) * ins
    r2 = max(t["bar2_release"] for t in te.values())
    fin = max(v["pe_done"] for v in tl.values() if v["pe_done"] is not None)
    bounds = sorted({t["period_bound"] for t in te.values()})
    return {"config": max(cfg_words.values()) if cfg_words else None,
            "barrier": r2 - m["bar2_last_arrival"], "window": fin - r2,
            "period": max(t["period"] for t in te.values()), "rounds": max(t["rounds"] for t in te.values()),
            "period_bound": bounds, "first_tile": min(t["first_tile"] for t in te.values()) - r2,
            "total_with_host": m["cycles"]}


def rtl_phases(e: dict) -> dict:
    be, ev = e["rtl_bar_events"], e["rtl_events"]
    used = [c for c in e["binding"]]
    nohost = [c for c in used if c not in e["ia_homes"]]
    r1, a2, r2 = be["1"]["release"], be["2"]["arrive"], be["2"]["release"]
    cfg = max(a2[str(c)] - r1[str(c)] for c in nohost) if nohost else None
    last_r2 = max(r2.values())
    pe_last = max(v for k, v in ev.items() if k.startswith("pe_last"))
    return {"config": cfg, "barrier": last_r2 - max(a2.values()), "window": pe_last - last_r2,
            "total_with_host": e["rtl_cycles"]}


def operating_point() -> dict:
    """The RTL rules the Simba model leaves out, evaluated at the Simba operating point."""
    a = load_arch(bench_dir=OUT)
    from tessera.hdl.chiplet.config import ChipletConfig
    cfg = ChipletConfig()
    max_pkt = cfg.max_tile + 1                       # words + head
    flit = cfg.word_bits / 8 / a.nop_link_bytes_per_cycle         # PE cycles per flit on a GRS link
    link_lat = a.nop_hop_cycles - a.noc_hop_pe_cycles              # hop minus its router
    buf = max(max_pkt, 2 * link_lat + 2)                          # PackageConfig minimum NoP buffer
    rule = mcast_hop_cycles(buf, max_pkt, link_lat, max_pkt, flit)
    small = small_package(2, 2)
    sb = small.nop_router_buffer_flits
    smp = small.chiplet.max_packet_flits
    srule = mcast_hop_cycles(sb, smp, small.nop_link_latency, smp, small.nop_flit_cycles)
    return {"nop_mcast_rule": {
        "simba_point": {"max_packet_flits": max_pkt, "flit_cycles": round(flit, 3), "link_latency_cycles": round(link_lat, 2),
                        "min_nop_buffer_flits": round(buf, 1), "cycles_per_packet": round(rule, 2),
                        "link_rate_cycles_per_packet": round(max_pkt * flit, 2),
                        "slowdown": round(rule / (max_pkt * flit), 3)},
        "rtl_bench_point": {"nop_buffer_flits": sb, "max_packet_flits": smp, "link_latency": small.nop_link_latency,
                            "cycles_per_packet": srule, "link_rate_cycles_per_packet": smp * small.nop_flit_cycles,
                            "slowdown": round(srule / (smp * small.nop_flit_cycles), 3)},
        "verdict": "binds on the RTL bench packages (10-flit NoP buffer at link latency 4 cannot hold a "
                   "max packet beside the previous one) but not at the Simba point: the RTL's minimum NoP "
                   "buffer covers the credit round trip (2 x latency + 2 flits), which leaves room for a "
                   "second max packet at a 20 ns hop; not added to the Simba model"}}


#: the take-apart: one changed term at a time from the model without the stop-21 terms
TERM_ROWS = [
    ("before (stop-21 terms off)", dict(TERMS_OFF)),
    ("+ barrier master (barrier_cycles 10, NoC legs)", {**TERMS_OFF, "barrier_cycles": None}),
    ("+ tile start (pe_tile_start_cycles 4)", {**TERMS_OFF, "pe_tile_start_cycles": None}),
    ("+ psum drain in the tile (psum_drain_in_tile)", {**TERMS_OFF, "psum_drain_in_tile": None}),
    ("+ multicast cut-through (first tile)", {**TERMS_OFF, "mcast_cut_through": None}),
    ("+ DATA credit window (credit_window_packets 32)", {**TERMS_OFF, "credit_window_packets": None}),
    ("+ PSUM credit window (psum_window_packets 2)", {**TERMS_OFF, "psum_window_packets": None}),
    ("+ DATA packet heads (packet_heads 1; experiment, off)", {**TERMS_OFF, "packet_heads": 1}),
    ("+ Global PE ejection: CREDIT flits (credit_batch 4; experiment, off)", {**TERMS_OFF, "credit_batch": 4}),
    ("after (the stop-21 terms committed on)", {}),
    ("after + packet heads + credit batch 4 (RTL experiment)", {"packet_heads": 1, "credit_batch": 4}),
    ("after + NoC 8 B/cycle (RTL 64-bit flit; experiment)", {"noc_link_bytes_per_cycle": 8.0}),
]
FIG_KEYS = [("headline ms", "headline ms (paper 0.50)", lambda v: round(v, 4)),
            ("uniform ms", "uniform ms", lambda v: round(v, 4)),
            ("fig5 res2a_branch2b", "fig5 res2a_br2b best n; t32/t8 (8; >1)", lambda v: [v["best_n"], round(v["t32/t8"], 3)]),
            ("fig5 res2a_branch1", "fig5 res2a_br1 best n; t32/t8 (8-32; ~1)", lambda v: [v["best_n"], round(v["t32/t8"], 3)]),
            ("fig5 res5a_branch2b", "fig5 res5a_br2b best n; t32/t8 (32; <1)", lambda v: [v["best_n"], round(v["t32/t8"], 3)]),
            ("fig6 res3a_branch1", "fig6 res3a_branch1 (0.27)", lambda v: round(v, 4)),
            ("fig6 res3a_branch2b", "fig6 res3a_branch2b (0.05)", lambda v: round(v, 4)),
            ("fig7 res4a_branch1", "fig7 far/adjacent (2.0-3.0)", lambda v: round(v, 3)),
            ("fig10 max", "fig10 max (0.08-0.20)", lambda v: [v[0], round(v[1], 4)]),
            ("fig12 max", "fig12 max from seq fill (0.08-0.20)", lambda v: [v[0], round(v[1], 3)]),
            ("fig12 res4a_branch1 (K over 32)", "fig12 res4a_br1 K over 32 (0.03-0.08)",
             lambda v: None if v is None else round(v, 4))]


def figure_takeapart(samples: int, jobs: int) -> list:
    """Every figure of simba_premises.figures (premise ``free``, runtime baseline) per row of
    TERM_ROWS (None = the committed value)."""
    import simba_premises as SP
    from tessera.sim_models.simba.layers import load_network
    base = load_arch(bench_dir=OUT)
    net = {l.name: l for l in load_network("resnet50")}
    rows = []
    for label, kw in TERM_ROWS:
        arch = base.with_(**{k: v for k, v in kw.items() if v is not None}) if any(
            v is not None for v in kw.values()) else base
        r = SP.figures("free", arch, net, samples, jobs)
        row = {"row": label, **{name: fmt(r[key]) for key, name, fmt in FIG_KEYS},
               "search_seconds": round(r["search_seconds"], 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--package-json", default=str(OUT / "package_layer.json"))
    ap.add_argument("--out", default=str(OUT / "simba_overheads.json"))
    ap.add_argument("--figures", type=int, default=0, metavar="SAMPLES",
                    help="also the figure take-apart (one term at a time, SAMPLES per layer; ~1 min per row at 1000)")
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    src = json.loads(Path(a.package_json).read_text())
    net = PL.layers()
    nop_hop = src["measured"]["nop_hop_cycles"]
    rows = []
    for e in src["entries"]:
        if e.get("rtl_cycles") is None:
            continue
        base = e["layer"].split("_C")[0]
        sh = e["shape"]
        L = parse_slice(net[base], f"C={sh['C']},K={sh['K']},H={sh['H']},W={sh['W']}")
        ckx, cky = map(int, e["chiplets"].split("x"))
        nx, ny = map(int, e["pes"].split("x"))
        pcfg = small_package(ckx, cky) if (nx, ny) == (2, 2) else small_package(ckx, cky, nx=nx, ny=ny)
        mp = parse_mapping(e["mapping"], e)
        pp = compile_package(L, mp, pcfg, gc.layer_tensors(L, 0), binding=e["binding"], arch=package_arch(pcfg, rtl_terms=True))
        arch = rtl_matched_arch(pcfg, nop_hop)
        row = {"layer": e["layer"], "chiplets": e["chiplets"], "pes": e["pes"], "mapping": e["mapping"],
               "rtl": rtl_phases(e), "package_model": package_phases(pp, default_constants(pcfg)),
               "simba_before": simba_phases(L, arch.with_(**TERMS_OFF), mp, e["binding"]),
               "simba_after": simba_phases(L, arch, mp, e["binding"]),
               # + the two RTL terms committed off (packet heads; CREDIT flits at the package
               # chiplet's batch, 1 in package mode)
               "simba_exp": simba_phases(L, arch.with_(packet_heads=1, credit_batch=pp.target.chiplet_cfg()
                                                       .node_credit_batch), mp, e["binding"])}
        r = row["rtl"]
        r["layer"] = (r["config"] if r["config"] is not None else row["package_model"]["config"]) + r["barrier"] + r["window"]
        r["config_source"] = "RTL" if row["rtl"]["config"] is not None else "package model (every chiplet has host input)"
        pm = row["package_model"]
        pm["layer"] = pm["config"] + pm["barrier"] + pm["window"] if pm["config"] is not None else None
        rows.append(row)
    # summary: Simba / RTL per phase (geometric mean over runs)
    summ = {}
    for who in ("package_model", "simba_before", "simba_after", "simba_exp"):
        summ[who] = {}
        for ph in ("config", "barrier", "window", "layer"):
            rs = [row[who][ph] / row["rtl"][ph] for row in rows
                  if row[who].get(ph) is not None and row["rtl"].get(ph)]
            summ[who][ph] = round(float(np.exp(np.mean(np.log(rs)))), 3) if rs else None
    doc = {"doc": __doc__, "nop_hop_cycles": nop_hop, "terms_off_for_before": TERMS_OFF, "rows": rows,
           "ratio_to_rtl_geomean": summ, "operating_point": operating_point()}
    out = Path(a.out)
    if a.figures:
        doc["figure_takeapart"] = {"samples_per_layer": a.figures, "premise": "free (runtime baseline)",
                                   "rows": figure_takeapart(a.figures, a.jobs)}
    elif out.exists():                                   # keep the last take-apart
        old = json.loads(out.read_text())
        if "figure_takeapart" in old:
            doc["figure_takeapart"] = old["figure_takeapart"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=float) + "\n")
    f = lambda v: "-" if v is None else f"{v:7.0f}"
    print(f"{'run':34s} {'phase':8s} {'RTL':>7s} {'pkg':>7s} {'simba0':>7s} {'simba1':>7s} {'s1+exp':>7s}")
    for row in rows:
        for ph in ("config", "barrier", "window", "layer"):
            print(f"{row['layer'][:34]:34s} {ph:8s} {f(row['rtl'][ph])} {f(row['package_model'].get(ph))} "
                  f"{f(row['simba_before'][ph])} {f(row['simba_after'][ph])} {f(row['simba_exp'][ph])}"
                  + (f"   pkg bound {row['package_model']['period_bound']}" if ph == "window" else ""))
    print("ratio to RTL (geomean over runs):")
    for who, v in summ.items():
        print(f"  {who:14s} " + "  ".join(f"{k} {x}" for k, x in v.items()))
    print("operating point:", json.dumps(doc["operating_point"]["nop_mcast_rule"]["simba_point"]))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
