"""JSON/plot export of network runs (shared by the CLI and bench/simba_repro.py; seed paper Sec.
4-5 figures).  Left out: energy of the activation moves between layers (latency only)."""
from __future__ import annotations

from .arch import Arch


def result_dict(res, arch: Arch) -> dict:
    f = arch.pe_clock_ghz * 1e3                    # cycles per microsecond
    return {
        "layer": res.layer, "chiplets": res.n_chiplets, "mapping": res.mapping.short(),
        "k_ext": list(res.mapping.k_ext) if res.mapping.k_ext else None,
        "p_ext": list(res.mapping.p_ext) if res.mapping.p_ext else None,
        "binding": res.binding if isinstance(res.binding, str) else list(res.binding),
        "placement": res.placement, "latency_cycles": res.latency_cycles,
        "latency_us": res.latency_cycles / f, "energy_uj": res.energy_pj / 1e6,
        "energy_pj": res.energy, "samples": res.samples,
    }


def network_dict(run: dict, arch: Arch) -> dict:
    f = arch.pe_clock_ghz * 1e3
    layers = []
    for r in run["rows"]:
        l = r["layer"]
        d = {"name": l.name, "macs": l.macs, "uniform": result_dict(r["uniform"], arch),
             "best": result_dict(r["best"], arch),
             "speedup": r["uniform"].latency_cycles / r["best"].latency_cycles,
             "move_in_us": r.get("move_best", 0.0) / f}
        for k in ("nonuniform", "placement"):
            if k in r:
                d[k] = result_dict(r[k], arch)
        layers.append(d)
    total_us = run["total_cycles"] / f
    return {
        "opt": run["opt"], "chiplets": run["chiplets"], "samples_per_layer": run["samples"],
        "spatial_pq": run.get("spatial_pq", True),
        "dataflow": run.get("dataflow", "free"),
        "placement_baseline": "local (inputs on their consumers; moves between layers charged)",
        "move_us": run.get("move_best_cycles", 0.0) / f,
        "clock_ghz": arch.pe_clock_ghz, "grs_gbps": arch.grs_gbps,
        "total_uniform_us": run["total_uniform_cycles"] / f, "total_us": total_us,
        "images_per_s": 1e6 / total_us, "pipelined_blocks": run["pipelined_blocks"],
        "energy_uj": sum(r["best"].energy_pj for r in run["rows"]) / 1e6,
        "layers": layers,
        "params": {k: str(v) for k, v in arch.provenance.items()},
    }


def plot_layers(doc: dict, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [l["name"] for l in doc["layers"]]
    u = [l["uniform"]["latency_us"] for l in doc["layers"]]
    b = [l["best"]["latency_us"] for l in doc["layers"]]
    fig, ax = plt.subplots(figsize=(14, 4))
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], u, 0.4, label="uniform baseline")
    ax.bar([i + 0.2 for i in x], b, 0.4, label=f"opt={doc['opt']}")
    ax.set_xticks(list(x), names, rotation=90, fontsize=6)
    ax.set_ylabel("latency (us)")
    ax.set_title(f"Simba model, {doc['chiplets']} chiplets: total {doc['total_us']:.0f} us "
                 f"({doc['images_per_s']:.0f} images/s)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
