"""Cycles of one PE tile, from the RTL PE's measured behaviour (seed paper Sec. 3.1 PE, Listing 1
PE level; the project's RTL in ``hdl/pe`` is the reference, measured by ``bench/pe_utilization.py``).

    cycles = visited MAC operations                         (one per cycle, Listing 1 PE loops)
           + weight_switch_cycles x R S K1 C1               (weight-register loads per block)
           + overhead_cycles[path]                          (per-tile cycles beyond the issue
                                                             cycles, 'ppu' (LAST/ONLY roles)
                                                             or 'psum' (FIRST/MIDDLE))

The RTL-measured cycles are steady-state cycles per tile of back-to-back tiles (the PE starts
the next tile, with its input double-buffered, while the previous one drains; done-to-done),
which is how a PE runs the tiles of a layer: the pipeline fill and drain (``latency_cycles``
in the data, isolated tiles) are paid once per run, not per tile, so the fitted overheads are
0 for the pipelined PE (issue 20; they were the per-tile fill + drain, 11 / 6 cycles, when
the PE ran one tile at a time).

Visited operations follow the PE contract (``hdl/pe/config.py``, ``sequencer.py`` docstrings):
every (r, s, k1, c1) sweep covers the P1 x Q1 tile, except that sweeps other than the first
(r = s = c1 = 0) and the final one (last r, s, c1) skip rows/columns reading only zero
padding, and a sweep that is all padding costs one idle cycle.  The constants are not
hard-wired: they live with the RTL-measured tile cycles they were fitted to in
``data/pe_tile_cycles.json`` (command and commit recorded there) and are re-fitted from
``build/bench/pe_utilization.json`` when ``load_pe_cycles(bench_dir)`` finds it, so a
re-pipelined PE changes them by re-running the bench, not by editing code.
Left out: back-pressure on the result streams and input-buffer loads; the one fill/drain
of a run of tiles (``isolated`` constants in the data file).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data" / "pe_tile_cycles.json"
PPU_ROLES = (2, 3)          # LAST, ONLY (hdl/pe/config.py Role)
# The pipelined RTL sequencer waits for its per-tile constants before the first sweep (part of
# the fill, paid once), so no first sweep is stretched any more (was 3 cycles minimum).
FIRST_SWEEP_MIN = 1


def setup_wait(cfg: dict) -> int:
    return max(0, FIRST_SWEEP_MIN - cfg["P1"] * cfg["Q1"])


class PECycleError(ValueError):
    """Invalid PE cycle data."""


@dataclass(frozen=True)
class PECycles:
    overhead_ppu: float          # fill + drain through the PPU, cycles per tile
    overhead_psum: float         # fill + drain to psum_out, cycles per tile
    weight_switch_cycles: float  # per weight block (R S K1 C1 of them)
    source: str = field(default="", compare=False)

    def __post_init__(self):
        for n in ("overhead_ppu", "overhead_psum", "weight_switch_cycles"):
            if getattr(self, n) < 0:
                raise PECycleError(f"{n} must be >= 0, got {getattr(self, n)!r}")

    def overhead(self, role: int) -> float:
        return self.overhead_ppu if role in PPU_ROLES else self.overhead_psum


def _axis_range(pad, off, extent, tile, stride):
    """Visited block-counter range [lo, hi] of one axis in a skippable sweep (None: empty)."""
    a = pad - off
    b = extent - 1 + pad - off
    lo = 0 if a <= 0 else ((a + 1) >> 1 if stride == 2 else a)
    hi = min(b >> 1 if stride == 2 else b, tile - 1)
    if b < 0 or lo > hi:
        return None
    return lo, hi


def visited_ops(cfg: dict) -> int:
    """MAC issue cycles of one tile (``cfg``: the PE's tile configuration fields)."""
    R, S, C1, K1 = cfg["R"], cfg["S"], cfg["C1"], cfg["K1"]
    P1, Q1 = cfg["P1"], cfg["Q1"]
    pool = bool(cfg.get("pool", 0))
    pt, pl, st = cfg.get("pad_top", 0), cfg.get("pad_left", 0), cfg.get("stride", 1)
    total = 0
    for r in range(R):
        for s in range(S):
            for c1 in range(C1):
                whole = pool or (r == s == c1 == 0) or (r == R - 1 and s == S - 1 and c1 == C1 - 1)
                if whole or (pt == 0 and pl == 0):
                    n = P1 * Q1
                else:
                    pr = _axis_range(pt, r, cfg["H_in"], P1, st)
                    qr = _axis_range(pl, s, cfg["W_in"], Q1, st)
                    n = 1 if pr is None or qr is None else (pr[1] - pr[0] + 1) * (qr[1] - qr[0] + 1)
                total += n * K1
    return total


def tile_cycles(cfg: dict, pc: PECycles) -> float:
    blocks = cfg["R"] * cfg["S"] * cfg["K1"] * cfg["C1"]
    return (visited_ops(cfg) + setup_wait(cfg) + pc.weight_switch_cycles * blocks
            + pc.overhead(int(cfg.get("role", 3))))


def fit(tiles: list[dict], source: str = "") -> PECycles:
    """Least-squares constants from measured tiles (``{config, cycles}``), rounded to cycles
    (fill/drain) and to 1/1000 cycle (weight switch)."""
    if not tiles:
        raise PECycleError("no tiles to fit")
    A, y = [], []
    for t in tiles:
        c = t["config"]
        ppu = int(c.get("role", 3)) in PPU_ROLES
        A.append([c["R"] * c["S"] * c["K1"] * c["C1"], 1.0 if ppu else 0.0, 0.0 if ppu else 1.0])
        y.append(t["cycles"] - visited_ops(c) - setup_wait(c))
    A, y = np.array(A, float), np.array(y, float)
    # simplest model first: constant fill/drain per output path; a per-weight-block switch
    # cost is added only if the constants alone leave more than half a cycle unexplained
    sol = np.zeros(3)
    for cols in ([1, 2], [0, 1, 2]):
        cols = [j for j in cols if A[:, j].any()]
        sol = np.zeros(3)
        sol[cols] = np.linalg.lstsq(A[:, cols], y, rcond=None)[0]
        if np.abs(A @ sol - y).max() <= 0.5:
            break
    wsw = max(0.0, round(float(sol[0]), 3))
    if not A[:, 1].any():
        sol[1] = sol[2]
    if not A[:, 2].any():
        sol[2] = sol[1]
    return PECycles(max(0.0, round(float(sol[1]))), max(0.0, round(float(sol[2]))), wsw, source)


def load_data(path: str | Path = DATA) -> dict:
    return json.loads(Path(path).read_text())


def load_pe_cycles(bench_dir: str | Path | None = None) -> PECycles:
    """Constants from the committed RTL tile data, or re-fitted from the live bench JSON
    (``<bench_dir>/pe_utilization.json``) when it exists."""
    if bench_dir is not None:
        f = Path(bench_dir) / "pe_utilization.json"
        if f.exists():
            d = json.loads(f.read_text())
            if "tiles" not in d:
                raise PECycleError(f"{f}: missing key 'tiles'")
            return fit(d["tiles"], f"RTL bench {f} (fitted)")
    d = load_data()
    k = d["constants"]
    return PECycles(k["overhead_ppu"], k["overhead_psum"], k["weight_switch_cycles"],
                    f"{DATA.name} (RTL {d['provenance']['commit'][:10]})")
