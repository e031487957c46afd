"""Fig 16 case by case: the model's sub-layer speedups against what T3's text says per case (§6.1.1-§6.1.3).

The paper's Fig 16 bars are not in the extracted text (``paper.json`` ``fig16_reading``), so the
per-case comparison uses the statements §6.1 makes about individual cases or classes of cases:
the named Ideal-GEMM-RS-Overlap maximum and minimum, OP T3 close to (and sometimes above) Ideal,
the RS traffic having little impact on the OP GEMMs' progress (read as: of a model's sub-layers at one TP,
the OP GEMM is slowed least inside T3 - §3.2.2 puts the impact on GEMMs whose inputs miss the LLC),
FC T3 more than 15 % slower than Ideal, T3-MCA far from Ideal on T-NLG FC-1 TP16.  From the first
and fourth it derives where the paper's T3 maximum can lie (:func:`fc_t3_ceiling`), and
:func:`t3_max_candidates` lists the model's cases that could host it.

Left out: any bar height (not available); FC-1 vs FC-2 differences (identical GEMM shapes in the model).
"""
from __future__ import annotations


def pct(x: float) -> float:
    return 100.0 * (x - 1.0)


def is_fc(sublayer: str) -> bool:
    return sublayer.startswith("FC")


def fc_t3_ceiling(P: dict) -> float:
    """Largest T3 speedup (%) an FC case can have in the paper: Ideal <= the Fig 16 maximum and
    T3 runtime > ``fig16_fc_t3_below_ideal_min_ratio`` x Ideal runtime (§6.1.2)."""
    return pct((1.0 + P["fig16_ideal_max"]) / P["fig16_fc_t3_below_ideal_min_ratio"])


def case_table(rows) -> list[dict]:
    """One dict per case: speedups (%), T3's runtime over Ideal's, the GEMM's slowdown inside the
    fused T3 kernel, its isolated DRAM read rate and whether the case is RS-bound."""
    out = []
    for r in rows:
        reads = r.traffic["sequential"]["gemm_reads"]
        out.append(dict(
            case=f"{r.model} TP{r.tp} {r.sublayer}", model=r.model, tp=r.tp, sublayer=r.sublayer,
            ideal=pct(r.speedup("ideal")), ideal_rs_nmc=pct(r.speedup("ideal-rs-nmc")),
            t3=pct(r.speedup("t3")), t3_mca=pct(r.speedup("t3-mca")),
            t3_over_ideal_runtime=r.times["t3"] / r.times["ideal"],
            mca_over_ideal_runtime=r.times["t3-mca"] / r.times["ideal"],
            gemm_slowdown_t3=r.gemm_in_fused["t3"] / r.gemm,
            gemm_read_GBps=reads / r.gemm / 1e9, rs_bound=bool(r.rs > r.gemm)))
    return out


def text_checks(table: list[dict], P: dict) -> list[dict]:
    """Each per-case statement of §6.1 checked on the model: name, source, held (bool), detail."""
    by = {c["case"]: c for c in table}
    ideal_max = max(table, key=lambda c: c["ideal"])
    ideal_min = min(table, key=lambda c: c["ideal"])
    t3_max = max(table, key=lambda c: c["t3"])
    mca_max = max(table, key=lambda c: c["t3_mca"])
    op = [c for c in table if c["sublayer"] == "OP"]
    fc = [c for c in table if is_fc(c["sublayer"])]
    ratio = P["fig16_fc_t3_below_ideal_min_ratio"]
    fm, fsub, ftp = P["fig16_t3mca_far_from_ideal_case"].split()
    far = by[f"{fm} {ftp} {fsub}"]
    worst_fc = min(fc, key=lambda c: c["t3_over_ideal_runtime"])
    worst_op = min(op, key=lambda c: c["t3"] - c["ideal"])
    ceiling = fc_t3_ceiling(P)
    groups = {}
    for c in table:
        groups.setdefault((c["model"], c["tp"]), []).append(c)
    op_slow = []                 # (model, tp) groups whose OP GEMM is not the least slowed inside T3
    for (m, tp), g in sorted(groups.items()):
        o = [c for c in g if c["sublayer"] == "OP"]
        rest = [c for c in g if c["sublayer"] != "OP"]
        if o and rest and o[0]["gemm_slowdown_t3"] > min(c["gemm_slowdown_t3"] for c in rest):
            least = min(rest, key=lambda c: c["gemm_slowdown_t3"])
            op_slow.append(f"{m} TP{tp}: OP x{o[0]['gemm_slowdown_t3']:.2f} vs {least['sublayer']} "
                           f"x{least['gemm_slowdown_t3']:.2f}")
    return [
        dict(name="OP GEMM: RS traffic has little impact on its progress (least slowed inside T3 of its model/TP)",
             source="§6.1.2 + §3.2.2", held=not op_slow, detail="; ".join(op_slow) or "OP least slowed everywhere"),
        dict(name="ideal maximum is T-NLG FC-1 TP16", source="§6.1.1",
             held=ideal_max["case"] in ("t-nlg TP16 FC-1", "t-nlg TP16 FC-2"), detail=ideal_max["case"]),
        dict(name="ideal minimum is Mega-GPT-2 OP TP16", source="§6.1.1",
             held=ideal_min["case"] == "mega-gpt-2 TP16 OP", detail=ideal_min["case"]),
        dict(name="OP: T3 >= 0.95 x Ideal speedup", source="§6.1.2",
             held=all((1 + c["t3"] / 100) >= P["fig16_op_t3_over_ideal_min"] * (1 + c["ideal"] / 100) for c in op),
             detail=f"worst {worst_op['case']}: T3 {worst_op['t3']:.1f} vs Ideal {worst_op['ideal']:.1f}"),
        dict(name="OP: T3 exceeds Ideal in some case", source="§6.1.2",
             held=any(c["t3"] > c["ideal"] for c in op),
             detail=", ".join(c["case"] for c in op if c["t3"] > c["ideal"]) or "none"),
        dict(name=f"FC: T3 runtime > {ratio} x Ideal runtime", source="§6.1.2",
             held=all(c["t3_over_ideal_runtime"] > ratio for c in fc),
             detail=f"smallest {worst_fc['case']}: {worst_fc['t3_over_ideal_runtime']:.3f}"),
        dict(name=f"T3 maximum is not an FC case (FC T3 < {ceiling:.1f}%)", source="§6.1.1 + §6.1.2",
             held=not is_fc(t3_max["case"].split()[-1]), detail=f"{t3_max['case']} {t3_max['t3']:.1f}%"),
        dict(name="T3-MCA far from Ideal on T-NLG FC-1 TP16: > 1 point below the T3-MCA maximum",
             source="§6.1.3", held=far["t3_mca"] < mca_max["t3_mca"] - 1.0,
             detail=f"T3-MCA max {mca_max['case']} {mca_max['t3_mca']:.1f}%; T-NLG FC-1 TP16 T3-MCA "
                    f"{far['t3_mca']:.1f} vs Ideal {far['ideal']:.1f}"),
    ]


def t3_max_candidates(table: list[dict], P: dict) -> list[dict]:
    """Non-FC cases whose Ideal-RS+NMC speedup reaches the paper's T3 maximum (only they can host it,
    since T3 exceeds Ideal only through NMC's faster RS), with the model's T3 there."""
    need = 100 * P["fig16_t3_max"]
    return [dict(case=c["case"], model=c["model"], tp=c["tp"], sublayer=c["sublayer"], ideal=c["ideal"], ideal_rs_nmc=c["ideal_rs_nmc"], t3=c["t3"],
                 gemm_slowdown_t3=c["gemm_slowdown_t3"], gemm_read_GBps=c["gemm_read_GBps"],
                 rs_bound=c["rs_bound"])
            for c in table if not is_fc(c["sublayer"]) and c["ideal_rs_nmc"] >= need]
