"""Simba mapper, Sec. 5 optimisations (never lose to their baseline) and the CLI."""
import json
from pathlib import Path

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
    """res2b_branch2c (the paper's Sec. 5.1 example of comparable compute and communication) on
    8 chiplets gains from non-uniform partitioning: the extents it picks are unequal and sum to
    the layer, and the gain stays within the paper's range (<= 20 %)."""
    l = NET["res2b_branch2c"]
    base = search(l, ARCH, 8, samples=400, seed=0)
    nu = nonuniform(l, ARCH, base)
    assert 1.0 < base.latency_cycles / nu.latency_cycles <= 1.20
    ext = nu.mapping.k_ext or nu.mapping.p_ext
    assert ext and len(set(ext)) > 1


def test_placement_centre_beats_corner_for_broadcast():
    """Sec. 5.2: from the sequential fill (Fig. 11b, source in the corner) moving the homes of
    res4a_branch1's inputs helps."""
    l = NET["res4a_branch1"]
    base = search(l, ARCH, 32, samples=300, seed=0)
    seq = evaluate(l, ARCH, base.mapping, placement="sequential")
    pl = placement(l, ARCH, seq)
    assert pl.latency_cycles < seq.latency_cycles


def test_pipeline_disjoint_and_charged():
    """Pipelined stages sit on disjoint partitions, are never faster than their slowest stage,
    and pay for the producer -> consumer moves and the NoP links they share: the block is no
    faster than the busiest link's total traffic allows, and charging the moves never helps."""
    from tessera.sim_models.simba.interlayer import move_bytes, move_time
    from tessera.sim_models.simba.optim import pipeline_time
    blk = [NET[n] for n in ("res4b_branch2a", "res4b_branch2b", "res4b_branch2c")]
    per = [search(l, ARCH, chiplet_counts(32), samples=200, seed=i, keep_per_count=True)
           for i, l in enumerate(blk)]
    t, plan = pipeline_block(blk, per, ARCH, 32)
    used = [c for p in plan for c in p[2]]
    assert len(used) == len(set(used)) and len(used) <= 32
    assert t >= max(p[3].latency_cycles for p in plan)      # never faster than its slowest stage
    stages = [(p[3], p[0]) for p in plan]
    moves = [(0.0, 0.0)] + [move_time(move_bytes(blk[i - 1], plan[i - 1][3], blk[i], plan[i][3], ARCH), ARCH)
                            for i in (1, 2)]
    assert all(mv > 0 and lat > 0 for mv, lat in moves[1:])   # disjoint partitions: data must move
    free = pipeline_time(stages)
    assert pipeline_time(stages, moves=moves) > free
    assert t >= pipeline_time(stages, moves=moves)


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
    # moves between layers are part of the network latency (2a -> 2b -> 2c on different tilings)
    assert u["move_uniform_cycles"] > 0
    assert u["total_cycles"] == pytest.approx(sum(r["uniform"].latency_cycles for r in u["rows"])
                                              + u["move_uniform_cycles"])
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
    data = json.loads((Path(__file__).parents[1] / "sim_models/simba/data/pe_tile_cycles.json").read_text())
    tiles = [{**t, "cycles": t["cycles"] + 2} for t in data["tiles"]]      # a slower PE's bench
    (tmp_path / "pe_utilization.json").write_text(json.dumps({"tiles": tiles}))
    rc = main(["simba", "--layer", "res5a_branch1", "--opt", "all", "--samples", "100", "--jobs", "1",
               "--out", str(tmp_path), "--bench-dir", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "res5a_branch1" in out and "images/s" in out
    doc = json.loads((tmp_path / "simba_resnet50_all.json").read_text())
    assert doc["layers"][0]["name"] == "res5a_branch1"
    assert doc["layers"][0]["best"]["latency_cycles"] <= doc["layers"][0]["uniform"]["latency_cycles"]
    assert (tmp_path / "simba_resnet50_all.png").stat().st_size > 1000
    assert "pe_utilization.json" in doc["params"]["pe_overhead_ppu"]     # RTL bench value used


def test_kc_only_ablation_keeps_p_q_temporal():
    """Listing 1's default dataflow (K/C parallel_for only) stays available as an ablation; the
    default search covers Sec. 3.3's P/Q splits too and finds a tiling at least as fast."""
    l = NET["res3a_branch2b"]
    kc = search(l, ARCH, [8, 32], samples=300, seed=3, keep_per_count=True, spatial_pq=False)
    for r in kc.values():
        assert (r.mapping.pc, r.mapping.qc, r.mapping.pp, r.mapping.qp) == (1, 1, 1, 1)
    full = search(l, ARCH, [8, 32], samples=300, seed=3, keep_per_count=True)
    assert any((r.mapping.pc, r.mapping.qc, r.mapping.pp, r.mapping.qp) != (1, 1, 1, 1) for r in full.values())
    assert min(r.latency_cycles for r in full.values()) <= min(r.latency_cycles for r in kc.values())


def test_conv1_uses_p_q_splits():
    """conv1 (C = 3, K = 64) can use at most 8 PEs with K/C splits alone; with P/Q splits the
    32-chiplet mapping is many times faster (the K/C-only conv1 alone exceeds the paper's
    0.50 ms for the whole network)."""
    l = NET["conv1"]
    full = search(l, ARCH, 32, samples=300, seed=0)
    kc = search(l, ARCH, 32, samples=300, seed=0, spatial_pq=False)
    assert kc.latency_us(ARCH) > 400
    assert full.latency_cycles * 10 < kc.latency_cycles


def test_cli_kc_only_flag(tmp_path, capsys):
    """--kc-only reaches the mapper: the JSON records it, and with it no layer splits P/Q."""
    import re
    for flag in ([], ["--kc-only"]):
        rc = main(["simba", "--layer", "res3a_branch2b", "--samples", "100", "--jobs", "1",
                   "--out", str(tmp_path), "--bench-dir", str(tmp_path)] + flag)
        assert rc == 0
        doc = json.loads((tmp_path / "simba_resnet50_uniform.json").read_text())
        assert doc["spatial_pq"] == (not flag)
        if flag:
            assert re.match(r"chip K\d+C\d+P1Q1 pe K\d+C\d+P1Q1 ", doc["layers"][0]["best"]["mapping"])
    capsys.readouterr()


def test_cli_dataflow_flag(tmp_path, capsys):
    """--dataflow reaches the mapper: the JSON records it, and pe-kc splits no PE over P/Q."""
    import re
    rc = main(["simba", "--layer", "res3a_branch2b", "--samples", "100", "--jobs", "1", "--dataflow", "pe-kc",
               "--out", str(tmp_path), "--bench-dir", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "simba_resnet50_uniform.json").read_text())
    assert doc["dataflow"] == "pe-kc"
    assert re.search(r" pe K\d+C\d+P1Q1 ", doc["layers"][0]["best"]["mapping"])
    capsys.readouterr()
