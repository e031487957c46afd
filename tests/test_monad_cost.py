"""Cost model (Monad §II-B, Eq. 1) against hand-computed values."""
import math

import pytest

from tessera.sim_models.cost import model as cm


def test_dies_per_wafer_hand_computed():
    # d = 300 - 2*3 = 294 mm; S = (10 + 0.1)^2 = 102.01 mm^2
    # pi*147^2/102.01 - pi*294/sqrt(204.02) = 665.49 - 64.66 = 600.83 -> 600
    assert cm.dies_per_wafer(100.0) == 600
    # 331 mm^2 (TPU): S = (18.1934 + 0.1)^2 -> 167.16 -> 167
    assert cm.dies_per_wafer(331.0) == 167
    # no edge exclusion, no scribe: 100 mm^2 -> pi*150^2/100 - pi*300/sqrt(200) = 706.86-66.64
    assert cm.dies_per_wafer(100.0, 300.0, 0.0, 0.0) == 640


def test_negative_binomial_yield_hand_computed():
    # 1 cm^2, D0 = 0.07, alpha = 3: (1 + 0.07/3)^-3
    assert cm.neg_binomial_yield(100.0, 0.07, 3.0) == pytest.approx(1.0233333333 ** -3, rel=1e-9)
    assert cm.neg_binomial_yield(100.0, 0.07, 3.0) == pytest.approx(0.933144, abs=1e-6)
    assert cm.neg_binomial_yield(331.0, 0.07, 3.0) == pytest.approx(0.799964, abs=1e-6)
    assert cm.neg_binomial_yield(0.0, 0.07, 3.0) == 1.0


def test_die_cost_hand_computed():
    c, y = cm.die_cost(331.0, 28)      # $2891 / 167 dies
    assert c == pytest.approx(2891 / 167, rel=1e-12)
    assert c / y == pytest.approx(21.6403, rel=1e-4)


def test_eq1_organic_hand_computed():
    b = cm.package_cost([cm.Die(100.0, 28)] * 3, "organic")
    die = 3 * (2891 / 600) / 0.9331439350672827            # 15.4913
    bond = 3 * 0.02                                         # C4 bond, Fig 3 bound (packaging.json)
    sub = 0.005 * 4.0 * 300.0                               # 6.0
    proc = 0.0005 * 300.0
    assembled = die + bond + sub
    total = assembled / 0.995 ** 3 + proc
    assert b.die == pytest.approx(die, rel=1e-9)
    assert b.substrate == pytest.approx(sub, rel=1e-12)
    assert b.total == pytest.approx(total, rel=1e-9)
    assert b.total == pytest.approx(22.0272, rel=1e-4)


def test_eq1_passive_interposer_terms():
    b = cm.package_cost([cm.Die(100.0, 28)] * 3, "passive")
    a_int = 1.2 * 300.0
    assert b.interposer_area_mm2 == pytest.approx(a_int)
    dpw = cm.dies_per_wafer(a_int)
    y_int = (1 + 3.6 * 0.02 / 3) ** -3
    assert b.interposer == pytest.approx(1445.5 / dpw / y_int, rel=1e-12)     # 28 nm BEOL-only wafer
    assert b.substrate == pytest.approx(0.005 * 4.0 * a_int)
    assert b.process == pytest.approx(0.001 * 300.0 + 0.004 * a_int)


def test_bigger_die_never_higher_yield_and_cost_per_area_grows():
    areas = [0.5, 1, 5, 20, 50, 100, 200, 400, 800]
    for nm in (5, 7, 14, 20, 22, 28, 55):
        ys = [cm.die_cost(a, nm)[1] for a in areas]
        assert all(a >= b for a, b in zip(ys, ys[1:]))
        cost = [cm.die_cost(a, nm)[0] / cm.die_cost(a, nm)[1] for a in areas]
        assert all(a < b for a, b in zip(cost, cost[1:]))
        # above ~50 mm^2 (scribe/edge overheads negligible) cost per mm^2 grows with area
        per_area = [c / a for c, a in zip(cost[4:], areas[4:])]
        assert all(a < b for a, b in zip(per_area, per_area[1:]))


def test_io_area_and_links():
    assert cm.io_area_mm2(250.0, "organic", 4) == pytest.approx(250 / 125 * 4)
    assert cm.io_area_mm2(750.0, "passive", 2) == pytest.approx(2.0)
    assert cm.links_through_bumps("organic", 4) == 8
    assert cm.links_through_bumps("passive", 2) == 4
    assert cm.links_through_bumps("active", 4) == 2


def test_fig3_qualitative_claims():
    f = cm.fig3()
    tpu, gem = f["TPU"]["rows"], f["Gem"]["rows"]
    assert tpu["mono"]["die"] == 1.0 and gem["mono"]["die"] == 1.0
    # larger chips give more die-cost reduction; tiny chips almost none
    assert tpu["organic"]["die"] < 0.6
    assert gem["organic"]["die"] > 0.95
    assert tpu["organic"]["total"] < tpu["mono"]["total"]
    assert gem["organic"]["total"] > gem["mono"]["total"]      # bonding overhead dominates
    # interposers are costly: > 15 % (passive) and > 30 % (active) "for both TPU and Gemmini" (§II-B)
    for rows in (tpu, gem):
        assert rows["passive"]["interposer_share"] > 0.15
        assert rows["active"]["interposer_share"] > 0.30
    for rows in (tpu, gem):
        assert rows["organic"]["total"] < rows["passive"]["total"] < rows["active"]["total"]


@pytest.mark.parametrize("call", [
    lambda: cm.dies_per_wafer(0.0),
    lambda: cm.dies_per_wafer(1e6),
    lambda: cm.node(3),
    lambda: cm.packaging("glass"),
    lambda: cm.package_cost([], "organic"),
    lambda: cm.neg_binomial_yield(1.0, 0.1, 0.0),
])
def test_bad_parameters_raise(call):
    with pytest.raises(cm.CostError):
        call()
