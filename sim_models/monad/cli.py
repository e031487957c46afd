"""``tessera monad`` -- Monad cost model (§II-B) and design-space exploration (§IV).

  tessera monad cost --area 331 --node 28 --chiplets 3 [--packaging all] [--json]
  tessera monad cost --fig3
  tessera monad dse --workload transformer --objective edp --budget 20 [--sa-steps 50]
                    [--seed 0] [--batch 4] [--flow two-stage|joint] [--polish N]
                    [--workers N | --scheduler tcp://HOST:PORT] --out DIR
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def _err(cmd, msg) -> int:
    print(f"tessera monad {cmd}: error: {msg}", file=sys.stderr)
    return 2


def _fmt_row(name, row):
    return (f"{name:8s} {row['die']:7.3f} {row['bond']:7.3f} {row['substrate']:7.3f} "
            f"{row['interposer']:7.3f} {row['process']:7.3f} {row['bond_loss']:7.3f} {row['total']:7.3f}")


HEAD = "package      die    bond  substr  interp    proc  bondyl   total"


def run_cost(args) -> int:
    from ..cost import model as cm
    try:
        if args.fig3:
            f = cm.fig3()
            if args.json:
                print(json.dumps(f, indent=1))
                return 0
            for name, v in f.items():
                print(f"{name}: 3 x {v['area_mm2']} mm^2 @ {v['node_nm']} nm "
                      f"(normalised to monolithic die cost ${v['mono_die_usd']:.2f} = 1)")
                print(HEAD)
                for k, row in v["rows"].items():
                    extra = f"  interposer {row['interposer_share']:.0%}" if "interposer_share" in row else ""
                    print(_fmt_row(k, row) + extra)
            return 0
        if args.area is None:
            return _err("cost", "--area is required (or --fig3)")
        if args.chiplets < 1:
            return _err("cost", "--chiplets must be >= 1")
        if args.area <= 0:
            return _err("cost", f"--area must be > 0 mm^2, got {args.area}")
        pkgs = cm.PACKAGINGS if args.packaging == "all" else (args.packaging,)
        mono = cm.monolithic_equivalent(args.area, args.chiplets, args.node)
        rows = {"mono": mono.as_dict()}
        for p in pkgs:
            rows[p] = cm.package_cost([cm.Die(args.area, args.node)] * args.chiplets, p).as_dict()
    except cm.CostError as e:
        return _err("cost", str(e))
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{args.chiplets} x {args.area} mm^2 @ {args.node} nm vs one {args.chiplets * args.area:g} mm^2 die (USD)")
    print(HEAD)
    for k, r in rows.items():
        print(_fmt_row(k, r) + f"  yield {min(r['die_yields']):.3f}")
    return 0


def run_dse(args) -> int:
    from tqdm import tqdm

    from .executor import make_executor
    from .optimizer import OBJECTIVES, optimise, pareto_front
    from .perf import ModelError, workload_names
    if args.workload not in workload_names():
        return _err("dse", f"unknown workload {args.workload!r} (known: {', '.join(workload_names())})")
    if args.objective not in OBJECTIVES:
        return _err("dse", f"objective must be one of {', '.join(OBJECTIVES)}")
    if args.budget < 1 or args.batch < 1 or args.sa_steps < 0 or args.polish < 0 or args.polish_chains < 1:
        return _err("dse", "--budget, --batch and --polish-chains must be >= 1, --sa-steps and --polish >= 0")
    if args.workers is not None and args.workers < 0:
        return _err("dse", "--workers must be >= 0")
    if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://")):
        return _err("dse", f"--scheduler must look like tcp://HOST:PORT, got {args.scheduler!r}")
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return _err("dse", f"cannot create --out {out}: {e.strerror}")
    try:
        with make_executor(args.scheduler, args.workers) as ex, \
                tqdm(total=args.budget * (2 if args.flow == "two-stage" else 1), desc=f"dse {args.workload}/{args.objective}", file=sys.stderr) as bar:
            h = optimise(args.workload, args.objective, args.budget, args.sa_steps, args.seed, ex,
                         args.batch, keep_samples=True, progress=bar.update,
                         two_stage=args.flow == "two-stage", polish=args.polish,
                         polish_chains=args.polish_chains)
    except (ModelError, ValueError, OSError) as e:
        return _err("dse", str(e))
    best = h.best
    lat_cost = [(s[0], s[1]) for s in h.samples]
    front = pareto_front(lat_cost)
    doc = {"workload": args.workload, "objective": args.objective, "budget": args.budget, "flow": args.flow,
           "sa_steps": args.sa_steps, "seed": args.seed, "evaluations": h.evals,
           "history": h.values, "best": best, "pareto_latency_cost": front}
    (out / "dse.json").write_text(json.dumps(doc, indent=1, default=str))
    _plot(h, front, out / "dse.png", args)
    r = best["result"]
    print(f"best {args.objective} = {best['value']:.4g} after {h.evals} evaluations: latency {r['latency_ns']:.4g} ns, "
          f"energy {r['energy_pj'] / 1e6:.4g} uJ, cost ${r['cost_usd']:.2f}, area {r['area_mm2']:.1f} mm^2, "
          f"packaging {best['low']['packaging']}, network {best['low']['network']}")
    print(f"wrote {out / 'dse.json'} and {out / 'dse.png'}")
    return 0


def _plot(h, front, path, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    best, run = [], float("inf")
    for v in h.values:
        run = min(run, v)
        best.append(run)
    ax[0].semilogy(h.values, ".", label="sample")
    ax[0].semilogy(best, "-", label="best so far")
    ax[0].set_xlabel("Bayes evaluation")
    ax[0].set_ylabel(args.objective)
    ax[0].legend()
    for p, c in ((0, "tab:blue"), (1, "tab:orange"), (2, "tab:green")):
        pts = [(s[0], s[1]) for s in h.samples if s[3] == p]
        if pts:
            ax[1].scatter([x for x, _ in pts], [y for _, y in pts], s=3, c=c,
                          label=("organic", "passive", "active")[p])
    if front:
        ax[1].plot([x for x, _ in front], [y for _, y in front], "k-", label="Pareto")
    ax[1].set_xscale("log")
    ax[1].set_yscale("log")
    ax[1].set_xlabel("latency (ns)")
    ax[1].set_ylabel("cost (USD)")
    ax[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args) -> int:
    return args.monad_func(args)


def add_parser(subparsers):
    p = subparsers.add_parser("monad", help="Monad chiplet cost model and co-optimiser (DSE)")
    sub = p.add_subparsers(dest="monad_cmd", required=True, parser_class=type(p))
    c = sub.add_parser("cost", help="Eq. 1 fabrication cost of N chiplets vs a monolithic die")
    c.add_argument("--area", type=float, help="area of one chiplet (mm^2)")
    c.add_argument("--node", type=int, default=28, help="technology node in nm (default 28)")
    c.add_argument("--chiplets", type=int, default=3)
    c.add_argument("--packaging", choices=["organic", "passive", "active", "all"], default="all")
    c.add_argument("--fig3", action="store_true", help="print the paper's Fig. 3 (TPU, Gemmini)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=run, monad_func=run_cost)
    d = sub.add_parser("dse", help="Bayesian + annealing co-optimisation of a workload")
    d.add_argument("--workload", required=True)
    d.add_argument("--objective", default="edp", help="latency | energy | edp | cost | pareto")
    d.add_argument("--budget", type=int, default=20, help="Bayes evaluations (per stage)")
    d.add_argument("--sa-steps", type=int, default=50, help="annealing steps per evaluation")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--batch", type=int, default=4, help="evaluations in flight (asynchronous Bayes, constant liar)")
    d.add_argument("--flow", choices=["two-stage", "joint"], default="two-stage",
                   help="architecture then integration stage (Fig. 6a), or one joint search")
    d.add_argument("--polish", type=int, default=0, help="final annealing steps on the best design")
    d.add_argument("--polish-chains", type=int, default=1,
                   help="run the polish as this many independent chains (tasks), the steps shared out")
    d.add_argument("--workers", type=int, default=None, help="local processes (0 = in-process)")
    d.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="Dask scheduler")
    d.add_argument("--out", required=True, metavar="DIR")
    d.set_defaults(func=run, monad_func=run_dse)


def demo() -> list:
    """Quick checks of the cost and performance models against hand values and the paper."""
    from ..cost import model as cm
    from .perf import Level, Mapping, evaluate_op, make_op
    rows = []
    n = 0
    assert abs(cm.dies_per_wafer(100.0) - 600.83) < 0.01
    n += 1
    assert abs(cm.neg_binomial_yield(100.0, 0.07, 3.0) - 0.933144) < 1e-6
    n += 1
    f = cm.fig3()
    tpu = f["TPU"]["rows"]
    ok = [tpu["organic"]["total"] < tpu["mono"]["total"], tpu["passive"]["interposer_share"] > 0.15,
          tpu["active"]["interposer_share"] > 0.30, f["Gem"]["rows"]["organic"]["die"] > 0.95,
          f["Gem"]["rows"]["passive"]["interposer_share"] > 0.15, f["Gem"]["rows"]["active"]["interposer_share"] > 0.30]
    n += len(ok)
    rows.append({"block": "monad.cost", "checks": n if all(ok) else 0, "cycles": "-",
                 "detail": f"Fig3 TPU organic {tpu['organic']['total']:.2f} vs mono {tpu['mono']['total']:.2f}; "
                           f"interposer {tpu['passive']['interposer_share']:.0%}/{tpu['active']['interposer_share']:.0%}"
                           + ("" if all(ok) else " FAILED")})
    op = make_op({"name": "mm", "loops": {"i": 64, "j": 64, "k": 64},
                  "inputs": [{"name": "A", "idx": [["i"], ["k"]]}, {"name": "B", "idx": [["k"], ["j"]]}],
                  "output": {"name": "C", "idx": [["i"], ["j"]]}})
    r = evaluate_op(op, Mapping(Level((1, 1), ("i", "j"), ("i", "j", "k")), Level(),
                                Level((8, 8), ("i", "j"), ("i", "j", "k"))))
    good = r.compute_cycles == 4096 and abs(r.util - 1.0) < 1e-12
    rows.append({"block": "monad.perf", "checks": 2 if good else 0, "cycles": int(r.compute_cycles),
                 "detail": "64^3 matmul on 8x8 PEs = 4096 cycles, U=1" + ("" if good else " FAILED")})
    return rows
