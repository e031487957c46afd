"""Chiplet fabrication cost model -- Monad paper §II-B, Eq. 1 (and §IV-B I/O area),
structured like Chiplet Actuary (Feng & Ma, DAC'22; the cost model Monad's
peers use) where the Monad paper is silent.

    C_total = sum_i (C_die_i / y_die_i + C_bond) + C_sub + C_int / y_int + C_proc

* C_die  = wafer cost / dies per wafer; dies per wafer from the usable wafer
  diameter (edge exclusion removed) and the die footprint (die + scribe lane):
  DPW = pi*(d/2)^2/S - pi*d/sqrt(2*S), kept fractional (Chiplet Actuary: a
  cost per die is an average over wafers, not a count on one wafer).
* y      = negative binomial (1 + A*D0/alpha)^-alpha (A in cm^2).
* C_sub  = substrate cost per mm^2 x package body area.  A multi-die organic
  substrate needs extra routing layers: x1.5 / x1.75 / x2 for bodies up to
  17x17 mm, up to 30x30 mm and larger (Chiplet Actuary's layer factor; one die:
  x1; packages on an interposer: x1, the interposer does the routing).
* C_int  = interposer wafer / interposer DPW; passive (BEOL only) and active
  (logic process) silicon interposers.
* C_proc = bumping per die area (C4 on organic, micro-bumps on silicon) + TSV /
  C4 processing per interposer area.
* Yield loss of assembly (Eq. 1 has none; Chiplet Actuary's structure):
  organic: everything (dies, bond, bumps, substrate) / y_b^N (y_b = C4 yield
  per die); interposer: dies, bonds, micro-bumps / (y_b^N y_c4), interposer
  incl. its TSV/C4 processing / (y_int y_b^N y_c4) -- a bad bond or a bad
  substrate attach scraps the interposer -- and substrate / y_c4 (the
  substrate-attach (C4) yield is charged on everything).  ``bond_loss`` is
  everything above the plain Eq. 1 terms.  C_bond (Eq. 1's per-die assembly
  cost; Chiplet Actuary has none) is charged with the dies.
* Die-to-die I/O area = bw / D_bw x N_link (§IV-B); N_link is every router link
  through bumps for organic/passive, 2 (inject+eject) for active interposers.

Every parameter table can be replaced (``tech``: the layout of nodes.json +
packaging.json), so the structure can be checked with Chiplet Actuary's own
parameters (tests/test_monad_cost.py).

Left out: NRE (the paper also leaves it out), test cost, known-good-die testing,
reticle limits (a die larger than a reticle is priced, not rejected), wafer-level
edge-die geometry beyond the standard DPW formula, chip-first assembly.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("data")
PACKAGINGS = ("organic", "passive", "active")


class CostError(ValueError):
    """Invalid cost-model parameter."""


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    with open(DATA / name) as f:
        return json.load(f)


def nodes(tech: dict | None = None) -> dict:
    return (tech or _load("nodes.json"))["nodes"]


def node(nm, tech: dict | None = None) -> dict:
    table = nodes(tech)
    key = str(int(nm)) if float(nm) == int(float(nm)) else str(nm)
    if key not in table:
        raise CostError(f"unknown technology node {nm!r} nm (known: {', '.join(sorted(table, key=int))})")
    return table[key]


def packaging(name: str, tech: dict | None = None) -> dict:
    table = (tech or _load("packaging.json"))["packaging"]
    if isinstance(name, int):
        if not 0 <= name < len(PACKAGINGS):
            raise CostError(f"packaging id must be 0-2, got {name}")
        name = PACKAGINGS[name]
    if name not in table:
        raise CostError(f"unknown packaging {name!r} (known: {', '.join(PACKAGINGS)})")
    return table[name]


def wafer_geometry(tech: dict | None = None) -> dict:
    return (tech or _load("nodes.json"))["wafer"]


def substrate(tech: dict | None = None) -> dict:
    return (tech or _load("packaging.json"))["substrate"]


def tech28() -> dict:
    return _load("nodes.json")["tech_28nm"]


# ---------------------------------------------------------------- primitives
def dies_per_wafer(die_area_mm2: float, diameter_mm: float = 300.0,
                   edge_exclusion_mm: float = 3.0, scribe_mm: float = 0.1) -> float:
    """Gross dies per wafer for a square die of the given area (fractional)."""
    if die_area_mm2 <= 0:
        raise CostError(f"die area must be > 0 mm^2, got {die_area_mm2}")
    d = diameter_mm - 2.0 * edge_exclusion_mm
    if d <= 0:
        raise CostError("edge exclusion leaves no usable wafer")
    side = math.sqrt(die_area_mm2) + scribe_mm
    s = side * side
    n = math.pi * (d / 2.0) ** 2 / s - math.pi * d / math.sqrt(2.0 * s)
    if n < 1:
        raise CostError(f"a {die_area_mm2} mm^2 die does not fit on a {diameter_mm} mm wafer")
    return n


def _dpw(area_mm2: float, tech: dict | None = None) -> float:
    w = wafer_geometry(tech)
    return dies_per_wafer(area_mm2, w["diameter_mm"], w["edge_exclusion_mm"], w["scribe_lane_mm"])


def neg_binomial_yield(area_mm2: float, d0_per_cm2: float, alpha: float) -> float:
    """y = (1 + A*D0/alpha)^-alpha, A converted to cm^2."""
    if area_mm2 < 0 or d0_per_cm2 < 0 or alpha <= 0:
        raise CostError("yield needs area >= 0, D0 >= 0, alpha > 0")
    return (1.0 + area_mm2 / 100.0 * d0_per_cm2 / alpha) ** (-alpha)


def die_cost(area_mm2: float, nm, tech: dict | None = None) -> tuple[float, float]:
    """(raw die cost C_die in USD, die yield y_die) for a logic die."""
    nd = node(nm, tech)
    return nd["wafer_cost_usd"] / _dpw(area_mm2, tech), neg_binomial_yield(area_mm2, nd["d0_per_cm2"], nd["alpha"])


def substrate_layer_factor(body_mm2: float, n_dies: int, on_interposer: bool, tech: dict | None = None) -> float:
    """Extra routing layers of a multi-die organic substrate (Chiplet Actuary):
    the factor of the largest threshold the package body exceeds."""
    if n_dies <= 1 or on_interposer:
        return 1.0
    f = 1.0
    for area, factor in substrate(tech)["multi_die_layer_factor"]:
        if body_mm2 > area:
            f = factor
    return f


def io_area_mm2(bw_gbps: float, pkg: str, n_links: int) -> float:
    """Reserved die-to-die I/O area: bw / D_bw x N_link (§IV-B)."""
    if bw_gbps < 0 or n_links < 0:
        raise CostError("bandwidth and link count must be >= 0")
    return bw_gbps / packaging(pkg)["bw_density_gbps_per_mm2"] * n_links


def links_through_bumps(pkg: str, router_degree: int) -> int:
    """Unidirectional links crossing the bumps of one chiplet.

    Organic / passive: the router is in the chiplet, all its 2*degree network
    links (in + out) cross bumps.  Active: routers live in the interposer, only
    the inject and eject links (2) cross bumps (§IV-B)."""
    return 2 if packaging(pkg)["routers_in"] == "interposer" else 2 * router_degree


def pe_area_mm2(nm) -> float:
    node(nm)
    return tech28()["pe_area_mm2"] * (float(nm) / 28.0) ** 2


def sram_area_mm2(kib: float, nm) -> float:
    node(nm)
    return tech28()["sram_area_mm2_per_kib"] * kib * (float(nm) / 28.0) ** 2


def mac_energy_pj(nm) -> float:
    node(nm)
    return tech28()["mac_energy_pj"] * float(nm) / 28.0


# ---------------------------------------------------------------- Eq. 1
@dataclass(frozen=True)
class Die:
    area_mm2: float
    node_nm: int = 28


@dataclass
class CostBreakdown:
    die: float = 0.0          # sum C_die/y_die
    bond: float = 0.0         # sum C_bond
    substrate: float = 0.0    # C_sub
    interposer: float = 0.0   # C_int/y_int
    process: float = 0.0      # C_proc
    bond_loss: float = 0.0    # assembly yield loss: bonding, substrate attach, interposer yield on its TSVs
    yields: list = field(default_factory=list)
    interposer_yield: float = 1.0
    interposer_area_mm2: float = 0.0

    @property
    def total(self) -> float:
        return self.die + self.bond + self.substrate + self.interposer + self.process + self.bond_loss

    def as_dict(self) -> dict:
        return {"die": self.die, "bond": self.bond, "substrate": self.substrate,
                "interposer": self.interposer, "process": self.process,
                "bond_loss": self.bond_loss, "total": self.total,
                "die_yields": list(self.yields), "interposer_yield": self.interposer_yield,
                "interposer_area_mm2": self.interposer_area_mm2}


def package_cost(dies: list[Die], pkg: str = "organic", tech: dict | None = None) -> CostBreakdown:
    """Eq. 1 for N dies on ``pkg`` with the yield-loss structure of Chiplet
    Actuary (module docstring).  One die on ``organic`` is the monolithic
    baseline.  ``tech``: replacement parameter tables (nodes.json +
    packaging.json layout)."""
    if not dies:
        raise CostError("need at least one die")
    p = packaging(pkg, tech)
    s = substrate(tech)
    b = CostBreakdown()
    footprint = 0.0
    for d in dies:
        c, y = die_cost(d.area_mm2, d.node_nm, tech)
        b.die += c / y
        b.yields.append(y)
        b.bond += p["bond_cost_usd_per_die"]
        b.process += p["bump_cost_usd_per_mm2"] * d.area_mm2
        footprint += d.area_mm2
    y_b = p["bond_yield_per_die"] ** len(dies)
    ip = p["interposer"]
    if ip is None:
        body = s["area_factor"] * footprint
        b.substrate = s["cost_usd_per_mm2"] * body * substrate_layer_factor(body, len(dies), False, tech)
        base = b.die + b.bond + b.process + b.substrate
        b.bond_loss = base / y_b - base
        return b
    a_int = ip["area_factor"] * footprint
    y_int = neg_binomial_yield(a_int, ip["d0_per_cm2"], ip["alpha"])
    c_int = ip["wafer_cost_usd"] / _dpw(a_int, tech)
    tsv = ip["tsv_cost_usd_per_mm2"] * a_int
    b.interposer = c_int / y_int
    b.interposer_yield = y_int
    b.interposer_area_mm2 = a_int
    body = s["area_factor"] * a_int
    b.substrate = s["cost_usd_per_mm2"] * body
    y_c4 = s["attach_yield"]
    chips = b.die + b.bond + b.process
    b.process += tsv
    total = chips / (y_b * y_c4) + (c_int + tsv) / (y_int * y_b * y_c4) + b.substrate / y_c4
    b.bond_loss = total - (b.die + b.bond + b.process + b.interposer + b.substrate)
    return b


def monolithic_equivalent(chiplet_area_mm2: float, n: int, nm) -> CostBreakdown:
    """Baseline of Fig. 3: one die of n x the chiplet area on an organic substrate."""
    return package_cost([Die(n * chiplet_area_mm2, nm)], "organic")


def fig3(cases=None) -> dict:
    """Fig. 3: 3 TPU-size / 3 Gemmini-size chiplets on organic, passive and
    active vs a monolithic die of 3x the area; normalised to the monolithic
    die cost (C_die/y_die of the big die) = 1."""
    cases = cases or {"TPU": (331.0, 28), "Gem": (1.1, 22)}
    out = {}
    for name, (area, nm) in cases.items():
        mono = monolithic_equivalent(area, 3, nm)
        norm = mono.die
        rows = {"mono": {k: v / norm for k, v in mono.as_dict().items()
                         if k not in ("die_yields", "interposer_yield", "interposer_area_mm2")}}
        for pkg in PACKAGINGS:
            b = package_cost([Die(area, nm)] * 3, pkg)
            rows[pkg] = {k: v / norm for k, v in b.as_dict().items()
                         if k not in ("die_yields", "interposer_yield", "interposer_area_mm2")}
            rows[pkg]["interposer_share"] = b.interposer / b.total
        out[name] = {"area_mm2": area, "node_nm": nm, "mono_die_usd": norm, "rows": rows}
    return out
