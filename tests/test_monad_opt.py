"""Monad optimiser (§IV): BO finds an enumerable optimum; executors agree."""
import itertools
import random

import pytest

from tessera.sim_models.monad.executor import SerialExecutor, make_executor
from tessera.sim_models.monad.optimizer import History, Task, anneal, optimise, pareto_front, run_task
from tessera.sim_models.monad.perf import load_workload
from tessera.sim_models.monad.space import Space

from tessera.sim_models.monad.space import shapes

FIX = {"tiny.shape": shapes(64).index(((2, 2), (1, 1), (4, 4))), "tiny.spatial.pkg": 1, "tiny.spatial.chip": 1,
       "tiny.share": 0, "network": 0, "io": 1,
       "order": [[("i", "j", "k"), ("i", "j", "k"), ("i", "j", "k")]],
       "tiling": [[{"i": 5, "j": 5, "k": 5}, {"i": 3, "j": 3, "k": 5}]], "placement": "identity"}


def test_bayes_finds_enumerated_optimum():
    sp = Space(load_workload("tiny"), 64, FIX)
    assert [n for n, _ in sp.free_low] == ["tiny.spatial.core", "packaging"]
    vals = {x: run_task(Task("tiny", 64, FIX, list(x), 0, 0, "edp"))["value"]
            for x in itertools.product(*[range(k) for _, k in sp.free_low])}
    assert len(vals) == 27
    best = min(vals.values())
    assert sorted(vals.values())[-1] > 2 * best          # a non-trivial landscape
    h = optimise("tiny", "edp", budget=14, sa_steps=0, seed=1, batch=1, fixed=FIX, pe_total=64, n_initial=6)
    assert len(h.values) == 14
    assert min(h.values) == best
    assert h.best["value"] == best


def test_annealing_improves_on_its_start():
    wl = load_workload("transformer")
    sp = Space(wl, 4096)
    rng = random.Random(3)
    low = sp.full_low(sp.random_low(rng))
    v0, _, _, _, _ = anneal(sp, low, "latency", 0, random.Random(7))
    v1, _, _, _, n = anneal(sp, low, "latency", 150, random.Random(7))
    assert n == 151
    assert v1 < v0


def test_pareto_front():
    pts = [(1, 5), (2, 3), (3, 4), (4, 1), (2, 6), (5, 1)]
    assert pareto_front(pts) == [(1, 5), (2, 3), (4, 1)]


def test_dask_localcluster_agrees_with_local_pool():
    distributed = pytest.importorskip("distributed")
    kw = dict(budget=4, sa_steps=5, seed=11, batch=2, n_initial=2, asynchronous=False)
    with make_executor(None, workers=1) as ex:
        local = optimise("transformer", "edp", executor=ex, **kw)
    serial = optimise("transformer", "edp", executor=SerialExecutor(), **kw)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with make_executor(client) as ex:
            dask = optimise("transformer", "edp", executor=ex, **kw)
    assert local.values == serial.values == dask.values
    assert local.best["low"] == dask.best["low"]


@pytest.mark.parametrize("kw", [dict(objective="speed"), dict(budget=0), dict(sa_steps=-1)])
def test_bad_optimiser_arguments(kw):
    args = dict(workload="tiny", objective="edp", budget=2, sa_steps=0)
    args.update(kw)
    with pytest.raises(ValueError):
        optimise(**args)


def test_bad_scheduler_address():
    with pytest.raises(ValueError):
        with make_executor("localhost:8786"):
            pass


def test_two_stage_design_selector():
    wl = load_workload("transformer")
    h = optimise("transformer", "latency", budget=6, sa_steps=4, seed=2, batch=3, two_stage=True, keep=2)
    assert len(h.values) == 12 and h.best["value"] == min(h.values)
    stage2 = h.records[6:]
    assert all("mm0.design" in r["low"] for r in stage2)
    # the selector copies the chosen candidate's architecture fields into the design
    cands = [{"low": {k: v for k, v in r["low"].items() if k.startswith("mm")}, "high": r["high"]}
             for r in h.records[:2]]
    sp = Space(wl, 4096, {"candidates": cands})
    assert [n for n, _ in sp.free_low] == [f"mm{i}.design" for i in range(5)] + ["packaging", "network", "io"]
    low = sp.full_low([1, 0, 1, 0, 1, 2, 3, 0])
    assert low["mm0.shape"] == cands[1]["low"]["mm0.shape"] and low["mm1.shape"] == cands[0]["low"]["mm1.shape"]
    high = sp.random_high(low, random.Random(0))
    assert high["tiling"][0] == cands[1]["high"]["tiling"][0]
    assert sp.neighbour(low, high, random.Random(0))["order"] == high["order"]   # only placement moves
    # the integration stage can only improve on the architecture stage's best
    assert h.best["value"] <= min(h.values[:6])


def test_polish_never_worse():
    kw = dict(budget=3, sa_steps=3, seed=5, batch=3, n_initial=3)
    a = optimise("transformer", "energy", **kw)
    b = optimise("transformer", "energy", polish=20, **kw)
    assert b.values == a.values and b.evals == a.evals + 21
    assert b.best["value"] <= a.best["value"]


def test_polish_chains_share_out_the_steps():
    """The polish as independent chains (tasks): the steps are shared out, each
    chain evaluates its start too, the best chain is kept; more chains than
    steps fall back to one chain per step; 0 chains is refused."""
    kw = dict(budget=3, sa_steps=3, seed=5, batch=3, n_initial=3)
    a = optimise("transformer", "energy", **kw)
    b = optimise("transformer", "energy", polish=21, polish_chains=2, **kw)
    assert b.values == a.values and b.evals == a.evals + (11 + 1) + (10 + 1)
    assert b.best["value"] <= a.best["value"]
    c = optimise("transformer", "energy", polish=2, polish_chains=5, **kw)
    assert c.evals == a.evals + 2 * 2
    with pytest.raises(ValueError, match="polish_chains"):
        optimise("transformer", "energy", polish=2, polish_chains=0, **kw)


def test_reset_worker_caches_empties_the_model_caches():
    from tessera.sim_models.monad import network, system
    from tessera.sim_models.monad.executor import reset_worker_caches
    optimise("transformer", "energy", budget=1, sa_steps=2, seed=1, batch=1, n_initial=1)
    assert system._op_cache.cache_info().currsize > 0 and network._path.cache_info().currsize > 0
    reset_worker_caches()
    assert [c.cache_info().currsize for c in (system._op_cache, network._route, network._path)] == [0, 0, 0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning", "ignore::UserWarning")
def test_async_bo_on_two_worker_processes():
    """Asynchronous BO + polish on a real 2-process LocalCluster: every task is a
    separate worker process's job; the budget is spent exactly and the best is
    the minimum seen (polish can only improve it)."""
    distributed = pytest.importorskip("distributed")
    import os
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        wpids = set(client.run(os.getpid).values())
        with make_executor(client) as ex:
            h = optimise("transformer", "edp", budget=6, sa_steps=30, seed=3, batch=2, n_initial=2,
                         executor=ex, polish=30, polish_chains=2)
    assert len(wpids) == 2 and os.getpid() not in wpids
    assert h.pids == wpids                        # BO samples and polish ran on both worker processes
    assert len(h.values) == 6 and h.evals == 6 * 31 + 2 * 16
    assert h.best["value"] <= min(h.values)


def test_warm_start_and_known_seed_the_incumbent():
    """A known design seeds the incumbent: the search can only return it or better,
    and every sample starts its annealing from the incumbent's mapping."""
    wl = load_workload("transformer")
    sp = Space(wl, 4096)
    rng = random.Random(4)
    low = sp.full_low(sp.random_low(rng))
    v, high, res, _, _ = anneal(sp, low, "latency", 60, random.Random(1))
    known = [{"value": v, "low": low, "high": high, "result": res.as_dict()}]
    h = optimise("transformer", "latency", budget=3, sa_steps=0, seed=1, batch=1, n_initial=3, known=known)
    assert h.best["value"] <= v
    # with 0 annealing steps a warm sample is exactly the incumbent's mapping on the new shape
    t = Task("transformer", 4096, {}, sp.free_of(sp.full_low(h.points[0])), 0, 0, "latency", start=high)
    o = run_task(t)
    assert o["high"]["order"] == [[tuple(x) for x in lv] for lv in high["order"]]
    assert o["high"]["tiling"] == high["tiling"]


def test_two_stage_starts_from_stage1_best_and_integration_x0():
    """Co-opt (Fig 6a) reusing an architecture search: the stage's best design
    (here a known design, not among its records) is candidate 0, and an
    ``x0_integration`` point with every selector at 0 evaluates it first."""
    wl = load_workload("transformer")
    sp = Space(wl, 4096, {"packaging": 0, "network": 0, "placement": "identity", "io": 1})
    rng = random.Random(6)
    low = sp.full_low(sp.random_low(rng))
    v, high, res, _, _ = anneal(sp, low, "latency", 40, random.Random(2))
    low2 = sp.full_low(sp.random_low(rng))
    v2, high2, res2, _, _ = anneal(sp, low2, "latency", 0, random.Random(2))
    if v2 < v:
        (v, low, high, res), (v2, low2, high2) = (v2, low2, high2, res2), (v, low, high)
    assert v2 > v
    # a finished architecture stage whose best (a known design) is not among its records
    h1 = History("latency", [v2], [sp.free_of(low2)], {"value": v, "low": low, "high": high,
                                                       "result": res.as_dict(), "known": True},
                 1, [], [{"value": v2, "low": low2, "high": high2}])
    x0 = [{**{f"mm{i}.design": 0 for i in range(5)}, "packaging": 0, "network": 0, "io": 1}]
    h = optimise("transformer", "latency", budget=1, sa_steps=0, seed=1, batch=1, two_stage=True, stage1=h1,
                 x0_integration=x0)
    # the single integration sample is the known design (placement identity on the mesh): same value
    assert h.records[-1]["value"] == pytest.approx(v)
    assert h.best["value"] <= v


def test_op_screen_point_never_worse_per_op():
    """Op-wise screening keeps, per op, the draw with the fewest compute cycles (the
    base design's own fields included), and touches only free fields."""
    from tessera.sim_models.monad.optimizer import op_screen_point
    from tessera.sim_models.monad.system import _op_cache
    wl = load_workload("transformer")
    rng = random.Random(8)
    sp0 = Space(wl, 4096)
    base = sp0.full_low(sp0.random_low(rng))
    fixed = {k: v for k, v in base.items() if ".spatial." in k or k.endswith(".share")}   # Res-like: shapes free
    sp = Space(wl, 4096, fixed)
    x = op_screen_point(sp, "latency", 40, random.Random(1), base)
    low = sp.full_low(x)
    assert all(low[k] == v for k, v in fixed.items())

    def cycles(lw):
        d = sp.decode(lw, sp.random_high(lw, random.Random(0), heuristic=True))
        return [_op_cache(op, m, 28).compute_cycles for op, m in zip(wl.ops, d.mappings)]
    before, after = cycles(base), cycles(low)
    assert all(a <= b for a, b in zip(after, before)) and sum(after) < sum(before)
    assert op_screen_point(Space(wl, 4096, {**fixed, **{f"mm{i}.shape": 0 for i in range(5)}}),
                           "latency", 5, random.Random(1), base) is None      # no free op field


def test_polish_of_an_integration_search_keeps_the_selected_designs():
    """The polish of a search over a design selector (Fig 8 Inte/Pkg) may move
    only the placement: the selected designs' order and tiling stay."""
    wl = load_workload("transformer")
    sp = Space(wl, 4096)
    rng = random.Random(11)
    cands = []
    for _ in range(2):
        low = sp.full_low(sp.random_low(rng))
        high = sp.random_high(low, rng)
        cands.append({"low": {k: v for k, v in low.items() if k.startswith("mm")},
                      "high": {"order": high["order"], "tiling": high["tiling"]}})
    fx = {"candidates": cands, "packaging": 0, "io": 1}
    h = optimise("transformer", "latency", budget=3, sa_steps=2, seed=4, batch=1, n_initial=3, fixed=fx, polish=40)
    sel = [h.best["low"][f"mm{i}.design"] for i in range(5)]
    assert h.best["high"]["order"] == [[tuple(o) for o in cands[k]["high"]["order"][i]] for i, k in enumerate(sel)]
    assert h.best["high"]["tiling"] == [cands[k]["high"]["tiling"][i] for i, k in enumerate(sel)]


def test_lazy_surrogate_fit_asks_the_same_points(monkeypatch):
    """The asynchronous loop skips fits of the main surrogate that no ask reads (less
    client CPU beside the Dask workers); every asked point must stay the eager one's,
    including asks without pending points (a serial executor finishes a whole batch at
    once) after the initial random points."""
    import tessera.sim_models.monad.optimizer as O
    runs = []
    for lazy in (True, False):
        monkeypatch.setattr(O, "LAZY_FIT", lazy)
        h = optimise("tiny", "edp", budget=10, sa_steps=0, seed=1, batch=3, fixed=FIX, pe_total=64,
                     n_initial=4, executor=SerialExecutor())
        runs.append((h.points, h.values))
    assert len(runs[0][0]) == 10
    assert len(set(map(tuple, runs[0][0]))) > 4       # the surrogate asked distinct points
    assert runs[0] == runs[1]
