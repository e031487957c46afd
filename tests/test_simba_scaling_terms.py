"""Simba system model: the stop-22 scaling terms (model.py; issue 14, why the model keeps gaining
past 8 chiplets -- bench/simba_scaling.py), each hand-computed against the model without it."""
import pytest

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.chiplet_cycles import PRE_STOP21_TERMS
from tessera.sim_models.simba.layers import Layer
from tessera.sim_models.simba.model import build_structure, evaluate_batch
from tessera.sim_models.simba.topology import chiplet_noc

A0 = load_arch(**PRE_STOP21_TERMS)              # the RTL terms off: only the term under test moves
SMALL = Layer("t", C=16, K=16, R=3, S=3, H=6, W=6, stride=1, pad=1)
NOP_BW = 4 * 11.0 / 8 / 1.03                    # one NoP link at 11 Gb/s, 4 lanes, bytes per PE cycle


def run(arch, layer, kc, cc, pe):
    st = build_structure(layer, arch, kc, cc, 1, 1, placement="local")
    return evaluate_batch(st, arch, *[[v] for v in pe])


def test_scaling_terms_default_off():
    a = load_arch()
    assert (a.nop_port_shared, a.barrier_arrive_serial, a.psum_chain_serial) == (0, 0, 0)


@pytest.mark.parametrize("kc, extra", [(1, 0), (2, 1), (4, 3)])
def test_barrier_arrives_one_per_noc_cycle(kc, extra):
    """N chiplets: the master counts N single-flit ARRIVEs, one per NoC cycle (NoC clock = PE
    clock): + N - 1 cycles; one chiplet has no package barrier.  A term of the RTL package's barrier
    (ctrl_irq_barrier 0); the runtime's interrupt barrier (the default since stop 30) replaces that
    barrier, so there the term moves nothing."""
    pe = (1, 1, 1, 1, 6, 6)
    rtl = A0.with_(ctrl_irq_barrier=0)
    r0 = run(rtl, SMALL, kc, 1, pe)
    r1 = run(rtl.with_(barrier_arrive_serial=1), SMALL, kc, 1, pe)
    assert r1.latency[0] - r0.latency[0] == pytest.approx(extra)
    assert A0.ctrl_irq_barrier == 1
    assert run(A0.with_(barrier_arrive_serial=1), SMALL, kc, 1, pe).latency[0] == pytest.approx(
        run(A0, SMALL, kc, 1, pe).latency[0])


def test_nop_port_carries_partial_sums_both_ways():
    """1x1 conv C=16 K=64 on 6x6, C over 2 chiplets (a chain 0 -> 1), P1=2 Q1=6 (3 steps): the
    chain's partial sums, 3 B x 64 x 36 = 6912 B, leave chiplet 0 and enter chiplet 1 through
    their NoP router's NoC port, 16 B per cycle: 432 cycles each; at 100 Gb/s the NoP link
    (48.5 B/cycle) no longer hides it, and chiplet 0 (compute 8 x 36 = 288 cycles + tile
    overheads) becomes port-bound: its last two steps take 432 / 3 per step."""
    L = Layer("p", C=16, K=64, R=1, S=1, H=6, W=6, stride=1, pad=0)
    a = A0.with_(grs_gbps=100.0)
    pe = (1, 1, 1, 1, 2, 6)
    r0 = run(a, L, 1, 2, pe)
    r1 = run(a.with_(nop_port_shared=1), L, 1, 2, pe)
    assert list(r0.terms["t_port"][0]) == [0, 0]
    assert r1.terms["t_port"][0] == pytest.approx([6912 / 16, 6912 / 16])
    comp0 = r0.comp[0, 0]
    assert comp0 < 432
    assert r0.terms["period"][0, 0] == pytest.approx(comp0 / 3)
    assert r1.terms["period"][0, 0] == pytest.approx(432 / 3)
    assert r1.own[0, 0] - r0.own[0, 0] == pytest.approx(2 * (432 - comp0) / 3)


def test_nop_port_is_not_charged_without_nop_traffic():
    """P/Q split with inputs and outputs local: nothing crosses the NoP, the port is idle."""
    st = build_structure(SMALL, A0, 1, 1, 2, 1, placement="local")
    r = evaluate_batch(st, A0.with_(nop_port_shared=1), [1], [1], [1], [1], [3], [6])
    assert r.terms["t_port"].max() == 0


def test_psum_chain_lock_step_experiment():
    """SMALL, C over 2 chiplets, P1 = Q1 = 3 (4 steps): lock-step chain period = the chain's psum
    hop (route latency: nop_to_pe_max NoC hops out and in x 3 cycles + one 20.6-cycle NoP hop;
    3 x 16 x 36 = 1728 B over one 11 Gb/s link, a quarter per step) + a quarter of the compute."""
    noc = chiplet_noc(A0)
    assert noc.nop_to_pe_max == 6
    pe = (1, 1, 1, 1, 3, 3)
    r0 = run(A0, SMALL, 1, 2, pe)
    r1 = run(A0.with_(psum_chain_serial=1), SMALL, 1, 2, pe)
    lat_ps = 3 * (6 + 6) + 20 * 1.03
    hop = lat_ps + 1728 / NOP_BW / 4
    for i in (0, 1):
        assert r1.terms["period"][0, i] == pytest.approx(
            max(r0.terms["period"][0, i], hop + r0.comp[0, i] / 4))
    assert r1.terms["period"][0, 0] > r0.terms["period"][0, 0]
    # one chiplet: no chain, no change
    s0, s1 = run(A0, SMALL, 1, 1, pe), run(A0.with_(psum_chain_serial=1), SMALL, 1, 1, pe)
    assert s1.latency[0] == pytest.approx(s0.latency[0])


def test_scaling_bench_decomposition_adds_up():
    """bench/simba_scaling.py's critical-path terms add up to the model's latency (own + chain
    psum hops + tail + sync + setup), and the period is the largest per-step bound here."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import simba_scaling as SC
    from tessera.sim_models.simba.mapper import search
    for kc, cc in ((1, 1), (2, 2)):
        res = search(SMALL, A0, kc * cc, 50, seed=1, splits=[(kc, cc, 1, 1)])
        d = SC.decompose(SMALL, A0, res)
        assert d["latency"] == pytest.approx(res.latency_cycles)
        assert d["own"] + d["chain_psum"] + d["tail"] + d["sync"] + d["setup"] == pytest.approx(d["latency"])
        assert d["period"] >= max(d[k] for k in ("comp/step", "t_in/step", "t_ps/step", "t_oa/step")) - 1e-9


# ---- stop 29: weight copies over the NoP (experiment, off; bench/simba_candidates.py) ----

def _lat(arch, layer, kc, pc):
    st = build_structure(layer, arch, kc, 1, pc, 1, placement="local")
    return evaluate_batch(st, arch, [1], [1], [1], [1], [3], [6])


def test_weight_copy_nop_default_off():
    assert load_arch().weight_copy_nop == 0


def test_weight_copy_nop_one_copy_one_hop():
    """3x3 C=16 K=16 split over P on chiplets 0 and 1 (row-major, 1 hop): the single (k, c) block,
    3 x 3 x 16 x 16 = 2304 B, is multicast from chiplet 0 to chiplet 1 over one NoP link at
    11 Gb/s x 4 lanes before the layer: 2304 / NOP_BW + one NoP hop (20 ns at 1.03 GHz)."""
    r0 = _lat(A0, SMALL, 1, 2)
    r1 = _lat(A0.with_(weight_copy_nop=1), SMALL, 1, 2)
    assert r1.latency[0] - r0.latency[0] == pytest.approx(2304 / NOP_BW + 20 * 1.03)


def test_weight_copy_nop_shares_links_between_blocks():
    """K over 2 x P over 2 on chiplets 0..3 of the top row (logical order c, k, q, p): block k0 is
    copied 0 -> 2 and block k1 1 -> 3 (1152 B each); both trees cross link 1 -> 2, which carries
    2304 B; the farthest copy is 2 hops away."""
    r0 = _lat(A0, SMALL, 2, 2)
    r1 = _lat(A0.with_(weight_copy_nop=1), SMALL, 2, 2)
    assert r1.latency[0] - r0.latency[0] == pytest.approx(2304 / NOP_BW + 2 * 20 * 1.03)


def test_weight_copy_nop_nothing_without_chiplet_pq_split():
    """K/C splits keep one copy of every weight: nothing is multicast."""
    r0 = _lat(A0, SMALL, 2, 1)
    r1 = _lat(A0.with_(weight_copy_nop=1), SMALL, 2, 1)
    assert r1.latency[0] == r0.latency[0]
