"""Evaluate one sliced sub-layer under the five configurations of T3 §5.3 and aggregate (§6).

* Sequential: isolated GEMM (cached output) + ring RS + ring AG.
* T3: fused GEMM-RS (uncached NMC output, staggered WGs, tracker-triggered DMAs), round-robin DRAM
  arbitration, then AG.
* T3-MCA: as T3 with communication-aware arbitration (threshold learned by the MC from the queue
  occupancy of the isolated first stage, §4.5).  (Extra, not in the paper's figures: ``t3-cf``, plain compute-first arbitration.)
* Ideal-GEMM-RS-Overlap: ``max(GEMM, RS) + AG`` (isolated times, no dependency or contention).
* Ideal-RS+NMC: ``max(GEMM, RS_nmc) + AG``.

DRAM traffic per configuration (Fig 18) is the per-GPU byte count by category (GEMM reads/writes,
RS reads/writes, AG reads/writes; NMC updates count as writes).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from . import collectives as C
from .config import Model, System
from .gemm import GemmDims, gemm_isolated_roofline, plan, sublayer_dims
from .overlap import simulate

CONFIGS = ("sequential", "t3", "t3-mca", "ideal", "ideal-rs-nmc")
EXTRA = ("t3-cf",)          # T3 with plain compute-first arbitration (no occupancy threshold)


@dataclass
class SublayerResult:
    model: str
    tp: int
    sublayer: str
    M: int
    N: int
    K: int
    flops: int
    stages: int
    gemm: float             # isolated GEMM time (cached output)
    gemm_roofline: float
    rs: float
    rs_nmc: float
    ag: float
    times: dict             # config -> total time
    gemm_in_fused: dict     # config -> time the GEMM finished inside the fused kernel
    traffic: dict           # config -> {category: bytes}
    mca_threshold_entries: float
    gemm_dram_util: float
    fused: dict             # config -> FusedResult (not serialised)

    def speedup(self, cfg: str) -> float:
        return self.times["sequential"] / self.times[cfg]

    def to_json(self) -> dict:
        return dict(model=self.model, tp=self.tp, sublayer=self.sublayer, M=self.M, N=self.N,
                    K=self.K, flops=self.flops, stages=self.stages, gemm_us=self.gemm * 1e6,
                    gemm_roofline_us=self.gemm_roofline * 1e6, rs_us=self.rs * 1e6,
                    rs_nmc_us=self.rs_nmc * 1e6, ag_us=self.ag * 1e6,
                    times_us={k: v * 1e6 for k, v in self.times.items()},
                    gemm_in_fused_us={k: v * 1e6 for k, v in self.gemm_in_fused.items()},
                    speedup={k: self.speedup(k) for k in self.times},
                    traffic_MB={k: {c: b / 1e6 for c, b in v.items()} for k, v in self.traffic.items()},
                    mca_threshold_entries=self.mca_threshold_entries,
                    gemm_dram_util=self.gemm_dram_util)


def evaluate(sysm: System, model: Model, tp: int, sublayer: str, record: bool = False,
             configs=CONFIGS) -> SublayerResult:
    bad = [c for c in configs if c not in CONFIGS + EXTRA]
    if bad:
        raise ValueError(f"unknown config {bad[0]!r}; choose from {', '.join(CONFIGS + EXTRA)}")
    d = sublayer_dims(model, tp, sublayer)
    if record:
        return _evaluate(sysm, model.key, tp, d, True, tuple(configs))
    r = _cached(sysm, model.key, tp, d.M, d.N, d.K, tuple(configs))
    return replace(r, sublayer=sublayer)


@lru_cache(maxsize=512)
def _cached(sysm, key, tp, M, N, K, configs):
    # FC-1 (bwd) and FC-2 (fwd) have identical GEMM shapes in this model: evaluate once
    return _evaluate(sysm, key, tp, GemmDims("", M, N, K), False, configs)


def _evaluate(sysm: System, key: str, tp: int, d: GemmDims, record: bool, configs) -> SublayerResult:
    s = sysm.scaled(n_gpus=tp)
    size = d.out_bytes(s.elem_bytes)
    pc = plan(s, d, cached_output=True)
    iso = simulate(s, pc, comm=False)
    rs, rsn, ag = C.ring("rs", s, size), C.ring("rs_nmc", s, size), C.ring("ag", s, size)
    util = iso.dram_busy
    th = float("nan")
    times = {"sequential": iso.time + rs.time + ag.time,
             "ideal": max(iso.time, rs.time) + ag.time,
             "ideal-rs-nmc": max(iso.time, rsn.time) + ag.time}
    times = {k: v for k, v in times.items() if k in configs or k == "sequential"}
    gin = {"sequential": iso.time}
    fused = {}
    agt = dict(ag_reads=ag.dram_reads, ag_writes=ag.dram_writes)
    traffic = {"sequential": dict(gemm_reads=iso.dram["gemm_reads"], gemm_writes=pc.out_bytes.sum(),
                                  rs_reads=rs.dram_reads, rs_writes=rs.dram_writes, **agt)}
    pu = None
    for cfg, pol in (("t3", "rr"), ("t3-mca", "mca"), ("t3-cf", "compute_first")):
        if cfg not in configs:
            continue
        pu = pu or plan(s, d, cached_output=False)
        r = simulate(s, pu, comm=True, policy=pol, record=record)
        if pol == "mca":
            th = r.threshold
        fused[cfg] = r
        times[cfg] = r.time + ag.time
        gin[cfg] = r.gemm_end
        traffic[cfg] = dict(gemm_reads=r.dram["gemm_reads"], gemm_writes=r.dram["gemm_updates"],
                            rs_reads=r.dram["rs_reads"], rs_writes=r.dram["rs_updates"], **agt)
    return SublayerResult(key, tp, d.sublayer, d.M, d.N, d.K, d.flops, pc.stages, iso.time,
                          gemm_isolated_roofline(s, pc), rs.time, rsn.time, ag.time, times, gin,
                          traffic, th, util, fused)


def geomean(x) -> float:
    x = np.asarray(list(x), dtype=float)
    return float(np.exp(np.log(x).mean()))


def gemm_alone_uncached(sysm: System, model: Model, tp: int, sublayer: str):
    """(plan, result) of the sub-layer's GEMM planned with uncached NMC output and run alone (no
    communication): the baseline the T3 GEMM's loss inside the fused kernel is measured against
    (issue 15, bench/t3_max_reading.py)."""
    s = sysm.scaled(n_gpus=tp)
    pu = plan(s, sublayer_dims(model, tp, sublayer), cached_output=False)
    return pu, simulate(s, pu, comm=False)


def stage_phase_us(x) -> tuple[float, float]:
    """(compute, retirement) of a GEMM run summed over its stages, in us: compute = stage start to
    its last compute (read stalls included), retirement = to the stage's stores acknowledged."""
    return (float((x.stage_compute_end - x.stage_start).sum() * 1e6),
            float((x.stage_end - x.stage_compute_end).sum() * 1e6))


def fused_floor(r, pu, alone) -> float:
    """The fastest the fused GEMM-RS can finish, in s: the NMC reduce-scatter behind stage 0's compute
    (the link starts with stage 0's stores) or the T3 GEMM alone, whichever is longer."""
    return max(r.rs_nmc + pu.t_compute[0], alone.time)
