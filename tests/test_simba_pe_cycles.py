"""Simba model: the per-tile PE cycle formula against the RTL-measured tile cycles."""
import json
from pathlib import Path

import pytest

from tessera.sim_models.simba.pe_cycles import (PECycles, PECycleError, fit, load_data, load_pe_cycles,
                                                tile_cycles, visited_ops)

DATA = load_data()
LIVE = Path("build/bench/pe_utilization.json")


def test_data_file_has_provenance():
    p = DATA["provenance"]
    assert "bench/pe_utilization.py" in p["command"] and len(p["commit"]) == 40
    assert len(DATA["tiles"]) >= 10
    roles = {t["config"]["role"] for t in DATA["tiles"]}
    assert {0, 3} <= roles                       # both output paths (psum hand-off, PPU) measured


@pytest.mark.parametrize("t", DATA["tiles"], ids=lambda t: t["name"])
def test_formula_matches_rtl_tile_cycles(t):
    """Every RTL tile within 2 % with the committed constants (and with a fresh fit)."""
    pc = load_pe_cycles()
    assert tile_cycles(t["config"], pc) == pytest.approx(t["cycles"], rel=0.02)
    assert tile_cycles(t["config"], fit(DATA["tiles"])) == pytest.approx(t["cycles"], rel=0.02)


def test_committed_constants_are_the_fit():
    k, f = DATA["constants"], fit(DATA["tiles"])
    assert (k["overhead_ppu"], k["overhead_psum"], k["weight_switch_cycles"]) == \
        (f.overhead_ppu, f.overhead_psum, f.weight_switch_cycles)


def test_visited_ops_padding_skip():
    """Edge tile (pad 1 top/left, 3x3, C1 = 2): the 16 middle sweeps skip the padded row or
    column; first and final sweeps cover the whole 8x8 tile."""
    cfg = dict(R=3, S=3, C1=2, K1=1, P1=8, Q1=8, H_in=9, W_in=9, stride=1, pad_top=1, pad_left=1, role=3)
    # sweeps (r, s, c1): r = 0 or s = 0 lose row / column 0 (7 of 8); r = s = 0 loses both (7x7)
    n = 0
    for r in range(3):
        for s in range(3):
            for c1 in range(2):
                if (r, s, c1) in ((0, 0, 0), (2, 2, 1)):
                    n += 64
                else:
                    n += (7 if r == 0 else 8) * (7 if s == 0 else 8)
    assert visited_ops(cfg) == n == 1073
    assert visited_ops({**cfg, "pad_top": 0, "pad_left": 0}) == 1152


def test_live_bench_agrees_with_committed_data():
    """When the RTL bench has been run, its tile cycles must equal the committed data; if the PE
    was re-timed, re-run bench/pe_utilization.py and regenerate data/pe_tile_cycles.json."""
    if not LIVE.exists():
        pytest.skip("build/bench/pe_utilization.json not built (committed data checked above)")
    live = {t["name"]: t for t in json.loads(LIVE.read_text())["tiles"]}
    for t in DATA["tiles"]:
        assert t["name"] in live, t["name"]
        assert live[t["name"]]["config"] == t["config"], t["name"]
        assert live[t["name"]]["cycles"] == t["cycles"], (
            f"{t['name']}: RTL now {live[t['name']]['cycles']} cycles, data file {t['cycles']}: "
            "regenerate sim_models/simba/data/pe_tile_cycles.json")
    pc = load_pe_cycles(LIVE.parent)
    for t in live.values():
        assert tile_cycles(t["config"], pc) == pytest.approx(t["cycles"], rel=0.02), t["name"]


def test_refit_follows_a_retimed_pe(tmp_path):
    """A PE with 3 more pipeline cycles: re-fitting from its bench JSON moves the constants."""
    tiles = [{**t, "cycles": t["cycles"] + 3} for t in DATA["tiles"]]
    (tmp_path / "pe_utilization.json").write_text(json.dumps({"tiles": tiles}))
    pc = load_pe_cycles(tmp_path)
    assert pc.overhead_ppu == DATA["constants"]["overhead_ppu"] + 3
    assert "pe_utilization.json" in pc.source
    (tmp_path / "pe_utilization.json").write_text(json.dumps({"other": 1}))
    with pytest.raises(PECycleError, match="tiles"):
        load_pe_cycles(tmp_path)
    with pytest.raises(PECycleError):
        PECycles(-1, 0, 0)


def test_fit_finds_a_weight_switch_cost():
    """A PE that lost 2 cycles per weight block would be fitted with 2 more cycles of that cost
    (the measured RTL double-buffers the weight registers: ~0; fc1000's one cycle per
    back-to-back tile of 1-operation sweeps fits as 0.002)."""
    tiles = [{**t, "cycles": t["cycles"] + 2 * (t["config"]["R"] * t["config"]["S"] * t["config"]["K1"]
                                               * t["config"]["C1"])} for t in DATA["tiles"]]
    pc = fit(tiles)
    assert pc.weight_switch_cycles == pytest.approx(2.0 + DATA["constants"]["weight_switch_cycles"])
    assert (pc.overhead_ppu, pc.overhead_psum) == (DATA["constants"]["overhead_ppu"],
                                                   DATA["constants"]["overhead_psum"])
    for t in tiles:
        assert tile_cycles(t["config"], pc) == pytest.approx(t["cycles"], rel=0.02)
