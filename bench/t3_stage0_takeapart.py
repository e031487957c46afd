"""Take-apart of the fused GEMM-RS start-up on T3's best IP case, T-NLG IP TP16 (T3 §4.1, §4.5, §5.1.1,
§6.1.2, Fig 7, Fig 17), one assumption at a time.

Question (issue 15, Fig 16 T3 maximum 30.5 % vs the paper's 39 %): why is stage 0 about twice a mean
stage in the model, and does any start-up assumption the paper contradicts cap the case?

Prints, and writes ``build/bench/t3_stage0_takeapart.json``:

* ``schedule`` - the case's stage schedule split into compute and retirement (T3 and with DRAM
  contention removed), the link's busy time per ring slot, the link-only floor;
* ``candidates`` - each start-up candidate as a System switch: the case's T3 / T3-MCA and the Fig 16 set's
  T3 and T3-MCA geomean / max (targets: T3 20 +- 3 / >= 34, T3-MCA 30 +- 3 / 47 +- 5, MCA - T3 >= 7,
  OP T3 >= 0.95 Ideal), with what the paper says about it;
* ``stacked`` - the start-up terms removed together, with and without DRAM contention (case only);
* ``paper_reading_refit`` - the one start-up assumption the paper contradicts (stage 1 held behind stage
  0's remote burst) removed, with the write-drain watermarks (a calibration to the T3 geomean) re-fitted,
  and its §6.4 TP32 and Fig 19 figures against their 3-point bands.

Run: ``nice -n 10 .venv/bin/python bench/t3_stage0_takeapart.py`` (about 9 minutes on a loaded machine).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from tessera.sim_models.t3 import config, e2e, gemm, study

OUT = Path("build/bench")
CASE = ("t-nlg", 16, "IP")
NO_CONTENTION = dict(tRTW=0, tWTR=0, row_interference=False, row_hit=(1.0, 1.0, 1.0, 1.0))
NO_HOLD = dict(remote_store_buffer_bytes=1e12)          # stage 1 not held behind stage 0's remote burst
TRICKLE = dict(store_issue="remote_progress")          # stage 0's remote stores leave as it computes
CFGS = ("t3", "t3-mca", "ideal", "ideal-rs-nmc")


def pct(x: float) -> float:
    return 100.0 * (x - 1.0)


def fig16_set(sysm) -> dict:
    return set_summary([study.evaluate(sysm, config.model(k), tp, sl, configs=CFGS)
                        for k in ("mega-gpt-2", "t-nlg") for tp in config.model(k).tp for sl in config.SUBLAYERS])


def set_summary(rows) -> dict:
    """T3 / T3-MCA / Ideal geomean and max (with its case), MCA - T3, OP T3 / Ideal of a Fig 16 row set."""
    out = {}
    for c in ("t3", "t3-mca", "ideal"):
        best = max(rows, key=lambda r: r.speedup(c))
        out[c] = dict(geomean=pct(study.geomean(r.speedup(c) for r in rows)), max=pct(best.speedup(c)),
                      max_case=f"{best.model} {best.sublayer} TP{best.tp}")
    out["mca_minus_t3"] = out["t3-mca"]["geomean"] - out["t3"]["geomean"]
    out["op_t3_over_ideal_min"] = min(r.speedup("t3") / r.speedup("ideal") for r in rows if r.sublayer == "OP")
    return out


def large_and_fig19(sysm) -> dict:
    """§6.4 TP32 T3-MCA geomean / max and the Fig 19 end-to-end figures (as bench/t3_repro.py computes
    them), each with the paper's value and whether it is within the 3-point band."""
    P = config.paper()
    res = {(k, tp, sl): study.evaluate(sysm, config.model(k), tp, sl, configs=CFGS)
           for k in ("mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg") for tp in config.model(k).tp
           for sl in config.SUBLAYERS}
    big = [r for k, r in res.items() if k[1] == 32]
    rows = e2e.setup_rows(sysm, res, ("mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg"), cfgs=("t3", "t3-mca"))
    small = [r for r in rows if r["tp"] in (8, 16)]
    large = [r for r in rows if r["tp"] == 32]
    vals = {"large_t3mca_geomean": (pct(study.geomean(r.speedup("t3-mca") for r in big)), P["large_models_t3mca_geomean"]),
            "large_t3mca_max": (max(pct(r.speedup("t3-mca")) for r in big), P["large_models_t3mca_max"]),
            "fig19_large_train_max": (max(r["t3-mca"]["train"] for r in large), P["large_models_train_max"]),
            "fig19_large_infer_max": (max(r["t3-mca"]["infer"] for r in large), P["large_models_infer_max"])}
    for c, key in (("t3", "t3"), ("t3-mca", "t3mca")):
        for ph in ("train", "infer"):
            vals[f"fig19_{ph}_{key}_max"] = (max(r[c][ph] for r in small), P[f"fig19_{ph}_{key}_max"])
            vals[f"fig19_{ph}_{key}_geomean"] = (pct(study.geomean(1 + r[c][ph] / 100 for r in small)),
                                                 P[f"fig19_{ph}_{key}_geomean"])
    out = {k: dict(model=m, paper=100 * p, diff=m - 100 * p) for k, (m, p) in vals.items()}
    out["out_of_band"] = [k for k, v in out.items() if abs(v["diff"]) > 3.0]
    return out


def case(sysm) -> dict:
    key, tp, sl = CASE
    r = study.evaluate(sysm, config.model(key), tp, sl, configs=CFGS)
    f = r.fused["t3"]
    return dict(t3=pct(r.speedup("t3")), t3_mca=pct(r.speedup("t3-mca")), ideal=pct(r.speedup("ideal")),
                ideal_rs_nmc=pct(r.speedup("ideal-rs-nmc")), fused_t3_us=f.time * 1e6,
                sequential_us=r.times["sequential"] * 1e6, stage0_end_us=float(f.stage_end[0] * 1e6),
                mean_later_stage_us=float(np.diff(f.stage_end).mean() * 1e6),
                link_start_us=float(f.send_start[0] * 1e6), stages=r.stages,
                mca_threshold=r.mca_threshold_entries)


def schedule(sysm) -> dict:
    """Stage schedule of the case: compute (start -> compute end, read stalls included) and retirement
    (compute end -> the stage's stores acknowledged / on the link), per ring slot the link's time."""
    key, tp, sl = CASE
    s = sysm.scaled(n_gpus=tp)
    d = gemm.sublayer_dims(config.model(key), tp, sl)
    pu = gemm.plan(s, d, cached_output=False)
    r = study.evaluate(sysm, config.model(key), tp, sl, configs=("t3",))
    nc = study.evaluate(sysm.scaled(**NO_CONTENTION), config.model(key), tp, sl, configs=("t3",))
    n = pu.slot_bytes.shape[1]
    chunk_link_us = pu.slot_bytes.sum(axis=0) / s.link_bw * 1e6
    link_floor = (tp - 1) * s.link_latency + pu.slot_bytes.sum(axis=0)[:n - 1].sum() / s.link_bw
    out = dict(M=d.M, N=d.N, K=d.K, n_wg=pu.n_wg, stages=pu.stages, chunks=n,
               stage_wgs=pu.stage_wgs.tolist(), stage_compute_us=float(pu.t_compute[0] * 1e6),
               stage_read_MB=(pu.read_bytes / 1e6).round(3).tolist(),
               stage0_remote_MB=float(pu.slot_bytes[0, 0] / 1e6), stage0_local_MB=float(pu.slot_bytes[0, 1:].sum() / 1e6),
               chunk_MB=(pu.slot_bytes.sum(axis=0) / 1e6).round(3).tolist(),
               chunk_link_us=float(chunk_link_us[0]), remote_store_buffer_KB=s.remote_store_buffer_bytes / 1e3,
               link_floor_us=link_floor * 1e6, t3_max_needs_fused_us=(r.times["sequential"] / 1.34 - r.ag) * 1e6,
               rs_reads_MB=r.fused["t3"].dram["rs_reads"] / 1e6,
               rs_reads_slots_1_to_n2_MB=float(pu.slot_bytes.sum(axis=0)[1:n - 1].sum() / 1e6))
    for lab, rr in (("t3", r), ("t3_no_dram_contention", nc)):
        f = rr.fused["t3"]
        comp = (f.stage_compute_end - f.stage_start) * 1e6
        ret = (f.stage_end - f.stage_compute_end) * 1e6
        send = (f.send_end - f.send_start)[:n - 1] * 1e6
        out[lab] = dict(fused_us=f.time * 1e6, stage0_compute_us=float(comp[0]), stage0_retire_us=float(ret[0]),
                        later_compute_us=float(comp[1:].mean()), later_retire_us=float(ret[1:].mean()),
                        stage0_end_us=float(f.stage_end[0] * 1e6), link_start_us=float(f.send_start[0] * 1e6),
                        slot1_send_us=float(send[1]), later_slot_send_us=float(send[2:].mean()))
    return out


def main() -> int:
    t0 = time.time()
    OUT.mkdir(parents=True, exist_ok=True)
    sysm = config.system()
    res = {}
    sc = schedule(sysm)
    res["schedule"] = sc
    print(f"T-NLG IP TP16: GEMM {sc['M']}x{sc['N']}x{sc['K']} -> {sc['n_wg']} WG tiles, {sc['stages']} stages of "
          f"{min(sc['stage_wgs'])}-{max(sc['stage_wgs'])} WGs ({sc['stage_compute_us']:.1f} us compute each), "
          f"{sc['chunks']} ring chunks of {sc['chunk_MB'][0]:.2f} MB ({sc['chunk_link_us']:.1f} us on the link)")
    print(f"  stage 0: reads {sc['stage_read_MB'][0]:.1f} MB (later stages {np.mean(sc['stage_read_MB'][1:]):.2f} MB), "
          f"stores {sc['stage0_remote_MB']:.2f} MB remote (slot 0) + {sc['stage0_local_MB']:.2f} MB local")
    for lab in ("t3", "t3_no_dram_contention"):
        x = sc[lab]
        print(f"  {lab:22s} stage 0 = compute {x['stage0_compute_us']:5.1f} + retire {x['stage0_retire_us']:5.1f} us; "
              f"later stages compute {x['later_compute_us']:5.1f} + retire {x['later_retire_us']:5.1f} us; link from "
              f"{x['link_start_us']:.1f} us, slot 1 {x['slot1_send_us']:.1f} us, later slots {x['later_slot_send_us']:.1f} us; "
              f"fused {x['fused_us']:.0f} us")
    print(f"  link-only floor {sc['link_floor_us']:.0f} us; T3 34 % needs fused <= {sc['t3_max_needs_fused_us']:.0f} us; "
          f"RS DMA reads {sc['rs_reads_MB']:.1f} MB = slots 1..N-2 ({sc['rs_reads_slots_1_to_n2_MB']:.1f} MB): slot 0 "
          "has no local read")

    cands = [
        ("model", {}, "-"),
        ("stage = one ring chunk's WGs", dict(stage_split="chunk"),
         "§1/§2.5: a stage is the WGs the CUs can accommodate; §4.1: stages are set by the kernel, steps by the "
         "devices, Fig 7 draws stages = steps + 1 'for simplicity' -> model's split stands"),
        ("stage 0 without its cold operand walk", dict(first_stage_reads="steady"),
         "Fig 17a: every stage a read phase then a write burst; the cold walk is real -> model stands"),
        ("stages of 80 WGs (1 WG per CU)", dict(wgs_per_cu=1),
         "occupancy not given in the paper (model assumption 2 WGs/CU)"),
        ("ring chunks of equal bytes", dict(chunking="bytes"),
         "§2.3/§4.4: the array chunked N ways; the model's equal-WG chunks are 2.3 % larger for slots 0..14 "
         "(T-NLG's H = 4256 leaves a 32-wide tile column in the last chunk)"),
        ("stage 0's remote stores leave as it computes", TRICKLE,
         "§4.5: the MC learns its threshold in the isolated first stage, so no ring traffic during it -> "
         "contradicted; the burst at the stage's end (Fig 17a) stands"),
        ("stage 1 not held behind stage 0's remote burst", NO_HOLD,
         "§4.1: 'a GEMM stage's execution ... in parallel to the communication of the previous stage output. "
         "In the first step, the output is communicated ... directly by the GEMM'; §5.1.1/§6.2: the paper's "
         "simulator drops the first stage's local writes and injects traffic -> the hold is contradicted"),
    ]
    rows = []
    print("Candidates, one at a time (case T-NLG IP TP16; Fig 16 set):")
    print(f"  {'variant':48s} {'T3':>5s} {'MCA':>5s} {'fused':>6s} {'st0':>6s} | {'T3 geo/max':>11s} "
          f"{'MCA geo/max':>11s} {'M-T3':>5s} {'OPmin':>6s}")
    for lab, kw, paper in cands:
        s = sysm.scaled(**kw) if kw else sysm
        c, st = case(s), fig16_set(s)
        rows.append(dict(variant=lab, switch=kw, case=c, fig16=st, paper=paper))
        print(f"  {lab:48s} {c['t3']:5.1f} {c['t3_mca']:5.1f} {c['fused_t3_us']:6.0f} {c['stage0_end_us']:6.1f} | "
              f"{st['t3']['geomean']:5.1f}/{st['t3']['max']:5.1f} {st['t3-mca']['geomean']:5.1f}/{st['t3-mca']['max']:5.1f} "
              f"{st['mca_minus_t3']:5.1f} {st['op_t3_over_ideal_min']:6.3f}")
    res["candidates"] = rows

    print("Start-up terms removed together, with and without DRAM contention (case T3 / T3-MCA %, fused us):")
    stacked = []
    for lab, kw in (("model", {}), ("no hold", NO_HOLD), ("trickle", TRICKLE), ("no hold + trickle", {**NO_HOLD, **TRICKLE}),
                    ("no DRAM contention", NO_CONTENTION), ("no contention + no hold", {**NO_CONTENTION, **NO_HOLD}),
                    ("no contention + trickle", {**NO_CONTENTION, **TRICKLE}),
                    ("no contention + no hold + trickle", {**NO_CONTENTION, **NO_HOLD, **TRICKLE})):
        c = case(sysm.scaled(**kw) if kw else sysm)
        stacked.append(dict(variant=lab, switch={k: list(v) if isinstance(v, tuple) else v for k, v in kw.items()}, **c))
        print(f"  {lab:36s} T3 {c['t3']:5.1f}  MCA {c['t3_mca']:5.1f}  fused {c['fused_t3_us']:5.0f}  stage 0 ends "
              f"{c['stage0_end_us']:5.1f}  mean later stage {c['mean_later_stage_us']:5.1f}")
    res["stacked"] = stacked

    print("Paper reading (no hold) with the write-drain watermarks re-fitted to the T3 geomean (Fig 16 set; "
          "§6.4 TP32 and Fig 19, 3-point bands):")
    refit = []
    for lab, kw in (("model (hold, drain 12/8)", {}), ("no hold, drain 12/8", dict(NO_HOLD)),
                    ("no hold, drain 12/9", dict(NO_HOLD, write_drain=(12, 9))),
                    ("no hold, drain 11/8", dict(NO_HOLD, write_drain=(11, 8)))):
        s = sysm.scaled(**kw) if kw else sysm
        c, st, lg = case(s), fig16_set(s), large_and_fig19(s)
        refit.append(dict(variant=lab, write_drain=list(s.write_drain), case=c, fig16=st, large_fig19=lg))
        print(f"  {lab:26s} T3 {st['t3']['geomean']:5.1f}/{st['t3']['max']:5.1f} ({st['t3']['max_case']}), MCA "
              f"{st['t3-mca']['geomean']:5.1f}/{st['t3-mca']['max']:5.1f}, MCA-T3 {st['mca_minus_t3']:.1f}, OP min "
              f"{st['op_t3_over_ideal_min']:.3f}; case T3 {c['t3']:.1f} | TP32 MCA "
              f"{lg['large_t3mca_geomean']['model']:.1f}/{lg['large_t3mca_max']['model']:.1f}; out of band: "
              + (", ".join(f"{k} {lg[k]['model']:.1f} vs {lg[k]['paper']:.0f}" for k in lg['out_of_band']) or "none"))
    res["paper_reading_refit"] = refit
    best = max(r["case"]["t3"] for r in rows)
    res["finding"] = (
        f"Stage 0 ({sc['t3']['stage0_end_us']:.0f} us) = its compute ({sc['t3']['stage0_compute_us']:.0f} us, the cold "
        f"{sc['stage_read_MB'][0]:.1f} MB read costs {sc['t3']['stage0_compute_us'] - sc['stage_compute_us']:.1f} us) + the "
        f"hold behind its {sc['stage0_remote_MB']:.2f} MB remote burst on the {sc['chunk_link_us']:.0f}-us-per-chunk link "
        f"({sc['t3']['stage0_retire_us']:.0f} us); a later stage retires its local stores in "
        f"{sc['t3']['later_retire_us']:.0f} us ({sc['t3_no_dram_contention']['later_retire_us']:.0f} us without DRAM "
        f"contention). Under T3 the case is GEMM-bound inside the fused kernel: a later stage takes "
        f"{sc['t3']['later_compute_us'] + sc['t3']['later_retire_us']:.0f} us against {sc['chunk_link_us']:.0f} us of link "
        f"per chunk, so no start-up candidate lifts the case above {best:.1f} %; the start-up caps it only with "
        "DRAM contention removed.")
    print("Finding: " + res["finding"])
    res["runtime_s"] = time.time() - t0
    (OUT / "t3_stage0_takeapart.json").write_text(json.dumps(res, indent=1, default=float))
    print(f"wrote {OUT / 't3_stage0_takeapart.json'} ({res['runtime_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
