"""Bayesian + simulated-annealing co-optimiser -- Monad §IV-A/C (Fig. 6b).

Bayesian optimisation (scikit-optimize ``Optimizer``: Gaussian-process
surrogate, probability-of-improvement acquisition, ask/tell) samples the
low-dimensional fields; every sample is evaluated by a simulated-annealing run
over the high-dimensional fields (order, tiling, placement; started from an
output-stationary, large-tile heuristic point), whose best value
is told back to the GP (in log space).  Objectives: latency, energy, edp,
cost, and ``pareto`` (latency x cost; all visited designs are kept so the
cost-latency Pareto front can be drawn).

Equal-quality search: every hardware point (a BO sample, or a fixed baseline
design annealed with the same ``sa_steps``) gets the same annealing budget,
and each BO sample's annealing starts from the best mapping found so far
(``warm``; order and tiling are per-op log2 tiles, valid for any shape; the
placement is kept when the chiplet count allows).  ``known`` evaluations
(e.g. baselines' annealed designs) are told to the surrogate first and seed
the incumbent.

Evaluations are independent tasks sent to an executor (executor.py).
Asynchronous (default): ``batch`` tasks stay in flight; when one finishes its
value is told and a new point is asked with the pending points held at the
best value seen (constant liar, "cl_min"), so workers never wait for a
round; the polish is also a task.  Synchronous (``asynchronous=False``):
rounds of ``ask(n_points=batch)``; each task is seeded from (seed, task
index), so a given seed gives the same result on any executor (the
asynchronous order, and so the result, depends on completion order unless
the executor is serial).

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
    start: dict | None = None       # high fields to start annealing from (adapted to the low fields)
    t0: float = 0.5
    low: dict | None = None         # a full low dict instead of free_low (baselines, polish)


def run_task(task: Task) -> dict:
    """One Bayes evaluation: SA over the high-dimensional fields (top level, picklable)."""
    import os
    wl = load_workload(task.workload)
    space = Space(wl, task.pe_total, dict(task.fixed))
    low = dict(task.low) if task.low is not None else space.full_low(task.free_low)
    rng = random.Random(task.seed)
    start = space.adapt_high(low, task.start) if task.start is not None else None
    v, high, res, samples, n = anneal(space, low, task.objective, task.sa_steps, rng, task.keep_samples,
                                      start=start, t0=task.t0)
    return {"value": v, "low": low, "high": high, "result": res.as_dict() if res else None,
            "samples": samples, "evals": n, "pid": os.getpid()}


@dataclass
class History:
    objective: str
    values: list = field(default_factory=list)
    points: list = field(default_factory=list)
    best: dict | None = None
    evals: int = 0
    samples: list = field(default_factory=list)
    records: list = field(default_factory=list)     # {"value", "low", "high"} per evaluation
    pids: set = field(default_factory=set)          # worker processes that ran the tasks

    def as_dict(self) -> dict:
        return {"objective": self.objective, "values": self.values, "evals": self.evals,
                "best": self.best, "n_points": len(self.points)}


def optimise(workload: str, objective: str = "edp", budget: int = 20, sa_steps: int = 50,
             seed: int = 0, executor=None, batch: int = 4, fixed: dict | None = None,
             pe_total: int | None = None, n_initial: int | None = None, keep_samples: bool = False,
             progress=None, two_stage: bool = False, x0: list | None = None, keep: int = 4,
             polish: int = 0, asynchronous: bool = True, warm: bool = True,
             known: list | None = None, stage1: History | None = None,
             x0_integration: list | None = None, op_screen: int = 0, polish_chains: int = 1) -> History:
    """Bayes (GP + PI) over the free low-dimensional fields; SA inside each evaluation.

    ``two_stage`` (Fig. 6a): ``budget`` evaluations explore the architecture
    fields on an organic mesh with identity placement; the ``keep`` best designs
    become candidates of the integration stage, which selects a design per op
    and explores packaging, network and placement with another ``budget``.
    ``x0``: known designs (full low-field dicts) evaluated first (warm start).
    ``known``: already evaluated designs ({"value", "low", "high", "result"}),
    told to the surrogate and used as the first incumbent (not counted in
    ``budget``); the ``n_initial`` first samples are then local (1-2 free
    fields of the incumbent redrawn) instead of uniformly random.  ``warm``: anneal every sample from the incumbent's mapping.
    ``polish``: a final annealing of that many steps from the best point, split
    into ``polish_chains`` independent chains (tasks with their own seeds, the
    steps shared out, the best chain kept) so that it runs on several workers;
    one chain is the single polish task.
    ``asynchronous``: see the module docstring.  ``stage1``: the History of an
    architecture search already run on the first stage's space (organic mesh,
    default I/O area, identity placement), reused as the architecture stage.
    ``x0_integration``: known integration points (low dicts with a ``<op>.design``
    selector per op -- candidate 0 is the best kept design -- and packaging,
    network, io) evaluated first in the integration stage.
    ``op_screen``: before the BO, screen that many random values of every op's
    free architecture fields with the op model alone (each op owns its chiplets,
    §III-B) and evaluate the per-op best assembly as the first sample (see
    ``op_screen_point``)."""
    from skopt import Optimizer  # noqa: F401 -- fail early if missing
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}")
    if budget < 1 or sa_steps < 0 or batch < 1 or polish < 0 or polish_chains < 1:
        raise ValueError("budget, batch and polish_chains must be >= 1, sa_steps and polish >= 0")
    from threadpoolctl import threadpool_limits
    from .executor import SerialExecutor
    wl = load_workload(workload)
    pe_total = pe_total or default_pe_total(workload, len(wl.ops))
    cfg = dict(objective=objective, sa_steps=sa_steps, ex=executor or SerialExecutor(), batch=batch,
               pe_total=pe_total, n_initial=n_initial, keep_samples=keep_samples, progress=progress,
               asynchronous=asynchronous, warm=warm, op_screen=op_screen)
    with threadpool_limits(1):        # small GP: BLAS threads only add contention
        h = _two_stage(workload, budget, seed, fixed, x0, keep, known, cfg, stage1, x0_integration) if two_stage else \
            _optimise(workload, budget, seed, fixed, x0, known, cfg)
    if polish and h.best is not None and not h.best.get("known"):    # a known design is not re-polished
        b = h.best
        f = {k: v for k, v in (fixed or {}).items() if k in ("order", "tiling", "placement", "chiplets", "candidates")}
        n = min(polish_chains, polish)
        steps = [polish // n + (1 if j < polish % n else 0) for j in range(n)]
        futs = [cfg["ex"].submit(run_task, Task(workload, pe_total, f, [], seed + 104729 + 7 * j, st, objective,
                                                keep_samples, start=b["high"], t0=0.05, low=b["low"]))
                for j, st in enumerate(steps)]
        for fut in futs:                  # chain order: the first of equal values is kept
            o = fut.result()
            h.evals += o["evals"]
            h.samples.extend(o["samples"])
            h.pids.add(o["pid"])
            if o["result"] is not None and o["value"] < h.best["value"]:
                h.best = {**b, "value": o["value"], "high": o["high"], "result": o["result"]}
    return h


def _two_stage(workload, budget, seed, fixed, x0, keep, known, cfg, stage1=None, x0_integration=None):
    """Architecture stage, then integration stage over the kept designs (Fig. 6a)."""
    fixed = dict(fixed or {})
    ops = [op.name for op in load_workload(workload).ops]
    f1 = dict(fixed)
    f1.setdefault("packaging", 0)
    f1.setdefault("network", 0)
    f1.setdefault("placement", "identity")
    f1.setdefault("io", Space.default("io"))
    h1 = stage1 if stage1 is not None else _optimise(workload, budget, seed, f1, x0, None, cfg)
    cands, seen = [], set()
    # the stage's best first (it may be a known or polished design, not among the records)
    for r in ([h1.best] if h1.best is not None else []) + sorted(h1.records, key=lambda r: r["value"]):
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
    f2 = {k: v for k, v in fixed.items() if k in ("packaging", "network", "placement", "io")}
    f2["candidates"] = cands
    h2 = _optimise(workload, budget, seed + 7919, f2, x0_integration, None, cfg)
    h = History(h1.objective, h1.values + h2.values, h1.points + h2.points, None, h1.evals + h2.evals,
                h1.samples + h2.samples, h1.records + h2.records, h1.pids | h2.pids)
    bests = [b for b in (h1.best, h2.best) if b is not None]
    h.best = min(bests, key=lambda b: b["value"]) if bests else None
    return h


LAZY_FIT = True     # skip the fits of the main surrogate that no ask reads (see _optimise)


def _ask(opt, k, pending, rng_seed):
    """``k`` new points; pending points are held at the best value seen (constant liar)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not pending:
            return opt.ask(n_points=k) if k > 1 else [opt.ask()]
        o = opt.copy(random_state=rng_seed)
        lie = min(opt.yi) if opt.yi else 0.0
        o.tell([list(x) for x in pending], [lie] * len(pending))
        return o.ask(n_points=k) if k > 1 else [o.ask()]


def _optimise(workload, budget, seed, fixed, x0, known, cfg):
    import concurrent.futures as cf
    from skopt import Optimizer
    from skopt.space import Integer
    wl = load_workload(workload)
    pe_total, objective, ex = cfg["pe_total"], cfg["objective"], cfg["ex"]
    fixed = dict(fixed or {})
    space = Space(wl, pe_total, fixed)
    hist = History(objective)
    dims = [Integer(lo, hi) for lo, hi in space.low_dims()]

    def record(x, o):
        hist.points.append(x)
        hist.values.append(o["value"])
        hist.evals += o["evals"]
        hist.samples.extend(o["samples"])
        hist.pids.add(o["pid"])
        hist.records.append({"value": o["value"], "low": o["low"], "high": o["high"]})
        if o["result"] is not None and (hist.best is None or o["value"] < hist.best["value"]):
            hist.best = {k: v for k, v in o.items() if k not in ("samples", "pid")}

    def task(x, i):
        start = hist.best["high"] if (cfg["warm"] and hist.best is not None) else None
        return Task(workload, pe_total, fixed, x, seed * 1000003 + i, cfg["sa_steps"], objective,
                    cfg["keep_samples"], start=start)

    if not dims:                      # everything low is fixed: SA only
        o = ex.submit(run_task, Task(workload, pe_total, fixed, [], seed * 1000003, cfg["sa_steps"] * budget,
                                     objective, cfg["keep_samples"])).result()
        record([], o)
        return hist
    opt = Optimizer(dims, base_estimator="GP", acq_func="PI", acq_optimizer="sampling",
                    acq_optimizer_kwargs={"n_points": 2000},
                    n_initial_points=cfg["n_initial"] or min(10, budget), random_state=seed)
    for r in known or []:             # already evaluated designs: tell, and seed the incumbent
        x = space.free_of(r["low"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt.tell(x, math.log(r["value"]) if r["value"] < INFEASIBLE else 700.0)
        if r.get("result") is not None and (hist.best is None or r["value"] < hist.best["value"]):
            hist.best = {"value": r["value"], "low": r["low"], "high": r["high"], "result": r["result"],
                         "evals": 0, "known": True}
    warm = [space.free_of(dict(x)) for x in (x0 or [])][:budget]
    if cfg.get("op_screen") and objective in ("latency", "energy", "edp") and len(warm) < budget:
        base = hist.best["low"] if hist.best is not None else (dict(x0[0]) if x0 else None)
        pt = op_screen_point(space, objective, cfg["op_screen"], random.Random(seed * 31 + 5), base)
        if pt is not None:
            warm.append(pt)
    n_local = (cfg["n_initial"] or min(10, budget)) if known else 0
    lrng = random.Random(seed * 7 + 1)
    kdims = [k for _, k in space.free_low]

    def next_point(i, pending):
        """x0 first; with known designs the initial design is local (1-2 free fields of
        the incumbent redrawn), then the surrogate (constant liar over ``pending``)."""
        if warm:
            return warm.pop(0)
        if i < n_local and hist.best is not None:
            x = space.free_of(hist.best["low"])
            for j in lrng.sample(range(len(x)), min(len(x), lrng.choice((1, 2)))):
                x[j] = lrng.randrange(kdims[j])
            return x
        if not pending:
            refit()
        return _ask(opt, 1, pending, seed + i)[0]

    # Asynchronous with batch >= 2, most asks have pending points and go through a copy that
    # refits the surrogate (_ask), so a fit of ``opt`` itself on every tell is mostly never
    # read.  ``tell`` skips it but draws the acquisition samples the fit would have drawn from
    # ``opt.rng``; an ask without pending points (several tasks finished at once) first redoes
    # the last skipped fit from the saved random state.  Every asked point is exactly the
    # eager optimiser's; about 40 % of the client's CPU leaves the cores the workers share
    # (bench/monad_repro.py dask_speedup).
    lazy = LAZY_FIT and cfg["asynchronous"] and cfg["batch"] >= 2
    stale = []                        # [(x, y, rng state before its tell)] of a skipped fit

    def refit():
        if stale:
            x, y, st = stale.pop()
            opt.Xi.pop()
            opt.yi.pop()
            opt._n_initial_points += 1
            opt.rng.set_state(st)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                opt.tell(x, y)

    def tell(x, o):
        y = math.log(o["value"]) if o["value"] < INFEASIBLE else 700.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if not lazy:
                opt.tell(x, y)
            else:
                st = opt.rng.get_state()
                opt.tell(x, y, fit=False)
                if opt._n_initial_points <= 0:       # the draw a fit makes (skopt _tell)
                    opt.space.rvs(n_samples=opt.n_points, random_state=opt.rng)
                    stale[:] = [(x, y, st)]
        record(x, o)
        if cfg["progress"] is not None:
            cfg["progress"](1)

    if not cfg["asynchronous"]:
        done = 0
        while done < budget:
            k = min(cfg["batch"], budget - done)
            if warm:
                xs, warm = warm[:k], warm[k:]
                k = len(xs)
            elif done < n_local:
                xs = [next_point(done + i, []) for i in range(k)]
            else:
                xs = _ask(opt, k, [], seed)
            xs = [[int(v) for v in x] for x in xs]
            tasks = [task(x, done + i) for i, x in enumerate(xs)]
            futs = [ex.submit(run_task, t) for t in tasks]
            for x, f in zip(xs, futs):
                tell(x, f.result())
            done += k
        return hist
    # asynchronous: keep ``batch`` tasks in flight, ask one point per finished task
    issued, inflight = 0, {}
    while issued < budget or inflight:
        while issued < budget and len(inflight) < cfg["batch"]:
            x = [int(v) for v in next_point(issued, list(inflight.values()))]
            inflight[ex.submit(run_task, task(x, issued))] = x
            issued += 1
        done, _ = cf.wait(list(inflight), return_when=cf.FIRST_COMPLETED)
        for f in [f for f in inflight if f in done]:        # submission order among the finished
            tell(inflight.pop(f), f.result())
    return hist


def op_screen_point(space: Space, objective: str, n: int, rng: random.Random, base: dict | None = None):
    """Op-wise screening (a search aid; each op owns its chiplets, §III-B, so an
    op's architecture fields change only its own stage): for every op, ``n``
    random draws of its free low fields (shape, spatial, share) are scored by the
    op model alone -- compute cycles (latency), op energy (energy) or their
    product (edp), with the heuristic order/tiling -- and the best draw (or the
    ``base`` design's own values, if better) is kept.  Returns the free values of
    the assembled design, or None if no op has free fields.  Transfers are not
    scored: the point is one BO sample, evaluated and annealed like any other."""
    from .perf import hardware
    from .system import _op_cache
    nm = hardware()["node_nm"]
    kinds = dict(space.free_low)
    low = dict(base) if base is not None else space.full_low(space.random_low(rng))
    changed = False

    def proxy(trial, i, op):
        high = space.random_high(trial, random.Random(0), heuristic=True)
        try:
            r = _op_cache(op, space.decode(trial, high).mappings[i], nm)
        except (ModelError, ValueError):
            return math.inf
        e = sum(r.energy_pj.values())
        return {"latency": r.compute_cycles, "energy": e, "edp": r.compute_cycles * e}[objective]

    for i, op in enumerate(space.wl.ops):
        names = [k for k in kinds if k.startswith(op.name + ".") and not k.endswith(".design")]
        if not names:
            continue
        best_v, best = proxy(low, i, op), {k: low[k] for k in names}
        for _ in range(n):
            trial = dict(low)
            for k in names:
                trial[k] = rng.randrange(kinds[k])
            v = proxy(trial, i, op)
            if v < best_v:
                best_v, best = v, {k: trial[k] for k in names}
        low.update(best)
        changed = True
    return space.free_of(low) if changed else None


def pareto_front(points: list) -> list:
    """Non-dominated (x, y) pairs, both minimised, sorted by x."""
    pts = sorted(set(points))
    front, best_y = [], math.inf
    for x, y in pts:
        if y < best_y:
            front.append((x, y))
            best_y = y
    return front
