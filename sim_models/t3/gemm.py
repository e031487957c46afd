"""GEMM model for T3's sliced sub-layers (§2.5, §5.2): dimensions, output tiles -> workgroups ->
stages, and per-stage compute time, DRAM reads (with an L2 reuse estimate) and output bytes.

* Sub-layer dimensions (Megatron TP, §6.1): every AR-producing GEMM has output ``M x N = tokens x H``
  and dot-product ``K = k_per_H * H / TP`` (OP 1, FC-2 4, FC-1 4, IP 3).
* Output tiles (``wg_tile``) are WGs, dispatched with the token (M) dimension iterating fastest
  (``wg_fast_dim='tokens'``; the first pass's ``'fewer_tiles'`` order is kept as an option); a stage is
  the WGs the CUs hold at once (``cus x wgs_per_cu``), i.e. 1-2 weight column blocks x all token tiles.
  Stage compute time = (most WGs on one CU) x padded WG FLOPs / (CU peak x MMA efficiency) + a fixed
  per-stage overhead (wave quantisation included).
* L2 reuse estimate: within a stage every row-block and column-block is read from DRAM once (the
  stage's WGs walk K in step and share through L2).  Across stages the column operand of the tiled
  grid (with tokens fastest: the activation, ``tokens x K``) is re-walked by every stage; the part of it
  that survives is (L2 left over by the stage's other operand and - cached baseline GEMMs only - its
  dirty output) / footprint (``l2_retention='graded'``; ``'lru'`` = all-or-nothing).  Uncached T3/NMC
  GEMMs (§4.3) bypass L2 with their output, so they keep more of the operand: §6.2 / Fig 18 (GEMM reads
  -1.2x at TP8, -2x at TP16; 'larger TP leads to more LLC-amenable GEMMs') and §6.1.2 (OP inputs fit in
  the LLC, FC inputs do not) are what fix the dispatch order and the graded retention
  (data/system.json ``wg_dispatch_fast_dim``, ``l2_retention``).

Take-apart switches (``System``, defaults are the model; bench ``t3_stage0_takeapart``): ``stage_split='chunk'``
(a stage = one ring chunk's WGs, as Fig 7 draws it for simplicity, §4.1), ``chunking='bytes'`` (chunks of equal
bytes in whole tiles instead of equal WG counts), ``first_stage_reads='steady'`` (stage 0 without its cold
operand walk).

Left out: split-K (§7.7), transposed-operand layout effects, L2 bank conflicts and hit latency,
partial re-use of the row operand beyond consecutive stages.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .address_space import chunk_wg_bounds, stage_wg_cuts
from .config import SUBLAYERS, Model, System, load


@dataclass(frozen=True)
class GemmDims:
    sublayer: str
    M: int
    N: int
    K: int

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K

    def out_bytes(self, eb: int = 2) -> int:
        return self.M * self.N * eb


def sublayer_dims(model: Model, tp: int, sublayer: str) -> GemmDims:
    if sublayer not in SUBLAYERS:
        raise ValueError(f"unknown sub-layer {sublayer!r}; choose from {', '.join(SUBLAYERS)}")
    if tp < 2:
        raise ValueError(f"tp must be >= 2, got {tp}")
    kph = load("models")["sublayers"][sublayer]["k_per_H"]
    if (kph * model.H) % tp:
        raise ValueError(f"{kph}*H={kph * model.H} not divisible by tp={tp}")
    return GemmDims(sublayer, model.tokens, model.H, kph * model.H // tp)


@dataclass(frozen=True)
class GemmPlan:
    """Per-stage quantities of one GEMM on one GPU (arrays of length ``stages``)."""
    dims: GemmDims
    n_wg: int
    stages: int
    stage_wgs: np.ndarray          # WGs in each stage
    t_compute: np.ndarray          # s, at full speed, including per-stage overhead
    read_bytes: np.ndarray         # DRAM reads per stage
    out_bytes: np.ndarray          # output bytes written per stage
    slot_bytes: np.ndarray         # [stage, slot] output bytes of chunk slot s (staggered order)
    cached_output: bool

    @property
    def t_compute_total(self) -> float:
        return float(self.t_compute.sum())


def plan(sysm: System, dims: GemmDims, cached_output: bool = True, n_devices: int | None = None,
         stagger: bool = True) -> GemmPlan:
    tm, tn = sysm.wg_tile
    eb = sysm.elem_bytes
    # rows/cols of the tiled output; transpose so the fast (column) dimension has fewer tiles
    Mr, Nc = dims.M, dims.N
    if sysm.wg_fast_dim == "tokens":
        # token (M) tiles iterate fastest: the column operand of the tiled grid is the activation,
        # re-walked by every stage (§6.2 / Fig 18 per-TP read reductions; data/system.json)
        Mr, Nc, tm, tn = Nc, Mr, tn, tm
    elif -(-Mr // tm) < -(-Nc // tn):
        Mr, Nc, tm, tn = Nc, Mr, tn, tm
    gr, gc = -(-Mr // tm), -(-Nc // tn)
    n_wg = gr * gc
    per_stage = sysm.cus * sysm.wgs_per_cu
    stages = -(-n_wg // per_stage)
    nd = n_devices or sysm.n_gpus
    if sysm.stage_split == "chunk":          # take-apart: a stage = one ring chunk's WGs
        stages = nd
    # WG dispatch order: device 0's view, rotated to start at its first chunk (= natural order)
    wg = np.arange(n_wg)
    rows = np.minimum(tm, Mr - (wg // gc) * tm)
    cols = np.minimum(tn, Nc - (wg % gc) * tn)
    wg_out = rows * cols * eb
    if sysm.chunking == "bytes":             # take-apart: chunks of equal bytes (whole tiles), as the RS's
        cw = np.concatenate(([0.0], np.cumsum(wg_out)))
        bounds = np.searchsorted(cw, np.arange(nd + 1) * cw[-1] / nd - 1e-9).astype(np.int64)
        bounds[0], bounds[-1] = 0, n_wg
    else:                                    # equal WG counts (address_space, the Tracker/RTL configuration)
        bounds = chunk_wg_bounds(n_wg, nd)
    cut = bounds.copy() if sysm.stage_split == "chunk" else stage_wg_cuts(n_wg, stages)
    slot_of = np.searchsorted(bounds, wg, side="right") - 1     # device 0: slot == chunk
    wg_flops_padded = 2 * tm * tn * dims.K
    cu_rate = sysm.flops_per_cu_clk * sysm.clock * sysm.mma_eff

    b_bytes = dims.K * Nc * eb           # column operand, re-usable across stages
    nst = stages
    t_c = np.zeros(nst)
    rd = np.zeros(nst)
    ob = np.zeros(nst)
    sb = np.zeros((nst, nd))
    prev_rows: set = set()
    b_read_once = False
    for j in range(nst):
        w = wg[cut[j]:cut[j + 1]]
        nw = w.size
        t_c[j] = -(-nw // sysm.cus) * wg_flops_padded / cu_rate + sysm.stage_overhead
        rblk = np.unique(w // gc)
        cblk = np.unique(w % gc)
        new_rows = [r for r in rblk.tolist() if r not in prev_rows]
        a_rows = sum(min(tm, Mr - r * tm) for r in new_rows)
        a_bytes = a_rows * dims.K * eb
        b_stage = sum(min(tn, Nc - c * tn) for c in cblk.tolist()) * dims.K * eb
        out_stage = float(wg_out[w].sum())
        l2_left = sysm.l2_bytes - (out_stage if cached_output else 0.0)
        a_fp = rblk.size * tm * dims.K * eb
        if not b_read_once:
            b_cost = b_stage
            b_read_once = b_bytes + a_fp <= l2_left or sysm.l2_retention == "graded"
        elif sysm.l2_retention == "graded":
            # the part of the re-walked column operand that survives the stage's other traffic
            # (graded retention, §6.2 / Fig 18: bypass -1.2x reads at TP8, -2x at TP16)
            keep = min(1.0, max(0.0, (l2_left - a_fp) / b_bytes))
            b_cost = b_stage * (1.0 - keep)
        else:
            b_cost = 0.0 if b_bytes + a_fp <= l2_left else b_stage
        rd[j] = a_bytes + b_cost
        ob[j] = out_stage
        np.add.at(sb[j], slot_of[w], wg_out[w])
        prev_rows = set(rblk.tolist())
    if sysm.first_stage_reads == "steady" and nst > 1:
        rd[0] = rd[1:].mean()                # take-apart: no cold operand walk in the first stage
    return GemmPlan(dims, n_wg, nst, np.diff(cut), t_c, rd, ob, sb, cached_output)


def gemm_isolated_roofline(sysm: System, p: GemmPlan) -> float:
    """Lower bound: every stage max(compute, DRAM bytes / bandwidth); no contention."""
    return float(np.maximum(p.t_compute, (p.read_bytes + p.out_bytes) / sysm.dram_bw).sum())
