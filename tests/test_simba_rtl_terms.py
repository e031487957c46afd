"""Simba system model: the RTL package/chiplet terms added in stop 21 (model.py), each
hand-computed against the model without it (issue 14; bench/simba_overheads.py compares the
phases with the package RTL)."""
import json
from pathlib import Path

import numpy as np
import pytest

from tessera.sim_models.simba.arch import load_arch
from tessera.sim_models.simba.chiplet_cycles import PRE_STOP21_TERMS, RTL_CONTROLLER
from tessera.sim_models.simba.layers import Layer
from tessera.sim_models.simba.model import _prepare, build_structure, evaluate_batch
from tessera.sim_models.simba.topology import chiplet_noc

OFF = PRE_STOP21_TERMS                          # the stop-21 terms at their "off" values
A0 = load_arch(**OFF, **RTL_CONTROLLER)         # every stop-21 term off, the RTL chiplet's controller
SMALL = Layer("t", C=16, K=16, R=3, S=3, H=6, W=6, stride=1, pad=1)
HOP = 3                                         # NoC cycles per hop (RTL), NoC clock = PE clock


def run(arch, kc, cc, pe, placement="local"):
    st = build_structure(SMALL, arch, kc, cc, 1, 1, placement=placement)
    return st, evaluate_batch(st, arch, *[[v] for v in pe])


def test_committed_terms_are_on():
    a = load_arch()
    assert (a.barrier_cycles, a.pe_tile_start_cycles, a.psum_drain_in_tile, a.mcast_cut_through,
            a.credit_window_packets, a.psum_window_packets, a.packet_heads, a.credit_batch) == (
        10.0, 4.0, 1, 1, 32, 2, 0, 0)       # heads and CREDIT ejection: experiments (simba_arch.json)


def test_rtl_term_tile_start_per_tile():
    """P1 = Q1 = 3 on the 6x6 output: 4 tiles, 4 cycles each (chiplet_cycles tile_start_cycles)."""
    _, r0 = run(A0, 1, 1, (1, 1, 1, 1, 3, 3))
    _, r1 = run(A0.with_(pe_tile_start_cycles=4.0), 1, 1, (1, 1, 1, 1, 3, 3))
    assert r1.comp[0, 0] - r0.comp[0, 0] == pytest.approx(16)


def test_rtl_term_psum_drain_of_a_chain_member():
    """cp = 2 (a PE chain of 2): K1 = 2, one 6x6 tile -> 72 beats of 8 x 24 bit = 2 flits of
    16 B each + ceil(72 / 5) = 15 heads = 159 NoC cycles; the tile pays 159 - 72 = 87 more.
    One PE (the chain's last, PPU) pays nothing."""
    a = A0.with_(psum_drain_in_tile=1)
    _, r0 = run(A0, 1, 1, (1, 2, 1, 1, 6, 6))
    _, r1 = run(a, 1, 1, (1, 2, 1, 1, 6, 6))
    assert r1.comp[0, 0] - r0.comp[0, 0] == pytest.approx(87)
    _, s0 = run(A0, 1, 1, (1, 1, 1, 1, 6, 6))
    _, s1 = run(a, 1, 1, (1, 1, 1, 1, 6, 6))
    assert s1.comp[0, 0] == pytest.approx(s0.comp[0, 0])


def test_rtl_term_barrier_master_and_noc_legs():
    """2 chiplets: + barrier_cycles 10 at the master + NoC legs (2 g + 2) x 3 each way, g = 1
    (Global PE (4,1) to NoP router (4,2)) = 10 + 24; one chiplet has no package barrier."""
    a = A0.with_(barrier_cycles=10.0)
    assert chiplet_noc(A0).gpe_to_nop == 1
    _, r0 = run(A0, 2, 1, (1, 1, 1, 1, 6, 6))
    _, r1 = run(a, 2, 1, (1, 1, 1, 1, 6, 6))
    assert r1.latency[0] - r0.latency[0] == pytest.approx(10 + 2 * (2 * 1 + 2) * HOP)
    _, s0 = run(A0, 1, 1, (1, 1, 1, 1, 6, 6))
    _, s1 = run(a, 1, 1, (1, 1, 1, 1, 6, 6))
    assert s1.latency[0] == pytest.approx(s0.latency[0])


def test_rtl_term_multicast_cut_through_first_tile():
    """kc = 2: the IA block is multicast from chiplet 0 to both.  A packet of min(16, 8) input
    columns = 8 words x 8 B = 4 cycles at 16 B/cycle waits whole in each router: chiplet 0's
    own NoC (gpe_to_pe_max routers), chiplet 1 over 1 NoP hop + nop_to_pe_max + 1 routers."""
    noc = chiplet_noc(A0)
    _, r0 = run(A0, 2, 1, (1, 1, 1, 1, 6, 6))
    _, r1 = run(A0.with_(mcast_cut_through=1), 2, 1, (1, 1, 1, 1, 6, 6))
    d = r1.own[0] - r0.own[0]
    assert d[0] == pytest.approx(noc.gpe_to_pe_max * 4)
    assert d[1] == pytest.approx((1 + noc.nop_to_pe_max + 1) * 4)


def test_rtl_term_data_credit_window():
    """One PE, 4 tiles of 2 x 5 rows x 5 columns = 10 packets of 5 words: round trip = 2 x
    lat_in (6 hops x 3) + the packet in ((5 x 8 + 16) / 16) + 5 words into the PE + 8; with a
    window of one packet every tile waits 10 round trips (the period), with 32 it does not bind."""
    lat_in = 6 * HOP
    rtt = 2 * lat_in + (5 * 8 + 16) / 16 + 5 + 8
    _, r0 = run(A0, 1, 1, (1, 1, 1, 1, 3, 3))
    _, r1 = run(A0.with_(credit_window_packets=1), 1, 1, (1, 1, 1, 1, 3, 3))
    t_in = 1600 / 16
    first = lat_in + t_in / 4 + r0.comp[0, 0] / 4
    assert r1.own[0, 0] == pytest.approx(first + 3 * 10 * rtt)
    _, r32 = run(A0.with_(credit_window_packets=32), 1, 1, (1, 1, 1, 1, 3, 3))
    assert r32.own[0, 0] == pytest.approx(r0.own[0, 0])


def test_rtl_term_psum_window_across_chiplets():
    """cc = 2, 4 tiles: chiplet 0 sends 2 x 9 = 18 beats per tile = 4 PSUM packets to chiplet
    1; with a window of 1 (2) packet(s) each tile waits 4 (2) PCREDIT round trips (route both
    ways + a packet of 5 beats x 2 flits + head + 5 beats popped + 8): 3 more periods of
    2 round trips each."""
    a1, a2 = A0.with_(psum_window_packets=1), A0.with_(psum_window_packets=2)
    st, r1 = run(a1, 1, 2, (1, 1, 1, 1, 3, 3))
    _, r2 = run(a2, 1, 2, (1, 1, 1, 1, 3, 3))
    rtt = 2 * _prepare(st, a1)["lat_ps"][0] + (5 * 2 + 1 + 5) + 8
    assert r1.own[0, 0] - r2.own[0, 0] == pytest.approx(3 * 2 * rtt)
    _, r0 = run(A0, 1, 2, (1, 1, 1, 1, 3, 3))
    assert r2.own[0, 0] > r0.own[0, 0]                 # window 2 binds too (2 x rtt > 648 / 4)


def test_rtl_term_packet_heads_on_the_input_delivery():
    """One PE, 4 tiles of 2 C0 blocks x 5 rows x 5 columns: 10 packets of 5 words per tile, a
    16-B head each -> 4 x 10 x 16 = 640 B more through the Global PE port (1600 -> 2240 B at
    16 B/cycle): the first tile arrives (2240 - 1600) / 16 / 4 = 10 cycles later."""
    _, r0 = run(A0, 1, 1, (1, 1, 1, 1, 3, 3))
    _, r1 = run(A0.with_(packet_heads=1), 1, 1, (1, 1, 1, 1, 3, 3))
    assert r1.own[0, 0] - r0.own[0, 0] == pytest.approx(10)


def test_rtl_term_global_pe_ejection_credits():
    """kp = 8 PEs share each input tile (multicast); P1 = Q1 = 1: 36 tiles of 2 x 3 rows = 6
    one-column packets.  With one CREDIT per packet the Global PE's ejection port takes 8 x 6
    = 48 credit flits + 576 / 16 / 36 = 1 OUT per tile: period 49 instead of the controller's
    14 SEND words x 3 = 42 (the bound without the term)."""
    _, r0 = run(A0, 1, 1, (8, 1, 1, 1, 1, 1))
    _, r1 = run(A0.with_(credit_batch=1), 1, 1, (8, 1, 1, 1, 1, 1))
    assert r1.own[0, 0] - r0.own[0, 0] == pytest.approx(35 * (49 - 42))
    _, r4 = run(A0.with_(credit_batch=4), 1, 1, (8, 1, 1, 1, 1, 1))    # 12 + 1 < 42: no bound
    assert r4.own[0, 0] == pytest.approx(r0.own[0, 0])


BENCH = Path(__file__).resolve().parents[1] / "build" / "bench" / "package_layer.json"


@pytest.mark.skipif(not BENCH.exists(), reason="needs build/bench/package_layer.json (bench/package_layer.py)")
def test_overheads_bench_terms_move_the_model_toward_the_rtl(tmp_path):
    """bench/simba_overheads.py on the package RTL runs: with the stop-21 terms the Simba
    model's compute window and barrier are closer to the RTL's (geometric mean over runs)."""
    import sys
    sys.path.insert(0, str(BENCH.parents[2] / "bench"))
    import simba_overheads as so
    out = tmp_path / "o.json"
    assert so.main(["--package-json", str(BENCH), "--out", str(out)]) == 0
    g = json.loads(out.read_text())["ratio_to_rtl_geomean"]
    for ph in ("window", "barrier"):
        assert abs(np.log(g["simba_after"][ph])) < abs(np.log(g["simba_before"][ph]))
    assert 0.85 <= g["simba_after"]["barrier"] <= 1.15


def test_rtl_copies_in_simba_arch_are_checked_for_drift(tmp_path):
    """simba_arch.json's copies of RTL values (barrier master, tile start, credit loop, RTL
    chiplet defaults) are checked by rtl_constants.drift(): a changed copy is reported."""
    from tessera.sim_models.simba import rtl_constants as rc
    from tessera.sim_models.simba.arch import DATA
    assert rc.drift(None) == []
    src = json.loads((DATA / "simba_arch.json").read_text())
    for k, v in (("barrier_cycles", 20.0), ("pe_tile_start_cycles", 6.0), ("credit_fixed_cycles", 4.0),
                 ("psum_packet_beats", 4), ("credit_window_packets", 16)):
        bad = json.loads(json.dumps(src))
        bad["params"][k]["value"] = v
        f = tmp_path / f"{k}.json"
        f.write_text(json.dumps(bad))
        assert any(x.startswith(k) for x in rc.drift(None, arch_path=f)), k


def test_rtl_bench_mapping_is_pre_stop21():
    """The archs of the chiplet/package RTL benches (chiplet_arch / package_arch default) keep
    the stop-21 terms at PRE_STOP21_TERMS, so bench/chiplet_layer.py maps res3b_branch2b as the
    resolved issue-17 RTL table was run (main before stop 21: P1=1 Q1=2, 4 passes, model 37,535
    cycles for pass 0; with the terms on the mapper picks P1=3 Q1=4, 5 passes)."""
    from tessera.hdl.chiplet.compiler import compile_layer
    from tessera.hdl.chiplet.config import ChipletConfig
    from tessera.sim_models.simba.chiplet_cycles import (PRE_STOP21_TERMS, chiplet_arch,
                                                         map_for_chiplet)
    from tessera.sim_models.simba.layers import load_network
    cfg = ChipletConfig(nx=4, ny=4).validate()
    a = chiplet_arch(cfg)
    assert {k: getattr(a, k) for k in PRE_STOP21_TERMS} == PRE_STOP21_TERMS
    assert chiplet_arch(cfg, rtl_terms=True).pe_tile_start_cycles == load_arch().pe_tile_start_cycles
    L = {l.name: l for l in load_network("resnet50")}["res3b_branch2b"]
    res, n = map_for_chiplet(L, cfg, samples=300, seed=0)
    assert res.mapping.short() == "chip K1C1P1Q1 pe K16C1P1Q1 P1=1 Q1=2"
    assert len(compile_layer(L, res.mapping, cfg)) == 4
