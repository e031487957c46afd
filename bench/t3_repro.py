"""Reproduce T3 (Pati et al., ASPLOS'24) §6 with the Tessera system model.

Prints every figure's model value next to the paper's and the difference, writes
build/bench/t3_repro.json and PNG plots under build/bench/t3/ (Figs 15, 16, 18, 19, 20, a fused
GEMM-RS timeline with DRAM traffic over time) and take-apart experiments (arbitration policy, MCA
threshold, MC write-drain watermarks, L2 estimate vs Fig 18, one-term-at-a-time on T-NLG FC-1 TP16,
remote-store buffering, link rate).  The Fig 16 set runs in under 60 s (printed).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from tessera.sim_models.t3 import address_space as A
from tessera.sim_models.t3 import collectives as C
from tessera.sim_models.t3 import cases, config, e2e, gemm, overlap, plots, study, tracker_ref

OUT = Path("build/bench")
PLOTS = OUT / "t3"
CFGS = ("t3", "t3-mca", "ideal", "ideal-rs-nmc")


def pct(x):
    return 100.0 * (x - 1.0)


def line(name, model, paper, unit="%"):
    diff = model - paper
    print(f"  {name:44s} model {model:7.1f}{unit}  paper {paper:6.1f}{unit}  diff {diff:+6.1f}")
    return dict(model=model, paper=paper, diff=diff)


def run_set(sysm, keys):
    res = {}
    for key in keys:
        mo = config.model(key)
        for tp in mo.tp:
            for sl in config.SUBLAYERS:
                res[(key, tp, sl)] = study.evaluate(sysm, mo, tp, sl)
    return res


def vs_note(d: dict, extra: str = "") -> str:
    """Footer for a plot: one 'name: model / paper / diff' line per compared value in ``d``."""
    out = [f"{k:22s} model {v['model']:6.1f}  paper {v['paper']:6.1f}  diff {v['diff']:+6.1f}"
           for k, v in d.items() if isinstance(v, dict) and "paper" in v]
    return "\n".join(out + ([extra] if extra else []))


def summary(rows, cfgs=CFGS):
    return {c: dict(geomean=pct(study.geomean(r.speedup(c) for r in rows)),
                    max=pct(max(r.speedup(c) for r in rows))) for c in cfgs}


NO_CONTENTION = dict(tRTW=0, tWTR=0, row_interference=False, row_hit=(1.0, 1.0, 1.0, 1.0))


def per_case(sysm, P, rows, base) -> dict:
    """Fig 16 case by case against §6.1's per-case statements, and where the paper's T3 maximum
    (39%) can lie: an experiment that removes, one at a time, the model's T3 losses on the cases that
    could host it."""
    tab = cases.case_table(rows)
    chk = cases.text_checks(tab, P)
    print("Fig 16 case by case (speedup %; T3/Ideal = runtime ratio; GEMM x = slowdown inside T3; "
          "paper bars not available, fig16_reading)")
    print(f"  {'case':22s} {'Ideal':>6s} {'+NMC':>6s} {'T3':>6s} {'MCA':>6s} {'T3/Id':>6s} {'GEMMx':>6s} "
          f"{'rd GB/s':>7s} bound")
    for c in tab:
        print(f"  {c['case']:22s} {c['ideal']:6.1f} {c['ideal_rs_nmc']:6.1f} {c['t3']:6.1f} {c['t3_mca']:6.1f} "
              f"{c['t3_over_ideal_runtime']:6.3f} {c['gemm_slowdown_t3']:6.2f} {c['gemm_read_GBps']:7.0f} "
              f"{'RS' if c['rs_bound'] else 'GEMM'}")
    print("  §6.1 per-case statements on the model:")
    for k in chk:
        print(f"    [{'ok' if k['held'] else 'NO'}] {k['name']} ({k['source']}): {k['detail']}")
    ratio = {c["case"]: (1 + c["t3_mca"] / 100) / (1 + c["t3"] / 100) for c in tab}
    rmax = max(ratio, key=ratio.get)
    gi = study.geomean(r.speedup("ideal") for r in rows)
    gm = study.geomean(r.speedup("t3-mca") for r in rows)
    ratios = dict(
        t3mca_over_t3_max=line(f"T3-MCA over T3, max case ({rmax})", pct(ratio[rmax]), 100 * P["fig16_t3mca_over_t3_max"]),
        t3mca_below_ideal_geomean=line("T3-MCA below Ideal, geomean (runtime)", pct(gi / gm),
                                       100 * P["fig16_t3mca_vs_ideal_geomean_gap"]))
    ceiling = cases.fc_t3_ceiling(P)
    cand = cases.t3_max_candidates(tab, P)
    print(f"  The paper's FC T3 is < {ceiling:.1f}% (Ideal <= 50%, FC T3 > 1.15 x Ideal runtime), so its 39% T3 "
          "maximum is an OP or IP case; the model's non-FC cases whose Ideal-RS+NMC reaches 39%:")
    # experiment: remove the model's T3 losses one at a time on those cases
    variants = (("model", {}), ("WG-granular retirement", dict(wg_retire=True)),
                ("no read/write turnaround", dict(tRTW=0, tWTR=0)),
                ("no DRAM contention (no turnaround, no row interference, all row hits)", NO_CONTENTION),
                ("no DRAM contention + unbounded remote-store buffer",
                 dict(NO_CONTENTION, remote_store_buffer_bytes=1e12)))
    for c in cand:
        key, tp, sl = c["model"], c["tp"], c["sublayer"]
        r0 = base[(key, tp, sl)]
        s = sysm.scaled(n_gpus=tp)
        d = gemm.sublayer_dims(config.model(key), tp, sl)
        pu = gemm.plan(s, d, cached_output=False)
        link_only = (tp - 1) * (s.link_latency + d.out_bytes(s.elem_bytes) / tp / s.link_bw)
        c["fused_lower_bound"] = pct(r0.times["sequential"] / (max(pu.t_compute_total, link_only) + r0.ag))
        c["t3_by_variant"] = {}
        for lab, kw in variants:
            r = study.evaluate(sysm.scaled(**kw) if kw else sysm, config.model(key), tp, sl,
                               configs=("t3",))
            c["t3_by_variant"][lab] = pct(r0.times["sequential"] / r.times["t3"])
        f = study.evaluate(sysm.scaled(**NO_CONTENTION), config.model(key), tp, sl, configs=("t3",),
                           record=False).fused["t3"]
        c["no_contention_stage0_end_us"] = float(f.stage_end[0] * 1e6)
        c["no_contention_link_idle_us"] = float((f.time - f.send_start[0]) * 1e6 - link_only * 1e6)
        print(f"    {c['case']:22s} Ideal {c['ideal']:5.1f} +NMC {c['ideal_rs_nmc']:5.1f} lower bound "
              f"{c['fused_lower_bound']:5.1f} | T3 " + "  ".join(f"{v:5.1f}" for v in c["t3_by_variant"].values())
              + f" | GEMM x{c['gemm_slowdown_t3']:.2f}, reads {c['gemm_read_GBps']:.0f} GB/s, "
              f"{'RS' if c['rs_bound'] else 'GEMM'}-bound")
    print("    (T3 columns: " + "; ".join(lab for lab, _ in variants) + ")")
    best = max(max(c["t3_by_variant"].values()) for c in cand) if cand else float("nan")
    low = [c for c in cand if c["gemm_read_GBps"] == min(x["gemm_read_GBps"] for x in cand)]
    if low:
        lc = low[0]
        print(f"  The candidate §6.1.2's mechanism puts nearest Ideal (lowest GEMM read rate, RS-bound): "
              f"{lc['case']}; with every DRAM contention term removed T3 reaches "
              f"{lc['t3_by_variant'][variants[3][0]]:.1f}% (Ideal+NMC {lc['ideal_rs_nmc']:.1f}%): its first stage "
              f"ends at {lc['no_contention_stage0_end_us']:.0f} us and the link idles "
              f"{lc['no_contention_link_idle_us']:.0f} us in the fused pipeline (ramp + stage pacing), a structural "
              "cost of the staggered schedule, not DRAM contention")
    # WG-granular retirement (the variant that puts the candidate in the band) is confounded: with the
    # 12/8 write-drain calibration it slows the *isolated* T3 GEMM, before any communication
    d8 = gemm.sublayer_dims(config.model("mega-gpt-2"), 8, "FC-2")
    iso = {}
    for lab, kw in (("stage barrier, drain 12/8 (model)", {}), ("WG-granular, drain 12/8", dict(wg_retire=True)),
                    ("WG-granular, drain 40/16", dict(wg_retire=True, write_drain=(40, 16)))):
        s8 = sysm.scaled(n_gpus=8, **kw)
        iso[lab] = overlap.simulate(s8, gemm.plan(s8, d8, cached_output=False), comm=False).time * 1e6
    print("  Mega-GPT-2 FC-2 TP8 T3 GEMM alone (no communication), us: "
          + "; ".join(f"{k} {v:.0f}" for k, v in iso.items()))
    return dict(rows=tab, text_checks=chk, ratios=ratios, fc_t3_ceiling=ceiling, t3_max_candidates=cand,
                wg_retire_isolated_gemm_us=iso,
                variants=[lab for lab, _ in variants], best_candidate_t3_any_variant=best,
                reading="Fig 16 bars not in the extracted text (paper.json fig16_reading): per-case paper "
                        "values are §6.1's statements only")


def main() -> int:
    t0 = time.time()
    OUT.mkdir(parents=True, exist_ok=True)
    PLOTS.mkdir(parents=True, exist_ok=True)
    P = config.paper()
    sysm = config.system()
    out = {"system": {"peak_fp16_TFLOPs": sysm.peak_flops / 1e12, "ring_step_bw_GBps": sysm.link_bw / 1e9,
                      "dram_sustained_GBps": sysm.dram_bw / 1e9}, "figures": {}}
    F = out["figures"]

    # ---------------- Fig 15/16: Mega-GPT-2 and T-NLG, TP 8 and 16
    base = run_set(sysm, ("mega-gpt-2", "t-nlg"))
    out["fig16_runtime_s"] = time.time() - t0
    rows = list(base.values())
    js = [r.to_json() for r in rows]
    print("Fig 15/16: sub-layer runtime (us, Sequential) and speedup over Sequential")
    print(f"  {'model':10s} {'TP':>3s} {'sub':5s} {'GEMM':>7s} {'RS':>6s} {'AG':>6s} "
          + " ".join(f"{plots.CFG_LABEL[c][:12]:>12s}" for c in CFGS))
    for r in rows:
        print(f"  {r.model:10s} {r.tp:3d} {r.sublayer:5s} {r.gemm * 1e6:7.0f} {r.rs * 1e6:6.0f} "
              f"{r.ag * 1e6:6.0f} " + " ".join(f"{r.speedup(c):12.3f}" for c in CFGS))
    sm = summary(rows)
    f16 = {}
    for c, key in (("ideal", "fig16_ideal"), ("t3", "fig16_t3"), ("t3-mca", "fig16_t3mca")):
        f16[f"{c}_geomean"] = line(f"{plots.CFG_LABEL[c]} geomean speedup", sm[c]["geomean"],
                                   100 * P[f"{key}_geomean"])
        f16[f"{c}_max"] = line(f"{plots.CFG_LABEL[c]} max speedup", sm[c]["max"], 100 * P[f"{key}_max"])
    op16 = base[("mega-gpt-2", 16, "OP")]
    f16["ideal_mega_op_tp16"] = line("Ideal, Mega-GPT-2 OP TP16 (paper's minimum)",
                                     pct(op16.speedup("ideal")), 100 * P["fig16_ideal_min_case"])
    tf1 = base[("t-nlg", 16, "FC-1")]
    f16["ideal_tnlg_fc1_tp16"] = line("Ideal, T-NLG FC-1 TP16 (paper's maximum)",
                                      pct(tf1.speedup("ideal")), 100 * P["fig16_ideal_max"])
    f16["t3mca_minus_t3_geomean"] = line("T3-MCA - T3 geomean (points)", sm["t3-mca"]["geomean"] - sm["t3"]["geomean"],
                                         100 * (P["fig16_t3mca_geomean"] - P["fig16_t3_geomean"]))
    op = [r for r in rows if r.sublayer == "OP"]
    f16["op_t3_over_ideal_min"] = min(r.speedup("t3") / r.speedup("ideal") for r in op)
    print(f"  OP layers: T3 / Ideal speedup ratio min {f16['op_t3_over_ideal_min']:.3f} (§6.1.2: close to Ideal; target >= 0.95)")
    extra = max(r.speedup("ideal-rs-nmc") / r.speedup("ideal") for r in rows)
    f16["nmc_extra_max"] = line("Ideal-RS+NMC over Ideal, max", pct(extra), 100 * P["nmc_extra_speedup_max"])
    F["fig15_16"] = dict(rows=js, summary=sm, vs_paper=f16)
    F["fig16_per_case"] = per_case(sysm, P, rows, base)
    plots.breakdown(js, PLOTS / "fig15_breakdown.png",
                    note="paper gives the breakdown as bars only (no numbers); speedups: see fig16")
    plots.speedups(js, PLOTS / "fig16_speedup.png", note=vs_note(f16, "values in %"))

    # ---------------- NMC RS gain (§6.1.1) and bus bandwidth
    print("RS with NMC vs baseline RS (§6.1.1)")
    nm = {}
    for tp in (8, 16):
        rr = [r for r in rows if r.tp == tp]
        g = study.geomean(r.rs / r.rs_nmc for r in rr)
        nm[f"tp{tp}"] = line(f"NMC RS speedup TP{tp} (geomean)", pct(g), 100 * P[f"nmc_rs_gain_tp{tp}"])
    s8 = sysm.scaled(n_gpus=8)
    S = 64 * 2 ** 20
    ag = C.ring("ag", s8, S)
    nm["busbw_ag_64MB_GBps"] = C.busbw("ag", S, ag.time, 8) / 1e9
    print(f"  AG 64 MiB on 8 GPUs: busbw {nm['busbw_ag_64MB_GBps']:.1f} GB/s "
          f"(ring step bandwidth {sysm.link_bw / 1e9:.0f} GB/s, latency-bound share = the gap)")
    F["nmc_rs"] = nm

    # ---------------- Fig 18: DRAM traffic
    print("Fig 18: DRAM traffic per sub-layer, T3-MCA vs Sequential")
    red, rs_red, gr_red = [], [], []
    for r in rows:
        seq = sum(r.traffic["sequential"].values())
        mca = sum(r.traffic["t3-mca"].values())
        red.append(1 - mca / seq)
        rs_red.append(r.traffic["sequential"]["rs_reads"] / r.traffic["t3-mca"]["rs_reads"])
        gr_red.append(r.traffic["sequential"]["gemm_reads"] / r.traffic["t3-mca"]["gemm_reads"])
    f18 = {"reduction_geomean": line("traffic reduction geomean", 100 * (1 - study.geomean(1 - np.array(red))),
                                     100 * P["fig18_traffic_reduction_geomean"]),
           "reduction_max": line("traffic reduction max", 100 * max(red), 100 * P["fig18_traffic_reduction_max"]),
           "rs_reads_x": line("RS reads reduction (x, geomean)", study.geomean(rs_red),
                              P["fig18_rs_read_reduction_x"], unit="x"),
           "gemm_reads_x": line("GEMM reads reduction (x, geomean)", study.geomean(gr_red),
                                 P["fig18_gemm_read_reduction_x"], unit="x")}
    for tp in (8, 16):
        g = study.geomean(r.traffic["sequential"]["gemm_reads"] / r.traffic["t3-mca"]["gemm_reads"]
                          for r in rows if r.tp == tp)
        f18[f"gemm_reads_x_tp{tp}"] = line(f"GEMM reads reduction TP{tp} (x, geomean)", g,
                                           P[f"fig18_gemm_read_reduction_tp{tp}_x"], unit="x")
    F["fig18"] = f18
    plots.traffic(js, PLOTS / "fig18_traffic.png", note=vs_note(f18, "reductions in % or x"))

    # ---------------- large models (§6.4) and Fig 19 end-to-end
    big = run_set(sysm, ("gpt-3", "palm", "mt-nlg"))
    brow = list(big.values())
    bs = summary(brow)
    print("Large models at TP 32 (§6.4)")
    F["large"] = {"rows": [r.to_json() for r in brow], "summary": bs,
                  "t3mca_geomean": line("T3-MCA sub-layer geomean", bs["t3-mca"]["geomean"],
                                        100 * P["large_models_t3mca_geomean"]),
                  "t3mca_max": line("T3-MCA sub-layer max", bs["t3-mca"]["max"], 100 * P["large_models_t3mca_max"]),
                  "t3_geomean_model": bs["t3"]["geomean"]}
    print(f"  (model only: T3 {bs['t3']['geomean']:.1f}%/{bs['t3']['max']:.1f}%, Ideal-GEMM-RS-Overlap "
          f"{bs['ideal']['geomean']:.1f}%/{bs['ideal']['max']:.1f}% geomean/max; the paper gives neither at TP32)")
    print("Fig 19 / Fig 4: end-to-end speedups and communication share (Sequential)")
    allres = {**base, **big}
    e2e_rows = e2e.setup_rows(sysm, allres, ("mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg"))
    for row in e2e_rows:
        print(f"  {row['model']:10s} TP{row['tp']:<3d} comm share train {100 * row['comm_share']['train']:5.1f}% "
              f"infer {100 * row['comm_share']['infer']:5.1f}% | T3 train {row['t3']['train']:5.1f}% "
              f"infer {row['t3']['infer']:5.1f}% | T3-MCA train {row['t3-mca']['train']:5.1f}% "
              f"infer {row['t3-mca']['infer']:5.1f}%")
    f19 = {"rows": e2e_rows}
    small = [r for r in e2e_rows if r["tp"] in (8, 16)]
    large = [r for r in e2e_rows if r["tp"] == 32]
    f19["train_t3mca_max"] = line("train T3-MCA max (Mega/T-NLG)", max(r["t3-mca"]["train"] for r in small),
                                  100 * P["fig19_train_t3mca_max"])
    f19["train_t3_max"] = line("train T3 max (Mega/T-NLG)", max(r["t3"]["train"] for r in small),
                               100 * P["fig19_train_t3_max"])
    f19["infer_t3mca_max"] = line("inference T3-MCA max (Mega/T-NLG)", max(r["t3-mca"]["infer"] for r in small),
                                  100 * P["fig19_infer_t3mca_max"])
    f19["infer_t3_max"] = line("inference T3 max (Mega/T-NLG)", max(r["t3"]["infer"] for r in small),
                               100 * P["fig19_infer_t3_max"])
    for ph, name in (("train", "train"), ("infer", "inference")):
        g = pct(study.geomean(1 + r["t3-mca"][ph] / 100 for r in small))
        f19[f"{ph}_t3mca_geomean"] = line(f"{name} T3-MCA geomean (Mega/T-NLG)", g,
                                          100 * P[f"fig19_{ph}_t3mca_geomean"])
        g = pct(study.geomean(1 + r["t3"][ph] / 100 for r in small))
        f19[f"{ph}_t3_geomean"] = line(f"{name} T3 geomean (Mega/T-NLG)", g, 100 * P[f"fig19_{ph}_t3_geomean"])
    f19["large_train_max"] = line("train T3-MCA max (TP32 models)", max(r["t3-mca"]["train"] for r in large),
                                  100 * P["large_models_train_max"])
    f19["large_infer_max"] = line("inference T3-MCA max (TP32 models)", max(r["t3-mca"]["infer"] for r in large),
                                  100 * P["large_models_infer_max"])
    f19["comm_share_mega_max"] = line("comm share Mega-GPT-2 max (Fig 4)",
                                      100 * max(max(r["comm_share"].values()) for r in e2e_rows if r["model"] == "mega-gpt-2"),
                                      100 * P["fig4_comm_share_mega_max"])
    f19["comm_share_tnlg_max"] = line("comm share T-NLG max (Fig 4)",
                                      100 * max(max(r["comm_share"].values()) for r in e2e_rows if r["model"] == "t-nlg"),
                                      100 * P["fig4_comm_share_tnlg_max"])
    F["fig19"] = f19
    labels = [f"{r['model']} TP{r['tp']}" for r in e2e_rows]
    plots.grouped(labels, {f"{plots.CFG_LABEL[c]} {ph}": [r[c][ph] for r in e2e_rows]
                           for c in ("t3", "t3-mca") for ph in ("train", "infer")},
                  PLOTS / "fig19_e2e.png", "end-to-end speedup (%)", "End-to-end speedups, Fig 19",
                  note=vs_note(f19, "values in %"))

    # ---------------- Fig 20: GPU-2X-CU
    print("Fig 20: GPU-2X-CU (160 CUs, same memory and links) - T3-MCA speedup")
    s2 = sysm.scaled(cus=2 * sysm.cus)
    two = run_set(s2, ("mega-gpt-2", "t-nlg"))
    f20 = []
    for k, r in base.items():
        r2 = two[k]
        f20.append(dict(model=k[0], tp=k[1], sublayer=k[2], base=pct(r.speedup("t3-mca")),
                        x2=pct(r2.speedup("t3-mca")), base_t3=pct(r.speedup("t3")), x2_t3=pct(r2.speedup("t3")),
                        base_ideal=pct(r.speedup("ideal")), x2_ideal=pct(r2.speedup("ideal"))))
        print(f"  {k[0]:10s} TP{k[1]:<3d} {k[2]:5s} T3-MCA {f20[-1]['base']:5.1f}% -> {f20[-1]['x2']:5.1f}%   "
              f"T3 {f20[-1]['base_t3']:5.1f}% -> {f20[-1]['x2_t3']:5.1f}%   Ideal {f20[-1]['base_ideal']:5.1f}% -> "
              f"{f20[-1]['x2_ideal']:5.1f}%")
    fc2_up = sum(1 for r in f20 if r["sublayer"] == "FC-2" and r["x2"] > r["base"])
    op_down = sum(1 for r in f20 if r["sublayer"] == "OP" and r["x2"] < r["base"])
    print(f"  paper: FC-2 benefit grows with 2x CUs ({fc2_up}/4 cases in the model), OP benefit shrinks "
          f"({op_down}/4 cases in the model)")
    F["fig20"] = dict(rows=f20, fc2_benefit_grows=fc2_up, op_benefit_shrinks=op_down)
    plots.grouped([f"{r['model']}\nTP{r['tp']} {r['sublayer']}" for r in f20],
                  {"T3-MCA base": [r["base"] for r in f20], "T3-MCA 2X-CU": [r["x2"] for r in f20],
                   "T3 base": [r["base_t3"] for r in f20], "T3 2X-CU": [r["x2_t3"] for r in f20]},
                  PLOTS / "fig20_2xcu.png", "speedup over Sequential (%)", "GPU-2X-CU, Fig 20",
                  note=f"paper (trend only, no numbers): FC-2 benefit grows with 2x CUs - model {fc2_up}/4 "
                       f"cases; OP benefit shrinks - model {op_down}/4 cases")

    # ---------------- timeline (Fig 7/17 style) for T-NLG FC-2 TP8
    tl = study.evaluate(sysm, config.model("t-nlg"), 8, "FC-2", record=True)
    plots.timeline({c: tl.fused[c] for c in ("t3", "t3-mca")}, tl.ag * 1e6, PLOTS / "timeline_tnlg_fc2_tp8.png",
                   "T-NLG FC-2 TP8")
    tl2 = study.evaluate(s2, config.model("t-nlg"), 16, "FC-1", record=True)
    plots.timeline({c: tl2.fused[c] for c in ("t3", "t3-mca")}, tl2.ag * 1e6,
                   PLOTS / "timeline_tnlg_fc1_tp16_2xcu.png", "T-NLG FC-1 TP16, GPU-2X-CU")
    F["timeline"] = {"case": "t-nlg TP8 FC-2", "t3_gemm_end_us": tl.gemm_in_fused["t3"] * 1e6,
                     "t3mca_gemm_end_us": tl.gemm_in_fused["t3-mca"] * 1e6, "isolated_gemm_us": tl.gemm * 1e6,
                     "2xcu_case": "t-nlg TP16 FC-1", "2xcu_isolated_gemm_us": tl2.gemm * 1e6,
                     "2xcu_t3_gemm_end_us": tl2.gemm_in_fused["t3"] * 1e6,
                     "2xcu_t3mca_gemm_end_us": tl2.gemm_in_fused["t3-mca"] * 1e6}
    print(f"GEMM inside the fused kernel (contention): T-NLG FC-2 TP8 isolated {tl.gemm * 1e6:.0f} us, "
          f"T3 {tl.gemm_in_fused['t3'] * 1e6:.0f} us, T3-MCA {tl.gemm_in_fused['t3-mca'] * 1e6:.0f} us; "
          f"2X-CU T-NLG FC-1 TP16 isolated {tl2.gemm * 1e6:.0f}, T3 {tl2.gemm_in_fused['t3'] * 1e6:.0f}, "
          f"T3-MCA {tl2.gemm_in_fused['t3-mca'] * 1e6:.0f} us")

    # ---------------- arbitration: policies and the MCA threshold (take-apart experiments)
    def fig16_with(ss, cfgs, **kw):
        rr = [study.evaluate(ss, config.model(k[0]), k[1], k[2], configs=("sequential",) + cfgs) for k in base]
        return {c: dict(geomean=pct(study.geomean(r.speedup(c) for r in rr)), max=pct(max(r.speedup(c) for r in rr)))
                for c in cfgs}

    cf = fig16_with(sysm, ("t3-cf",))["t3-cf"]
    F["policy_compute_first"] = cf
    print(f"Arbitration policies (Mega/T-NLG geomean/max): round-robin (T3) {sm['t3']['geomean']:.1f}%/"
          f"{sm['t3']['max']:.1f}%, compute-first {cf['geomean']:.1f}%/{cf['max']:.1f}%, MCA (learned threshold) "
          f"{sm['t3-mca']['geomean']:.1f}%/{sm['t3-mca']['max']:.1f}%")
    learned = sorted({int(r.mca_threshold_entries) for r in rows})
    print(f"  MCA thresholds learned in the first stage (entries; {overlap.NO_LIMIT} = no limit): {learned}")
    print("Take-apart: MC write-drain watermarks (high/low entries; system.json write_drain_watermarks), Fig 16 set")
    wds = {}
    for wd in ((40, 16), (16, 8), (12, 6), (12, 7), tuple(sysm.write_drain)):
        k = f"{wd[0]}/{wd[1]}"
        wds[k] = {"t3": sm["t3"], "t3-mca": sm["t3-mca"]} if wd == tuple(sysm.write_drain) else \
            fig16_with(sysm.scaled(write_drain=wd), ("t3", "t3-mca"))
        print(f"  {k:>6s}: T3 {wds[k]['t3']['geomean']:5.1f}%/{wds[k]['t3']['max']:5.1f}%  T3-MCA "
              f"{wds[k]['t3-mca']['geomean']:5.1f}%/{wds[k]['t3-mca']['max']:5.1f}% (geomean/max)")
    F["write_drain_sensitivity"] = wds
    print("Take-apart: L2 estimate (gemm.py; system.json wg_dispatch_fast_dim, l2_retention)")
    l2m = {}
    for fast in ("fewer_tiles", "tokens"):
        for ret in ("lru", "graded"):
            red = {}
            for tp in (8, 16):
                ss = sysm.scaled(n_gpus=tp, wg_fast_dim=fast, l2_retention=ret)
                red[tp] = study.geomean(
                    gemm.plan(ss, gemm.sublayer_dims(config.model(k), tp, sl), True).read_bytes.sum()
                    / gemm.plan(ss, gemm.sublayer_dims(config.model(k), tp, sl), False).read_bytes.sum()
                    for k in ("mega-gpt-2", "t-nlg") for sl in config.SUBLAYERS)
            l2m[f"{fast}/{ret}"] = {"gemm_reads_x_tp8": red[8], "gemm_reads_x_tp16": red[16]}
            print(f"  {fast:>11s} {ret:6s}: Fig 18 GEMM-read reduction TP8 {red[8]:.2f}x TP16 {red[16]:.2f}x "
                  f"(paper {P['fig18_gemm_read_reduction_tp8_x']}x / {P['fig18_gemm_read_reduction_tp16_x']}x)")
    old_l2 = fig16_with(sysm.scaled(wg_fast_dim="fewer_tiles", l2_retention="lru"), ("t3", "t3-mca"))
    F["l2_model_fig18"] = l2m
    F["l2_first_pass_fig16"] = old_l2
    print(f"  first-pass L2 estimate (weights re-walked, all-or-nothing) on Fig 16: T3 {old_l2['t3']['geomean']:.1f}%"
          f"/{old_l2['t3']['max']:.1f}%, T3-MCA {old_l2['t3-mca']['geomean']:.1f}%/{old_l2['t3-mca']['max']:.1f}% "
          f"(current {sm['t3']['geomean']:.1f}/{sm['t3']['max']:.1f}, {sm['t3-mca']['geomean']:.1f}/{sm['t3-mca']['max']:.1f})")
    print("Take-apart: T-NLG FC-1 TP16 (Fig 16's largest Ideal case), one term at a time")
    ta = {}
    for name, kw in (("model", {}), ("no read/write turnaround (tRTW=tWTR=0)", dict(tRTW=0, tWTR=0)),
                     ("unbounded remote-store buffer", dict(remote_store_buffer_bytes=1e12)),
                     ("write drain 40/16", dict(write_drain=(40, 16))),
                     ("all row hits", dict(row_hit=(1.0, 1.0, 1.0, 1.0))),
                     ("no row-buffer interference between streams", dict(row_interference=False)),
                     ("no interference, no turnaround", dict(row_interference=False, tRTW=0, tWTR=0))):
        r = study.evaluate(sysm.scaled(**kw) if kw else sysm, config.model("t-nlg"), 16, "FC-1",
                           configs=("sequential", "t3", "t3-mca", "ideal"))
        ta[name] = {c: pct(r.speedup(c)) for c in ("t3", "t3-mca", "ideal")}
        ta[name]["gemm_in_t3_us"] = r.gemm_in_fused["t3"] * 1e6
        ta[name]["gemm_isolated_us"] = r.gemm * 1e6
        print(f"  {name:40s} T3 {ta[name]['t3']:5.1f}%  T3-MCA {ta[name]['t3-mca']:5.1f}%  Ideal {ta[name]['ideal']:5.1f}%"
              f"  GEMM isolated {r.gemm * 1e6:5.0f} us, inside T3 {r.gemm_in_fused['t3'] * 1e6:5.0f} us")
    F["tnlg_fc1_tp16_take_apart"] = ta
    noi = fig16_with(sysm.scaled(row_interference=False), ("t3", "t3-mca"))
    F["no_row_interference_fig16"] = noi
    print(f"  Fig 16 set without row-buffer interference between streams: T3 {noi['t3']['geomean']:.1f}%/"
          f"{noi['t3']['max']:.1f}%, T3-MCA {noi['t3-mca']['geomean']:.1f}%/{noi['t3-mca']['max']:.1f}% "
          f"(model {sm['t3']['geomean']:.1f}/{sm['t3']['max']:.1f}, {sm['t3-mca']['geomean']:.1f}/{sm['t3-mca']['max']:.1f})")
    print("Sensitivity: MCA with a fixed occupancy threshold (entries) on the Fig 16 set")
    ths = {}
    for th in (5, 10, 30):
        ss = sysm.scaled(mca_thresholds=(th, th, th, th))
        ths[str(th)] = fig16_with(ss, ("t3-mca",))["t3-mca"]
        print(f"  threshold {th:3d}: T3-MCA geomean {ths[str(th)]['geomean']:5.1f}%  max {ths[str(th)]['max']:5.1f}%")
    F["mca_threshold_sensitivity"] = dict(fixed=ths, learned=learned)
    print("Sensitivity: remote-store (slot 0) buffering before the storing WGs stall (derived 100 KB)")
    rbs = {}
    for rb in (sysm.remote_store_buffer_bytes, 8 * 2 ** 20, 1e12):
        ss = sysm.scaled(remote_store_buffer_bytes=rb)
        rbs[str(rb)] = {"t3": sm["t3"], "t3-mca": sm["t3-mca"]} if rb == sysm.remote_store_buffer_bytes else \
            fig16_with(ss, ("t3", "t3-mca"))
        size = "unbounded" if rb >= 1e12 else f"{rb / 2 ** 20:.3f} MB"
        print(f"  {size:>10s}: T3 geomean {rbs[str(rb)]['t3']['geomean']:5.1f}% max "
              f"{rbs[str(rb)]['t3']['max']:5.1f}% | T3-MCA geomean {rbs[str(rb)]['t3-mca']['geomean']:5.1f}% "
              f"max {rbs[str(rb)]['t3-mca']['max']:5.1f}%")
    F["remote_store_buffer_sensitivity"] = rbs
    # first stage's remote stores (issue 15, fifth pass): the paper has them leave as the stage's output
    # burst (Fig 17a) after an isolated first stage (§4.5) and sent "in parallel" with the next stage (§4.1);
    # the model holds the next stage until the burst is on the link but for the remote-store buffer
    print("Take-apart: the first stage's remote stores (slot 0, remote_map) on T-NLG IP TP16")
    s16i = sysm.scaled(n_gpus=16)
    fs = {}
    for name, kw in (("burst at the stage end (model)", {}),
                     ("burst, unbounded remote-store buffer", dict(remote_store_buffer_bytes=1e12)),
                     ("trickled as the GEMM computes", dict(store_issue="remote_progress"))):
        ss = s16i.scaled(**kw) if kw else s16i
        pp = gemm.plan(ss, gemm.sublayer_dims(config.model("t-nlg"), 16, "IP"), cached_output=False)
        f = overlap.simulate(ss, pp, comm=True, policy="rr")
        fm = overlap.simulate(ss, pp, comm=True, policy="mca")
        r = study.evaluate(sysm.scaled(**kw) if kw else sysm, config.model("t-nlg"), 16, "IP", configs=("t3", "t3-mca"))
        fs[name] = dict(stage0_compute_end_us=float(f.stage_compute_end[0] * 1e6), slot0_send_start_us=float(f.send_start[0] * 1e6),
                        slot0_send_end_us=float(f.send_end[0] * 1e6), stage1_start_us=float(f.stage_start[1] * 1e6),
                        mca_threshold=fm.threshold, t3=pct(r.speedup("t3")), t3_mca=pct(r.speedup("t3-mca")),
                        set=(rbs[str(1e12)] if "unbounded" in name else
                             {"t3": sm["t3"], "t3-mca": sm["t3-mca"]} if not kw else fig16_with(sysm.scaled(**kw), ("t3", "t3-mca"))))
        v = fs[name]
        print(f"  {name:38s} stage 0 compute ends {v['stage0_compute_end_us']:5.1f} us, slot 0 on the link "
              f"{v['slot0_send_start_us']:5.1f}-{v['slot0_send_end_us']:5.1f} us, stage 1 starts {v['stage1_start_us']:5.1f} us, "
              f"MCA threshold {v['mca_threshold']:2d} | case T3 {v['t3']:4.1f}% T3-MCA {v['t3_mca']:4.1f}% | set T3 "
              f"{v['set']['t3']['geomean']:4.1f}/{v['set']['t3']['max']:4.1f}% T3-MCA {v['set']['t3-mca']['geomean']:4.1f}/"
              f"{v['set']['t3-mca']['max']:4.1f}%")
    F["first_stage_remote_stores"] = fs
    gap2x = pct(study.geomean(1 + r["x2"] / 100 for r in f20)) - pct(study.geomean(1 + r["x2_t3"] / 100 for r in f20))
    F["mca_gap_2xcu"] = gap2x
    print(f"T3-MCA - T3 geomean: {sm['t3-mca']['geomean'] - sm['t3']['geomean']:.1f} points (base), "
          f"{gap2x:.1f} points with GPU-2X-CU (RS-bound there; learned thresholds bind and hold RS back)")
    print("Link rate per ring step vs Fig 16's named cases (Ideal-GEMM-RS-Overlap, paper 50% / 15%)")
    lk = {}
    for bw in (75e9, 100e9, 150e9):
        ss = sysm.scaled(link_bw=bw)
        a = study.evaluate(ss, config.model("t-nlg"), 16, "FC-1", configs=("sequential", "ideal"))
        b = study.evaluate(ss, config.model("mega-gpt-2"), 16, "OP", configs=("sequential", "ideal"))
        lk[str(bw / 1e9)] = dict(tnlg_fc1_tp16=pct(a.speedup("ideal")), mega_op_tp16=pct(b.speedup("ideal")))
        print(f"  {bw / 1e9:5.0f} GB/s: T-NLG FC-1 TP16 {lk[str(bw / 1e9)]['tnlg_fc1_tp16']:5.1f}%  "
              f"Mega-GPT-2 OP TP16 {lk[str(bw / 1e9)]['mega_op_tp16']:5.1f}%")
    F["link_rate_named_cases"] = lk

    # ---------------- issue 15 second pass: where T3 loses, DRAM timing, write path, TP32 balance
    print("Take-apart: T3's loss on the largest-Ideal case (T-NLG FC-2 TP16), per stage: read phase (compute) "
          "vs output burst until the WGs retire (store acknowledged)")
    s16 = sysm.scaled(n_gpus=16)
    pu16 = gemm.plan(s16, gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-2"), cached_output=False)
    ph = {}
    for name, kw in (("alone", dict(comm=False)), ("t3 (round-robin)", dict(comm=True, policy="rr")),
                     ("t3-mca", dict(comm=True, policy="mca"))):
        f = overlap.simulate(s16, pu16, **kw)
        rd = (f.stage_compute_end - f.stage_start)[1:] * 1e6
        ep = (f.stage_end - f.stage_compute_end)[1:] * 1e6
        ph[name] = dict(read_phase_us=float(rd.mean()), output_burst_us=float(ep.mean()), gemm_end_us=f.gemm_end * 1e6)
        print(f"  {name:17s} stages 2..{pu16.stages}: read phase {rd.mean():5.1f} us, output burst {ep.mean():5.1f} us "
              f"(stage output {pu16.out_bytes[1] / 1e6:.1f} MB); GEMM done at {f.gemm_end * 1e6:5.0f} us")
    F["t3_loss_phases_tnlg_fc2_tp16"] = ph
    fcip = [r for r in rows if r.sublayer != "OP" and r.sublayer != "FC-1"]
    loss = np.array([pct(r.speedup("ideal")) - pct(r.speedup("t3")) for r in fcip])
    inten = np.array([r.traffic["t3"]["gemm_reads"] / r.gemm for r in fcip]) / 1e9
    corr = float(np.corrcoef(loss, inten)[0, 1])
    F["t3_loss_vs_gemm_read_rate"] = dict(rows=[dict(model=r.model, tp=r.tp, sublayer=r.sublayer, loss_points=float(a),
                                                     gemm_read_GBps=float(b)) for r, a, b in zip(fcip, loss, inten)],
                                          correlation=corr)
    print("  Ideal - T3 (points) vs the GEMM's own DRAM read rate in T3 (GB/s), FC-2 and IP: "
          + ", ".join(f"{r.model[:5]} TP{r.tp} {r.sublayer} {a:4.1f}/{b:4.0f}" for r, a, b in zip(fcip, loss, inten))
          + f"; correlation {corr:+.2f} (§6.1.2: the loss follows the GEMM-RS DRAM contention)")
    print("Take-apart: WG retirement (one assumption): stage barrier (model) vs WGs retiring one by one as their "
          "stores are acknowledged (next stage's WGs take the freed slots)")
    wr = {"stage barrier (model)": {"t3": sm["t3"], "t3-mca": sm["t3-mca"]}}
    wr["WG-granular retirement"] = fig16_with(sysm.scaled(wg_retire=True), ("t3", "t3-mca"))
    wr["WG-granular, MCA threshold always 'no limit'"] = fig16_with(
        sysm.scaled(wg_retire=True, mca_thresholds=(None, None, None, None)), ("t3", "t3-mca"))
    for k, v in wr.items():
        print(f"  {k:44s} T3 {v['t3']['geomean']:5.1f}%/{v['t3']['max']:5.1f}%  T3-MCA {v['t3-mca']['geomean']:5.1f}%/"
              f"{v['t3-mca']['max']:5.1f}% (geomean/max)")
    mg = study.evaluate(sysm.scaled(wg_retire=True), config.model("mega-gpt-2"), 8, "FC-2",
                        configs=("sequential", "t3", "t3-mca"))
    wr["mega_fc2_tp8_wg_retire"] = dict(learned_threshold=mg.mca_threshold_entries,
                                        isolated_first_stage_occupancy=float(
                                            overlap.simulate(sysm.scaled(n_gpus=8, wg_retire=True),
                                                             gemm.plan(sysm.scaled(n_gpus=8, wg_retire=True),
                                                                       gemm.sublayer_dims(config.model("mega-gpt-2"), 8, "FC-2"),
                                                                       cached_output=False), comm=False).mean_occupancy),
                                        t3=pct(mg.speedup("t3")), t3mca=pct(mg.speedup("t3-mca")))
    print(f"  with WG-granular retirement Mega-GPT-2 FC-2 TP8 learns threshold {mg.mca_threshold_entries:.0f}; the GEMM alone "
          f"keeps {wr['mega_fc2_tp8_wg_retire']['isolated_first_stage_occupancy']:.0f} entries queued on average, so MCA "
          f"admits RS only through the starvation limit: T3-MCA {pct(mg.speedup('t3-mca')):.1f}% < T3 {pct(mg.speedup('t3')):.1f}%")
    F["wg_retire_take_apart"] = wr
    print("Take-apart: HBM2 timing line (system.json t_row_miss/tRTW: Accel-Sim's 1 GHz line = Table 1's clock)")
    dt_ = {"1 GHz line (model: tRP+tRCD 28, tRTW 15)": {"t3": sm["t3"], "t3-mca": sm["t3-mca"]},
           "850 MHz line (first pass: 24, 13)": fig16_with(sysm.scaled(t_row_miss=24, tRTW=13), ("t3", "t3-mca")),
           "1 GHz line + tRAS 33": fig16_with(sysm.scaled(tRAS=33), ("t3", "t3-mca")),
           "1 GHz + 256 write-path entries per channel": fig16_with(sysm.scaled(write_path_entries=256), ("t3", "t3-mca"))}
    for k, v in dt_.items():
        print(f"  {k:44s} T3 {v['t3']['geomean']:5.1f}%/{v['t3']['max']:5.1f}%  T3-MCA {v['t3-mca']['geomean']:5.1f}%/"
              f"{v['t3-mca']['max']:5.1f}% (geomean/max)")
    F["dram_timing_take_apart"] = dt_
    print("Take-apart: row locality (system.json row_locality): rows shared by address region vs by request stream")
    rl = {"region (model), watermarks " + "/".join(map(str, sysm.write_drain)): {"t3": sm["t3"], "t3-mca": sm["t3-mca"]},
          "region, watermarks 16/8": wds["16/8"],
          "stream (first pass), watermarks 16/8": fig16_with(sysm.scaled(row_locality="stream", write_drain=(16, 8)),
                                                             ("t3", "t3-mca"))}
    for k, v in rl.items():
        print(f"  {k:44s} T3 {v['t3']['geomean']:5.1f}%/{v['t3']['max']:5.1f}%  T3-MCA {v['t3-mca']['geomean']:5.1f}%/"
              f"{v['t3-mca']['max']:5.1f}% (geomean/max)")
    F["row_locality_take_apart"] = rl
    print("Take-apart: what sets T3's maximum (issue 15, fourth pass): the DRAM write handling, one model at a time")
    s16b = sysm.scaled(n_gpus=16)
    wh_models = (("unified FR-FCFS + write drain " + "/".join(map(str, sysm.write_drain)) + " (model)", {}),
                 ("GPGPU-Sim bank heads, no write drain (SM7_QV100)", dict(mc_scheduler="bank_heads")),
                 ("separate write queue 64:56:32, MCA on reads", dict(write_queue_entries=64, write_drain=(56, 32),
                                                                     mca_occupancy="reads")),
                 ("separate write queue 32:28:16, MCA on reads", dict(write_queue_entries=32, write_drain=(28, 16),
                                                                     mca_occupancy="reads")),
                 ("stores issued as the GEMM computes", dict(store_issue="progress")))
    burst = {}
    for name, kw in wh_models[:4] + (("no turnaround (tRTW=tWTR=0)", dict(tRTW=0, tWTR=0)),
                                     ("no turnaround, no row interference",
                                      dict(tRTW=0, tWTR=0, row_interference=False))):
        ss = s16b.scaled(**kw) if kw else s16b
        pp = gemm.plan(ss, gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-2"), cached_output=False)
        burst[name] = {}
        for pol in ("rr", "compute_first"):
            f = overlap.simulate(ss, pp, comm=True, policy=pol)
            burst[name][pol] = float(((f.stage_end - f.stage_compute_end)[1:-1] * 1e6).mean())
        print(f"  T-NLG FC-2 TP16 output burst per stage, {name:52s} round-robin {burst[name]['rr']:5.1f} us, "
              f"compute-first {burst[name]['compute_first']:5.1f} us")
    wh = {}
    for name, kw in wh_models:
        wh[name] = {"t3": sm["t3"], "t3-mca": sm["t3-mca"]} if not kw else fig16_with(sysm.scaled(**kw), ("t3", "t3-mca"))
    for k in ("16/8", "12/6", "12/7", "40/16"):
        wh[f"unified FR-FCFS + write drain {k}"] = wds[k]
    for k, v in wh.items():
        print(f"  {k:56s} T3 {v['t3']['geomean']:5.1f}%/{v['t3']['max']:5.1f}%  T3-MCA {v['t3-mca']['geomean']:5.1f}%/"
              f"{v['t3-mca']['max']:5.1f}% (geomean/max)")
    hit = [v["t3"]["geomean"] for v in wh.values() if v["t3"]["max"] >= P["fig16_t3_max"] * 100 - 5]
    tmm = dict(models=wh, burst_tnlg_fc2_tp16_us=burst,
               min_t3_geomean_with_max_in_band=min(hit) if hit else None,
               t3_spread_points={k: v["t3"]["max"] - v["t3"]["geomean"] for k, v in wh.items()})
    F["t3_max_mechanism"] = tmm
    print(f"  every model with T3 max >= {P['fig16_t3_max'] * 100 - 5:.0f}% has T3 geomean >= "
          f"{tmm['min_t3_geomean_with_max_in_band']:.1f}% (band <= {P['fig16_t3_geomean'] * 100 + 3:.0f}%); T3 spread "
          f"max - geomean {min(tmm['t3_spread_points'].values()):.1f}-{max(tmm['t3_spread_points'].values()):.1f} "
          "points (paper 19)")
    print("TP32 (§6.4): Ideal-GEMM-RS-Overlap maximum vs a per-step fixed cost (alpha, in the sequential RS/AG) and "
          "the GEMM's MMA efficiency")
    tp32 = {}
    for lab, kw in (("model (alpha 0.5 us)", {}), ("alpha 5 us", dict(link_latency=5e-6)),
                    ("alpha 10 us", dict(link_latency=10e-6)), ("alpha 20 us", dict(link_latency=20e-6)),
                    ("MMA efficiency 0.6", dict(mma_eff=0.6)), ("MMA efficiency 1.0", dict(mma_eff=1.0))):
        ss = sysm.scaled(**kw) if kw else sysm
        rr = [study.evaluate(ss, config.model(k), 32, sl, configs=("sequential", "ideal"))
              for k in ("gpt-3", "palm", "mt-nlg") for sl in config.SUBLAYERS]
        best = max(rr, key=lambda r: r.speedup("ideal"))
        tp32[lab] = dict(ideal_geomean=pct(study.geomean(r.speedup("ideal") for r in rr)),
                         ideal_max=pct(best.speedup("ideal")), max_case=f"{best.model} {best.sublayer}",
                         gemm_over_rs=best.gemm / best.rs)
        print(f"  {lab:22s} Ideal geomean {tp32[lab]['ideal_geomean']:5.1f}%  max {tp32[lab]['ideal_max']:5.1f}% "
              f"({best.model} {best.sublayer}, GEMM/RS {best.gemm / best.rs:.2f})")
    F["tp32_ideal_balance"] = tp32

    # ---------------- cross-check: cycle-level tracker reference on a 4-GPU, 4-stage instance
    sx = config.system(4).scaled(cus=8)
    dx = gemm.GemmDims("xcheck", 1024, 1024, 512)
    px = gemm.plan(sx, dx, cached_output=False)
    fx = overlap.simulate(sx, px, comm=True, record=True, dt=0.05e-6)
    cx = A.configure_gemm_rs(1024, 1024, sx.wg_tile, sx.wf_tile, px.stages, 4)
    xr = tracker_ref.replay(cx, fx, sx.clock)
    print(f"Tracker cross-check (4 GPUs, {px.stages} stages, {xr['entries']} WF tiles): {xr['fired']} triggers, "
          f"problems: {xr['problems'] or 'none'}")
    F["tracker_crosscheck"] = xr

    # ---------------- same stream through the real Tracker: golden TrackerModel and RTL (Verilator)
    import tempfile

    from tessera.tb.runner import run as rtl_run
    from tessera.tb.t3 import xcheck as X
    gx = X.golden_crosscheck()
    with tempfile.TemporaryDirectory() as tmp:
        res = Path(tmp) / "r.jsonl"
        rtl_run("tracker", X.XCHECK_PARAMS, "tessera.tb.t3.test_xcheck", testcase="tracker_xcheck",
                seed=1, result_file=res)          # raises if RTL != golden or a check fails
        rr = json.loads(res.read_text().splitlines()[-1])
    F["rtl_crosscheck"] = dict(golden=gx, rtl=rr, rtl_equals_golden=True,
                               params=X.XCHECK_PARAMS)
    print(f"Tracker RTL cross-check: {rr['updates']} model updates -> {rr['triggers']} triggers, RTL == "
          f"TrackerModel (cycle, wg, wf, addr); lateness vs model ready + {X.LATENCY} cycles: "
          f"max {gx['max_lateness']} ({gx['late_triggers']} late, serialisation of same-cycle model "
          f"events, model step {gx['model_step_cycles']} cycles); problems: {gx['problems'] or 'none'}")

    util = [r.gemm_dram_util for r in rows]
    inf = str(1e12)
    bl = F["large"]["summary"]
    tnl = ta["model"]
    pc = F["fig16_per_case"]
    best_t3 = max(rows, key=lambda r: r.speedup("t3"))
    wnl = wr["WG-granular, MCA threshold always 'no limit'"]
    wd_old = wds["40/16"]
    note = [
        "Closing note (larger differences):",
        f"* Row locality by address region (T3's chunk traffic - NMC output stores, the neighbour's updates and the "
        f"DMA reads of the same chunk - shares rows; system.json row_locality) instead of by stream: with the stream "
        f"grouping at the calibrated watermarks T3 is {rl['stream (first pass), watermarks 16/8']['t3']['geomean']:.1f}/"
        f"{rl['stream (first pass), watermarks 16/8']['t3']['max']:.1f}% (geomean/max), by region "
        f"{rl['region, watermarks 16/8']['t3']['geomean']:.1f}/{rl['region, watermarks 16/8']['t3']['max']:.1f}% at 16/8 and "
        f"{sm['t3']['geomean']:.1f}/{sm['t3']['max']:.1f}% at the recalibrated {'/'.join(map(str, sysm.write_drain))} (T3-MCA {sm['t3-mca']['geomean']:.1f}/"
        f"{sm['t3-mca']['max']:.1f}%). 40/16 (first pass): T3 / T3-MCA {wd_old['t3']['geomean']:.1f} / "
        f"{wd_old['t3-mca']['geomean']:.1f}% (MCA below T3: parked writes keep the queue above every §6.1.3 threshold).",
        f"* T3 geomean {sm['t3']['geomean']:.1f}% vs 20 and T3 max {sm['t3']['max']:.1f}% vs 39: the two move together with "
        f"the write-drain watermarks (12/6: {wds['12/6']['t3']['geomean']:.1f}/{wds['12/6']['t3']['max']:.1f}%; system.json "
        "write_drain_watermarks lists 8 settings): the model's T3 spread "
        f"(max - geomean, {sm['t3']['max'] - sm['t3']['geomean']:.1f} points) is about half the paper's (19). Why: the loss is "
        f"in every stage's output burst, not in the GEMM's read phase. On T-NLG FC-2 TP16 a stage reads for "
        f"{ph['alone']['read_phase_us']:.0f} us alone / {ph['t3 (round-robin)']['read_phase_us']:.0f} us in T3, its 5 MB "
        f"output takes {ph['alone']['output_burst_us']:.0f} us alone, {ph['t3 (round-robin)']['output_burst_us']:.0f} us in "
        f"T3, {ph['t3-mca']['output_burst_us']:.0f} us with MCA (round-robin mixes the NMC stores with the DMA reads of the "
        "chunk they complete: read/write turnarounds). Every stage of every case pays it, so Ideal - T3 follows the "
        f"GEMM's read rate only partly (correlation {corr:+.2f}; §6.1.2 makes the GEMM-RS DRAM contention the driver). WGs retiring one by one instead of a stage barrier "
        f"(one assumption) gives T3 {wr['WG-granular retirement']['t3']['geomean']:.1f}/{wr['WG-granular retirement']['t3']['max']:.1f}% "
        f"(T3 targets met) but T3-MCA {wr['WG-granular retirement']['t3-mca']['geomean']:.1f}%: the GEMM's own queue "
        f"occupancy then sits above the learned 30-entry threshold and MCA starves RS; 'no limit' everywhere gives "
        f"{wnl['t3-mca']['geomean']:.1f}/{wnl['t3-mca']['max']:.1f}% (compute-first plus the starvation limit starves it as "
        "well). Not adopted: it would need the MCA learning/threshold model redone.",
        "* T3 maximum, fourth pass (bench t3_max_mechanism): the T3 loss on the largest case is the output burst under "
        f"round-robin (T-NLG FC-2 TP16: {burst[wh_models[0][0]]['rr']:.1f} us per stage vs "
        f"{burst[wh_models[0][0]]['compute_first']:.1f} us with compute first; "
        f"{burst['no turnaround (tRTW=tWTR=0)']['rr']:.1f} us without read/write turnarounds, "
        f"{burst['no turnaround, no row interference']['rr']:.1f} "
        "us without row interference as well): the DMA reads the Tracker triggers on each acknowledged store are mixed "
        "1:1 with the stores. Four structurally different write-handling models - the unified queue with write drain "
        "(model, watermark sweep), GPGPU-Sim's bank-head scheduler without write drain (the SM7_QV100 config the "
        "paper's simulator uses), a separate write queue (64:56:32 Accel-Sim HBM, 32:28:16 GPGPU-Sim default) and "
        "stores issued as the GEMM computes (against Fig 17a) - all trade the T3 maximum against the T3 geomean on one "
        f"line: with the maximum within 5 points of 39 the geomean is >= {tmm['min_t3_geomean_with_max_in_band']:.1f}% "
        f"(needs <= 23). The model's T3 spread (max - geomean) is {min(tmm['t3_spread_points'].values()):.0f}-"
        f"{max(tmm['t3_spread_points'].values()):.0f} points against the paper's 19, because the burst costs every "
        "FC/IP stage about the same (5 MB of output per stage at TP8 and TP16) while §6.1.2 makes the loss follow "
        "GEMM-read contention; no in-paper write-handling or store-issue mechanism widens it (the GEMM's read "
        "latency tolerance, gemm_prefetch 400-500 ns and gemm_mlp_factor 0.5-1.5 with the separate write queue, "
        "moves the geomean by < 1 point). The calibration stays at the T3 geomean and the maximum is the miss.",
        f"* Where the T3 loss comes from on T-NLG FC-1 TP16 (GEMM {tnl['gemm_in_t3_us']:.0f} us inside T3 vs "
        f"{tnl['gemm_isolated_us']:.0f} us alone): T3 {tnl['t3']:.1f}% -> {ta['no read/write turnaround (tRTW=tWTR=0)']['t3']:.1f}% "
        f"without turnarounds, {ta['no row-buffer interference between streams']['t3']:.1f}% without row interference, "
        f"{ta['no interference, no turnaround']['t3']:.1f}% without both (Ideal {tnl['ideal']:.1f}%).",
        f"* T3-MCA max {sm['t3-mca']['max']:.1f}% (HBM2 timing from Table 1's 1 GHz: tRP+tRCD 28, tRTW 15; the 850 MHz line "
        f"gives {dt_['850 MHz line (first pass: 24, 13)']['t3-mca']['max']:.1f}%). Slot-0 remote stores (100 KB in flight) "
        f"hold it back: unbounded buffering gives {ta['unbounded remote-store buffer']['t3-mca']:.1f}% on T-NLG FC-1 TP16 but "
        f"T3-MCA geomean {rbs[inf]['t3-mca']['geomean']:.1f}%.",
        f"* §6.4 TP32: T3-MCA {bl['t3-mca']['geomean']:.1f}% / {bl['t3-mca']['max']:.1f}% vs 29 / 35; Ideal "
        f"{bl['ideal']['geomean']:.1f}% / {bl['ideal']['max']:.1f}%. The K of the TP32 GEMMs (384-2560) is dense enough "
        "that some case always has GEMM ~= RS, so the Ideal maximum stays near 50% whatever the per-step cost or GEMM "
        "rate: a per-step fixed cost of 5/10/20 us gives "
        + "/".join(f"{tp32[k]['ideal_max']:.1f}" for k in ("alpha 5 us", "alpha 10 us", "alpha 20 us"))
        + "%, MMA efficiency 0.6/1.0 "
        + "/".join(f"{tp32[k]['ideal_max']:.1f}" for k in ("MMA efficiency 0.6", "MMA efficiency 1.0"))
        + f"%. The paper's 35% maximum therefore means MCA ~{bl['ideal']['max'] - bl['t3-mca']['max']:.0f} points below "
        "Ideal on the balanced case (GPT-3 IP), as §6.1.3 reports for T-NLG FC-1 TP16; in the model that gap is the "
        "NMC updates' read/write turnarounds slowing the GEMM under MCA too (write-drain calibration, "
        "system.json write_drain_watermarks: 12/7 gives 32.1 / 42.4%).",
        f"* MCA's occupancy threshold: learned thresholds {learned}; fixed thresholds 5/10/30 give "
        + "/".join(f"{ths[k]['geomean']:.1f}" for k in ("5", "10", "30"))
        + "% geomean: 30 helps the memory-intensive GEMMs (test_mca_threshold_beats_compute_first_on_a_"
        "memory_intensive_gemm), 5/10 hold RS back behind the GEMM's own occupancy.",
        f"* Remote (slot-0) stores complete at the neighbour's MC: with 100 KB in flight the storing WGs "
        f"wait for the link; with unbounded buffering T3 / T3-MCA are {rbs[inf]['t3']['geomean']:.1f} / "
        f"{rbs[inf]['t3-mca']['geomean']:.1f}% (see remote-store sensitivity).",
        "* Fig 16 case by case (fifth pass, bench fig16_per_case; the bars are not in the extracted text, so the paper "
        "side is §6.1's per-case statements): the model holds "
        f"{sum(k['held'] for k in pc['text_checks'])}/{len(pc['text_checks'])} of them (named Ideal max/min cases, OP T3 near and "
        "sometimes above Ideal, every FC case's T3 > 1.15 x Ideal runtime, T3 max not FC, T3-MCA max not T-NLG FC-1 "
        "TP16, OP GEMM least slowed inside T3); not held: "
        + ("; ".join(f"{k['name']} ({k['detail']})" for k in pc['text_checks'] if not k['held']) or "none")
        + " - the model's T3 GEMM loss is mostly stage retirement (store admission), the same for every sub-layer, "
        "while §6.1.2 puts it on read stalls, least for OP (bench t3_max_reading)."
        f" The paper's own statements put its 39% T3 maximum in an OP or IP case (FC T3 < {pc['fc_t3_ceiling']:.1f}%), "
        "which is where the model's maximum is too (" + max(pc['rows'], key=lambda c: c['t3'])['case'] + "). The model's "
        "non-FC cases with Ideal-RS+NMC >= 39%: " + "; ".join(
            f"{c['case']} T3 {c['t3']:.1f} (" + ", ".join(f"{k.split(' (')[0]} {v:.1f}" for k, v in list(c['t3_by_variant'].items())[1:])
            + ")" for c in pc['t3_max_candidates'])
        + ". The one §6.1.2's mechanism puts near Ideal (lowest GEMM read rate, RS-bound) is T-NLG IP TP16; WG-granular "
        "retirement alone brings it to the band, but that variant slows the isolated T3 GEMM with the 12/8 drain "
        "calibration (" + ", ".join(f"{k} {v:.0f} us" for k, v in pc['wg_retire_isolated_gemm_us'].items())
        + ") and its T3-MCA collapses (bench wg_retire_take_apart; starvation limits 4-64 give T3-MCA geomean 19.5-20.0%, "
        "t3_fig16_variant.py); recalibrating the drain for it lands on the same line (40/16: T3 31.0/43.9%, 20/10: "
        "27.8/37.7%).",
        "* FC-1 and FC-2 have identical GEMM shapes here (the paper's differ by transposed inputs and "
        "kernels).",
        "* Fig 19 follows the sub-layer results; the end-to-end layer is built from the same GEMM model "
        "plus an unfused-attention estimate instead of MLPerf-BERT measurements.",
    ]
    print("\n".join(note))
    out["closing_note"] = note
    out["runtime_s"] = time.time() - t0
    (OUT / "t3_repro.json").write_text(json.dumps(out, indent=1, default=float))
    print(f"Fig 16 set simulated in {out['fig16_runtime_s']:.1f} s")
    print(f"wrote {OUT / 't3_repro.json'} and plots in {PLOTS}/ ({out['runtime_s']:.1f} s)")
    return 0 if not (xr["problems"] or gx["problems"]) else 1


if __name__ == "__main__":
    sys.exit(main())
