"""Whole-network runs (seed paper Sec. 4-5): per-layer search, the Sec. 5 optimisations, and
ResNet-50 batch-1 latency.  Layers are searched in parallel worker processes.  The network
latency is the sum of the layers (or pipelined blocks) plus the activation moves between
layers (interlayer.py: each layer's outputs travel to the next layer's input homes).
``fig5_class_bound``: the headline experiment that holds each layer to the Sec. 4.3 scaling class.
Left out: pooling/element-wise layers (no MACs; run in the Global PEs)."""
from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

from .arch import Arch
from .layers import Layer
from .mapper import chiplet_counts, dataflow_kwargs, search
from .interlayer import producers, transfer_cycles
from .optim import nonuniform, pipeline_block, placement

OPTS = ("uniform", "nonuniform", "placement", "pipeline", "all")


def run_layer(layer: Layer, arch: Arch, n_chiplets: int, opt: str, samples: int, seed: int,
              spatial_pq: bool = True, placement_start: str = "local", dataflow: str = "free") -> dict:
    per = search(layer, arch, chiplet_counts(n_chiplets), samples, seed, keep_per_count=True,
                 spatial_pq=spatial_pq, placement=placement_start, **dataflow_kwargs(dataflow))
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
                spatial_pq: bool = True, placement_start: str = "local", dataflow: str = "free") -> dict:
    """``spatial_pq``: the mapper also splits P and Q spatially (Sec. 3.3); False = Listing 1's
    K/C-only dataflow (ablation; see mapper.search).  ``placement_start``: the data homes the
    baseline tilings are searched under (model.py: "local" = the runtime baseline; "row" /
    "sequential" = the Fig. 11b start state, a sensitivity).  ``dataflow``: the premise of
    mapper.DATAFLOWS (which levels may split P/Q)."""
    if opt not in OPTS:
        raise ValueError(f"unknown opt {opt!r} (choose from {', '.join(OPTS)})")
    if not 1 <= n_chiplets <= arch.n_chiplets:
        raise ValueError(f"chiplets must be in [1, {arch.n_chiplets}], got {n_chiplets}")
    dataflow_kwargs(dataflow)
    args = [(l, arch, n_chiplets, opt, samples, seed + i, spatial_pq, placement_start, dataflow)
            for i, l in enumerate(layers)]
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
    prod = producers(layers)

    def moves(key):
        out = [0.0] * len(rows)
        for i, j in enumerate(prod):
            if j is not None:
                out[i] = transfer_cycles(layers[j], rows[j][key], layers[i], rows[i][key], arch)
        return out
    mv_u = moves("uniform")
    if opt != "uniform":
        # a layer keeps its optimised result only if that does not lose once the moves into and
        # out of it (to its consumers) are charged -- placement changes where data lives
        cons = {j: [i for i, p in enumerate(prod) if p == j] for j in range(len(rows))}
        for j, r in enumerate(rows):
            if r["best"] is r["uniform"]:
                continue
            def cost(res):
                c = res.latency_cycles
                if prod[j] is not None:
                    c += transfer_cycles(layers[prod[j]], rows[prod[j]]["best"], layers[j], res, arch)
                for i in cons[j]:
                    c += transfer_cycles(layers[j], res, layers[i], rows[i]["best"], arch)
                return c
            if cost(r["best"]) >= cost(r["uniform"]):
                r["best"] = r["uniform"]
                if opt == "all":
                    r["all"] = r["uniform"]
    mv_b = moves("best")
    for r, a, b in zip(rows, mv_u, mv_b):
        r["move_uniform"], r["move_best"] = a, b
    total_uniform = sum(r["uniform"].latency_cycles for r in rows) + sum(mv_u)
    total_layer = sum(r["best"].latency_cycles for r in rows) + sum(mv_b)
    total = total_layer
    pipes = []
    if opt in ("pipeline", "all"):
        total = 0.0
        for blk in blocks(layers):
            seq = sum(rows[i]["best"].latency_cycles + mv_b[i] for i in blk)
            pl = None
            if len(blk) > 1:
                pl = pipeline_block([layers[i] for i in blk], [rows[i]["per_count"] for i in blk], arch,
                                    n_chiplets)
            into = max(mv_b[i] for i in blk if prod[i] is None or prod[i] not in blk)
            if pl is not None and pl[0] + into < seq:
                total += pl[0] + into
                pipes.append({"block": [layers[i].name for i in blk], "sequential_cycles": seq,
                              "pipelined_cycles": pl[0] + into, "move_into_block_cycles": into,
                              "chiplets": [p[1] for p in pl[1]]})
            else:
                total += seq
        if not pipes:
            total = total_layer          # same sum, same order (no float drift vs the baseline)
    return {"rows": rows, "opt": opt, "chiplets": n_chiplets, "samples": samples,
            "total_uniform_cycles": total_uniform, "total_cycles": total, "pipelined_blocks": pipes,
            "move_uniform_cycles": sum(mv_u), "move_best_cycles": sum(mv_b),
            "clock_ghz": arch.pe_clock_ghz, "spatial_pq": spatial_pq,
            "dataflow": dataflow}


# Sec. 4.3: "Of the 53 layers of ResNet-50, 12 follow the behavior of res3a_branch1 [gain to 8
# chiplets, flat to 32], 24 follow that of res5[a-c]_branch2b [scale to 32], and the remaining 17
# have behavior similar to res2[a-c]_branch2b [gain to 8, worse at 32]"; the paper attributes the
# non-scaling to the layers' small weight counts ("the number of weights in this layer is so small").
FIG5_CLASSES = (("res2-like", 17, 8), ("flat past 8", 12, 8), ("scales to 32", 24, None))


def fig5_class_bound(run: dict) -> dict:
    """Experiment for the headline (issue 14 item 5): the network latency if each layer runs as
    fast as the model allows *within the Sec. 4.3 scaling class the paper measured for it* -- the
    conv layers sorted by weight bytes, the 17 smallest and the next 12 held to their best tiling on
    <= 8 chiplets, the 24 largest (and fc1000) free.  Uses the per-count results of ``run`` and adds
    the same activation moves between layers.  Returns total/layer cycles and each layer's class."""
    convs = [r for r in run["rows"] if not r["layer"].H == r["layer"].W == 1]      # fc1000 is 1x1x1
    order = sorted(convs, key=lambda r: (r["layer"].weight_bytes, r["layer"].name))
    cls, i = {}, 0
    for label, n, cap in FIG5_CLASSES:
        for r in order[i:i + n]:
            cls[r["layer"].name] = (label, cap)
        i += n
    layers_cyc, per = 0.0, {}
    for r in run["rows"]:
        label, cap = cls.get(r["layer"].name, ("scales to 32", None))
        opts = [v.latency_cycles for k, v in r["per_count"].items() if cap is None or k <= cap]
        per[r["layer"].name] = {"class": label, "cycles": min(opts),
                                "model_best_cycles": min(v.latency_cycles for v in r["per_count"].values())}
        layers_cyc += min(opts)
    return {"layer_cycles": layers_cyc, "move_cycles": run["move_uniform_cycles"],
            "total_cycles": layers_cyc + run["move_uniform_cycles"], "layers": per}
