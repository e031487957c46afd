"""``tessera simba``: map a network onto the Simba package model and print per-layer results
(seed paper Sec. 3.3 mapper/binder, Sec. 5 optimisations).  ``demo()`` runs quick checks of
the model against paper numbers for ``make demo``."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .arch import ArchError, load_arch
from .layers import LayerError, load_network
from .network import OPTS, run_network
from .report import network_dict, plot_layers


def add_parser(subparsers):
    p = subparsers.add_parser("simba", help="Simba package model: map a network, print per-layer latency/energy")
    p.add_argument("--network", default="resnet50", help="network name (data/<name>.json) or JSON path")
    p.add_argument("--chiplets", type=int, default=32, help="chiplets available (1-36; default 32)")
    p.add_argument("--opt", choices=OPTS, default="uniform", help="Sec. 5 optimisation(s) to apply")
    p.add_argument("--samples", type=int, default=1000, help="valid mappings sampled per layer")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=2, help="worker processes")
    p.add_argument("--layer", action="append", metavar="NAME", help="only these layers (repeatable)")
    p.add_argument("--clock-ghz", type=float, help="PE clock (default 1.03, Sec. 4.1); NoP hop ns unchanged")
    p.add_argument("--gbps", type=float, help="GRS rate per pin, Gb/s (default 11)")
    p.add_argument("--bench-dir", default="build/bench", help="RTL bench JSON to take measured parameters from")
    p.add_argument("--kc-only", action="store_true",
                   help="Listing 1's K/C-only dataflow (ablation; default also splits P/Q, Sec. 3.3)")
    p.add_argument("--dataflow", choices=("free", "chip-kc", "pe-kc", "kc-only"), default="free",
                   help="which levels may split P/Q (mapper.DATAFLOWS; kc-only = --kc-only)")
    p.add_argument("--out", metavar="DIR", help="write <DIR>/simba_<network>_<opt>.json and .png")
    p.set_defaults(func=run)


def _err(msg) -> int:
    print(f"tessera simba: error: {msg}", file=sys.stderr)
    return 2


def run(args) -> int:
    if not 1 <= args.samples <= 100000:
        return _err(f"--samples must be in [1, 100000], got {args.samples}")
    if not 1 <= args.jobs <= 64:
        return _err(f"--jobs must be in [1, 64], got {args.jobs}")
    kw = {}
    if args.clock_ghz is not None:
        kw["pe_clock_ghz"] = args.clock_ghz
    if args.gbps is not None:
        if not 11 <= args.gbps <= 25:
            return _err(f"--gbps must be in [11, 25] (GRS range, Sec. 3.2), got {args.gbps}")
        kw["grs_gbps"] = args.gbps
    try:
        arch = load_arch(bench_dir=args.bench_dir, **kw)
        layers = load_network(args.network)
    except (ArchError, LayerError) as e:
        return _err(str(e).splitlines()[0])
    if not 1 <= args.chiplets <= arch.n_chiplets:
        return _err(f"--chiplets must be in [1, {arch.n_chiplets}], got {args.chiplets}")
    if args.layer:
        names = {l.name for l in layers}
        bad = [n for n in args.layer if n not in names]
        if bad:
            return _err(f"unknown layer(s) {', '.join(bad)} in {args.network}")
        layers = [l for l in layers if l.name in args.layer]
    run_ = run_network(layers, arch, args.chiplets, args.opt, args.samples, args.seed, args.jobs,
                       progress=sys.stderr.isatty(), spatial_pq=not args.kc_only,
                       dataflow=args.dataflow)
    doc = network_dict(run_, arch)
    doc["network"] = args.network
    print(f"{'layer':18s} {'MMAC':>7s} {'chip':>4s} {'uniform us':>10s} {'opt us':>8s} {'speedup':>7s} "
          f"{'uJ':>7s} {'pJ/MAC':>6s}  mapping")
    for l in doc["layers"]:
        b = l["best"]
        print(f"{l['name']:18s} {l['macs'] / 1e6:7.1f} {b['chiplets']:4d} {l['uniform']['latency_us']:10.2f} "
              f"{b['latency_us']:8.2f} {l['speedup']:7.3f} {b['energy_uj']:7.2f} "
              f"{b['energy_uj'] * 1e6 / l['macs']:6.2f}  {b['mapping']}")
    for p in doc["pipelined_blocks"]:
        print(f"pipelined {'+'.join(p['block'])}: {p['sequential_cycles']:.0f} -> {p['pipelined_cycles']:.0f} "
              f"cycles on {p['chiplets']} chiplets")
    print(f"total: uniform {doc['total_uniform_us']:.1f} us, opt={args.opt} {doc['total_us']:.1f} us "
          f"= {doc['images_per_s']:.0f} images/s at {arch.pe_clock_ghz} GHz, {arch.grs_gbps} Gb/s GRS "
          f"(incl. {doc['move_us']:.1f} us of activation moves between layers); "
          f"energy {doc['energy_uj']:.1f} uJ; {doc['samples_per_layer']} samples/layer")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"simba_{Path(args.network).stem}_{args.opt}"
        (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
        plot_layers(doc, out / f"{stem}.png")
        print(f"wrote {out / (stem + '.json')} and {out / (stem + '.png')}")
    return 0


def demo() -> list[dict]:
    """Quick model checks against the paper (each row: number of passed checks)."""
    from .mapper import search
    from .model import Mapping, evaluate
    rows = []
    arch = load_arch()
    net = {l.name: l for l in load_network("resnet50")}
    checks = 0
    assert sum(l.macs for l in net.values()) == 3_857_973_248; checks += 1
    assert sum(n != "fc1000" for n in net) == 53; checks += 1      # "the 53 layers of ResNet-50"
    rows.append({"block": "simba.workload", "checks": checks, "cycles": "-",
                 "detail": "ResNet-50: 53 convs + fc, 3.858 GMAC"})
    checks = 0
    t1, t36 = arch.peak_tops(1, 2.0), arch.peak_tops(36, 1.8)
    assert abs(t1 - 4.01) / 4.01 < 0.03; checks += 1               # 4.01 TOPS/chiplet
    assert abs(t36 - 127.8) / 127.8 < 0.05; checks += 1            # 127.8 TOPS / 36 chiplets
    assert abs(arch.with_(grs_gbps=25.0).nop_chiplet_gbytes_per_s - 100) < 1e-9; checks += 1
    rows.append({"block": "simba.peak", "checks": checks, "cycles": "-",
                 "detail": f"{t1:.2f} TOPS/chiplet, {t36:.1f} TOPS/36, 100 GB/s NoP"})
    l = net["res2a_branch2b"]
    r = evaluate(l, arch, Mapping(1, 1, 1, 1, 8, 2, 1, 1, 4, 4))
    ideal = l.macs / arch.macs_per_chiplet
    assert ideal < r.latency_cycles < 1.2 * ideal
    e_op = r.energy_pj / l.macs / 2 / arch.energy_scale            # pJ/op at 0.42 V
    assert 0.08 < e_op < 0.14                                       # 0.11 pJ/op measured (Sec. 3.2)
    rows.append({"block": "simba.pe_model", "checks": 2, "cycles": round(r.latency_cycles),
                 "detail": f"1-chiplet res2a_branch2b {r.latency_cycles / ideal:.2f}x ideal, "
                           f"{e_op:.3f} pJ/op @0.42V (paper 0.11)"})
    per = search(net["res5a_branch2b"], arch, [8, 32], samples=200, keep_per_count=True)
    assert per[32].latency_cycles < per[8].latency_cycles
    rows.append({"block": "simba.mapper", "checks": 1, "cycles": round(per[32].latency_cycles),
                 "detail": f"res5a_branch2b 8->32 chiplets speedup {per[8].latency_cycles / per[32].latency_cycles:.2f}x"})
    return rows
