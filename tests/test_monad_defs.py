"""Definitions used by the Monad reproduction (§V-B baselines, §V-C Rand):
the ``chiplets`` filter of the design space, the capacity-imposed tiling of a
fixed hardware configuration, and the bench's Simba-like Rand reference."""
import importlib.util
import math
from pathlib import Path

import pytest

from tessera.sim_models.monad.perf import evaluate_op, hardware, load_workload
from tessera.sim_models.monad.space import Space, default_pe_total

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("monad_repro", ROOT / "bench" / "monad_repro.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_chiplets_filter_keeps_exactly_the_shapes_with_that_count():
    wl = load_workload("att1")
    full, four = Space(wl, 1024), Space(wl, 1024, {"chiplets": 4})
    assert four.shape_opts[0] == [s for s in full.shape_opts[0] if s[0][0] * s[0][1] == 4]
    # 4 chiplets x core grid x PE array with 1024/16 < PEs <= 1024, e.g. 2x2 cores x 8x8 (1024), 1x1 x 12x12 (576)
    assert ((2, 2), (2, 2), (8, 8)) in four.shape_opts[0] and ((2, 2), (1, 1), (12, 12)) in four.shape_opts[0]
    assert all(64 < 4 * a * b * c * d <= 1024 for _, (a, b), (c, d) in four.shape_opts[0])
    assert ((2, 2), (1, 1), (4, 6)) in four.shape_opts[0] and ((2, 2), (1, 1), (4, 4)) not in four.shape_opts[0]
    with pytest.raises(ValueError, match="no shape"):
        Space(wl, 1024, {"chiplets": 7})
    with pytest.raises(ValueError, match="positive int"):
        Space(wl, 1024, {"chiplets": 0})


def test_shapes_use_up_to_the_budget_not_a_power_of_two():
    from tessera.sim_models.monad.space import pe_budgets, shapes
    wl = load_workload("transformer")
    b = pe_budgets(wl, 4096)
    assert b == [682, 682, 682, 682, 1365]                 # MAC shares, not rounded to 512 / 1024
    s = shapes(682)
    used = [math.prod(x[0]) * math.prod(x[1]) * math.prod(x[2]) for x in s]
    assert max(used) > 512 and max(used) <= 682 and min(used) > 682 / 16
    assert used == sorted(used)                             # the shape index orders the PE use
    assert ((6, 6), (4, 4), (8, 8)) in shapes(36864)        # Simba's real package (36 chiplets)


def test_nnbaton_rotates_the_smaller_input():
    mr = _bench()
    # res2: weights 64x64x3x3 = 37k < input 64x58x58 = 215k -> split the output plane, rotate weights
    assert mr.baton_split(load_workload("res2").ops[0]) == (("p", "q"), "w2")
    # res5: input 512x9x9 = 41k < weights 512x512x3x3 = 2.4M -> split output channels, rotate inputs
    assert mr.baton_split(load_workload("res5").ops[0]) == (("k", "k"), "ifmap")
    # att4: A 512x1024 < B 1024x4096 -> split j (B's columns), rotate A
    assert mr.baton_split(load_workload("att4").ops[0])[0] == ("j", "j")


def test_capacity_tiling_hand_computed():
    # tiny: 32^3 matmul, 2 chiplets splitting i -> chiplet share i16 j32 k32
    wl = load_workload("tiny")
    sp = Space(wl, 64)
    pairs = sp.pairs[0]
    low = {"tiny.shape": sp.shape_opts[0].index(((1, 2), (1, 1), (4, 8))),
           "tiny.spatial.pkg": pairs.index(("i", "i")), "tiny.spatial.chip": pairs.index(("i", "j")),
           "tiny.spatial.core": pairs.index(("i", "j")), "tiny.share": 0, "packaging": 0, "network": 0}
    # chiplet buffer 2 B x (A 16x32 + B 32x32 + C 16x32) = 4096 > 2048: halve j (2560 B), then k (1536 B)
    # core buffer 2 x 3 x 16x16 = 1536 > 512: halve i (1024), j (640), k (384 B)
    t = sp.capacity_tiling(low, 2048, 512)
    assert t == [[{"i": 5, "j": 4, "k": 4}, {"i": 3, "j": 3, "k": 3}]]
    high = sp.random_high(low, __import__("random").Random(0), heuristic=True)
    high["tiling"] = t
    r = evaluate_op(wl.ops[0], sp.decode(low, high).mappings[0])
    assert (r.gb_bytes, r.core_buf_bytes) == (1536, 384)
    with pytest.raises(ValueError, match="unit tiles"):
        sp.capacity_tiling(low, 5, 5)


def test_rand_reference_is_simba_hardware_with_random_dataflow():
    mr = _bench()
    wl = load_workload("transformer")
    pe = default_pe_total("transformer", len(wl.ops))
    simba = mr.baseline_fixed(wl, pe, "simba")
    sl = hardware()["simba_like"]
    dataflows, pes = set(), set()
    for seed in range(3):
        sp, low, high = mr.random_reference(wl, pe, seed)
        assert (low["packaging"], low["network"]) == (0, 0)          # Simba: organic MCM, mesh
        d = sp.decode(low, high)
        for i, (op, m) in enumerate(zip(wl.ops, d.mappings)):
            # Simba-like chiplet count, random PE use
            assert sp.shape_opts[i][low[f"{op.name}.shape"]][0] == sp.shape_opts[i][simba[f"{op.name}.shape"]][0]
            pes.add((op.name, m.n_pes))
            r = evaluate_op(op, m)
            assert r.gb_bytes <= sl["chip_buf_bytes"] and r.core_buf_bytes <= sl["core_buf_bytes"]
        dataflows.add(tuple(low[f"{op.name}.spatial.pkg"] for op in wl.ops))
    assert len(dataflows) == 3                                        # the dataflow is random
    assert len(pes) > len(wl.ops)                                     # so is the PE use


def test_fig7_monad_space_holds_baseline_chiplets_and_interface():
    mr = _bench()
    wl = load_workload("res3")
    shape = hardware()["simba_like"]["fig7_shape_real_scale"]      # the premise experiment's 36-chiplet Simba
    mfix = {"chiplets": 36, "packaging": 0, "io": Space.default("io")}
    pe = default_pe_total("res3", 1)
    sp, spf = Space(wl, pe), Space(wl, pe, mfix)
    for style in ("simba", "baton"):
        a, b = mr.baseline_fixed(wl, pe, style, None, shape), mr.baseline_fixed(wl, pe, style, mfix, shape)
        # Simba's real shape whichever space the index refers to; same package and I/O area as Monad
        assert sp.shape_opts[0][a["res3.shape"]] == spf.shape_opts[0][b["res3.shape"]] == ((6, 6), (4, 4), (8, 8))
        assert (b["packaging"], b["io"]) == (mfix["packaging"], mfix["io"])
    assert all(s[0] == (6, 6) for s in spf.shape_opts[0])


def test_fig7_nnbaton_at_its_own_granularity_and_monad_space():
    mr = _bench()
    wl = load_workload("res3")
    pe = default_pe_total("res3", 1)
    own = tuple(tuple(x) for x in hardware()["nnbaton_like"]["fig7_shape"])
    assert own == ((2, 2), (2, 2), (48, 48)) and 4 * 4 * 48 * 48 == pe == 36864   # same PE count as Simba's package
    bfix = {"chiplets": 4, "packaging": 0, "io": Space.default("io")}
    fx = mr.baseline_fixed(wl, pe, "baton", bfix, own)
    sp = Space(wl, pe, bfix)
    assert sp.shape_opts[0][fx["res3.shape"]] == own and fx["network"] == 2       # ring (§V-B)
    # the baseline's design re-indexed into Monad's space (chiplet count free) is the same shape
    low = sp.full_low([])
    low.update({k: v for k, v in fx.items() if k in low})
    mfix = {"packaging": 0, "io": Space.default("io")}
    t = mr.to_space(wl, pe, low, bfix, mfix)
    assert Space(wl, pe, mfix).shape_opts[0][t["res3.shape"]] == own
    assert {k: v for k, v in t.items() if k != "res3.shape"} == {k: v for k, v in low.items() if k != "res3.shape"}
    # not in a 36-chiplet space, nor in a space with another packaging
    assert mr.to_space(wl, pe, low, bfix, {"chiplets": 36}) is None
    assert mr.to_space(wl, pe, low, bfix, {"packaging": 1}) is None


def test_inte_selects_among_rands_designs():
    """Fig 8 Inte/Pkg: the design selector picks, per op, one of Rand's random
    Simba-like designs (candidate 0 = Rand's own design)."""
    import random
    mr = _bench()
    wl = load_workload("transformer")
    pe = default_pe_total("transformer", len(wl.ops))
    pool = mr.rand_designs(wl, pe, [7, 3])
    fx = {"packaging": 0, "network": 0, "io": Space.default("io"), "placement": "identity", "candidates": pool}
    sp = Space(wl, pe, fx)
    assert [n for n, _ in sp.free_low] == [f"{op.name}.design" for op in wl.ops]
    refs = [mr.random_reference(wl, pe, s) for s in (7, 3)]
    want = [r[0].decode(r[1], r[2]).mappings for r in refs]
    for sel in ([0] * 5, [1] * 5, [1, 0, 0, 1, 0]):
        low = sp.full_low(sel)
        d = sp.decode(low, sp.random_high(low, random.Random(0)))
        assert d.mappings == tuple(want[k][i] for i, k in enumerate(sel))


def test_fig7_baselines_share_pes_and_die_to_die_interfaces():
    """§V-B: the baselines are realised with "the same number of PEs and die-to-die
    interfaces": Simba-like has NN-Baton-like's 4 chiplets and the same PE count,
    keeps Simba's 4x4 PEs (our cores) per chiplet and its channel split; both sit
    on the same packaging and I/O area per chiplet."""
    import math as _m
    mr = _bench()
    hw = hardware()
    s = tuple(tuple(x) for x in hw["simba_like"]["fig7_shape"])
    b = tuple(tuple(x) for x in hw["nnbaton_like"]["fig7_shape"])
    pe = default_pe_total("res3", 1)
    assert _m.prod(map(_m.prod, s)) == _m.prod(map(_m.prod, b)) == pe == 36864
    assert _m.prod(s[0]) == _m.prod(b[0]) == 4 and s[1] == (4, 4)
    assert mr.FIG7_PREMISES[mr.FIG7_PREMISE] == {"monad_chiplets": None, "baton": "own", "simba": "fig7"}
    wl = load_workload("res3")
    bfix = {"chiplets": 4, "packaging": 0, "io": Space.default("io")}
    fx = mr.baseline_fixed(wl, pe, "simba", bfix, s)
    sp = Space(wl, pe, bfix)
    assert sp.shape_opts[0][fx["res3.shape"]] == s
    assert sp.pairs[0][fx["res3.spatial.pkg"]] == ("k", "c")       # Simba divides output and input channels
    assert (fx["packaging"], fx["io"], fx["network"]) == (0, Space.default("io"), 0)


def test_fig8_inte_is_network_and_packaging_of_rands_own_chiplets():
    """§V-C: Inte (7th bar) is "achieved by combining network and packaging"; the
    design alternatives of a selector come from an architecture stage (§IV-A), which
    Inte has not, so it selects only Rand's own design."""
    mr = _bench()
    assert mr.INTE_POOL == 1
    assert set(mr.SELECTOR_SETTINGS) == {"Pkg", "Inte"}


def test_fig8_rand_fills_simbas_36_nodes_with_equal_chip_grids():
    """§V-C Rand is "a Simba-like hardware configuration": Simba's package has 36
    chiplets, the network limit of the encoding is the same 36 nodes (§IV-C), and
    every matrix multiply is mapped to chiplets of its own.  The paper gives no
    per-op split, so Rand gives every op the largest equal chip grid the encoding
    holds within 36 nodes (Transformer: 2x3 per op, 30 chiplets; was 2x2, 20)."""
    from tessera.sim_models.monad import system
    from tessera.sim_models.monad.space import MAX_NODES
    mr = _bench()
    wl = load_workload("transformer")
    pe = default_pe_total("transformer", len(wl.ops))
    assert MAX_NODES == 36
    sp = Space(wl, pe)
    common = set.intersection(*({s[0] for s in opts} for opts in sp.shape_opts))
    fits = [g for g in common if math.prod(g) * len(wl.ops) <= MAX_NODES]
    want = max(math.prod(g) for g in fits)
    assert want == 6
    for seed in range(3):
        sp, low, high = mr.random_reference(wl, pe, seed)
        grids = {sp.shape_opts[i][low[f"{op.name}.shape"]][0] for i, op in enumerate(wl.ops)}
        assert grids == {tuple(hardware()["simba_like"]["fig8_rand_chip_grid"])}
        assert {math.prod(g) for g in grids} == {want}
        n = sp.n_chiplets(low)
        assert n == 30 and system.n_nodes(low["network"], n) <= MAX_NODES
        sp.decode(low, high)                       # a valid design of the space
