"""Definitions used by the Monad reproduction (§V-B baselines, §V-C Rand):
the ``chiplets`` filter of the design space, the capacity-imposed tiling of a
fixed hardware configuration, and the bench's Simba-like Rand reference."""
import importlib.util
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
    # 256 PEs per chiplet: core grid 1x1 -> 3 PE arrays, 1x2 -> 3, 2x2 -> 4, 2x4 -> 3, 4x4 -> 3
    assert len(four.shape_opts[0]) == 16
    with pytest.raises(ValueError, match="no shape"):
        Space(wl, 1024, {"chiplets": 3})
    with pytest.raises(ValueError, match="positive int"):
        Space(wl, 1024, {"chiplets": 0})


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
    dataflows = set()
    for seed in range(3):
        sp, low, high = mr.random_reference(wl, pe, seed)
        assert (low["packaging"], low["network"]) == (0, 0)          # Simba: organic MCM, mesh
        d = sp.decode(low, high)
        for op, m in zip(wl.ops, d.mappings):
            assert low[f"{op.name}.shape"] == simba[f"{op.name}.shape"]
            r = evaluate_op(op, m)
            assert r.gb_bytes <= sl["chip_buf_bytes"] and r.core_buf_bytes <= sl["core_buf_bytes"]
        dataflows.add(tuple(low[f"{op.name}.spatial.pkg"] for op in wl.ops))
    assert len(dataflows) == 3                                        # the dataflow is random


def test_fig7_monad_space_holds_baseline_chiplets_and_interface():
    mr = _bench()
    wl = load_workload("res3")
    mfix = {"chiplets": 4}
    sp, spf = Space(wl, 1024), Space(wl, 1024, mfix)
    for style in ("simba", "baton"):
        a, b = mr.baseline_fixed(wl, 1024, style), mr.baseline_fixed(wl, 1024, style, mfix)
        # same Simba-like shape whichever space the index refers to
        assert sp.shape_opts[0][a["res3.shape"]] == spf.shape_opts[0][b["res3.shape"]] == ((2, 2), (2, 2), (8, 8))
    assert all(s[0] == (2, 2) for s in spf.shape_opts[0])
