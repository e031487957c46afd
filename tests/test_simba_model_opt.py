"""Simba mapper, Sec. 5 optimisations (never lose to their baseline) and the CLI."""
import json

import pytest

from tessera.cli import main
from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import chiplet_counts, factorisations, search
from tessera.sim_models.simba.model import MappingError, evaluate
from tessera.sim_models.simba.network import blocks, run_network
from tessera.sim_models.simba.optim import nonuniform, pipeline_block, placement

ARCH = load_arch()
LAYERS = load_network("resnet50")
NET = {l.name: l for l in LAYERS}


def test_factorisations_and_counts():
    assert len(factorisations(32, 4)) == 56                  # C(5+3, 3) ordered splits of 2^5
    assert all(a * b * c * d == 32 for a, b, c, d in factorisations(32, 4))
    assert chiplet_counts(32) == [1, 2, 4, 8, 16, 32]
    assert chiplet_counts(36) == [1, 2, 4, 8, 16, 32, 36]


def test_search_is_seeded_and_valid():
    l = NET["res3a_branch2b"]
    a = search(l, ARCH, 8, samples=200, seed=3)
    b = search(l, ARCH, 8, samples=200, seed=3)
    assert a.mapping == b.mapping and a.latency_cycles == b.latency_cycles
    assert a.samples >= 200 and a.n_chiplets == 8
    # the reported result is reproducible by evaluating the mapping alone
    assert evaluate(l, ARCH, a.mapping).latency_cycles == pytest.approx(a.latency_cycles)


def test_search_rejects_infeasible():
    with pytest.raises(MappingError):                        # 2.36 MB of weights on 1 chiplet
        search(NET["res5a_branch2b"], ARCH, 1, samples=50)


def test_more_samples_never_worse():
    l = NET["res2a_branch1"]
    small = search(l, ARCH, 16, samples=100, seed=0)
    big = search(l, ARCH, 16, samples=3000, seed=0)          # same seed: superset of samples
    assert big.samples > small.samples
    assert big.latency_cycles <= small.latency_cycles


@pytest.mark.parametrize("name", ["res2b_branch2c", "res3a_branch2b", "res4a_branch1", "res5a_branch2c"])
def test_optimisations_never_lose(name):
    l = NET[name]
    base = search(l, ARCH, chiplet_counts(32), samples=300, seed=1)
    nu = nonuniform(l, ARCH, base)
    pl = placement(l, ARCH, base)
    assert nu.latency_cycles <= base.latency_cycles
    assert pl.latency_cycles <= base.latency_cycles
    assert pl.mapping == base.mapping                        # placement does not re-tile (Sec. 5.2)
    if nu.mapping.k_ext:
        assert sum(nu.mapping.k_ext) == l.K
    if nu.mapping.p_ext:
        assert sum(nu.mapping.p_ext) == l.P


def test_nonuniform_shifts_work_away_from_far_chiplets():
    """res3a_branch2b's best 8-chiplet tiling with P/Q also spatial gains from non-uniform
    partitioning: the extents it picks are unequal and sum to the layer.  (With the Listing 1
    K/C-only default its best 8-chiplet tiling is input-delivery bound on every chiplet, where
    shifting K cannot help -- Sec. 5.1: gains need comparable compute and communication.)"""
    l = NET["res3a_branch2b"]
    base = search(l, ARCH, 8, samples=400, seed=0, spatial_pq=True)
    nu = nonuniform(l, ARCH, base)
    assert nu.latency_cycles < base.latency_cycles
    ext = nu.mapping.k_ext or nu.mapping.p_ext
    assert ext and len(set(ext)) > 1


def test_placement_centre_beats_corner_for_broadcast():
    """Sec. 5.2: res4a_branch1 broadcasts; centre placement is better than the corner."""
    l = NET["res4a_branch1"]
    base = search(l, ARCH, 32, samples=300, seed=0)
    pl = placement(l, ARCH, base)
    assert pl.latency_cycles < base.latency_cycles


def test_pipeline_never_loses_and_is_disjoint():
    blk = [NET[n] for n in ("res4b_branch2a", "res4b_branch2b", "res4b_branch2c")]
    per = [search(l, ARCH, chiplet_counts(32), samples=200, seed=i, keep_per_count=True)
           for i, l in enumerate(blk)]
    t, plan = pipeline_block(blk, per, ARCH, 32)
    used = [c for p in plan for c in p[2]]
    assert len(used) == len(set(used)) and len(used) <= 32
    assert t >= max(p[3].latency_cycles for p in plan)      # never faster than its slowest stage
    seq = sum(min(d.values(), key=lambda r: r.latency_cycles).latency_cycles for d in per)
    assert t < seq


def test_blocks_grouping():
    b = blocks(LAYERS)
    names = [[LAYERS[i].name for i in g] for g in b]
    assert names[0] == ["conv1"] and names[-1] == ["fc1000"]
    assert names[1] == ["res2a_branch1", "res2a_branch2a", "res2a_branch2b", "res2a_branch2c"]
    assert len(b) == 18


def test_network_all_never_loses():
    sub = [NET[n] for n in ("res4b_branch2a", "res4b_branch2b", "res4b_branch2c")]
    u = run_network(sub, ARCH, 32, "uniform", samples=150, jobs=1)
    a = run_network(sub, ARCH, 32, "all", samples=150, jobs=1)
    assert u["total_cycles"] == pytest.approx(a["total_uniform_cycles"])
    assert a["total_cycles"] <= u["total_cycles"]
    with pytest.raises(ValueError):
        run_network(sub, ARCH, 37, "all")


@pytest.mark.parametrize("argv,msg", [
    (["simba", "--chiplets", "0"], "--chiplets must be in [1, 36]"),
    (["simba", "--network", "nope"], "unknown network"),
    (["simba", "--layer", "res9z"], "unknown layer"),
    (["simba", "--gbps", "40"], "--gbps must be in [11, 25]"),
    (["simba", "--samples", "0"], "--samples must be"),
])
def test_cli_bad_args(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert msg in err and "\n" not in err and err.startswith("tessera simba: error:")


def test_cli_bad_choice_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["simba", "--opt", "fast"])
    assert e.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_cli_runs_and_writes(tmp_path, capsys):
    (tmp_path / "pe_utilization.json").write_text(json.dumps({"min_utilization_large_tiles": 0.8}))
    rc = main(["simba", "--layer", "res5a_branch1", "--opt", "all", "--samples", "100", "--jobs", "1",
               "--out", str(tmp_path), "--bench-dir", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "res5a_branch1" in out and "images/s" in out
    doc = json.loads((tmp_path / "simba_resnet50_all.json").read_text())
    assert doc["layers"][0]["name"] == "res5a_branch1"
    assert doc["layers"][0]["best"]["latency_cycles"] <= doc["layers"][0]["uniform"]["latency_cycles"]
    assert (tmp_path / "simba_resnet50_all.png").stat().st_size > 1000
    assert "pe_utilization.json" in doc["params"]["pe_utilization"]     # RTL bench value used


def test_listing1_dataflow_keeps_p_q_temporal():
    """Listing 1: p3, q3, p2, q2 are temporal loops; only K and C are parallel_for.  The default
    search never splits P/Q spatially; spatial_pq=True may (and finds a tiling at least as fast,
    since it searches a superset of the split space)."""
    l = NET["res3a_branch2b"]
    per = search(l, ARCH, [8, 32], samples=300, seed=3, keep_per_count=True)
    for r in per.values():
        assert (r.mapping.pc, r.mapping.qc, r.mapping.pp, r.mapping.qp) == (1, 1, 1, 1)
    pq = search(l, ARCH, [8, 32], samples=300, seed=3, keep_per_count=True, spatial_pq=True)
    assert any((r.mapping.pc, r.mapping.qc, r.mapping.pp, r.mapping.qp) != (1, 1, 1, 1) for r in pq.values())


def test_cli_spatial_pq_flag(tmp_path, capsys):
    """--spatial-pq reaches the mapper: the JSON records it, and without it no layer splits P/Q."""
    for flag in ([], ["--spatial-pq"]):
        rc = main(["simba", "--layer", "res3a_branch2b", "--samples", "100", "--jobs", "1",
                   "--out", str(tmp_path), "--bench-dir", str(tmp_path)] + flag)
        assert rc == 0
        doc = json.loads((tmp_path / "simba_resnet50_uniform.json").read_text())
        assert doc["spatial_pq"] == bool(flag)
        if not flag:
            import re
            assert re.match(r"chip K\d+C\d+P1Q1 pe K\d+C\d+P1Q1 ", doc["layers"][0]["best"]["mapping"])
    capsys.readouterr()
