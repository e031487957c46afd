"""Monad performance model (§III): reuse analysis, stage delays, network contention."""
import pytest

from tessera.sim_models.monad import network as nw
from tessera.sim_models.monad.perf import (Level, Mapping, ModelError, Tensor, evaluate_op, footprint,
                                           load_workload, traffic)
from tessera.sim_models.monad.system import Design, evaluate

A = Tensor("A", (("i",), ("k",)))
B = Tensor("B", (("k",), ("j",)))
C = Tensor("C", (("i",), ("j",)))
R = {"i": 4, "j": 4, "k": 4}
T = {"i": 2, "j": 2, "k": 2}


def test_traffic_hand_computed():
    # order i, j, k (k innermost): A and B re-fetched every step, C stays (output stationary)
    assert traffic(R, T, ("i", "j", "k"), A) == (32, 0)
    assert traffic(R, T, ("i", "j", "k"), B) == (32, 0)
    assert traffic(R, T, ("i", "j", "k"), C, True) == (0, 16)
    # order k, i, j: A reused across j, C spills partial sums: 32 writes, 16 read-backs
    assert traffic(R, T, ("k", "i", "j"), A) == (16, 0)
    assert traffic(R, T, ("k", "i", "j"), C, True) == (16, 32)
    # whole region in the buffer: every tensor moved once
    assert traffic(R, R, ("i", "j", "k"), A) == (16, 0)


def test_sliding_window_footprint():
    ifmap = Tensor("x", (("c",), ("p", "r"), ("q", "s")))
    assert footprint(ifmap, {"c": 2, "p": 4, "r": 3, "q": 5, "s": 3}) == 2 * 6 * 7


def _mm_mapping(px=8, py=8, chip=(1, 1), order3=("i", "j", "k")):
    return Mapping(Level(chip, ("i", "j"), ("i", "j", "k"), ()),
                   Level((1, 1), ("", ""), ("i", "j", "k"), ()),
                   Level((px, py), ("i", "j"), order3, ()))


def _op(n=64):
    from tessera.sim_models.monad.perf import make_op
    return make_op({"name": "mm", "loops": {"i": n, "j": n, "k": n},
                    "inputs": [{"name": "A", "idx": [["i"], ["k"]]}, {"name": "B", "idx": [["k"], ["j"]]}],
                    "output": {"name": "C", "idx": [["i"], ["j"]]}})


def test_compute_delay_hand_computed():
    # 64^3 MACs on one 8x8 array, output stationary: 8*8*64 = 4096 cycles, U = 1
    r = evaluate_op(_op(), _mm_mapping())
    assert r.compute_cycles == 4096
    assert r.util == pytest.approx(1.0)
    # 4 chiplets split i, j: 1024 cycles each
    r4 = evaluate_op(_op(), _mm_mapping(chip=(2, 2)))
    assert r4.compute_cycles == 1024
    assert r4.ext_in == {"A": 32 * 64, "B": 64 * 32}
    # a 6x6 array on 64: ceil(64/6) = 11 -> 11*11*64 cycles, U = 4096/(36*... )
    r6 = evaluate_op(_op(), _mm_mapping(6, 6))
    assert r6.compute_cycles == 11 * 11 * 64
    assert r6.util == pytest.approx(64 ** 3 / 36 / (11 * 11 * 64))


def test_more_pes_never_slower():
    prev = None
    for side in (1, 2, 4, 8, 16):
        c = evaluate_op(_op(), _mm_mapping(side, side)).compute_cycles
        assert prev is None or c <= prev
        prev = c


def test_stationary_order_saves_buffer_energy():
    os_ = evaluate_op(_op(), _mm_mapping(order3=("i", "j", "k")))
    ws = evaluate_op(_op(), _mm_mapping(order3=("k", "i", "j")))
    assert os_.energy_pj["core_buf"] < ws.energy_pj["core_buf"]


def test_network_proportional_sharing_fig5b():
    # linear 1x3 mesh: e01 (0->2) and e12 (1->2) share channel 1->2, each gets half
    topo = nw.Topology(0, 3)
    assert topo.route(0, 2) == [(0, 1), (1, 2)]
    flows = [nw.Flow(0, 2, 1000.0, 10.0, "e01"), nw.Flow(1, 2, 1000.0, 10.0, "e12")]
    d, hops = nw.stage_delays(topo, flows, 20.0, 64.0, 8.0)
    assert hops == [2, 1]
    assert d["e01"] == 2 * 8 + 1000 / 10.0
    assert d["e12"] == 1 * 8 + 1000 / 10.0
    # unequal requirements: 3:1 split of the shared channel
    flows = [nw.Flow(0, 2, 1000.0, 30.0, "a"), nw.Flow(1, 2, 1000.0, 10.0, "b")]
    d, _ = nw.stage_delays(topo, flows, 20.0, 64.0, 8.0)
    assert d["a"] == 16 + 1000 / 15.0 and d["b"] == 8 + 1000 / 5.0
    assert nw.hotspot(topo, flows) == 40.0


def test_routing():
    ring = nw.Topology(2, 6)
    assert ring.route(0, 4) == [(0, 5), (5, 4)]
    assert nw.Topology(3, 6).route(0, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    mesh = nw.Topology(1, 4)            # YX on 2x2
    assert mesh.route(0, 3) == [(0, 2), (2, 3)]
    assert nw.Topology(0, 4).route(0, 3) == [(0, 1), (1, 3)]
    assert [mesh.degree(i) for i in range(4)] == [2, 2, 2, 2]
    with pytest.raises(nw.NetworkError):
        nw.Topology(9, 4)


def _transformer_design(bw=None, net=0):
    wl = load_workload("transformer")
    m = Mapping(Level((1, 2), ("i", "j"), ("i", "j", "k"), ()),
                Level((2, 2), ("i", "j"), ("k", "i", "j"), (("i", 32), ("j", 32))),
                Level((8, 8), ("i", "j"), ("k", "i", "j"), ()))
    return wl, Design((m,) * 5, 0, net, (), bw)


def test_more_bandwidth_never_more_latency():
    wl, _ = _transformer_design()
    lats = [evaluate(wl, _transformer_design(bw)[1]).latency_ns for bw in (0.5, 1, 2, 4, 8, 16, 64, 256)]
    assert all(a >= b for a, b in zip(lats, lats[1:]))
    assert lats[0] > lats[-1]


def test_hotspot_bandwidth_sizes_io_area_and_cost():
    wl, d = _transformer_design()
    r = evaluate(wl, d)
    r_hi = evaluate(wl, _transformer_design(r.link_bw * 10)[1])
    assert r_hi.area_mm2 > r.area_mm2 and r_hi.cost_usd > r.cost_usd
    assert r_hi.latency_ns <= r.latency_ns
    # pipelined latency (experiment rule): longest path + (steps-1) x longest stage
    from tessera.sim_models.monad.perf import hardware_overrides
    with hardware_overrides(latency_rule="pipelined"):
        assert evaluate(wl, d).latency_ns >= max(r.stages.values()) * wl.pipeline_steps
    assert r.throughput == pytest.approx(1 / max(r.stages.values()))


def test_bad_mapping_rejected():
    bad = Mapping(Level((1, 1), ("x", ""), (), ()), Level(), Level())
    with pytest.raises(ModelError):
        evaluate_op(_op(), bad)
    with pytest.raises(ModelError):
        load_workload("nope")
    wl, d = _transformer_design()
    with pytest.raises(ModelError):
        evaluate(wl, Design(d.mappings, 0, 0, (0, 1, 2)))


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::ResourceWarning")   # inside scalesim
def test_compute_model_vs_scalesim():
    """Independent cycle-level check: SCALE-Sim (output stationary, 8x8) vs the model.
    The model ignores the systolic fill/drain of every fold (~2x8 cycles per fold), so it
    is lower by about 16/K for K-deep folds; the error must stay within that bound."""
    pytest.importorskip("scalesim")
    from tessera.sim_models.monad.validate import scalesim_cycles
    gemms = [(64, 64, 64), (32, 48, 128), (64, 32, 256)]
    sim = scalesim_cycles(gemms)
    for (m, n, k), s in zip(gemms, sim):
        from tessera.sim_models.monad.perf import make_op
        op = make_op({"name": "g", "loops": {"i": m, "j": n, "k": k},
                      "inputs": [{"name": "A", "idx": [["i"], ["k"]]}, {"name": "B", "idx": [["k"], ["j"]]}],
                      "output": {"name": "C", "idx": [["i"], ["j"]]}})
        model = evaluate_op(op, _mm_mapping()).compute_cycles
        assert model == -(-m // 8) * -(-n // 8) * k
        assert model < s                                   # fill/drain is never free
        assert (s - model) / s <= 16.0 / k                 # ~2x8 cycles per fold, nothing else


def test_port_bandwidth_from_io_area_hand_computed():
    """§IV-B: bw = D_bw x reserved I/O area / N_link.  10 chiplets on a 3x4 mesh: an
    interior chiplet has 4 neighbours -> 8 links through bumps on organic/passive, 2 on
    an active interposer (routers in the interposer); a ring node has 2 neighbours."""
    import dataclasses
    wl, d = _transformer_design()
    assert d.n_chiplets == 10
    bw = {p: evaluate(wl, dataclasses.replace(d, packaging=p)).link_bw for p in range(3)}
    assert bw[0] == pytest.approx(125.0 * 0.5 / 8)           # 7.8 GB/s (slowest channel)
    assert bw[1] == pytest.approx(750.0 * 0.5 / 8)
    assert bw[2] == pytest.approx(750.0 * 0.5 / 2)
    assert evaluate(wl, dataclasses.replace(d, network=2)).link_bw == pytest.approx(125.0 * 0.5 / 4)
    # the reserved area is the I/O area of every chiplet: die area = compute + io_mm2
    r = evaluate(wl, d)
    r2 = evaluate(wl, dataclasses.replace(d, io_mm2=2.0))
    assert [b - a for a, b in zip(r.chiplet_areas, r2.chiplet_areas)] == pytest.approx([1.5] * 10)


def test_packaging_network_and_io_area_move_latency():
    """Packaging and network change the hotspot's bandwidth and so the latency (§V-C);
    more I/O area buys latency with cost."""
    import dataclasses
    wl, d = _transformer_design()
    r = [evaluate(wl, dataclasses.replace(d, packaging=p)) for p in range(3)]
    assert r[0].latency_ns > r[1].latency_ns > r[2].latency_ns
    assert r[0].cost_usd < r[1].cost_usd < r[2].cost_usd
    assert r[0].energy_pj > r[1].energy_pj                   # 0.5 vs 0.25 pJ/bit die-to-die
    lat_net = {n: evaluate(wl, dataclasses.replace(d, network=n)).latency_ns for n in range(5)}
    assert len({round(v) for v in lat_net.values()}) >= 3
    io = [evaluate(wl, dataclasses.replace(d, io_mm2=a)) for a in (0.25, 0.5, 1.0, 2.0)]
    assert all(a.latency_ns > b.latency_ns for a, b in zip(io, io[1:]))
    assert all(a.cost_usd < b.cost_usd for a, b in zip(io, io[1:]))
    with pytest.raises(ModelError):
        evaluate(wl, dataclasses.replace(d, io_mm2=0.0))


def test_link_bandwidth_rules_for_sensitivity():
    """hardware ``link_bw_rule``: "hotspot" sizes every channel to the hotspot's
    requirement (the paper's §IV-B sizing: the hotspot flow's transfer then lasts
    its compute stage), "unlimited" leaves only router hops; overrides end with
    the block."""
    from tessera.sim_models.monad.network import Topology, hotspot
    from tessera.sim_models.monad.perf import hardware, hardware_overrides
    wl, d = _transformer_design()
    base = evaluate(wl, d)
    with hardware_overrides(link_bw_rule="unlimited"):
        inf = evaluate(wl, d)
    with hardware_overrides(link_bw_rule="unlimited", dram_bw_bytes_per_cycle=1e12):
        free = evaluate(wl, d)
    with hardware_overrides(link_bw_rule="hotspot"):
        hot = evaluate(wl, d)
    assert "link_bw_rule" not in hardware() and evaluate(wl, d).latency_ns == base.latency_ns
    assert free.latency_ns < inf.latency_ns < base.latency_ns
    assert inf.chiplet_areas == base.chiplet_areas          # I/O area stays the io field's
    # no bandwidth left to wait for: a transfer stage is its hop delays only (<= 12 hops x t_s)
    t_s = hardware()["router_delay_cycles"]
    assert max(v for k, v in free.stages.items() if not k.startswith("v:")) <= 12 * t_s + 1e-6
    # hotspot rule: every channel carries the hotspot's summed requirement, so (DRAM aside) a
    # flow gets at least its bwr = volume / min(D(v_i), D(v_j)): no transfer outlasts its stages
    with hardware_overrides(link_bw_rule="hotspot", dram_bw_bytes_per_cycle=1e12):
        hot_free = evaluate(wl, d)
    comp = max(v for k, v in hot_free.stages.items() if k.startswith("v:"))
    xfer = [v for k, v in hot_free.stages.items() if not k.startswith("v:")]
    assert max(xfer) <= comp + 12 * t_s + 1e-6 and max(xfer) > 0.5 * comp
    assert hot.link_bw != base.link_bw and hot.area_mm2 != base.area_mm2     # I/O area follows bw
    with hardware_overrides(link_bw_rule="nope"), pytest.raises(ModelError):
        evaluate(wl, d)


def test_latency_rule_path_is_the_paper_equation():
    """hardware ``latency_rule`` "path" (the default): latency is §III-C's Lat = max
    over paths of the summed stage delays of one chunk; "pipelined" (the former
    default, an experiment setting) adds (steps - 1) x the longest stage."""
    from tessera.sim_models.monad.perf import hardware, hardware_overrides
    wl, d = _transformer_design()
    one = evaluate(wl, d)
    with hardware_overrides(latency_rule="pipelined"):
        base = evaluate(wl, d)
    assert hardware()["latency_rule"] == "path" and evaluate(wl, d).latency_ns == one.latency_ns
    longest = max(base.stages.values())          # ns
    assert wl.pipeline_steps > 1
    assert base.latency_ns == pytest.approx(one.latency_ns + (wl.pipeline_steps - 1) * longest)
    # the path by hand: the longer of mm0 -> mm2 -> mm4 and mm1 -> mm3 -> mm4
    st = one.stages
    by_hand = max(st["in:mm0"] + st["v:mm0"] + st["in:mm2"] + st["v:mm2"],
                  st["in:mm1"] + st["v:mm1"] + st["in:mm3"] + st["v:mm3"])
    by_hand += st["in:mm4"] + st["v:mm4"] + st.get("out:mm4", 0.0)
    assert one.latency_ns == pytest.approx(by_hand)
    assert one.energy_pj == base.energy_pj and one.cost_usd == base.cost_usd
    with hardware_overrides(latency_rule="nope"), pytest.raises(ModelError):
        evaluate(wl, d)


def test_latency_is_one_chunk_so_ratios_do_not_depend_on_the_chunk_count():
    """Every D(v) on the latency path is one chunk's (compute cycles and transfer
    volumes / pipeline_steps), so a design's latency with 8 chunks is its 1-chunk
    latency / 8 (up to the per-hop router delay t_s, which does not shrink) and
    the latency ratio of two designs (what Fig 8 reports) is the same for 1 and 8
    chunks.  Under the makespan of all chunks ("pipelined") neither holds."""
    import dataclasses
    import random
    from tessera.sim_models.monad.space import Space
    wl8 = load_workload("transformer")
    wl1 = dataclasses.replace(wl8, pipeline_steps=1)
    sp = Space(wl8, 4096)
    rng = random.Random(3)
    lat = []
    while len(lat) < 4:
        low = sp.full_low(sp.random_low(rng))
        try:
            d = sp.decode(low, sp.random_high(low, rng))
            lat.append((evaluate(wl8, d).latency_ns, evaluate(wl1, d).latency_ns))
        except ValueError:
            continue
    for l8, l1 in lat:
        assert l8 * wl8.pipeline_steps == pytest.approx(l1, rel=0.02)
    for (a8, a1), (b8, b1) in zip(lat, lat[1:]):
        assert a8 / b8 == pytest.approx(a1 / b1, rel=0.02)


def test_optimiser_objective_is_the_figures_latency():
    """The optimiser's latency value (computed in its tasks) is the latency the
    figures report: system.latency_of under hardware ``latency_rule`` applied to
    the best design's stage delays."""
    from tessera.sim_models.monad import system
    from tessera.sim_models.monad.optimizer import optimise
    from tessera.sim_models.monad.perf import hardware
    wl = load_workload("transformer")
    h = optimise("transformer", "latency", budget=2, sa_steps=3, seed=5, batch=1, n_initial=2)
    st = h.best["result"]["stage_delays_ns"]
    assert h.best["value"] == pytest.approx(system.latency_of(wl, st, hardware()["latency_rule"]))
    assert h.best["value"] == pytest.approx(system.latency_of(wl, st, "path"))
    assert h.best["value"] < system.latency_of(wl, st, "pipelined")


def test_idle_chiplet_needs_no_producer_data():
    """A split with more chiplets than iterations leaves a chiplet with an empty
    region; it receives nothing (was a ZeroDivisionError in a TT search)."""
    import random
    from tessera.sim_models.monad import system
    from tessera.sim_models.monad.space import Space
    wl = load_workload("tensor_train")
    sp = Space(wl, 1048576)
    rng = random.Random(0)
    for _ in range(4):                       # the 4th random design of seed 0 has one
        low = sp.full_low(sp.random_low(rng))
        high = sp.random_high(low, rng)
    d = sp.decode(low, high)
    res = system._op_cache(wl.op("C43"), d.mappings[wl.ops.index(wl.op("C43"))], 28)
    assert any(hi <= lo for reg in res.regions.values() for lo, hi in reg.values())
    r = evaluate(wl, d)
    assert r.latency_ns > 0 and r.energy_pj > 0


def test_psum_reduction_on_package_sensitivity():
    """hardware ``psum_reduction`` "on_package" (a Fig 7 take-apart premise; default
    "dram"): chiplets holding partial sums of the same outputs (a package-level split
    of the reduction loop c) reduce them along a chain and only the chain's last
    chiplet writes to DRAM (§III-A "only the final results are written to DRAM")."""
    from tessera.sim_models.monad.perf import hardware, hardware_overrides
    wl = load_workload("res3")
    m = Mapping(Level((1, 2), ("k", "c")), Level((2, 2), ("k", "c")), Level((8, 8), ("c", "k")))
    d = Design((m,))
    base = evaluate(wl, d)
    with hardware_overrides(psum_reduction="on_package"):
        red = evaluate(wl, d)
    assert "psum_reduction" not in hardware()
    # two chiplets split c: one partial-sum hop instead of a second DRAM write
    saved_bits = (base.energy["dram"] - red.energy["dram"]) / hardware()["dram_pj_per_bit"]
    assert saved_bits > 0
    # the same bits cross one die-to-die hop instead (organic UCIe 0.5 pJ/bit, neighbours)
    assert red.energy["d2d"] - base.energy["d2d"] == pytest.approx(saved_bits * 0.5)
    # a split of output loops only has no partial sums to reduce: nothing changes
    m2 = Mapping(Level((1, 2), ("k", "p")), Level((2, 2), ("k", "c")), Level((8, 8), ("c", "k")))
    a = evaluate(wl, Design((m2,)))
    with hardware_overrides(psum_reduction="on_package"):
        b = evaluate(wl, Design((m2,)))
    assert (a.energy_pj, a.latency_ns) == (b.energy_pj, b.latency_ns)
