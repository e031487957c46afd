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
    """Fig. 7 trend: the bench's slice (res4a_branch1 C16 K32 H8, Listing 1's K split over 4
    one-PE chiplets) on a 4x4 package, adjacent (0,1,4,5) vs corners (0,3,12,15); and L1 on
    chiplets of 2x2 PEs: every chiplet's compute ends later far apart (its total also depends
    on how much of the read-back the longer routes buffer, see test_readback_*)."""
    from tessera.sim_models.simba.layers import load_network
    L7 = replace(next(l for l in load_network("resnet50") if l.name == "res4a_branch1"),
                 C=16, K=32, H=8, W=8)
    M7 = Mapping(4, 1, 1, 1, 1, 1, 1, 1, 4, 4)
    pkg7 = small_package(4, 4, nx=1, ny=1)
    near = package_cycles(compile_package(L7, M7, pkg7, binding=(0, 1, 4, 5)))
    far = package_cycles(compile_package(L7, M7, pkg7, binding=(0, 3, 12, 15)))
    assert far["cycles"] > near["cycles"]
    pkg = small_package(4, 4)
    T = gc.layer_tensors(L1, 0)
    near = package_cycles(compile_package(L1, M1, pkg, T, binding=(0, 1, 4, 5)))
    far = package_cycles(compile_package(L1, M1, pkg, T, binding=(0, 3, 12, 15)))
    assert max(t["pe_fin"] for t in far["timeline"].values() if t["pe_fin"]) > \
        max(t["pe_fin"] for t in near["timeline"].values() if t["pe_fin"])
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
    k = replace(default_constants(pkg), nop_mcast_rule=False)     # the credit loop alone
    a = package_cycles(pp, k)
    assert any(t["period_bound"] == "credit_window" for t in a["terms"].values())
    b = package_cycles(pp, k, chiplet_consts=(replace(cc, credit_fixed_cycles=cc.credit_fixed_cycles + 20), pe))
    assert b["cycles"] > a["cycles"]
    off = package_cycles(pp, replace(k, credit_structure=False))
    assert off["cycles"] < a["cycles"]


def test_readback_send_end_variants():
    """A read-back SEND ends when its last flit has left the Global PE (hdl/global_pe/send.py;
    the default): no chiplet ends later than with the ablation readback_arrival (data at the
    host + CREDIT back), the last one, queued on the one host port, earlier; and SENDs of
    several chiplets overlap: chiplets whose window fits the buffers of their route end
    within the host port's time for one window of each other."""
    pp = compile_package(*CASE_PQ)
    a = package_cycles(pp)
    b = package_cycles(pp, replace(default_constants(PKG), readback_arrival=True))
    assert all(x <= y for x, y in zip(a["chiplet_cycles"], b["chiplet_cycles"]))
    assert a["cycles"] < b["cycles"]
    ready = [t["wait_done"] for t in a["timeline"].values()]
    after = [d - r for d, r in zip(a["chiplet_cycles"], ready)]
    win = max(w.n for ch in pp.chiplets for w in ch.windows)
    assert max(after) - min(after) < win


def test_mcast_router_rule_drains_to_free_space():
    """The router rule per multicast packet and hop (chiplet and NoP routers): measured on the
    bare 4x5 mesh (bench/noc_mcast.py measure, bench/package_mcast_rule.py): B=17/max 17/5
    flits 12.00, B=32/max 17/5 flits 5.00, B=16/max 9/8 flits 11.00, B=16/max 9/4 flits 4.00."""
    from tessera.sim_models.simba.chiplet_cycles import mcast_hop_cycles
    assert mcast_hop_cycles(17, 17, 1, 5) == 12
    assert mcast_hop_cycles(32, 17, 1, 5) == 5
    assert mcast_hop_cycles(16, 9, 1, 8) == 11
    assert mcast_hop_cycles(16, 9, 1, 4) == 4
    assert mcast_hop_cycles(10, 9, 4, 7, flit_cycles=2) == (7 + 6) * 2 + 8


def test_nop_multicast_rule_paces_remote_consumers():
    """K split over chiplets: the home multicasts its input over NoP routers whose buffers
    (max(max packet, 2 x link latency + 2) = 10 flits) cannot hold a max packet beside the
    previous one, so the router rule with the NoP link latency paces the round of every
    consumer on another chiplet (the home's own PEs, before the NoP, run ahead: RTL Fig. 7
    4x4 adjacent run, home PEs done at 372, remote at 508-518); NoP buffers that can hold it
    (32 flits) leave the chiplet's own bounds."""
    pp = compile_package(L1, M1, PKG)
    a = package_cycles(pp)
    home = [c.chiplet for c in pp.chiplets if c.consumers][0]
    assert all((t["period_bound"] == "nop_mcast") == (c != home) for c, t in a["terms"].items())
    big = replace(small_package(2, 2), nop_buffer_flits=32)
    b = package_cycles(compile_package(L1, M1, big), default_constants(big))
    assert all(t["period_bound"] != "nop_mcast" for t in b["terms"].values())
    assert b["cycles"] < a["cycles"]


CASE_PQ = (Layer("pq", 8, 16, 3, 3, 8, 8, 1, 1), Mapping(1, 1, 2, 2, 2, 1, 2, 1, 2, 4), PKG)


# Fig. 7's slice on a 4x4 NoP of one-PE chiplets (bench/package_layer.py, RTL runs of stop 20)
L7 = Layer("res4a_branch1_C16K32H8W8", 16, 32, 1, 1, 8, 8, 2, 0)
M7 = Mapping(4, 1, 1, 1, 1, 1, 1, 1, 4, 4)
PKG7 = small_package(4, 4, nx=1, ny=1)


def test_nop_multicast_cut_through_latency():
    """A multicast packet goes on from a router only 2 cycles after its tail arrived
    (hdl/noc/router.py), so past the home's NoP router each router (the NoP routers of the route
    and the consumer chiplet's NoC routers, gateway included) adds pkt - 1 to the remote
    consumers' first tile; the home's own PEs keep the chiplet model's terms (RTL 4x4 Fig. 7:
    remote PEs end 10 cycles later per NoP hop, wormhole 6)."""
    from tessera.hdl.chiplet.config import node_map
    for b in ((0, 1, 4, 5), (0, 3, 12, 15)):
        pp = compile_package(L7, M7, PKG7, binding=b)
        k = default_constants(PKG7)
        on, off = package_cycles(pp, k), package_cycles(pp, replace(k, mcast_cut_through=False))
        cfg = PKG7.chiplet_cfg()
        nm = node_map(cfg)
        pkt = min(cfg.max_tile, pp.chiplets[b[1]].ps.jobs[0].cfg.W_in) + 1
        xy = PKG7.chiplets()
        assert on["terms"][b[0]]["first_tile"] == off["terms"][b[0]]["first_tile"]
        for c in b[1:]:
            hops = abs(xy[c][0] - xy[b[0]][0]) + abs(xy[c][1] - xy[b[0]][1])
            routers = hops + abs(nm.gateway[0] - nm.pes[0][0]) + abs(nm.gateway[1] - nm.pes[0][1]) + 1
            assert on["terms"][c]["first_tile"] - off["terms"][c]["first_tile"] == routers * (pkt - 1)


def test_home_send_completes_at_the_global_pe():
    """send.py: a SEND completes when its last flit leaves the engine into the Global PE's
    router.  Fig. 7's home sends 8 packets, which the route to its NoP router buffers whole, so
    its SEND ends at injection and the home ends before its remote consumers (RTL 4x4 far: home
    501, consumers 642-672; the consumer rule had it at 625); a multi-round pass whose SEND
    the route cannot hold keeps the consumer rule (back-pressure reaches the Global PE)."""
    pp = compile_package(L7, M7, PKG7, binding=(0, 3, 12, 15))
    k = default_constants(PKG7)
    a = package_cycles(pp, k)
    b = package_cycles(pp, replace(k, send_done_at_gpe=False))
    assert a["timeline"][0]["sends_done"] < a["timeline"][0]["pe_done"] < b["timeline"][0]["sends_done"]
    assert a["chiplet_cycles"][0] < min(a["chiplet_cycles"][c] for c in (3, 12, 15))
    assert b["chiplet_cycles"][0] > a["chiplet_cycles"][0] + 50
    pp2 = compile_package(L1, M1, PKG)
    x = package_cycles(pp2)
    y = package_cycles(pp2, replace(default_constants(PKG), send_done_at_gpe=False))
    assert x["chiplet_cycles"] == y["chiplet_cycles"]
