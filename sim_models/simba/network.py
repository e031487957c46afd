"""Whole-network runs (seed paper Sec. 4-5): per-layer search, the Sec. 5 optimisations, and
ResNet-50 batch-1 latency.  Layers are searched in parallel worker processes.
Left out: pooling/element-wise layers (no MACs; run in the Global PEs) and inter-layer
activation movement between separately compiled layers (the paper compiles and runs each layer
independently with inputs preloaded, Sec. 4.1)."""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

from .arch import Arch
from .layers import Layer
from .mapper import chiplet_counts, search
from .optim import nonuniform, pipeline_block, placement

OPTS = ("uniform", "nonuniform", "placement", "pipeline", "all")


def run_layer(layer: Layer, arch: Arch, n_chiplets: int, opt: str, samples: int, seed: int,
              spatial_pq: bool = False) -> dict:
    per = search(layer, arch, chiplet_counts(n_chiplets), samples, seed, keep_per_count=True,
                 spatial_pq=spatial_pq)
    base = min(per.values(), key=lambda r: (r.latency_cycles, r.energy_pj))
    out = {"layer": layer, "per_count": per, "uniform": base, "best": base}
    cands = [base]
    if opt in ("nonuniform", "all"):
        out["nonuniform"] = nonuniform(layer, arch, base)
        cands.append(out["nonuniform"])
    if opt in ("placement", "all"):
        out["placement"] = placement(layer, arch, base)
        cands.append(out["placement"])
    if opt == "all":
        cands.append(placement(layer, arch, out["nonuniform"]))
    out["best"] = min(cands, key=lambda r: r.latency_cycles)
    if opt == "all":
        out["all"] = out["best"]
    return out


def _run_one(a):
    return run_layer(*a)


def blocks(layers: list[Layer]) -> list[list[int]]:
    """Indices of residual blocks (branch1?, 2a, 2b, 2c); conv1 and fc stand alone."""
    out, cur = [], []
    for i, l in enumerate(layers):
        stem = l.name.split("_")[0]
        if cur and layers[cur[0]].name.split("_")[0] != stem:
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


def run_network(layers: list[Layer], arch: Arch, n_chiplets: int = 32, opt: str = "uniform",
                samples: int = 1000, seed: int = 0, jobs: int = 2, progress: bool = False,
                spatial_pq: bool = False) -> dict:
    """``spatial_pq``: let the mapper also split P and Q spatially (Listing 1 keeps them
    temporal; see mapper.search)."""
    if opt not in OPTS:
        raise ValueError(f"unknown opt {opt!r} (choose from {', '.join(OPTS)})")
    if not 1 <= n_chiplets <= arch.n_chiplets:
        raise ValueError(f"chiplets must be in [1, {arch.n_chiplets}], got {n_chiplets}")
    args = [(l, arch, n_chiplets, opt, samples, seed + i, spatial_pq) for i, l in enumerate(layers)]
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(layers), desc=f"simba {opt}", unit="layer", leave=False)
    rows = []
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs) as ex:
            for r in ex.map(_run_one, args):
                rows.append(r)
                bar and bar.update()
    else:
        for a in args:
            rows.append(_run_one(a))
            bar and bar.update()
    bar and bar.close()
    total_uniform = sum(r["uniform"].latency_cycles for r in rows)
    total_layer = sum(r["best"].latency_cycles for r in rows)
    total = total_layer
    pipes = []
    if opt in ("pipeline", "all"):
        total = 0.0
        for blk in blocks(layers):
            seq = sum(rows[i]["best"].latency_cycles for i in blk)
            pl = None
            if len(blk) > 1:
                pl = pipeline_block([layers[i] for i in blk], [rows[i]["per_count"] for i in blk], arch,
                                    n_chiplets)
            if pl is not None and pl[0] < seq:
                total += pl[0]
                pipes.append({"block": [layers[i].name for i in blk], "sequential_cycles": seq,
                              "pipelined_cycles": pl[0], "chiplets": [p[1] for p in pl[1]]})
            else:
                total += seq
    return {"rows": rows, "opt": opt, "chiplets": n_chiplets, "samples": samples,
            "total_uniform_cycles": total_uniform, "total_cycles": total, "pipelined_blocks": pipes,
            "clock_ghz": arch.pe_clock_ghz, "spatial_pq": spatial_pq}
