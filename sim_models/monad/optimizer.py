"""Bayesian + simulated-annealing co-optimiser -- Monad §IV-A/C (Fig. 6b).

Bayesian optimisation (scikit-optimize ``Optimizer``: Gaussian-process
surrogate, probability-of-improvement acquisition, ask/tell) samples the
low-dimensional fields; every sample is evaluated by a simulated-annealing run
over the high-dimensional fields (order, tiling, placement; started from an
output-stationary, large-tile heuristic point), whose best value
is told back to the GP (in log space).  Objectives: latency, energy, edp,
cost, and ``pareto`` (latency x cost; all visited designs are kept so the
cost-latency Pareto front can be drawn).

Evaluations are independent tasks sent to an executor (executor.py) in
batches (``ask(n_points=batch)``, constant-liar); each task is seeded from
(seed, task index), so a given seed gives the same result on any executor.

``two_stage=True`` runs the flow of Fig. 6a (architecture stage, then an
integration stage over the best kept designs with a design selector per op);
otherwise all fields are searched jointly.  Left out: keeping a true Pareto
set in the architecture stage (the best ``keep`` designs by the objective are
kept), true multi-objective BO.
"""
from __future__ import annotations

import math
import random
import warnings
from dataclasses import dataclass, field

from .perf import ModelError, load_workload
from .space import Space, default_pe_total
from .system import evaluate

OBJECTIVES = ("latency", "energy", "edp", "cost", "pareto")
INFEASIBLE = 1e300


def score(res, objective: str) -> float:
    if objective == "pareto":
        return res.latency_ns * res.cost_usd
    return res.objective(objective)


def anneal(space: Space, low: dict, objective: str, steps: int, rng: random.Random,
           keep_samples: bool = False, start: dict | None = None, t0: float = 0.5):
    """SA over order/tiling/placement for fixed low fields, from ``start`` or
    the heuristic point.  Returns (best value, best high, best Result, samples,
    evaluations)."""
    high = start if start is not None else space.random_high(low, rng, heuristic=True)
    try:
        res = evaluate(space.wl, space.decode(low, high))
        cur = score(res, objective)
    except ModelError:
        res, cur = None, INFEASIBLE
    best = (cur, high, res)
    samples = []
    n = 1
    t1 = 0.005
    for s in range(steps):
        temp = t0 * (t1 / t0) ** (s / max(1, steps - 1))
        cand = space.neighbour(low, high, rng)
        try:
            r = evaluate(space.wl, space.decode(low, cand))
            v = score(r, objective)
        except ModelError:
            r, v = None, INFEASIBLE
        n += 1
        if keep_samples and r is not None:
            samples.append((r.latency_ns, r.cost_usd, r.energy_pj, low["packaging"]))
        dv = math.log(v) - math.log(cur) if cur < INFEASIBLE else -1.0
        if v < cur or rng.random() < math.exp(-dv / temp):
            high, cur = cand, v
            if v < best[0]:
                best = (v, cand, r)
    return best[0], best[1], best[2], samples, n


@dataclass
class Task:
    workload: str
    pe_total: int
    fixed: dict
    free_low: list
    seed: int
    sa_steps: int
    objective: str
    keep_samples: bool = False


def run_task(task: Task) -> dict:
    """One Bayes evaluation: SA over the high-dimensional fields (top level, picklable)."""
    wl = load_workload(task.workload)
    space = Space(wl, task.pe_total, dict(task.fixed))
    low = space.full_low(task.free_low)
    rng = random.Random(task.seed)
    v, high, res, samples, n = anneal(space, low, task.objective, task.sa_steps, rng, task.keep_samples)
    return {"value": v, "low": low, "high": high, "result": res.as_dict() if res else None,
            "samples": samples, "evals": n}


@dataclass
class History:
    objective: str
    values: list = field(default_factory=list)
    points: list = field(default_factory=list)
    best: dict | None = None
    evals: int = 0
    samples: list = field(default_factory=list)
    records: list = field(default_factory=list)     # {"value", "low", "high"} per evaluation

    def as_dict(self) -> dict:
        return {"objective": self.objective, "values": self.values, "evals": self.evals,
                "best": self.best, "n_points": len(self.points)}


def optimise(workload: str, objective: str = "edp", budget: int = 20, sa_steps: int = 50,
             seed: int = 0, executor=None, batch: int = 4, fixed: dict | None = None,
             pe_total: int | None = None, n_initial: int | None = None, keep_samples: bool = False,
             progress=None, two_stage: bool = False, x0: list | None = None, keep: int = 4,
             polish: int = 0) -> History:
    """Bayes (GP + PI) over the free low-dimensional fields; SA inside each evaluation.

    ``two_stage`` (Fig. 6a): ``budget`` evaluations explore the architecture
    fields on an organic mesh with identity placement; the ``keep`` best designs
    become candidates of the integration stage, which selects a design per op
    and explores packaging, network and placement with another ``budget``.
    ``x0``: known designs (full low-field dicts) evaluated first (warm start).
    ``polish``: a final annealing run of that many steps from the best point."""
    from skopt import Optimizer
    from skopt.space import Integer
    from .executor import SerialExecutor, run_ordered
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}")
    if budget < 1 or sa_steps < 0 or batch < 1:
        raise ValueError("budget and batch must be >= 1, sa_steps >= 0")
    from threadpoolctl import threadpool_limits
    args = (objective, sa_steps, executor, batch, pe_total, n_initial, keep_samples, progress,
            Optimizer, Integer, SerialExecutor, run_ordered)
    with threadpool_limits(1):        # small GP: BLAS threads only add contention
        h = _two_stage(workload, budget, seed, fixed, x0, keep, args) if two_stage else \
            _optimise(workload, budget, seed, fixed, x0, *args)
    if polish and h.best is not None:
        wl = load_workload(workload)
        b = h.best
        f = {k: v for k, v in (fixed or {}).items() if k in ("order", "tiling", "placement", "chiplets")}
        space = Space(wl, pe_total or default_pe_total(workload, len(wl.ops)), f)
        v, high, res, samples, n = anneal(space, b["low"], objective, polish, random.Random(seed + 104729),
                                          keep_samples, start=b["high"], t0=0.05)
        h.evals += n
        h.samples.extend(samples)
        if res is not None and v < b["value"]:
            h.best = {**b, "value": v, "high": high, "result": res.as_dict()}
    return h


def _two_stage(workload, budget, seed, fixed, x0, keep, args):
    """Architecture stage, then integration stage over the kept designs (Fig. 6a)."""
    fixed = dict(fixed or {})
    ops = [op.name for op in load_workload(workload).ops]
    f1 = dict(fixed)
    f1.setdefault("packaging", 0)
    f1.setdefault("network", 0)
    f1.setdefault("placement", "identity")
    h1 = _optimise(workload, budget, seed, f1, x0, *args)
    cands, seen = [], set()
    for r in sorted(h1.records, key=lambda r: r["value"]):
        arch = {k: v for k, v in r["low"].items() if k.split(".")[0] in ops and "." in k}
        key = tuple(sorted(arch.items()))
        if key in seen or r["value"] >= INFEASIBLE:
            continue
        seen.add(key)
        cands.append({"low": arch, "high": {"order": r["high"]["order"], "tiling": r["high"]["tiling"]}})
        if len(cands) == keep:
            break
    if not cands:
        return h1
    f2 = {k: v for k, v in fixed.items() if k in ("packaging", "network", "placement")}
    f2["candidates"] = cands
    h2 = _optimise(workload, budget, seed + 7919, f2, None, *args)
    h = History(h1.objective, h1.values + h2.values, h1.points + h2.points, None, h1.evals + h2.evals,
                h1.samples + h2.samples, h1.records + h2.records)
    bests = [b for b in (h1.best, h2.best) if b is not None]
    h.best = min(bests, key=lambda b: b["value"]) if bests else None
    return h


def _optimise(workload, budget, seed, fixed, x0, objective, sa_steps, executor, batch, pe_total,
              n_initial, keep_samples, progress, Optimizer, Integer, SerialExecutor, run_ordered):
    wl = load_workload(workload)
    pe_total = pe_total or default_pe_total(workload, len(wl.ops))
    fixed = dict(fixed or {})
    space = Space(wl, pe_total, fixed)
    ex = executor or SerialExecutor()
    hist = History(objective)
    dims = [Integer(lo, hi) for lo, hi in space.low_dims()]
    if not dims:                      # everything low is fixed: SA only
        r = run_task(Task(workload, pe_total, fixed, [], seed * 1000003, sa_steps * budget, objective, keep_samples))
        hist.values.append(r["value"])
        hist.records.append({"value": r["value"], "low": r["low"], "high": r["high"]})
        hist.best, hist.evals, hist.samples = {k: v for k, v in r.items() if k != "samples"}, r["evals"], r["samples"]
        return hist
    opt = Optimizer(dims, base_estimator="GP", acq_func="PI", acq_optimizer="sampling",
                    acq_optimizer_kwargs={"n_points": 2000},
                    n_initial_points=n_initial or min(10, budget), random_state=seed)
    done = 0
    warm = [space.free_of(dict(x)) for x in (x0 or [])][:budget]
    while done < budget:
        k = min(batch, budget - done)
        if warm:
            xs, warm = warm[:k], warm[k:]
            k = len(xs)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                xs = opt.ask(n_points=k) if k > 1 else [opt.ask()]
        xs = [[int(v) for v in x] for x in xs]
        tasks = [Task(workload, pe_total, fixed, x, seed * 1000003 + done + i, sa_steps, objective, keep_samples)
                 for i, x in enumerate(xs)]
        outs = run_ordered(ex, run_task, tasks)
        ys = [math.log(o["value"]) if o["value"] < INFEASIBLE else 700.0 for o in outs]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt.tell(xs, ys)
        for x, o in zip(xs, outs):
            hist.points.append(x)
            hist.values.append(o["value"])
            hist.evals += o["evals"]
            hist.samples.extend(o["samples"])
            hist.records.append({"value": o["value"], "low": o["low"], "high": o["high"]})
            if o["result"] is not None and (hist.best is None or o["value"] < hist.best["value"]):
                hist.best = {k: v for k, v in o.items() if k != "samples"}
        done += k
        if progress is not None:
            progress(k)
    return hist


def pareto_front(points: list) -> list:
    """Non-dominated (x, y) pairs, both minimised, sorted by x."""
    pts = sorted(set(points))
    front, best_y = [], math.inf
    for x, y in pts:
        if y < best_y:
            front.append((x, y))
            best_y = y
    return front
