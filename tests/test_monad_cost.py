"""Cost model (Monad §II-B, Eq. 1) against hand-computed values."""
import math

import pytest

from tessera.sim_models.cost import model as cm


def test_dies_per_wafer_hand_computed():
    # d = 300 - 2*3 = 294 mm; S = (10 + 0.1)^2 = 102.01 mm^2
    # pi*147^2/102.01 - pi*294/sqrt(204.02) = 665.490 - 64.664 = 600.83 (kept fractional)
    assert cm.dies_per_wafer(100.0) == pytest.approx(600.826, abs=1e-3)
    # 331 mm^2 (TPU): S = (18.1934 + 0.1)^2 = 334.64 -> 203.06 - 35.92 = 167.15
    assert cm.dies_per_wafer(331.0) == pytest.approx(167.15, abs=0.01)
    # no edge exclusion, no scribe: 100 mm^2 -> pi*150^2/100 - pi*300/sqrt(200) = 706.86-66.64
    assert cm.dies_per_wafer(100.0, 300.0, 0.0, 0.0) == pytest.approx(640.21, abs=0.01)


def test_negative_binomial_yield_hand_computed():
    # 1 cm^2, D0 = 0.07, alpha = 3: (1 + 0.07/3)^-3
    assert cm.neg_binomial_yield(100.0, 0.07, 3.0) == pytest.approx(1.0233333333 ** -3, rel=1e-9)
    assert cm.neg_binomial_yield(100.0, 0.07, 3.0) == pytest.approx(0.933144, abs=1e-6)
    assert cm.neg_binomial_yield(331.0, 0.07, 3.0) == pytest.approx(0.799964, abs=1e-6)
    assert cm.neg_binomial_yield(0.0, 0.07, 3.0) == 1.0


def test_die_cost_hand_computed():
    c, y = cm.die_cost(331.0, 28)      # $2891 / 167.15 dies
    assert c == pytest.approx(2891 / cm.dies_per_wafer(331.0), rel=1e-12)
    assert c / y == pytest.approx(21.621, rel=1e-3)


def test_eq1_organic_hand_computed():
    b = cm.package_cost([cm.Die(100.0, 28)] * 3, "organic")
    die = 3 * (2891 / 600.826) / 0.9331439350672827        # 15.4691
    bond = 3 * 0.02                                         # C4 bond, Fig 3 bound (packaging.json)
    sub = 0.005 * 4.0 * 300.0 * 2.0                         # body 1200 mm^2 > 30x30: layer factor 2
    proc = 0.0005 * 300.0
    total = (die + bond + sub + proc) / 0.995 ** 3          # C4 yield charged on everything
    assert b.die == pytest.approx(die, rel=1e-5)
    assert b.substrate == pytest.approx(sub, rel=1e-12)
    assert b.total == pytest.approx(total, rel=1e-5)
    assert b.total == pytest.approx(28.0987, rel=1e-4)
    # a single die has no extra layers
    assert cm.package_cost([cm.Die(100.0, 28)], "organic").substrate == pytest.approx(0.005 * 400.0)


def test_eq1_passive_interposer_terms():
    b = cm.package_cost([cm.Die(100.0, 28)] * 3, "passive")
    a_int = 1.2 * 300.0
    assert b.interposer_area_mm2 == pytest.approx(a_int)
    dpw = cm.dies_per_wafer(a_int)
    y_int = (1 + 3.6 * 0.02 / 3) ** -3
    assert b.interposer == pytest.approx(1445.5 / dpw / y_int, rel=1e-12)     # 28 nm BEOL-only wafer
    assert b.substrate == pytest.approx(0.005 * 4.0 * a_int)                  # no layer factor on an interposer
    assert b.process == pytest.approx(0.001 * 300.0 + 0.004 * a_int)


# ---- Chiplet Actuary structure, with Chiplet Actuary's own parameters (parameter.ini of
# github.com/Yinxiao-Feng/chiplet-actuary: 300 mm wafer, 0.2 mm scribe, 5 mm edge loss,
# critical level 10 for dies / 6 for the SI interposer, 28 nm $2891 D0 0.07, 55 nm $1937 D0 0.07
# (the SI interposer wafer), OS: body x4, $0.005/mm^2, C4 yield 0.99, C4 bumps $0.005/mm^2;
# SI: area x1.1, micro-bump yield 0.95, micro-bumps $0.01/mm^2).  Active interposer: the same
# structure on a 28 nm logic wafer.  Reference values are computed by hand below with CA's
# formulas, independently of the model's code path.
CA = {
    "nodes": {"28": {"wafer_cost_usd": 2891.0, "d0_per_cm2": 0.07, "alpha": 10.0}},
    "wafer": {"diameter_mm": 300.0, "edge_exclusion_mm": 5.0, "scribe_lane_mm": 0.2},
    "substrate": {"cost_usd_per_mm2": 0.005, "area_factor": 4.0, "attach_yield": 0.99,
                  "multi_die_layer_factor": [[0.0, 1.5], [289.0, 1.75], [900.0, 2.0]]},
    "packaging": {
        "organic": {"bond_cost_usd_per_die": 0.0, "bond_yield_per_die": 0.99, "bump_cost_usd_per_mm2": 0.005,
                    "interposer": None},
        "passive": {"bond_cost_usd_per_die": 0.0, "bond_yield_per_die": 0.95, "bump_cost_usd_per_mm2": 0.01,
                    "interposer": {"wafer_cost_usd": 1937.0, "d0_per_cm2": 0.07, "alpha": 6.0,
                                   "area_factor": 1.1, "tsv_cost_usd_per_mm2": 0.005}},
        "active": {"bond_cost_usd_per_die": 0.0, "bond_yield_per_die": 0.95, "bump_cost_usd_per_mm2": 0.01,
                   "interposer": {"wafer_cost_usd": 2891.0, "d0_per_cm2": 0.07, "alpha": 6.0,
                                  "area_factor": 1.1, "tsv_cost_usd_per_mm2": 0.005}},
    },
}


def _ca_n(area):            # CA N_die_total: footprint with scribe, radius 150 - 5 mm
    a = area + 2 * 0.2 * math.sqrt(area) + 0.2 ** 2
    return math.pi * (150 - 5) ** 2 / a - math.pi * (300 - 10) / math.sqrt(2 * a)


def _ca_kgd(area, wafer=2891.0, d0=0.07, crit=10.0):
    return wafer / _ca_n(area) / (1 + d0 / 100 * area / crit) ** -crit


def _ca_os(areas):           # CA class OS: cost_total_system
    body = 4 * sum(areas)
    factor = 1 if len(areas) == 1 else (2 if body > 900 else 1.75 if body > 289 else 1.5)
    raw_pkg = body * 0.005 * factor
    chips = sum(_ca_kgd(a) + a * 0.005 for a in areas)
    return (chips + raw_pkg) / 0.99 ** len(areas)


def _ca_si(areas, wafer):    # CA class Advanced, chip-last: cost_total_system
    a_int = 1.1 * sum(areas)
    interposer = wafer / _ca_n(a_int) + a_int * 0.005
    sub = 4 * a_int * 0.005
    y1 = (1 + 0.07 / 100 * a_int / 6) ** -6
    y2, y3 = 0.95 ** len(areas), 0.99
    chips = sum(_ca_kgd(a) + a * 0.01 for a in areas)
    return chips / (y2 * y3) + interposer / (y1 * y2 * y3) + sub / y3


@pytest.mark.parametrize("areas", [[300.0], [2.0], [100.0] * 4, [20.0] * 3, [2.0] * 2, [400.0] * 2])
def test_chiplet_actuary_organic_and_monolithic(areas):
    b = cm.package_cost([cm.Die(a, 28) for a in areas], "organic", tech=CA)
    assert b.total == pytest.approx(_ca_os(areas), rel=0.01)
    assert b.total == pytest.approx(_ca_os(areas), rel=1e-9)      # same structure: exact


@pytest.mark.parametrize("pkg,wafer", [("passive", 1937.0), ("active", 2891.0)])
@pytest.mark.parametrize("areas", [[100.0] * 4, [2.0] * 3, [400.0] * 2])
def test_chiplet_actuary_interposers(pkg, wafer, areas):
    b = cm.package_cost([cm.Die(a, 28) for a in areas], pkg, tech=CA)
    assert b.total == pytest.approx(_ca_si(areas, wafer), rel=0.01)
    assert b.total == pytest.approx(_ca_si(areas, wafer), rel=1e-9)


def test_chiplet_actuary_hand_numbers():
    """One case written out with numbers: 4 x 100 mm^2 on organic (CA parameters)."""
    # N = pi*145^2/104.04 - pi*290/sqrt(208.08) = 634.87 - 63.16 = 571.71 dies; y = (1+0.007)^-10
    kgd = 2891 / 571.71 / 1.007 ** -10                   # 5.0567 x 1.0723 = 5.4224
    chips = 4 * (kgd + 0.5)                               # + C4 bumps 100 mm^2 x $0.005
    pkg = 1600 * 0.005 * 2.0                              # body 1600 mm^2 > 30x30: x2 layers
    total = (chips + pkg) / 0.99 ** 4                    # 39.69 / 0.9606
    assert total == pytest.approx(41.32, abs=0.01)
    b = cm.package_cost([cm.Die(100.0, 28)] * 4, "organic", tech=CA)
    assert b.total == pytest.approx(total, rel=1e-3)


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
