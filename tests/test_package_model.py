"""Package cycle model (sim_models/simba/package_cycles.py) and the RTL-measured constants
(sim_models/simba/rtl_constants.py): per-chiplet completion times, NoP latency / rate / distance
trends (Fig. 7), non-uniform partitions, the mapper adapter, and the drift check that fails when
a model constant the RTL measures differs from its measurement."""
import json
from dataclasses import replace

import pytest

from tessera.golden import chiplet as gc
from tessera.hdl.package.compiler import compile_package, small_package
from tessera.sim_models.simba import rtl_constants as rc
from tessera.sim_models.simba.layers import Layer
from tessera.sim_models.simba.model import Mapping
from tessera.sim_models.simba.package_cycles import (default_constants, map_for_package,
                                                     nop_flits, package_cycles)

PKG = small_package(2, 2)
L1 = Layer("c1", 16, 32, 1, 1, 8, 8)
M1 = Mapping(4, 1, 1, 1, 1, 2, 2, 1, 2, 8)


def test_per_chiplet_completion():
    pp = compile_package(L1, M1, PKG)
    r = package_cycles(pp)
    per = r["chiplet_cycles"]
    assert len(per) == 4 and r["cycles"] == max(per)
    assert all(v > 0 for v in per)
    # the IA home (chiplet 0) multicasts to all: its SENDs finish with the farthest consumer,
    # consumers farther from it finish later than its neighbours
    assert [c.chiplet for c in pp.chiplets if c.home_of is not None] == [0]
    assert per[3] > per[1] and per[3] > per[2]
    assert set(r["provenance"]) >= {"noc_hop_cycles", "nop_hop_cycles", "barrier_cycles", "instr_cycles"}


def test_nop_latency_and_rate_move_remote_chiplets():
    pp = compile_package(L1, M1, PKG)
    base = default_constants(PKG)
    a = package_cycles(pp, base)
    b = package_cycles(pp, replace(base, nop_hop_cycles=base.nop_hop_cycles + 40))
    c = package_cycles(pp, replace(base, nop_flit_cycles=4.0))
    assert b["cycles"] > a["cycles"] and c["cycles"] > a["cycles"]
    assert all(y >= x for x, y in zip(a["chiplet_cycles"], b["chiplet_cycles"]))


def test_fig7_far_apart_is_slower():
    """The same 4-chiplet slice on a 4x4 package: adjacent (0,1,4,5) vs corners (0,3,12,15)."""
    pkg = small_package(4, 4)
    T = gc.layer_tensors(L1, 0)
    near = package_cycles(compile_package(L1, M1, pkg, T, binding=(0, 1, 4, 5)))
    far = package_cycles(compile_package(L1, M1, pkg, T, binding=(0, 3, 12, 15)))
    assert far["cycles"] > near["cycles"]
    assert nop_flits(compile_package(L1, M1, pkg, binding=(0, 3, 12, 15))) > \
        nop_flits(compile_package(L1, M1, pkg, binding=(0, 1, 4, 5)))


def test_nonuniform_shifts_completion():
    """Less K work on a chiplet -> it completes earlier (what §5.1's partition exploits)."""
    L = Layer("nu", 8, 48, 1, 1, 8, 8)
    u = package_cycles(compile_package(L, Mapping(2, 1, 1, 1, 2, 1, 1, 1, 2, 8), PKG))
    n = package_cycles(compile_package(L, Mapping(2, 1, 1, 1, 2, 1, 1, 1, 2, 8, k_ext=(32, 16)), PKG))
    assert n["chiplet_cycles"][1] < u["chiplet_cycles"][1]


def test_mapper_adapter_maps_on_the_package():
    r = map_for_package(Layer("m", 16, 32, 3, 3, 8, 8, 1, 1), PKG, samples=60)
    assert r.mapping.n_chiplets == 4
    pp = compile_package(Layer("m", 16, 32, 3, 3, 8, 8, 1, 1), r.mapping, PKG)
    assert package_cycles(pp)["cycles"] > 0


# ------------------------------------------------------------------ calibration / drift
def test_constants_have_provenance():
    k = rc.load()
    for name in ("noc_hop_cycles", "nop_hop_cycles", "barrier_cycles", "instr_cycles",
                 "pe_overhead_ppu", "pe_weight_switch_cycles"):
        assert name in k.values and k.provenance[name]
    pc = default_constants(PKG)
    assert "nop_link_latency" in pc.provenance["nop_hop_cycles"] or "RTL" in pc.provenance["nop_hop_cycles"]


def test_no_drift_against_live_rtl_benches():
    """Fails when a committed constant differs from the RTL bench JSON in build/bench (re-run
    the bench and commit the measurement in data/rtl_constants.json)."""
    assert rc.drift() == []


def test_drift_detected(tmp_path):
    """A re-timed router (4 cycles per hop) / a measured NoP hop not committed -> drift."""
    (tmp_path / "noc_throughput.json").write_text(json.dumps([{"mesh": "4x4", "packet_flits": 1,
                                                               "link_latency": 1,
                                                               "zero_load_cycles_per_hop": 4.0}]))
    (tmp_path / "package_layer.json").write_text(json.dumps({"measured": {"nop_hop_cycles": 9.0}}))
    d = rc.drift(tmp_path)
    assert any(s.startswith("noc_hop_cycles") for s in d)
    assert any(s.startswith("nop_hop_cycles") for s in d)
    k = rc.load(tmp_path)
    assert k["noc_hop_cycles"] == 4.0 and "noc_throughput.json" in k.provenance["noc_hop_cycles"]
    assert k["nop_hop_cycles"] == 9.0
    assert default_constants(PKG, tmp_path).nop_hop_cycles == 9.0


def test_credit_loops_derived_from_the_rtl_structure():
    """No credit term is fitted on package runs: the committed residual is 0 and a credit loop
    costs route + packet flits + words popped into the PE + the chiplet model's
    credit_fixed_cycles; with one credit per lane the credit loop bounds the period and moves
    with that handling."""
    from tessera.sim_models.simba.chiplet_cycles import default_constants as chip_defaults
    from tessera.sim_models.simba.package_cycles import credit_handling
    data = json.loads(rc.DATA.read_text())["constants"]["credit_overhead_cycles"]
    assert data["value"] == 0.0 and data["bench"] is None and "derived" in data["source"]
    cc, pe = chip_defaults()
    pc = default_constants(PKG)
    assert credit_handling(9, 8, cc, pc) == 9 + 8 + cc.credit_fixed_cycles + pc.credit_overhead_cycles
    pkg = small_package(2, 2, credit_window=1)
    pp = compile_package(L1, M1, pkg)
    a = package_cycles(pp, default_constants(pkg))
    assert any(t["period_bound"] == "credit_window" for t in a["terms"].values())
    b = package_cycles(pp, default_constants(pkg), chiplet_consts=(replace(cc, credit_fixed_cycles=cc.credit_fixed_cycles + 20), pe))
    assert b["cycles"] > a["cycles"]
    off = package_cycles(pp, replace(default_constants(pkg), credit_structure=False))
    assert off["cycles"] < a["cycles"]


def test_readback_send_end_variants():
    """The read-back experiment (readback_arrival=False: a SEND ends when its last flit has left
    the Global PE, the RTL's done) ends no chiplet later than the default (data at the host +
    CREDIT back), and the last chiplet, queued on the one host port, earlier."""
    pp = compile_package(*CASE_PQ)
    a = package_cycles(pp, replace(default_constants(PKG), readback_arrival=False))
    b = package_cycles(pp)
    assert all(x <= y for x, y in zip(a["chiplet_cycles"], b["chiplet_cycles"]))
    assert a["cycles"] < b["cycles"]


CASE_PQ = (Layer("pq", 8, 16, 3, 3, 8, 8, 1, 1), Mapping(1, 1, 2, 2, 2, 1, 2, 1, 2, 4), PKG)
