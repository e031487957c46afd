"""Matplotlib figures for the T3 reproduction (Figs 15-20 and a fused-kernel timeline).

Each function takes plain result rows (``SublayerResult.to_json`` dicts or bench rows) and writes
one PNG; the Agg backend is forced so no display is needed.  ``note`` puts the figure's
model / paper / difference lines (from bench/t3_repro.py) in a footer under the plot.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

CFG_LABEL = {"t3": "T3", "t3-mca": "T3-MCA", "ideal": "Ideal-GEMM-RS-Overlap",
             "ideal-rs-nmc": "Ideal-RS+NMC", "sequential": "Sequential"}


def _finish(fig, path: Path, note: str | None):
    """tight layout, the model-vs-paper footer (``note``: one line per figure value), save."""
    if note:
        n = note.count("\n") + 1
        h = min(0.6, 0.1 * (n + 1) / fig.get_figheight())     # 6 pt lines ~ 0.1 inch
        fig.tight_layout(rect=(0, h, 1, 1))
        fig.text(0.01, 0.005, note, fontsize=6, family="monospace", va="bottom")
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _label(r):
    return f"{r['model']}\nTP{r['tp']} {r['sublayer']}"


def breakdown(rows, path: Path, title="Sub-layer runtime breakdown (Sequential), Fig 15", note=None):
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(rows)), 4))
    x = np.arange(len(rows))
    bottom = np.zeros(len(rows))
    for key, lab in (("gemm_us", "GEMM"), ("rs_us", "RS"), ("ag_us", "AG")):
        v = np.array([r[key] / r["times_us"]["sequential"] for r in rows])
        ax.bar(x, v, bottom=bottom, label=lab)
        bottom += v
    ax.set_xticks(x, [_label(r) for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("fraction of Sequential time")
    ax.set_title(title)
    ax.legend(fontsize=8)
    _finish(fig, path, note)


def speedups(rows, path: Path, configs=("t3", "t3-mca", "ideal", "ideal-rs-nmc"),
             title="Speedup over Sequential, Fig 16", note=None):
    fig, ax = plt.subplots(figsize=(max(6, 0.55 * len(rows)), 4))
    x = np.arange(len(rows))
    w = 0.8 / len(configs)
    for i, c in enumerate(configs):
        ax.bar(x + i * w - 0.4 + w / 2, [r["speedup"][c] for r in rows], w, label=CFG_LABEL[c])
    ax.axhline(1.0, color="k", lw=0.5)
    ax.set_xticks(x, [_label(r) for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("speedup (x)")
    ax.set_ylim(0.8, None)
    ax.set_title(title)
    ax.legend(fontsize=7)
    _finish(fig, path, note)


def traffic(rows, path: Path, configs=("sequential", "t3", "t3-mca"), note=None):
    cats = ("gemm_reads", "gemm_writes", "rs_reads", "rs_writes", "ag_reads", "ag_writes")
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(rows)), 4))
    w = 0.8 / len(configs)
    x = np.arange(len(rows))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, c in enumerate(configs):
        bottom = np.zeros(len(rows))
        for k, cat in enumerate(cats):
            v = np.array([r["traffic_MB"][c][cat] for r in rows])
            ax.bar(x + i * w - 0.4 + w / 2, v, w, bottom=bottom, color=colors[k % len(colors)],
                   label=cat if i == 0 else None, edgecolor="k", lw=0.2)
            bottom += v
    ax.set_xticks(x, [_label(r) for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("DRAM MB per GPU (bars: " + ", ".join(CFG_LABEL[c] for c in configs) + ")")
    ax.set_title("DRAM accesses per sub-layer, Fig 18")
    ax.legend(fontsize=7)
    _finish(fig, path, note)


def grouped(labels, series: dict, path: Path, ylabel: str, title: str, hline=None, note=None):
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(labels)), 4))
    x = np.arange(len(labels))
    w = 0.8 / max(1, len(series))
    for i, (name, vals) in enumerate(series.items()):
        ax.bar(x + i * w - 0.4 + w / 2, vals, w, label=name)
    if hline is not None:
        ax.axhline(hline, color="k", lw=0.5)
    ax.set_xticks(x, labels, rotation=90, fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    _finish(fig, path, note)


def timeline(fused: dict, ag_us: float, path: Path, title: str):
    """Gantt of GEMM stages, the RS transfer of each chunk slot and AG for each fused config, plus
    the DRAM traffic over time (Fig 17 style)."""
    cfgs = list(fused)
    fig, axes = plt.subplots(2 * len(cfgs), 1, figsize=(10, 3.2 * len(cfgs)), squeeze=False)
    for k, c in enumerate(cfgs):
        f = fused[c]
        ax = axes[2 * k][0]
        n = len(f.send_start)
        for j, (a, b) in enumerate(zip(f.stage_start, f.stage_end)):
            ax.barh(0, (b - a) * 1e6, left=a * 1e6, color="C0" if j % 2 else "C9", edgecolor="k", lw=0.3)
        for s in range(n - 1):
            if np.isfinite(f.send_start[s]):
                ax.barh(1 + s, (f.send_end[s] - f.send_start[s]) * 1e6, left=f.send_start[s] * 1e6,
                        color="C1" if s else "C3", edgecolor="k", lw=0.3)
            if s and np.isfinite(f.slot_ready[s]):
                ax.plot(f.slot_ready[s] * 1e6, 1 + s, "k|", ms=8)
        if np.isfinite(f.slot_ready[n - 1]):
            ax.plot(f.slot_ready[n - 1] * 1e6, n, "k|", ms=8)
        ax.barh(n, ag_us, left=f.time * 1e6, color="C2", edgecolor="k", lw=0.3)
        names = ["GEMM", "slot0 remote"] + [f"DMA slot{s}" for s in range(1, n - 1)] + ["AG"]
        keep = [i for i in range(n + 1) if n <= 8 or i in (0, 1, n) or i % 4 == 0]
        ax.set_yticks(keep, [names[i] for i in keep], fontsize=6)
        ax.invert_yaxis()
        ax.set_title(f"{title} - {CFG_LABEL.get(c, c)} (| = chunk reduced / tracker-ready)", fontsize=9)
        ax2 = axes[2 * k + 1][0]
        tr = f.trace
        if tr:
            t = tr["t"] * 1e6
            ax2.stackplot(t, tr["gemm_read"] / 1e9, tr["gemm_write"] / 1e9, tr["comm"] / 1e9,
                          labels=["GEMM reads", "GEMM writes/updates (cost)", "RS DMA reads + updates (cost)"])
            ax2.set_ylabel("DRAM GB/s", fontsize=7)
            ax2.legend(fontsize=6, loc="upper right")
        ax2.set_xlabel("time (us)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
