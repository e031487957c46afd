"""End-to-end Transformer layer time and T3 speedups (T3 §5.1.2, §6.3, Fig 4, Fig 19).

The paper scales measured MLPerf-BERT operator times; this model instead builds one Megatron TP
layer per GPU from the same GEMM and collective models, and substitutes the four AR sub-layers:

forward (prompt-phase inference = forward only): IP GEMM ``[T,H]x[H,3H/TP]``; attention core,
unfused as in MLPerf v1.1 (§6.3): QK^T and AV at MMA peak, scale/mask/softmax/dropout on the
``B x heads/TP x SL x SL`` FP16 scores memory-bound with 8 accesses per element; OP sub-layer
(GEMM + AR); residual/dropout/layer-norm on ``T x H`` (6 accesses, redundant on every GPU); FC-1 GEMM
``[T,H]x[H,4H/TP]``; GeLU on ``T x 4H/TP`` (2 accesses); FC-2 sub-layer; residual/LN.
backward: every GEMM has a data-gradient and a weight-gradient GEMM of equal FLOPs; the FC-1 and IP
data gradients are the AR sub-layers; attention core and element-wise work cost twice the forward.

Left out: optimizer step, data-parallel gradient all-reduce, embeddings/loss, pipeline bubbles,
kernel-launch gaps.  Layer count cancels in the speedup.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import SUBLAYERS, Model, System, model
from .gemm import GemmDims, plan
from .overlap import simulate
from .study import SublayerResult


def _gemm_time(sysm: System, M: int, N: int, K: int) -> float:
    return simulate(sysm, plan(sysm, GemmDims("other", M, N, K)), comm=False).time


@dataclass
class LayerTimes:
    other_fwd: float          # everything except the AR sub-layers, forward
    other_bwd: float
    sub_fwd: dict             # OP, FC-2 -> sequential time
    sub_bwd: dict             # FC-1, IP -> sequential time

    @property
    def train(self) -> float:
        return self.other_fwd + self.other_bwd + sum(self.sub_fwd.values()) + sum(self.sub_bwd.values())

    @property
    def infer(self) -> float:
        return self.other_fwd + sum(self.sub_fwd.values())


def layer_times(sysm: System, model: Model, tp: int, subs: dict) -> LayerTimes:
    s = sysm.scaled(n_gpus=tp)
    T, H = model.tokens, model.H
    eb = s.elem_bytes
    B = s.dram_bw
    peak = s.peak_flops * s.mma_eff
    ip = _gemm_time(s, T, 3 * H // tp, H)
    fc1 = _gemm_time(s, T, 4 * H // tp, H)
    scores = model.B * (model.heads / tp) * model.SL ** 2
    attn = 4 * model.B * model.SL ** 2 * (H / tp) / peak + 8 * scores * eb / B
    elt = 2 * (6 * T * H * eb / B) + 2 * T * (4 * H / tp) * eb / B
    other_fwd = ip + fc1 + attn + elt
    # backward GEMMs without AR: OP and FC-2 data gradients, and all four weight gradients
    op_dg = _gemm_time(s, T, H // tp, H)
    fc2_dg = _gemm_time(s, T, 4 * H // tp, H)
    wg = (_gemm_time(s, 3 * H // tp, H, T) + _gemm_time(s, H, H // tp, T)
          + _gemm_time(s, 4 * H // tp, H, T) + _gemm_time(s, H, 4 * H // tp, T))
    other_bwd = op_dg + fc2_dg + wg + 2 * attn + 2 * elt
    return LayerTimes(other_fwd, other_bwd,
                      {k: subs[k].times["sequential"] for k in ("OP", "FC-2")},
                      {k: subs[k].times["sequential"] for k in ("FC-1", "IP")})


def speedups(lt: LayerTimes, subs: dict[str, SublayerResult], cfg: str) -> dict:
    save_f = sum(subs[k].times["sequential"] - subs[k].times[cfg] for k in ("OP", "FC-2"))
    save_b = sum(subs[k].times["sequential"] - subs[k].times[cfg] for k in ("FC-1", "IP"))
    return {"train": lt.train / (lt.train - save_f - save_b),
            "infer": lt.infer / (lt.infer - save_f)}


def comm_fraction(lt: LayerTimes, subs: dict[str, SublayerResult]) -> dict:
    """Fig 4: share of the layer time spent in RS + AG (Sequential)."""
    comm_f = sum(subs[k].rs + subs[k].ag for k in ("OP", "FC-2"))
    comm_b = sum(subs[k].rs + subs[k].ag for k in ("FC-1", "IP"))
    return {"train": (comm_f + comm_b) / lt.train, "infer": comm_f / lt.infer}


def setup_rows(sysm: System, results: dict, keys, cfgs=("t3", "t3-mca", "ideal")) -> list[dict]:
    """One row per (model, TP) of ``results[(key, tp, sublayer)]``: Fig 4's communication share and each
    configuration's train / inference speedup (%, Fig 19)."""
    rows = []
    for key in keys:
        mo = model(key)
        for tp in mo.tp:
            subs = {sl: results[(key, tp, sl)] for sl in SUBLAYERS}
            lt = layer_times(sysm, mo, tp, subs)
            row = dict(model=key, tp=tp, comm_share=comm_fraction(lt, subs))
            for c in cfgs:
                row[c] = {k: 100.0 * (v - 1.0) for k, v in speedups(lt, subs, c).items()}
            rows.append(row)
    return rows
