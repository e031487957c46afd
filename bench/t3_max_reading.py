"""Fig 16's T3 maximum read from the paper, and what the model's T3 loss is made of (T3 §3.2.2,
§6.1.1-§6.1.3, Fig 17; issue 15).

Question: which case is the paper's 39 % T3 maximum, what does the paper say limits T3 there, and is
there an assumption the paper contradicts whose change moves the model's T3 maximum (30.5 %) without
moving the geomean bands?

Prints, and writes ``build/bench/t3_max_reading.json``:

* ``paper_reading`` - where the 39 % can lie from the text alone (Ideal maximum case, FC ceiling, OP Ideal
  range) and the model's cases that could host it;
* ``gemm_loss`` - per case, the T3 GEMM's stage time split into its compute/read phase and its retirement
  (the stage's stores acknowledged), alone (uncached NMC output, no communication) and inside T3, so the
  GEMM's slowdown in T3 is attributed to read stalls or to store admission; against §6.1.2's statement
  that the RS traffic has "little impact on the GEMMs' progress" for OP (text check ``OP GEMM``);
* ``variants`` - the Fig 16 set under each structural candidate (one System switch or two), with the
  issue's bands (T3 17-23 / >= 34, T3-MCA 27-33 / >= 42, MCA - T3 >= 7) and the §6.1 text checks.

Run: ``nice -n 10 .venv/bin/python bench/t3_max_reading.py`` (about 6 minutes on a loaded machine).
Left out: §6.4 TP32 and Fig 19 (computed by bench/t3_stage0_takeapart.py's ``large_and_fig19`` only for a
variant that keeps every Fig 16 band; none does).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from t3_stage0_takeapart import CFGS, NO_CONTENTION, NO_HOLD, large_and_fig19, pct, set_summary  # noqa: E402

from tessera.sim_models.t3 import cases, config, study  # noqa: E402

OUT = Path("build/bench")
P39 = config.paper()["fig16_t3_max"]
UNIQUE = [(k, tp, sl) for k in ("mega-gpt-2", "t-nlg") for tp in (8, 16) for sl in ("OP", "FC-2", "IP")]
VARIANTS = (
    ("model", {}),
    ("no DRAM contention (upper bound: no turnaround, no row interference, all row hits)", NO_CONTENTION),
    ("WG-granular retirement (no stage barrier)", dict(wg_retire=True)),
    ("no stage-0 hold (unbounded remote-store buffer)", NO_HOLD),
    ("WG-granular + no stage-0 hold", dict(NO_HOLD, wg_retire=True)),
    ("Accel-Sim SM7_QV100 scheduler (bank heads, no write drain)", dict(mc_scheduler="bank_heads")),
    ("WG-granular + Accel-Sim bank heads", dict(wg_retire=True, mc_scheduler="bank_heads")),
)


def rows_of(sysm):
    return [study.evaluate(sysm, config.model(k), tp, sl, configs=CFGS)
            for k in ("mega-gpt-2", "t-nlg") for tp in config.model(k).tp for sl in config.SUBLAYERS]


def bands(st: dict) -> dict:
    return {"t3_geomean_17_23": 17 <= st["t3"]["geomean"] <= 23, "t3_max_ge_34": st["t3"]["max"] >= 34,
            "t3mca_geomean_27_33": 27 <= st["t3-mca"]["geomean"] <= 33, "t3mca_max_ge_42": st["t3-mca"]["max"] >= 42,
            "mca_minus_t3_ge_7": st["mca_minus_t3"] >= 7}


def paper_reading(P: dict, tab: list[dict]) -> dict:
    op_ideal = max(c["ideal_rs_nmc"] for c in tab if c["sublayer"] == "OP")
    return dict(
        ideal_max_case=P["fig16_t3mca_far_from_ideal_case"],
        not_the_ideal_max_case="§6.1.3 names T-NLG FC-1 TP16 (the Ideal maximum, 50 %) as a case where T3-MCA is far "
                               "from Ideal, because L2 bypassing of the GEMM's NMC writes slows the GEMM; T3 bypasses L2 "
                               "the same way, so T3 is far from Ideal there too and cannot be the 39 % maximum",
        fc_t3_ceiling=cases.fc_t3_ceiling(P),
        op_ideal_rs_nmc_max_model=op_ideal,
        reading=f"FC cases are > 15 % slower than Ideal (§6.1.2) so FC T3 < {cases.fc_t3_ceiling(P):.1f} %; OP T3 is "
                f"close to Ideal but the model's OP Ideal-RS+NMC is <= {op_ideal:.1f} % (and the paper's OP minimum is "
                "15 %), so the 39 % is an IP case: one whose Ideal-RS+NMC reaches 39 % and on which T3 comes within a few "
                "points of it. The paper names no limiter for that case; its general one is GEMM-RS DRAM contention "
                "stalling the GEMM's reads (§6.1.2, Fig 17), weakest where the GEMM's inputs fit the LLC (OP, §3.2.2)",
        candidates=[dict(case=c["case"], ideal=c["ideal"], ideal_rs_nmc=c["ideal_rs_nmc"], t3=c["t3"],
                         gemm_read_GBps=c["gemm_read_GBps"], rs_bound=c["rs_bound"])
                    for c in cases.t3_max_candidates(tab, P)])


def gemm_loss(sysm, key, tp, sl) -> dict:
    """The T3 GEMM's stage time split into compute (read phase, read stalls included) and retirement (the
    stage's stores acknowledged), alone and inside T3 (round-robin)."""
    s = sysm.scaled(n_gpus=tp)
    pu, alone = study.gemm_alone_uncached(sysm, config.model(key), tp, sl)
    r = study.evaluate(sysm, config.model(key), tp, sl, configs=CFGS)
    f = r.fused["t3"]
    out = dict(case=f"{key} TP{tp} {sl}", stages=pu.stages, gemm_isolated_cached_us=r.gemm * 1e6,
               gemm_alone_uncached_us=alone.time * 1e6, gemm_in_t3_us=f.gemm_end * 1e6,
               gemm_slowdown_t3=f.gemm_end / r.gemm, read_GBps=r.traffic["sequential"]["gemm_reads"] / r.gemm / 1e9,
               t3=pct(r.speedup("t3")), ideal=pct(r.speedup("ideal")), ideal_rs_nmc=pct(r.speedup("ideal-rs-nmc")),
               sequential_us=r.times["sequential"] * 1e6, ag_us=r.ag * 1e6, rs_nmc_us=r.rs_nmc * 1e6,
               stage0_compute_us=float(pu.t_compute[0] * 1e6), fc=cases.is_fc(sl),
               weight_MB=pu.dims.K * pu.dims.N * s.elem_bytes / 1e6, activation_MB=pu.dims.M * pu.dims.K * s.elem_bytes / 1e6,
               inputs_fit_l2=bool((pu.dims.M + pu.dims.N) * pu.dims.K * s.elem_bytes <= s.l2_bytes))
    # what hosting the paper's 39 % would take: the fused GEMM-RS within Sequential / 1.39 - AG; its floor is the
    # NMC RS behind stage 0's compute (the link starts with stage 0's stores) or the T3 GEMM alone
    budget = r.times["sequential"] / (1 + P39) - r.ag
    floor = study.fused_floor(r, pu, alone)
    out.update(fused_budget_for_39_us=budget * 1e6, fused_floor_us=floor * 1e6, can_host_39=bool(floor <= budget),
               allowed_gemm_slowdown_for_39=budget / alone.time, fused_t3_us=(r.times["t3"] - r.ag) * 1e6)
    for lab, x in (("alone", alone), ("t3", f)):
        out[f"{lab}_compute_us_total"], out[f"{lab}_retire_us_total"] = study.stage_phase_us(x)
        out[f"{lab}_stage0_retire_us"] = float((x.stage_end[0] - x.stage_compute_end[0]) * 1e6)
    ex_c = out["t3_compute_us_total"] - out["alone_compute_us_total"]
    ex_r = out["t3_retire_us_total"] - out["alone_retire_us_total"]
    out["extra_compute_us"], out["extra_retire_us"] = ex_c, ex_r
    out["retire_share_of_extra"] = ex_r / (ex_c + ex_r) if ex_c + ex_r > 0 else float("nan")
    return out


def main() -> int:
    t0 = time.time()
    OUT.mkdir(parents=True, exist_ok=True)
    P = config.paper()
    sysm = config.system()
    rows = rows_of(sysm)
    tab = cases.case_table(rows)
    res = dict(paper_reading=paper_reading(P, tab))
    print("Where the paper's 39 % T3 maximum can lie (text only):")
    print("  " + res["paper_reading"]["reading"])
    for c in res["paper_reading"]["candidates"]:
        print(f"    candidate {c['case']:20s} Ideal {c['ideal']:5.1f} +NMC {c['ideal_rs_nmc']:5.1f} model T3 {c['t3']:5.1f} "
              f"reads {c['gemm_read_GBps']:4.0f} GB/s {'RS' if c['rs_bound'] else 'GEMM'}-bound")

    print("The T3 GEMM's loss, stage compute (read phase) vs retirement (stores acknowledged), us summed over stages:")
    print(f"  {'case':20s} {'rd GB/s':>7s} {'GEMMx':>6s} {'comp alone':>10s} {'comp T3':>8s} {'ret alone':>9s} {'ret T3':>7s} "
          f"{'retire share':>12s}")
    gl = []
    for key, tp, sl in UNIQUE:
        g = gemm_loss(sysm, key, tp, sl)
        gl.append(g)
        print(f"  {g['case']:20s} {g['read_GBps']:7.0f} {g['gemm_slowdown_t3']:6.2f} {g['alone_compute_us_total']:10.0f} "
              f"{g['t3_compute_us_total']:8.0f} {g['alone_retire_us_total']:9.0f} {g['t3_retire_us_total']:7.0f} "
              f"{g['retire_share_of_extra']:12.2f}")
    res["gemm_loss"] = gl
    print("What hosting the paper's 39 % T3 needs per case (fused GEMM-RS budget vs its floor = max(NMC RS + stage-0 "
          "compute, T3 GEMM alone); allowed T3 GEMM slowdown over its uncached run alone):")
    for g in gl:
        print(f"  {g['case']:20s} Ideal+NMC {g['ideal_rs_nmc']:5.1f} budget {g['fused_budget_for_39_us']:6.0f} floor "
              f"{g['fused_floor_us']:6.0f} {'can' if g['can_host_39'] else 'cannot'} host 39; allowed GEMM x"
              f"{g['allowed_gemm_slowdown_for_39']:.2f} (model T3 fused {g['fused_t3_us']:.0f} us); inputs "
              f"{g['weight_MB'] + g['activation_MB']:.1f} MB {'fit' if g['inputs_fit_l2'] else 'miss'} the 16 MB L2"
              f"{' [FC]' if g['fc'] else ''}")
    res["hosts_for_39"] = [g["case"] for g in gl if g["can_host_39"] and not g["fc"]]
    chk = {k["name"].split(":")[0]: k for k in cases.text_checks(tab, P)}
    res["op_gemm_check"] = chk["OP GEMM"]
    print(f"  §6.1.2 OP GEMM check: {'held' if chk['OP GEMM']['held'] else 'NOT held'} - {chk['OP GEMM']['detail']}")

    print("Fig 16 set per structural candidate (T3 geomean/max, T3-MCA geomean/max, MCA - T3; bands; text checks):")
    var = {}
    for lab, kw in VARIANTS:
        s = sysm.scaled(**kw) if kw else sysm
        rs = rows_of(s)
        st = set_summary(rs)
        tb = cases.case_table(rs)
        ck = cases.text_checks(tb, P)
        b = bands(st)
        v = dict(overrides={k: repr(x) for k, x in kw.items()}, summary=st, bands=b,
                 failed_text_checks=[k["name"] for k in ck if not k["held"]],
                 op_gemm_slowdown_max=max(c["gemm_slowdown_t3"] for c in tb if c["sublayer"] == "OP"),
                 non_op_gemm_slowdown_min=min(c["gemm_slowdown_t3"] for c in tb if c["sublayer"] != "OP"),
                 fc_t3_over_ideal_runtime_min=min(c["t3_over_ideal_runtime"] for c in tb if cases.is_fc(c["sublayer"])))
        if all(b.values()) and not v["failed_text_checks"]:
            v["large_and_fig19"] = large_and_fig19(s)
        var[lab] = v
        print(f"  {lab[:62]:62s} T3 {st['t3']['geomean']:5.1f}/{st['t3']['max']:5.1f} ({st['t3']['max_case']}) "
              f"MCA {st['t3-mca']['geomean']:5.1f}/{st['t3-mca']['max']:5.1f} d {st['mca_minus_t3']:5.1f} | "
              f"misses {[k for k, ok in b.items() if not ok] or 'none'} | OP GEMM x{v['op_gemm_slowdown_max']:.2f} vs "
              f"others >= x{v['non_op_gemm_slowdown_min']:.2f} | FC T3/Ideal >= {v['fc_t3_over_ideal_runtime_min']:.3f} | "
              f"failed checks {len(v['failed_text_checks'])}")
    res["variants"] = var
    m = var["model"]["summary"]
    wr = var["WG-granular retirement (no stage barrier)"]["summary"]
    hosts = res["hosts_for_39"]
    ipt = next(g for g in gl if g["case"] == "t-nlg TP16 IP")
    res["finding_host"] = (
        f"In the model's case set the 39 % can only be hosted (fused GEMM-RS floor within Sequential / 1.39 - AG) by "
        + ", ".join(f"{g['case']} (T3 GEMM slowdown over its run alone must be <= x{g['allowed_gemm_slowdown_for_39']:.2f}; "
                    f"model x{(g['fused_t3_us']) / g['gemm_alone_uncached_us']:.2f})" for g in gl if g["case"] in hosts)
        + f" among non-FC cases; not by T-NLG IP TP16, the case the earlier take-aparts chased: its floor (NMC RS "
        f"{ipt['rs_nmc_us']:.0f} us + stage-0 compute {ipt['stage0_compute_us']:.0f} us) is {ipt['fused_floor_us']:.0f} us "
        f"against a {ipt['fused_budget_for_39_us']:.0f} us budget - it can reach the >= 34 % band, not 39 %. If §6.1.2's "
        "'> 15 % slower' holds for every FC case, the paper's maximum is a GEMM-bound IP case whose T3 GEMM is slowed "
        "by about a fifth or less, i.e. T3's loss there is small although its reads are as intense as the FC GEMMs' "
        "(Mega-GPT-2 IP TP8 356 GB/s vs FC-2 407 GB/s) and neither host's inputs fit the 16 MB LLC (§3.2.2's "
        "criterion for a small impact; the cases whose inputs fit: " + ", ".join(g["case"] for g in gl if g["inputs_fit_l2"])
        + "). Either the paper's Ideal for an IP case is higher than "
        "the model's (calibrated only on the two named cases and the geomean), or T3 loses little on a GEMM-bound IP "
        "case whose inputs miss the LLC; the text says neither.")
    print(res["finding_host"])
    res["finding"] = (
        f"The model's T3 loss is store admission, not read stalls: averaged over the 12 cases "
        f"{100 * np.mean([g['retire_share_of_extra'] for g in gl]):.0f} % (mean) of the extra GEMM time inside T3 is "
        "stage retirement (the stage's NMC stores waiting for MC admission behind the chunk's DMA reads and incoming "
        "updates, with read/write turnarounds at the 12/8 drain watermarks), and the OP GEMMs - the smallest read "
        "traffic, the highest store rate - are the most slowed, against §6.1.2 (RS traffic has little impact on the OP "
        "GEMMs' progress) and §3.2.2 (the impact is on GEMMs whose inputs miss the LLC). The stage barrier (a GPU has "
        f"none, §2.5) turns that into lost compute: WG-granular retirement alone puts T3 in both bands "
        f"({wr['t3']['geomean']:.1f}/{wr['t3']['max']:.1f} % vs model {m['t3']['geomean']:.1f}/{m['t3']['max']:.1f} %) but "
        f"T3-MCA falls to {wr['t3-mca']['geomean']:.1f} %: with retirement overlapping the next stage's reads the GEMM's "
        "own stream (reads + stores at 12/8 turnarounds) stays backlogged, so compute-first MCA issues RS only at the "
        "starvation limit. Of the variants here, every one that lifts the T3 maximum past 34 % either breaks MCA "
        "(WG-granular retirement) or lifts the geomean past 23 % (no DRAM contention, Accel-Sim bank heads): no single "
        "assumption moves the maximum alone, and the OP GEMM check fails in "
        f"{sum('OP GEMM' in ' '.join(v['failed_text_checks']) for v in var.values())}/{len(var)} of them (even without "
        "DRAM timing contention round-robin gives the chunk's RS traffic half the admissions while the OP stage's "
        "dense store burst waits). What would: a GEMM slowdown driven by read stalls (§6.1.2, Fig 17) strong enough on "
        "the FC cases to hold the geomean at 20 % once the store path stops costing the OP/IP-TP16 GEMMs.")
    print(res["finding"])
    res["runtime_s"] = time.time() - t0
    (OUT / "t3_max_reading.json").write_text(json.dumps(res, indent=1, default=float))
    print(f"wrote {OUT / 't3_max_reading.json'} ({res['runtime_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
