"""Simba model against the paper's claims, as bounds (seed paper Sec. 4.3-4.4, 5.1-5.2).

Claims the model does not reproduce yet are strict xfails naming the experiment that shows why
(bench/simba_repro.py, issue 14 closing note); they turn red when the model starts meeting them.
"""
import pytest

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.layers import load_network
from tessera.sim_models.simba.mapper import search
from tessera.sim_models.simba.model import evaluate
from tessera.sim_models.simba.optim import nonuniform, placement

ARCH = load_arch()
NET = {l.name: l for l in load_network("resnet50")}


def _fig7_far_over_adjacent(**kw):
    """res4a_branch1 on 4 chiplets: the best tiling for adjacent chiplets, then the same
    tiling on far-apart ones; returns (mapping, far / adjacent latency)."""
    l = NET["res4a_branch1"]
    adj, far = (0, 1, 6, 7), (0, 5, 30, 35)
    b = search(l, ARCH, 4, samples=1000, seed=7, binding=adj, **kw)
    return b.mapping, evaluate(l, ARCH, b.mapping, binding=far).latency_cycles / b.latency_cycles


@pytest.mark.parametrize("name", ["res2a_branch2a", "res2b_branch2c", "res4a_branch2a", "res5a_branch1", "fc1000"])
def test_optimisation_gain_per_layer_at_most_20_percent(name):
    """Sec. 5: non-uniform partitioning and data placement each gain at most ~15-16 % on a
    layer; from the runtime baseline (inputs on their consumers) the model stays within 20 %."""
    l = NET[name]
    base = search(l, ARCH, 32 if name != "fc1000" else 16, samples=200, seed=2)
    for opt in (nonuniform, placement):
        r = opt(l, ARCH, base)
        assert 1.0 <= base.latency_cycles / r.latency_cycles <= 1.20, opt.__name__


def _fig6(name, **kw):
    lat = [search(NET[name], ARCH.with_(grs_gbps=g), 32, samples=200, seed=6, **kw).latency_cycles
           for g in (11.0, 25.0)]
    return 1 - lat[1] / lat[0]


def test_fig6_1x1_more_bandwidth_sensitive_than_3x3():
    """Fig 6: res3a_branch1 (1x1) gains more from 11 -> 25 Gb/s than res3a_branch2b (3x3)."""
    assert _fig6("res3a_branch1") > _fig6("res3a_branch2b") >= 0


@pytest.mark.xfail(strict=True, reason="issue 14 miss: with inputs on their consumers P/Q tilings barely "
                   "use the NoP (~2 % / ~0 %); with any concentrated start state (sequential, Fig 11b row, "
                   "distributed) or the K/C-only dataflow both layers are link-bound (~51-53 % each); "
                   "inputs on their consumers with outputs sent to the Fig 11b output row: ~47 % / 5 % (1x1 over by 20 "
                   "points, 3x3 pinned below); see bench/simba_repro.py Fig 6 sensitivities")
def test_fig6_magnitudes_within_10_points():
    assert abs(_fig6("res3a_branch1") - 0.27) <= 0.10
    assert abs(_fig6("res3a_branch2b") - 0.05) <= 0.10


def _fig5(name):
    per = search(NET[name], ARCH, [1, 2, 4, 8, 16, 32], samples=200, seed=5, keep_per_count=True)
    return {n: r.latency_cycles for n, r in per.items()}


@pytest.mark.xfail(strict=True, reason="issue 14 miss: under the runtime baseline (inputs on their "
                   "consumers) res2 branch2b scales almost linearly to 32 chiplets; the RTL-derived "
                   "controller setup (~0.5-0.7 us per layer, independent of the chiplet count) does not "
                   "change that.  Under the paper's Fig 11b start state the turn-over appears (test_fig5_res2_branch2b_turns_over_under_the_fig11b_start_state), "
                   "but that start makes Fig 6 link-bound and Fig 12 gain many x (bench/simba_repro.py row-start entries). "
                   "Holding the 29 layers Sec. 4.3 says stop gaining past 8 chiplets to <= 8 gives ~0.54 ms for ResNet-50 "
                   "(network.fig5_class_bound): this scaling is the headline's missing ~0.23 ms.  Stop 22 "
                   "take-apart (bench/simba_scaling.py, test_fig5_res2_branch2b_from_8_chiplets_nothing_crosses_the_nop): from 8 chiplets on, the best "
                   "tilings put nothing on the NoP, so no communication term the paper names can slow them")
def test_fig5_res2_branch2b_gains_until_8_then_worse_at_32():
    t = _fig5("res2a_branch2b")
    assert t[8] < t[4] < t[2] < t[1]
    assert t[32] > t[8]


def test_fig5_res2_branch2b_from_8_chiplets_nothing_crosses_the_nop():
    """Why the xfail above cannot be closed by a communication term (bench/simba_scaling.py):
    under the headline premise res2a_branch2b's best tilings on 8 and 32 chiplets split P/Q
    only (no partial sums between chiplets) with inputs and outputs in the chiplets' own Global
    PEs -- zero NoP bytes; only sync and setup do not shrink with N."""
    per = search(NET["res2a_branch2b"], ARCH, [8, 32], samples=200, seed=5, keep_per_count=True)
    for r in per.values():
        assert r.mapping.kc == r.mapping.cc == 1
        assert sum(r.link_bytes) == 0


def test_fig5_res2_branch2b_ceiling_appears_only_when_chiplets_split_weights():
    """Stop 29 (bench/simba_candidates.py C): Sec. 4.3 blames res2 branch2b's ceiling on "the number
    of weights" and gives res2a_branch1 (fewer weights, 4x the K x C) more parallelism -- true of
    Listing 1's spatial K/C loops.  With chiplets and PEs splitting K/C only (kc-only) the layer gains
    until 8 and at most 20 % more from 8 to 32 (the paper bound).  With P/Q splits allowed (the
    headline premise) the model's finding changed in stop 30, when the runtime's interrupt barrier
    (ctrl_irq_barrier, Sec. 3.1) became the default: the layer still gains from 8 to 32 chiplets, but
    1.62x (t32 / t8 = 0.616 at 200 samples, seed 5), no longer > 2x (0.344 with the RTL barrier, the
    finding before stop 30) -- toward the paper's Fig 5 turn-over.  Why: the master releases the
    other chiplets by serial MMIO round trips over the NoP (Rocket: one MMIO in flight), so the
    barrier grows with the chiplet count: the sync term is 880 PE cycles at 8 chiplets and 5028 at
    32, half the 32-chiplet latency.  (kc-only is NoP-bound at 11 Gb/s: headline ~1.3 ms, Fig 6
    ~49 % for both layers -- the simba_repro.py note.)"""
    L = NET["res2a_branch2b"]
    kc = search(L, ARCH, [1, 2, 4, 8, 16, 32], samples=200, seed=5, keep_per_count=True,
                chip_pq=False, pe_pq=False)
    t = {n: r.latency_cycles for n, r in kc.items()}
    assert t[8] < t[4] < t[2] < t[1]
    assert t[32] >= 0.8 * t[8]
    free = search(L, ARCH, [8, 32], samples=200, seed=5, keep_per_count=True)
    assert ARCH.ctrl_irq_barrier == 1
    ratio = free[32].latency_cycles / free[8].latency_cycles
    assert 0.5 < ratio < 0.7, ratio                                   # 0.616
    assert free[32].sync_cycles > 5 * free[8].sync_cycles             # 5028 vs 880: the serial releases
    rtl = search(L, ARCH.with_(ctrl_irq_barrier=0), [8, 32], samples=200, seed=5, keep_per_count=True)
    assert rtl[32].latency_cycles < 0.5 * rtl[8].latency_cycles       # 0.344: the pre-stop-30 finding


def test_fig5_res5_branch2b_scales_to_32():
    per = search(NET["res5a_branch2b"], ARCH, [8, 16, 32], samples=200, seed=5, keep_per_count=True)
    assert per[32].latency_cycles < per[16].latency_cycles < per[8].latency_cycles


def test_fig12_sequential_fill_is_the_placement_start_state():
    """Fig 12 starts from the sequential fill (Fig. 11b): moving res4a_branch1's broadcast source
    away from the corner helps; the result keeps the tiling (Sec. 5.2: placement, not re-tiling)."""
    l = NET["res4a_branch1"]
    base = search(l, ARCH, 32, samples=200, seed=0)
    seq = evaluate(l, ARCH, base.mapping, placement="sequential")
    pl = placement(l, ARCH, seq)
    assert pl.latency_cycles < seq.latency_cycles and pl.mapping == seq.mapping


def test_fig5_res2_branch2b_turns_over_under_the_fig11b_start_state():
    """Experiment behind the xfail above (issue 14 lead 3): with the inputs preloaded in the Global
    PEs of the top row (Sec. 4.1 measurement start, Fig. 11b default placement) the input delivery
    no longer scales with the chiplet count and res2 branch2b gains until 8 and is worse at 32."""
    per = search(NET["res2a_branch2b"], ARCH, [1, 2, 4, 8, 16, 32], samples=200, seed=5,
                 keep_per_count=True, placement="row")
    t = {n: r.latency_cycles for n, r in per.items()}
    assert t[8] < t[4] < t[2] < t[1]
    assert t[32] > t[8]


def test_fig10_gain_in_paper_range_when_inputs_start_in_the_top_row():
    """Experiment behind the Fig 10 miss (issue 14): from the runtime baseline the 32-chiplet
    tilings finish together (~0 %), but with the tiling searched under the Fig 11b row start the
    far chiplets' inputs arrive late and shifting work (Sec. 5.1) gains within the paper's range;
    res5a_branch1 (compute-dominated, the paper's example of little gain) stays ~0."""
    for name, lo, hi in (("res3b_branch2a", 0.08, 0.20), ("res5a_branch1", 0.0, 0.02)):
        b = search(NET[name], ARCH, 32, samples=200, seed=0, placement="row")
        g = b.latency_cycles / nonuniform(NET[name], ARCH, b).latency_cycles - 1
        assert lo <= g <= hi, (name, g)


def test_fig7_far_over_adjacent_in_paper_range_with_the_chiplets_split_over_k_c():
    """Fig 7 (Sec. 4.5): res4a_branch1 on 4 chiplets, same tiling, active chiplets moved from adjacent
    to the four corners: 2.0-3.0x (paper up to 2.5x).  Premise: the chiplets split K/C (Sec. 4.1);
    the tiling is searched on the adjacent chiplets and kept.  The slowdown is the per-tile credit
    round trip of the 1-output-pixel tiles the search picks (with 2-pixel tiles, found by smaller
    searches, it is ~1.26x), so the search budget is the bench's."""
    mapping, r = _fig7_far_over_adjacent(chip_pq=False)
    assert 2.0 <= r <= 3.0, (mapping.short(), r)


@pytest.mark.xfail(strict=True, reason="issue 14 premise table (bench/simba_premises.py): under the "
                   "headline's dataflow (Sec. 3.3 full space) the best 4-chiplet tiling splits P/Q across "
                   "chiplets, keeps every input local and exchanges nothing, so distance costs ~1.01x")
def test_fig7_far_over_adjacent_in_paper_range_under_the_headline_dataflow():
    """Fig 7 under the one premise the headline uses (free P/Q + K/C at both levels): 2.0-3.0x."""
    mapping, r = _fig7_far_over_adjacent()
    assert 2.0 <= r <= 3.0, (mapping.short(), r)


@pytest.mark.xfail(strict=True, reason="issue 14 premise table (bench/simba_premises.py): with the chiplets "
                   "splitting K/C only (the premise that gives Fig 7) every 32-chiplet tiling of res3a_branch2b "
                   "is NoP-bound at 11 Gb/s (~5x slower than a P/Q tiling) and gains ~51 % at 25 Gb/s")
def test_fig6_3x3_within_10_points_under_the_fig7_dataflow():
    """Fig 6's res3a_branch2b (5 %, +-10 points) under the premise that reproduces Fig 7 (chiplets
    split K/C only, PEs free): together with the xfail above, the model has no single chiplet-level
    dataflow that meets both Fig 6's 3x3 insensitivity and Fig 7's distance sensitivity."""
    assert abs(_fig6("res3a_branch2b", chip_pq=False) - 0.05) <= 0.10


def test_fig6_3x3_within_10_points_when_outputs_go_to_the_fig11b_output_row():
    """Fig 6 sensitivity: inputs preloaded on their consumers, outputs sent to the default output homes
    (Fig. 11b); res3a_branch2b's gain from 11 -> 25 Gb/s is within 10 points of the paper's 5 % and
    res3a_branch1's is clearly larger (1x1 sensitive, 3x3 not)."""
    b1, b2 = _fig6("res3a_branch1", placement="local-row-oa"), _fig6("res3a_branch2b", placement="local-row-oa")
    assert abs(b2 - 0.05) <= 0.10
    assert b1 > 2 * b2 + 0.10


def _keep_output_homes(layer, arch, base):
    """Sec. 5.2 placement that may re-bind the chiplets but keeps the baseline's output homes
    (bench/simba_rowoa.py variant Rp)."""
    best = base
    for b in ("row-major", "snake", "centre"):
        r = evaluate(layer, arch, base.mapping, b, base.placement)
        if r.latency_cycles < best.latency_cycles - 1e-9:
            best = r
    return best


@pytest.mark.parametrize("start,opt", [
    pytest.param("local", placement, marks=pytest.mark.xfail(strict=True, reason=(
        "issue 14 miss (default): with inputs on their consumers and outputs on their producers "
        "res3a_branch1's 32-chiplet tiling barely uses the NoP: 11 -> 25 Gb/s gains ~1 % (paper 27 %)"))),
    pytest.param("local-row-oa", placement, marks=pytest.mark.xfail(strict=True, reason=(
        "issue 14 stop 32 (bench/simba_rowoa_takeapart.py): with outputs sent to the Fig 11b output "
        "row the layer is 35 % bandwidth-sensitive, but all of that is the NoP links into the row, "
        "and the Sec. 5.2 placement that writes the outputs back onto their producers removes it: "
        "placement gain 87 % here (35 % at 300 samples; paper: <= 15 % on every layer)"))),
    ("local-row-oa", _keep_output_homes),
], ids=["local", "row-oa", "row-oa-placement-keeps-outputs"])
def test_fig6_sensitivity_and_fig12_gain_together_on_res3a_branch1(start, opt):
    """Fig 6 and Fig 12 measure the same 32-chiplet layer: res3a_branch1 gets 27 % faster at
    25 Gb/s (within 10 points) and data placement gains at most 15 % on any layer.  Together they
    say the NoP traffic that makes the 1x1 layer bandwidth-bound is not traffic the placement
    optimisation can remove (if it were, placement alone would gain ~37 %: T11 / T25 = 1 / 0.73)."""
    l = NET["res3a_branch1"]
    lat = [search(l, ARCH.with_(grs_gbps=g), 32, samples=200, seed=6, placement=start) for g in (11.0, 25.0)]
    sens = 1 - lat[1].latency_cycles / lat[0].latency_cycles
    gain = lat[0].latency_cycles / opt(l, ARCH, lat[0]).latency_cycles - 1
    assert abs(sens - 0.27) <= 0.10, sens
    assert gain <= 0.15, gain
