"""T3 system model (sim_models/t3): collectives against alpha-beta closed forms and the nccl-tests
bus-bandwidth convention, GEMM dimensions / FLOPs / stages / L2 reuse, DRAM arbitration, and the
fused GEMM-RS simulation's conservation laws and lower bounds."""
import json

import numpy as np
import pytest

from tessera.sim_models.t3 import collectives as C
from tessera.sim_models.t3 import cases, config, gemm, overlap, study

S64 = 64 * 2 ** 20


def no_dram(n=8, **kw):
    return config.system(n).scaled(dram_bw=1e30, hbm_bw=1e30, **kw)


# ---------------- collectives
def test_alpha_beta_hand_value():
    # 8 GPUs, 64 MiB, 500 ns, 150 GB/s per ring step: 7 x (500 ns + 8 MiB / 150 GB/s)
    assert C.alpha_beta("rs", S64, 8, 500e-9, 150e9) == pytest.approx(3.949683733333333e-4, rel=1e-15)
    assert C.alpha_beta("ar", S64, 8, 500e-9, 150e9) == pytest.approx(2 * 3.949683733333333e-4, rel=1e-15)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
@pytest.mark.parametrize("kind", ["rs", "rs_nmc", "ag", "ar"])
def test_ring_matches_alpha_beta_when_link_bound(kind, n):
    s = no_dram(n)
    ab = C.alpha_beta("ar" if kind == "ar" else "rs", S64, n, s.link_latency, s.link_bw)
    assert C.ring(kind, s, S64).time == pytest.approx(ab, rel=1e-12)


@pytest.mark.parametrize("kind,factor", [("rs", 7 / 8), ("ag", 7 / 8), ("ar", 14 / 8)])
def test_busbw_convention(kind, factor):
    s = no_dram(8, link_latency=0.0)
    t = C.ring(kind, s, S64).time
    assert C.busbw(kind, S64, t, 8) == pytest.approx(s.link_bw, rel=1e-12)
    assert C.busbw(kind, S64, 2.0, 8) == S64 / 2.0 * factor
    assert C.algbw(S64, 2.0) == S64 / 2.0


def test_rs_dram_accesses_per_gpu():
    s = config.system(8)
    c = S64 / 8
    rs = C.ring("rs", s, S64)
    assert rs.dram_reads == pytest.approx(c * (2 * 8 - 1))        # C + 2C(N-2) + 2C
    assert rs.dram_writes == pytest.approx(8 * c)                 # (N-1) received + final
    assert rs.dram_updates == 0
    nmc = C.ring("rs_nmc", s, S64)
    assert (nmc.dram_reads, nmc.dram_writes, nmc.dram_updates) == pytest.approx((7 * c, 0, 7 * c))
    ag = C.ring("ag", s, S64)
    assert (ag.dram_reads, ag.dram_writes) == pytest.approx((7 * c, 7 * c))
    # per step (Fig 10): baseline steady step reads 2 copies + 1 incoming write; NMC 1 read + 1 update
    assert rs.per_step[0] == (c, c, 0.0) and rs.per_step[3] == (2 * c, c, 0.0)
    assert len(rs.per_step) == 8 and len(nmc.per_step) == 7 and nmc.per_step[2] == (c, 0.0, c)
    assert len(C.ring("ar", s, S64).per_step) == 15


def test_rs_dram_bound_and_nmc_tail():
    s = config.system(8).scaled(link_bw=1e30, link_latency=0.0)
    c = S64 / 8
    B = s.dram_bw
    tail = 3 * c / (s.hbm_bw * s.rs_final_eff)
    assert C.ring("rs", s, S64).time == pytest.approx(2 * c / B + 6 * 3 * c / B + tail)
    assert C.ring("rs_nmc", s, S64).time == pytest.approx(7 * (1 + s.nmc_update_cost) * c / B)


def test_nmc_rs_gain_matches_paper():
    p = config.paper()
    size = 8192 * 4256 * 2
    for tp, key in ((8, "nmc_rs_gain_tp8"), (16, "nmc_rs_gain_tp16")):
        s = config.system(tp)
        g = C.ring("rs", s, size).time / C.ring("rs_nmc", s, size).time - 1
        assert abs(g - p[key]) < 0.005, (tp, g)


@pytest.mark.parametrize("bad", [dict(kind="xx"), dict(n=1), dict(size=0)])
def test_ring_rejects_bad_arguments(bad):
    a = dict(kind="rs", sysm=config.system(8), size=S64, n=8)
    a.update(bad)
    with pytest.raises(ValueError):
        C.ring(**a)


# ---------------- GEMM
def test_sublayer_dims_and_flops():
    t = config.model("t-nlg")
    d = gemm.sublayer_dims(t, 8, "FC-2")
    assert (d.M, d.N, d.K) == (8192, 4256, 2128) and d.flops == 148386086912
    m = gemm.sublayer_dims(config.model("mega-gpt-2"), 16, "OP")
    assert (m.M, m.N, m.K) == (16384, 3072, 192) and m.flops == 19327352832
    assert gemm.sublayer_dims(t, 16, "IP").K == 3 * 4256 // 16
    assert gemm.sublayer_dims(t, 8, "FC-1") == gemm.GemmDims("FC-1", 8192, 4256, 2128)
    with pytest.raises(ValueError, match="sub-layer"):
        gemm.sublayer_dims(t, 8, "QKV")
    with pytest.raises(ValueError, match="divisible"):
        gemm.sublayer_dims(t, 5, "OP")


def test_stages_and_output_bytes():
    s = config.system(8)
    p = gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 8, "FC-2"))
    assert (p.n_wg, p.stages) == (64 * 34, 14)
    assert p.stage_wgs.sum() == 2176 and p.stage_wgs.max() - p.stage_wgs.min() <= 1
    assert p.out_bytes.sum() == 8192 * 4256 * 2
    assert p.slot_bytes.sum() == 8192 * 4256 * 2
    # wide output is tiled transposed: MT-NLG 2048 x 20480 -> 160 x 16 grid
    q = gemm.plan(s, gemm.sublayer_dims(config.model("mt-nlg"), 32, "OP"), n_devices=32)
    assert (q.n_wg, q.stages) == (2560, 16)


def test_full_stage_compute_time():
    s = config.system(8)
    p = gemm.plan(s, gemm.GemmDims("x", 128 * 160, 128, 1024))      # exactly one full stage
    per_wg = 2 * 128 * 128 * 1024 / (1024 * 1.4e9 * s.mma_eff)
    assert p.stages == 1
    assert p.t_compute[0] == pytest.approx(2 * per_wg + s.stage_overhead, rel=1e-12)


def test_l2_reuse_estimate():
    # the first pass's all-or-nothing estimate, kept as an option (fewer-tiles-fastest, LRU)
    s = config.system(8).scaled(wg_fast_dim="fewer_tiles", l2_retention="lru")
    small = gemm.plan(s, gemm.GemmDims("x", 1024, 1024, 256))
    assert small.read_bytes.sum() == (1024 * 256 + 256 * 1024) * 2     # compulsory only
    d = gemm.GemmDims("x", 8192, 4096, 1536)   # B = 12.6 MB: fits only if the output bypasses L2
    cached = gemm.plan(s, d, cached_output=True)
    unc = gemm.plan(s, d, cached_output=False)
    assert unc.read_bytes.sum() == (8192 * 1536 + 1536 * 4096) * 2
    assert cached.read_bytes.sum() > unc.read_bytes.sum()


def test_l2_graded_retention_of_the_rewalked_activation():
    """Default estimate: tokens fastest, so every stage re-walks the activation (tokens x K); the part
    that survives a stage is (L2 left over) / footprint - between compulsory and a full re-read."""
    s = config.system(8)
    small = gemm.plan(s, gemm.GemmDims("x", 1024, 1024, 256))
    assert small.read_bytes.sum() == (1024 * 256 + 256 * 1024) * 2     # compulsory only
    d = gemm.GemmDims("x", 8192, 4096, 1536)       # activation 25.2 MB > 16 MB L2
    act = 8192 * 1536 * 2
    blk = 128 * 1536 * 2                               # one weight column block
    c, u = gemm.plan(s, d, cached_output=True), gemm.plan(s, d, cached_output=False)
    for p in (c, u):
        assert p.read_bytes[0] >= act                  # first stage: compulsory activation
        assert (p.read_bytes[1:] < act).all()          # later stages: partly retained ...
    # ... uncached: re-read = footprint - (L2 - the stage's weight blocks) + its new weight blocks
    assert ((u.read_bytes[1:-1] > act - s.l2_bytes) & (u.read_bytes[1:-1] <= act - s.l2_bytes + 8 * blk)).all()
    # cached (baseline): the stage's dirty output takes exactly its size of L2 from the activation
    out = c.out_bytes[1:-1]
    assert np.allclose(c.read_bytes[1:-1] - u.read_bytes[1:-1], out, rtol=1e-9)


def test_l2_bypass_read_reduction_grows_with_tp():
    """§6.2 / Fig 18: bypassing L2 with the NMC output cuts the GEMM's DRAM reads ~1.2x at TP8 and
    ~2x at TP16 ('larger TP leads to more LLC-amenable GEMMs').  The first pass (weights re-walked,
    all-or-nothing) gave 1.75x / 1.00x - the trend reversed."""
    P = config.paper()
    red = {}
    for tp in (8, 16):
        r = []
        for key in ("mega-gpt-2", "t-nlg"):
            for sl in config.SUBLAYERS:
                s = config.system(tp)
                d = gemm.sublayer_dims(config.model(key), tp, sl)
                r.append(gemm.plan(s, d, True).read_bytes.sum() / gemm.plan(s, d, False).read_bytes.sum())
        red[tp] = float(np.exp(np.log(r).mean()))
    assert red[16] > red[8] + 0.25
    assert red[8] == pytest.approx(P["fig18_gemm_read_reduction_tp8_x"], abs=0.15)
    assert red[16] == pytest.approx(P["fig18_gemm_read_reduction_tp16_x"], abs=0.35)


def test_op_inputs_fit_the_llc_fc_inputs_do_not():
    """§6.1.2 / §3.2.2: OP GEMMs fit largely in the LLC (tiny DRAM reads); FC GEMMs re-read their
    inputs (their activation does not fit), which is what RS traffic contends with."""
    for key in ("mega-gpt-2", "t-nlg"):
        for tp in (8, 16):
            s = config.system(tp)
            op = gemm.plan(s, gemm.sublayer_dims(config.model(key), tp, "OP"), cached_output=False)
            fc = gemm.plan(s, gemm.sublayer_dims(config.model(key), tp, "FC-2"), cached_output=False)
            a_op = op.dims.M * op.dims.K * 2
            a_fc = fc.dims.M * fc.dims.K * 2
            assert op.read_bytes.sum() < 1.3 * (a_op + op.dims.K * op.dims.N * 2)
            assert fc.read_bytes.sum() > 1.5 * (a_fc + fc.dims.K * fc.dims.N * 2)


def test_more_cus_never_slower_gemm():
    d = gemm.sublayer_dims(config.model("t-nlg"), 16, "IP")
    times = [overlap.simulate(config.system(16).scaled(cus=c), gemm.plan(config.system(16).scaled(cus=c), d),
                              comm=False).time for c in (20, 40, 80, 160)]
    assert all(a >= b for a, b in zip(times, times[1:])), times


# ---------------- arbitration (one definition: dram.arb_step, RTL semantics of hdl/t3/mca.py)
@pytest.mark.parametrize("policy", [0, 1, 2])
def test_arbiter_matches_golden_on_random_inputs(policy):
    from tessera.golden.t3 import ArbiterModel
    from tessera.sim_models.t3 import dram
    rng = np.random.default_rng(policy)
    n = 4000
    tr = dict(c_valid=rng.random(n) < 0.6, m_valid=rng.random(n) < 0.5, out_ready=rng.random(n) < 0.8,
              occ=rng.integers(0, 64, n), drain=rng.random(n) < 0.05)
    got = dram.arb_replay(tr, policy, 20, 9, 1023)
    g = ArbiterModel(7, 10, 4)
    want = []
    for k in range(n):
        o = g.step(bool(tr["c_valid"][k]), bool(tr["m_valid"][k]), bool(tr["out_ready"][k]),
                   int(tr["occ"][k]), policy=policy, threshold=20, starve_limit=9,
                   drain=bool(tr["drain"][k]))
        want.append(2 if o["m_ready"] else 1 if o["c_ready"] else 0)
    assert got.tolist() == want
    assert {0, 1, 2} <= set(want)


def test_model_trace_window_replays_through_golden_arbiter():
    from tessera.tb.t3 import mca_replay as R
    for pol in ("mca", "rr", "compute_first"):
        tr = R.model_window(pol)
        assert R.golden_grants(tr) == tr["grant"], pol
        st = R.stats(tr)
        assert st["comp"] >= 60 and st["comm"] >= 60, (pol, st)
        if pol == "mca":     # the window exercises the threshold and the starvation limit
            assert st["threshold_blocked"] > 0 and st["comm_over_comp"] > 0, st


CASE_TH = ("t-nlg", 8, "IP")


@pytest.fixture(scope="module")
def threshold_runs():
    s = config.system(CASE_TH[1])
    pu = gemm.plan(s, gemm.sublayer_dims(config.model(CASE_TH[0]), CASE_TH[1], CASE_TH[2]),
                   cached_output=False)
    out = {thr: overlap.simulate(s, pu, comm=True, policy="mca", threshold=thr)
           for thr in (5, 30, overlap.NO_LIMIT)}
    out["cf"] = overlap.simulate(s, pu, comm=True, policy="compute_first")
    out["rr"] = overlap.simulate(s, pu, comm=True, policy="rr")
    return out


def test_mca_threshold_changes_the_result(threshold_runs):
    r = threshold_runs
    # §4.5: a lower threshold holds communication back (RS later) and never slows the GEMM
    assert r[5].time > 1.05 * r[overlap.NO_LIMIT].time
    assert r[5].gemm_end <= r[30].gemm_end * (1 + 1e-3)
    assert r[5].gemm_end <= r[overlap.NO_LIMIT].gemm_end * (1 + 1e-3)
    # compute priority protects the GEMM against round-robin
    assert r[overlap.NO_LIMIT].gemm_end < r["rr"].gemm_end


@pytest.mark.xfail(strict=True, reason="issue 15 third pass: with the 12/8 write-drain watermarks the 30-entry "
                   "threshold trickles RS updates in through the starvation limit and each 4-write drain window "
                   "costs two turnarounds: T-NLG IP TP8 GEMM 1503 us at threshold 30 vs 1441 us with no limit "
                   "(1417 / 1418 at 14/8). Known deviation from §4.5's direction, kept visible")
def test_mca_threshold_30_never_slows_the_gemm_against_no_limit(threshold_runs):
    r = threshold_runs
    assert r[30].gemm_end <= r[overlap.NO_LIMIT].gemm_end * (1 + 2e-3)


def test_compute_first_starves_rs_only_the_limit_bounds_it(threshold_runs):
    r = threshold_runs
    s = config.system()
    q = s.mc_queue_entries
    # MCA without a threshold = compute-first + starvation limit: the wait is bounded by the limit
    # (plus cycles the queue was full); plain compute-first is not bounded
    assert r[overlap.NO_LIMIT].max_comm_wait <= s.mca_starve_limit + q
    assert r["cf"].max_comm_wait > 4 * s.mca_starve_limit
    # round-robin never starves RS: its longest wait is a stretch of full-queue cycles (68 with the
    # 1 GHz HBM2 timing and 12/8 watermarks; < 64 = q in the first pass), far below the starvation limit
    assert r["rr"].max_comm_wait < 2 * q <= s.mca_starve_limit // 4


@pytest.mark.xfail(strict=True, reason="issue 15: the first pass's bound (round-robin's longest RS wait within one "
                   "MC queue, q = 64) at its original strength; with the 12/8 write-drain watermarks the model's "
                   "longest wait is 68 cycles. Kept visible, not loosened")
def test_round_robin_longest_wait_within_one_queue_original_bound(threshold_runs):
    q = config.system().mc_queue_entries
    assert threshold_runs["rr"].max_comm_wait <= q


@pytest.fixture(scope="module")
def memory_intensive_runs():
    """Mega-GPT-2 FC-2 TP8: the most memory-intensive GEMM of the Fig 16 set (activation re-walked)."""
    s = config.system(8)
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("mega-gpt-2"), 8, "FC-2"), cached_output=False)
    out = {k: overlap.simulate(s, pu, comm=True, policy=p, threshold=th)
           for k, p, th in (("rr", "rr", None), ("cf", "compute_first", None), ("mca30", "mca", 30))}
    out["alone"] = overlap.simulate(s, pu, comm=False)
    return out


def test_mca_threshold_beats_compute_first_on_a_memory_intensive_gemm(memory_intensive_runs):
    """§4.5 / §6.1.3: with the paper's largest threshold (30 entries) MCA keeps room in the queue for
    the GEMM and beats plain compute-first and round-robin (T3).  This needs the MC's write batching
    to stay below the threshold (write_drain high watermark 16): with 40 parked writes (first pass)
    the occupancy never falls below 30, communication enters only through the starvation limit and
    MCA ends far behind T3 (2749 vs 2141 us)."""
    r = memory_intensive_runs
    assert r["mca30"].time < 0.97 * r["cf"].time
    assert r["cf"].time < 0.9 * r["rr"].time
    # round-robin: the RS bursts and updates slow the GEMM itself (§6.1.2, Fig 17)
    assert r["rr"].gemm_end > 1.25 * r["alone"].time
    assert r["mca30"].gemm_end < 1.15 * r["alone"].time


@pytest.fixture(scope="module")
def turnaround_takeapart_runs():
    """T-NLG FC-1 TP16 under round-robin and MCA with the DRAM take-apart switches (one run each)."""
    d = gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-1")
    s0 = config.system(16)
    pu = gemm.plan(s0, d, cached_output=False)
    alone = overlap.simulate(s0, pu, comm=False).time
    res = {}
    for name, kw in (("model", {}), ("no turnaround", dict(tRTW=0, tWTR=0)),
                     ("no interference", dict(row_interference=False)),
                     ("neither", dict(tRTW=0, tWTR=0, row_interference=False))):
        s = s0.scaled(**kw)
        res[name] = {p: overlap.simulate(s, pu, comm=True, policy=p) for p in ("rr", "mca")}
    return alone, res


def test_round_robin_cost_is_turnarounds_and_row_conflicts(turnaround_takeapart_runs):
    """§6.1.2 / Fig 17: in T3 the RS traffic slows the GEMM.  In the channel model round-robin mixes the
    GEMM's NMC stores with the DMA reads and updates (read/write turnarounds) and its operand reads with
    the chunk traffic (row conflicts between the two row groups): each take-apart switch recovers part
    of it, both together most; MCA, which batches communication, depends on each less."""
    alone, res = turnaround_takeapart_runs
    g = {k: v["rr"].gemm_end for k, v in res.items()}
    assert g["model"] > 1.3 * alone
    assert g["no turnaround"] < 0.92 * g["model"]
    assert g["no interference"] < 0.95 * g["model"]
    assert g["neither"] < 0.87 * g["model"]
    for k in res:       # MCA depends on each less than round-robin does
        if k != "model":
            assert abs(res[k]["mca"].time / res["model"]["mca"].time - 1) < 1 - g[k] / g["model"], k


@pytest.mark.xfail(strict=True, reason="issue 15: the first pass's claim that MCA 'barely depends' on turnarounds "
                   "and row conflicts (< 3 % per take-apart switch) at its original strength; the model's MCA moves "
                   "4.3 % with them. Kept visible, not loosened")
def test_mca_barely_depends_on_turnarounds_and_row_conflicts_original_bound(turnaround_takeapart_runs):
    _, res = turnaround_takeapart_runs
    for k in res:
        assert abs(res[k]["mca"].time / res["model"]["mca"].time - 1) < 0.03, k


def test_mca_learns_threshold_from_the_isolated_first_stage():
    s = config.system(16)
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("mega-gpt-2"), 16, "OP"), cached_output=False)
    f = overlap.simulate(s, pu, comm=True, policy="mca")
    assert f.learned and f.threshold in overlap.threshold_table(s).tolist()
    # no occupancy -> the last table entry (no limit); all bins at 0 -> the first entry
    f0 = overlap.simulate(s.scaled(mca_bins=(0, 0, 0)), pu, comm=True, policy="mca")
    assert f0.threshold == overlap.threshold_table(s)[0]


def test_nmc_update_is_bank_group_timing_not_a_flat_2x():
    s = config.system(8)
    d = gemm.GemmDims("w", 8192, 8192, 64)            # store-bound: output burst dominates
    ratio = {}
    for bg in (4, 1):
        ss = s.scaled(bank_groups=bg, banks_per_group=16 // bg)
        p = gemm.plan(ss, d, cached_output=False)
        ratio[bg] = (overlap.simulate(ss, p, comm=False, nmc=True).time
                     / overlap.simulate(ss, p, comm=False, nmc=False).time)
    assert 1.0 <= ratio[4] < 1.15            # tCCDWL hidden by interleaving 4 bank groups
    assert ratio[1] > 1.4                    # one bank group: every update waits tCCDWL


# ---------------- fused simulation
CASES = [("t-nlg", 8, "OP"), ("t-nlg", 16, "FC-1"), ("mega-gpt-2", 16, "OP"), ("gpt-3", 32, "IP")]


@pytest.fixture(scope="module")
def results():
    s = config.system()
    return {c: study.evaluate(s, config.model(c[0]), c[1], c[2]) for c in CASES}


@pytest.mark.parametrize("case", CASES)
def test_overlapped_respects_lower_bounds(results, case):
    r = results[case]
    s = config.system(case[1])
    d = gemm.sublayer_dims(config.model(case[0]), case[1], case[2])
    pu = gemm.plan(s, d, cached_output=False)
    c = d.out_bytes() / case[1]
    link_only = (case[1] - 1) * (s.link_latency + c / s.link_bw)
    bound = max(pu.t_compute_total, link_only) + r.ag
    for cfg in ("t3", "t3-mca"):
        assert r.times[cfg] >= bound * (1 - 1e-9), (cfg, r.times[cfg], bound)
        assert r.gemm_in_fused[cfg] >= pu.t_compute_total
    assert r.times["ideal-rs-nmc"] <= r.times["ideal"] <= r.times["sequential"]
    assert r.times["ideal"] == pytest.approx(max(r.gemm, r.rs) + r.ag)
    assert r.times["sequential"] == pytest.approx(r.gemm + r.rs + r.ag)


@pytest.mark.parametrize("case", CASES)
def test_fused_traffic_conservation(results, case):
    r = results[case]
    n = case[1]
    d = gemm.sublayer_dims(config.model(case[0]), n, case[2])
    pu = gemm.plan(config.system(n), d, cached_output=False)
    slots = pu.slot_bytes.sum(axis=0)
    for cfg in ("t3", "t3-mca"):
        t = r.traffic[cfg]
        assert t["rs_reads"] == pytest.approx(slots[1:n - 1].sum(), rel=1e-6)     # DMA'd slots
        assert t["rs_writes"] == pytest.approx(slots[1:].sum(), rel=1e-6)         # incoming updates
        assert t["gemm_writes"] == pytest.approx(slots[1:].sum(), rel=1e-6)       # slot 0 is remote
        assert t["gemm_reads"] == pytest.approx(pu.read_bytes.sum(), rel=1e-6)
        f = r.fused[cfg]
        assert np.all(np.diff(f.send_start[:n - 1]) >= 0)                     # ring order
        assert np.all(f.slot_ready[2:] >= f.slot_ready[1:-1])


def test_more_link_bandwidth_never_slower():
    m = config.model("t-nlg")
    prev = None
    for bw in (75e9, 150e9, 300e9, 600e9):
        s = config.system().scaled(link_bw=bw)
        r = study.evaluate(s, m, 16, "OP", configs=("sequential", "t3"))
        cur = (r.rs, r.ag, r.times["sequential"], r.times["t3"])
        if prev:
            assert all(a <= b * (1 + 1e-3) for a, b in zip(cur, prev)), (bw, cur, prev)
        prev = cur


def test_op_layers_t3_near_ideal():
    # §6.1.2: for OP layers T3 achieves close to the Ideal-GEMM-RS-Overlap speedup
    s = config.system()
    for key in ("mega-gpt-2", "t-nlg"):
        for tp in (8, 16):
            r = study.evaluate(s, config.model(key), tp, "OP", configs=("sequential", "t3", "ideal"))
            assert r.speedup("t3") >= 0.95 * r.speedup("ideal"), (key, tp, r.speedup("t3"), r.speedup("ideal"))


def test_fc_layers_t3_more_than_15pct_slower_than_ideal():
    # §6.1.2: 'especially the much larger FC layers, the benefits are far from those with
    # Ideal-GEMM-RS-Overlap (>15% slower)'; Mega-GPT-2 FC TP16 is the model's closest FC case
    P = config.paper()
    s = config.system()
    for key, tp in (("mega-gpt-2", 16), ("t-nlg", 16)):
        r = study.evaluate(s, config.model(key), tp, "FC-1", configs=("sequential", "t3", "ideal"))
        assert r.times["t3"] / r.times["ideal"] > P["fig16_fc_t3_below_ideal_min_ratio"], (key, tp)


def test_paper_t3_maximum_is_not_an_fc_case():
    # §6.1.1 (Ideal <= 50%) + §6.1.2 (FC T3 > 1.15 x Ideal runtime): FC T3 < 30.4% < the 39% maximum
    P = config.paper()
    assert cases.fc_t3_ceiling(P) == pytest.approx(100 * (1.5 / 1.15 - 1))
    assert cases.fc_t3_ceiling(P) < 100 * P["fig16_t3_max"] - 5      # not even within the 5-point band


def _row(case, ideal, nmc, t3, mca):
    m, tp, sl = case.split()
    return dict(case=case, model=m, tp=int(tp[2:]), sublayer=sl, ideal=ideal, ideal_rs_nmc=nmc, t3=t3,
                t3_mca=mca, t3_over_ideal_runtime=(1 + ideal / 100) / (1 + t3 / 100),
                mca_over_ideal_runtime=(1 + ideal / 100) / (1 + mca / 100), gemm_slowdown_t3=1.0,
                gemm_read_GBps=100.0, rs_bound=True)


def test_text_checks_flag_each_violated_statement():
    P = config.paper()
    good = [_row("t-nlg TP16 FC-1", 50, 51, 22, 35), _row("t-nlg TP16 FC-2", 50, 51, 22, 46),
            _row("mega-gpt-2 TP16 OP", 15, 16, 15.5, 15), _row("t-nlg TP16 IP", 38, 41, 39, 40),
            _row("t-nlg TP16 OP", 16, 18, 16, 16)]
    assert all(k["held"] for k in cases.text_checks(good, P))
    assert [c["case"] for c in cases.t3_max_candidates(good, P)] == ["t-nlg TP16 IP"]
    bad = [dict(r) for r in good]
    bad[0].update(t3=45.0, t3_over_ideal_runtime=1.5 / 1.45)       # FC T3 near Ideal and the T3 maximum
    bad[2].update(t3=10.0)                                          # OP T3 far below Ideal
    bad[4].update(gemm_slowdown_t3=1.5)                             # OP GEMM slowed more than FC/IP (x1.0)
    failed = {k["name"].split(":")[0] for k in cases.text_checks(bad, P) if not k["held"]}
    assert failed == {"OP", "OP GEMM", "FC", "T3 maximum is not an FC case (FC T3 < 30.4%)"}


def test_contention_slows_gemm_and_mca_relieves_it():
    # GPU-2X-CU T-NLG FC-1 TP16: the GEMM's NMC write bursts compete with RS traffic
    s = config.system().scaled(cus=160)
    r = study.evaluate(s, config.model("t-nlg"), 16, "FC-1")
    d = gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-1")
    alone = overlap.simulate(s.scaled(n_gpus=16), gemm.plan(s.scaled(n_gpus=16), d, cached_output=False),
                             comm=False).time
    assert r.gemm_in_fused["t3"] > 1.05 * alone
    assert r.gemm_in_fused["t3-mca"] < r.gemm_in_fused["t3"]


def test_tracker_crosscheck_small_instance():
    from tessera.sim_models.t3 import address_space as A
    from tessera.sim_models.t3 import tracker_ref
    s = config.system(4).scaled(cus=8)
    p = gemm.plan(s, gemm.GemmDims("x", 1024, 1024, 512), cached_output=False)
    f = overlap.simulate(s, p, comm=True, record=True, dt=0.05e-6)
    cfg = A.configure_gemm_rs(1024, 1024, s.wg_tile, s.wf_tile, p.stages, 4)
    rep = tracker_ref.replay(cfg, f, s.clock)
    assert p.stages == 4
    assert rep["problems"] == []
    assert rep["fired"] == rep["entries"] == 3 * 16 * 8
    assert [x["slot"] for x in rep["slots"]] == [1, 2, 3]


def test_tracker_ref_detects_overflow():
    from tessera.sim_models.t3 import address_space as A
    from tessera.sim_models.t3.tracker_ref import TrackerRef
    cfg = A.configure_gemm_rs(256, 256, (64, 64), (32, 32), 4, 4)
    ref = TrackerRef(cfg.devices[0].tracker)
    wg = int(cfg.devices[0].tracker.wg_id[0])
    assert ref.update(wg, 0, 1024) is None
    assert ref.update(wg, 0, 1024) is not None        # 2 x 1024 = threshold
    with pytest.raises(AssertionError, match="overflow"):
        ref.update(wg, 0, 1)
    with pytest.raises(KeyError):
        ref.update(0, 0, 1)                            # chunk 0 of GPU-0 is remote, untracked


def test_data_files_have_sources():
    for name in ("system", "paper"):
        for k, v in config.load(name).items():
            if not k.startswith("_"):
                assert set(v) == {"value", "source"} and v["source"], k
    for k, v in config.load("models")["models"].items():
        assert v["source"]
    assert config.system().peak_flops == 80 * 1024 * 1.4e9


def test_study_config_selection():
    s = config.system()
    m = config.model("t-nlg")
    r = study.evaluate(s, m, 16, "OP", configs=("sequential", "t3-cf"))
    assert set(r.times) == {"sequential", "t3-cf"}
    assert r.times["t3-cf"] >= r.fused["t3-cf"].gemm_end
    with pytest.raises(ValueError, match="unknown config"):
        study.evaluate(s, m, 16, "OP", configs=("sequential", "magic"))


# ---------------- issue 15 second pass: where T3 loses, WG retirement, tRAS
@pytest.fixture(scope="module")
def tnlg_fc2_tp16_phases():
    s = config.system(16)
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-2"), cached_output=False)
    out = {"alone": overlap.simulate(s, pu, comm=False)}
    for p in ("rr", "mca"):
        out[p] = overlap.simulate(s, pu, comm=True, policy=p)
    return out


def test_t3_loss_is_in_the_output_burst(tnlg_fc2_tp16_phases):
    """Largest-Ideal case of Fig 16: round-robin barely slows the GEMM's read phase; the stage's NMC
    output burst, mixed with the DMA reads and updates of the just-written chunk, takes several times
    longer than alone (turnarounds, row conflicts); MCA (compute first) keeps it near the isolated time."""
    r = tnlg_fc2_tp16_phases
    rd = {k: np.nanmean((f.stage_compute_end - f.stage_start)[1:]) for k, f in r.items()}
    ep = {k: np.nanmean((f.stage_end - f.stage_compute_end)[1:]) for k, f in r.items()}
    for f in r.values():
        assert np.all(f.stage_start <= f.stage_compute_end) and np.all(f.stage_compute_end <= f.stage_end)
    assert rd["rr"] < 1.15 * rd["alone"]
    assert ep["rr"] > 3 * ep["alone"]
    assert ep["mca"] < 1.5 * ep["alone"]


def test_wg_retirement_overlaps_the_next_stage():
    s = config.system(16)
    d = gemm.sublayer_dims(config.model("t-nlg"), 16, "IP")
    pu = gemm.plan(s, d, cached_output=False)
    bar = overlap.simulate(s, pu, comm=True, policy="rr")
    wgr = overlap.simulate(s.scaled(wg_retire=True), pu, comm=True, policy="rr")
    # stage barrier: the next stage starts when the last store is acknowledged
    assert np.allclose(bar.stage_start[1:], bar.stage_end[:-1])
    # WG-granular: the next stage starts as soon as the previous one's compute is done and runs while
    # its stores drain
    assert np.allclose(wgr.stage_start[1:], wgr.stage_compute_end[:-1])
    assert np.all(wgr.stage_start[1:] < wgr.stage_end[:-1])
    assert wgr.gemm_end < 0.95 * bar.gemm_end


def test_tras_bounds_the_row_cycle():
    s = config.system(8)
    p = gemm.plan(s, gemm.GemmDims("w", 4096, 4096, 512), cached_output=False)
    t = {ras: overlap.simulate(s.scaled(tRAS=ras), p, comm=False).time for ras in (0, 14, 200)}
    # a row is never precharged before tRP + tRCD anyway: tRAS <= tRCD (14) changes nothing
    assert t[14] == t[0]
    assert t[200] > 1.1 * t[0]


def test_region_row_locality_shares_the_chunk_rows():
    """§4.1 / Fig 7: a stage's NMC stores, the neighbour's updates of the same chunk and the DMA reads
    the Tracker triggers on it address the same rows; grouping rows by stream instead makes them
    close each other's rows in round-robin's output burst (the first pass's T3 loss)."""
    s = config.system(16)
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 16, "IP"), cached_output=False)
    f = {loc: overlap.simulate(s.scaled(row_locality=loc), pu, comm=True, policy="rr")
         for loc in ("region", "stream")}
    ep = {k: np.nanmean((v.stage_end - v.stage_compute_end)[1:]) for k, v in f.items()}
    assert ep["region"] < 0.8 * ep["stream"]
    assert f["region"].gemm_end < 0.95 * f["stream"].gemm_end
    with pytest.raises(ValueError, match="row_locality"):
        s.scaled(row_locality="bank")


# ---------------- issue 15 fourth pass: the DRAM write handling behind T3's maximum
WRITE_MODELS = (("model", {}),
                ("bank_heads", dict(mc_scheduler="bank_heads")),
                ("wq64", dict(write_queue_entries=64, write_drain=(56, 32), mca_occupancy="reads")))


@pytest.fixture(scope="module")
def write_model_runs():
    s0 = config.system(16)
    d = gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-2")
    out = {}
    for name, kw in WRITE_MODELS:
        s = s0.scaled(**kw) if kw else s0
        pu = gemm.plan(s, d, cached_output=False)
        out[name] = {"plan": pu, "alone": overlap.simulate(s, pu, comm=False)}
        for p in ("rr", "compute_first"):
            out[name][p] = overlap.simulate(s, pu, comm=True, policy=p)
    return out


def _burst(f):
    return float(np.nanmean((f.stage_end - f.stage_compute_end)[1:-1]))


def test_round_robin_burst_cost_is_the_write_handling(write_model_runs):
    """T3's loss on the largest case is the output burst under round-robin: the Tracker's DMA reads of the
    chunk are mixed 1:1 with the NMC stores that complete it.  How much that costs is set by how the MC
    handles writes: the unified queue with 12/8 drain (model) turns around every few writes; GPGPU-Sim's
    bank-head scheduler and a separate 64:56:32 write queue (its batches, not the separate queue, are what
    matter: unified 56/32 gives nearly the same) cut the burst; compute-first keeps it near the isolated
    burst in every model."""
    r = write_model_runs
    b = {k: {p: _burst(v[p]) for p in ("rr", "compute_first")} for k, v in r.items()}
    for k in b:
        assert b[k]["compute_first"] < 1.3 * b["model"]["compute_first"], k
        assert b[k]["rr"] > 2 * b[k]["compute_first"], k
    assert b["model"]["rr"] > 4 * b["model"]["compute_first"]
    assert b["bank_heads"]["rr"] < 0.75 * b["model"]["rr"]
    assert b["wq64"]["rr"] < 0.6 * b["model"]["rr"]


def test_write_models_serve_every_request(write_model_runs):
    """Each write-handling model (bank heads hold requests outside the queue) still serves every
    request exactly once: the fused traffic per category is the model's own."""
    fc = config.system().dram_clock
    served = lambda f: round(f.dram_busy * f.time * fc)      # noqa: E731 - column commands issued
    base = write_model_runs["model"]["rr"]
    for k, v in write_model_runs.items():
        for p in ("rr", "compute_first"):
            f = v[p]
            assert np.isfinite(f.time) and f.gemm_end <= f.time, (k, p)
            assert served(f) == served(base), (k, p)
            assert f.dram["gemm_reads"] == pytest.approx(base.dram["gemm_reads"], rel=1e-12), (k, p)
            assert np.nanmax(f.slot_ready) <= f.time + 1e-12


def test_separate_write_queue_feeds_the_mca_its_read_occupancy():
    s = config.system(16).scaled(write_queue_entries=64, write_drain=(56, 32))
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 16, "IP"), cached_output=False)
    w = {occ: overlap.simulate(s.scaled(mca_occupancy=occ), pu, comm=True, policy="mca", threshold=30,
                               window=(200_000, 4096))
         for occ in ("all", "reads")}
    # the arbiter's occupancy input (window column 3) counts the parked writes only with 'all'
    assert w["all"].window[:, 3].mean() > w["reads"].window[:, 3].mean() + 8
    for bad in (dict(mca_occupancy="writes"), dict(mc_scheduler="frfcfs"), dict(store_issue="eager"),
                dict(write_queue_entries=-1), dict(write_queue_entries=16, write_drain=(56, 32))):
        with pytest.raises(ValueError):
            config.system(16).scaled(**bad)


def test_stores_issued_as_the_gemm_computes_leave_no_burst():
    s = config.system(16)
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 16, "IP"), cached_output=False)
    burst = overlap.simulate(s, pu, comm=True, policy="compute_first")
    prog = overlap.simulate(s.scaled(store_issue="progress"), pu, comm=True, policy="compute_first")
    assert _burst(burst) > 3e-6
    assert _burst(prog) < 0.2e-6
    for cat, x in burst.dram.items():
        assert prog.dram[cat] == pytest.approx(x, rel=1e-9), cat


def test_first_stage_remote_stores_leave_as_its_burst_and_hold_the_next_stage():
    """Stage 0's slot-0 chunk is stored straight into the neighbour (remote_map, §4.4) by the stage's
    WGs at its end (Fig 17a: read phase, then a bursty write phase), so the link is idle while the
    first stage computes (§4.5: the first stage runs isolated) and the next stage waits until the
    burst is on the link but for the remote-store buffer.  ``store_issue='remote_progress'``
    (take-apart) trickles those stores out as the GEMM computes instead: the link is busy at once,
    the first stage is link-throttled and the MCA learns a smaller threshold from it."""
    s = config.system(16)
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 16, "IP"), cached_output=False)
    f = overlap.simulate(s, pu, comm=True, policy="rr")
    c0 = f.stage_compute_end[0]
    assert c0 > 30e-6
    assert f.send_start[0] >= c0 - 1e-9                                # link idle during stage 0
    hold = s.remote_store_buffer_bytes / s.link_bw
    assert f.stage_start[1] >= f.send_end[0] - hold - 1e-6             # stage 1 waits for the burst
    assert f.stage_start[1] > c0 + 20e-6
    tr = overlap.simulate(s.scaled(store_issue="remote_progress"), pu, comm=True, policy="rr")
    assert tr.send_start[0] < 0.05 * c0                                # link busy from the start
    assert tr.stage_compute_end[0] > c0 + 10e-6                        # first stage link-throttled
    for cat, x in f.dram.items():
        assert tr.dram[cat] == pytest.approx(x, rel=1e-9), cat
    m = {k: overlap.simulate(s.scaled(store_issue=k), pu, comm=True, policy="mca").threshold
         for k in ("burst", "remote_progress")}
    assert m["remote_progress"] < m["burst"]


def _tnlg_ip_tp16(**kw):
    s = config.system(16, **kw)
    return s, gemm.plan(s, gemm.sublayer_dims(config.model("t-nlg"), 16, "IP"), cached_output=False)


def test_stage_take_apart_switches_reshape_the_plan():
    """bench t3_stage0_takeapart: a stage = one ring chunk's WGs, chunks of equal bytes, stage 0
    without its cold operand walk; the model's plan keeps 14 stages of the CUs' WGs over 16 chunks."""
    tile = 128 * 128 * 2
    s, p = _tnlg_ip_tp16()
    assert (p.stages, p.slot_bytes.shape[1]) == (14, 16)
    assert np.ptp(p.slot_bytes.sum(axis=0)) > tile               # equal WG counts: the last chunk is short
    assert p.read_bytes[0] > 10 * p.read_bytes[1:].mean()        # the cold walk of the activation operand
    _, c = _tnlg_ip_tp16(stage_split="chunk")
    assert c.stages == 16
    assert (np.count_nonzero(c.slot_bytes, axis=1) == 1).all()   # every stage's output is one chunk
    assert (c.slot_bytes.argmax(axis=1) == np.arange(16)).all()
    _, cb = _tnlg_ip_tp16(stage_split="chunk", chunking="bytes")      # stages follow the byte chunks
    assert (np.count_nonzero(cb.slot_bytes, axis=1) == 1).all()
    _, b = _tnlg_ip_tp16(chunking="bytes")
    assert np.ptp(b.slot_bytes.sum(axis=0)) <= tile
    assert b.slot_bytes.sum() == p.slot_bytes.sum()
    _, w = _tnlg_ip_tp16(first_stage_reads="steady")
    assert w.read_bytes[0] == pytest.approx(p.read_bytes[1:].mean())
    assert (w.read_bytes[1:] == p.read_bytes[1:]).all()
    for k, v in (("stage_split", "ring"), ("chunking", "rows"), ("first_stage_reads", "warm")):
        with pytest.raises(ValueError, match=k):
            config.system(16, **{k: v})


def test_stage0_is_its_compute_plus_the_remote_burst_hold():
    """Why stage 0 is ~2x a later stage on T-NLG IP TP16 (bench t3_stage0_takeapart): its compute pays
    nothing for the cold operand walk (compute-bound), then it waits for its slot-0 burst to get onto
    the link but for the remote-store buffer; a later stage only waits for its local stores.  Under T3
    a later stage takes longer than the link needs per chunk (GEMM-bound inside the fused kernel, so the
    link waits on the GEMM); without DRAM contention the link is the bound."""
    s, p = _tnlg_ip_tp16()
    f = overlap.simulate(s, p, comm=True, policy="rr")
    comp0 = f.stage_compute_end[0] - f.stage_start[0]
    assert comp0 == pytest.approx(p.t_compute[0], abs=1e-6)
    hold = (p.slot_bytes[0, 0] - s.remote_store_buffer_bytes) / s.link_bw
    assert f.stage_end[0] - f.stage_compute_end[0] == pytest.approx(hold, abs=2e-6)
    later_retire = (f.stage_end[1:] - f.stage_compute_end[1:]).mean()
    assert later_retire < 0.6 * hold
    n = p.slot_bytes.shape[1]
    chunk = p.slot_bytes[0, 0] / s.link_bw
    assert np.diff(f.stage_end).mean() > 1.1 * chunk
    assert (f.send_end - f.send_start)[2:n - 1].mean() > 1.05 * chunk
    sn = s.scaled(tRTW=0, tWTR=0, row_interference=False, row_hit=(1.0, 1.0, 1.0, 1.0))
    g = overlap.simulate(sn, p, comm=True, policy="rr")
    assert (g.send_end - g.send_start)[2:n - 1].mean() == pytest.approx(chunk, rel=0.01)
    assert g.stage_end[0] - g.stage_compute_end[0] == pytest.approx(hold, abs=2e-6)


def _t3_speedup(key, tp, sl, **kw):
    r = study.evaluate(config.system(**kw), config.model(key), tp, sl, configs=("t3",))
    return r.speedup("t3")


def test_no_hold_drain_level_lifts_the_t3_max_case_and_slows_a_memory_bound_fc_case():
    """bench t3_drain_takeapart: under the no-hold start-up reading (stage 1 not held behind stage 0's
    remote burst), raising the write-drain watermarks at a fixed 4-entry batch (12/8 -> 24/20) lifts the
    set's T3 maximum case (Mega-GPT-2 IP TP16) and slows a memory-bound FC case (Mega-GPT-2 FC-2 TP16):
    the watermark level separates the maximum from the geomean, the batch moves both together."""
    nh = dict(remote_store_buffer_bytes=1e12)
    ip = {wd: _t3_speedup("mega-gpt-2", 16, "IP", **nh, write_drain=wd) for wd in ((12, 8), (24, 20))}
    fc = {wd: _t3_speedup("mega-gpt-2", 16, "FC-2", **nh, write_drain=wd) for wd in ((12, 8), (24, 20))}
    assert ip[(24, 20)] > ip[(12, 8)] + 0.02
    assert fc[(24, 20)] < fc[(12, 8)] - 0.02


def _t3_gemm_split(key, tp, sl):
    """(GEMM slowdown inside T3 vs the isolated cached GEMM, extra compute us, extra retirement us) of the
    T3 GEMM inside the fused kernel against the same uncached GEMM alone (bench t3_max_reading)."""
    _, alone = study.gemm_alone_uncached(config.system(), config.model(key), tp, sl)
    r = study.evaluate(config.system(), config.model(key), tp, sl, configs=("t3",))
    f = r.fused["t3"]
    (fc, fr), (ac, ar) = study.stage_phase_us(f), study.stage_phase_us(alone)
    return f.gemm_end / r.gemm, fc - ac, fr - ar


@pytest.mark.xfail(strict=True, reason="issue 15 (bench t3_max_reading): §6.1.2 says the RS traffic has little "
                   "impact on the OP GEMMs' progress and §3.2.2 puts the impact on GEMMs whose inputs miss the LLC; "
                   "in the model the OP GEMM is the most slowed inside T3 (Mega-GPT-2 TP8: OP x2.05 vs FC-2 x1.35), "
                   "because the loss is stage retirement (store admission), the same output bytes for every sub-layer. "
                   "Known deviation, kept visible")
def test_op_gemm_least_slowed_inside_t3():
    op = _t3_gemm_split("mega-gpt-2", 8, "OP")
    fc = _t3_gemm_split("mega-gpt-2", 8, "FC-2")
    assert op[0] <= fc[0]


def test_t3_gemm_loss_is_mostly_store_admission_on_op():
    """The mechanism behind the xfail above: the OP GEMM's extra time inside T3 is almost all stage
    retirement (the stage's NMC stores waiting for MC admission), its read phase barely slows (its reads
    fit the LLC); the FC GEMM's read phase does slow (read stalls), by more than the OP's."""
    _, op_c, op_r = _t3_gemm_split("mega-gpt-2", 8, "OP")
    _, fc_c, fc_r = _t3_gemm_split("mega-gpt-2", 8, "FC-2")
    assert op_r > 5 * op_c
    assert fc_c > 4 * op_c
    assert op_r == pytest.approx(fc_r, rel=0.15)      # same output bytes, same store cost


def _host_floor_and_budget(key, tp, sl, speedup):
    """(floor, budget) in s of the fused GEMM-RS for T3 to reach ``speedup`` on a case (bench t3_max_reading):
    budget = Sequential / speedup - AG; floor = max(NMC RS + stage 0's compute, the T3 GEMM alone)."""
    pu, alone = study.gemm_alone_uncached(config.system(), config.model(key), tp, sl)
    r = study.evaluate(config.system(), config.model(key), tp, sl, configs=("ideal-rs-nmc",))
    return study.fused_floor(r, pu, alone), r.times["sequential"] / speedup - r.ag


def test_paper_t3_maximum_cannot_be_tnlg_ip_tp16_in_the_model():
    """The earlier take-aparts chased T-NLG IP TP16; its link starts only after stage 0's compute, so its
    fused floor is above the paper's 39 % budget (it can reach the >= 34 % band); Mega-GPT-2 IP TP8 can
    host 39 % if its T3 GEMM is slowed <= ~1.23x over its run alone."""
    P = config.paper()
    floor, b39 = _host_floor_and_budget("t-nlg", 16, "IP", 1 + P["fig16_t3_max"])
    _, b34 = _host_floor_and_budget("t-nlg", 16, "IP", 1 + P["fig16_t3_max"] - 0.05)
    assert b39 < floor < b34
    floor, b39 = _host_floor_and_budget("mega-gpt-2", 8, "IP", 1 + P["fig16_t3_max"])
    assert floor < b39 < 1.3 * floor


# ---------------- issue 15 (stop 30): sourced write-drain policy, GPGPU-Sim's frfcfs write queue
def test_watermark_write_rule_batches_writes_from_high_to_low():
    """GPGPU-Sim's frfcfs scheduler with its separate write queue (``write_drain_rule='watermark'``,
    dram_sched.cc): writes issue only in write mode, entered at >= high and left below low, so a write batch
    serves at least high - low + 1 writes (the end-of-kernel flush aside); the model's 'idle' rule also
    drains whenever no read waits, in batches of a few.  Same for the bank-head scheduler; every request is
    still served (the flush ends the kernel)."""
    s = config.system(16).scaled(write_queue_entries=64, write_drain=(56, 32))
    pu = gemm.plan(s, gemm.sublayer_dims(config.model("mega-gpt-2"), 16, "OP"), cached_output=False)
    runs = {k: overlap.simulate(s.scaled(**kw), pu, comm=True, policy="rr")
            for k, kw in (("idle", {}), ("watermark", dict(write_drain_rule="watermark")),
                          ("bank_heads", dict(write_drain_rule="watermark", mc_scheduler="bank_heads")))}
    fc = s.dram_clock
    writes = (runs["idle"].dram["gemm_updates"] + runs["idle"].dram["rs_updates"]) / s.unit_bytes
    per_batch = {k: writes / max(f.write_batches, 1) for k, f in runs.items()}
    assert per_batch["watermark"] >= 56 - 32 + 1, per_batch
    assert per_batch["bank_heads"] >= 56 - 32 + 1, per_batch
    assert per_batch["idle"] < 10, per_batch
    for k, f in runs.items():
        assert round(f.dram_busy * f.time * fc) == round(runs["idle"].dram_busy * runs["idle"].time * fc), k
    with pytest.raises(ValueError, match="write_drain_rule"):
        s.scaled(write_drain_rule="eager")


def test_without_stage_barrier_the_12_8_drain_slows_the_gemm_alone_and_fills_the_queue():
    """Why no stage barrier (§2.5) breaks T3-MCA under the calibrated 12/8 drain (bench t3_read_stall): with WGs
    retiring one by one the next stage's reads mix with this stage's stores, the 12/8 watermarks turn around
    every few writes, and the uncached GEMM alone slows ~1.4x with its MC queue above the largest MCA threshold
    (30), so compute-first MCA admits RS only at the starvation limit.  Under the paper simulator's scheduler
    (Accel-Sim SM7_QV100 bank heads, no write drain) the same GEMM is not slowed and the queue stays low."""
    d = gemm.sublayer_dims(config.model("mega-gpt-2"), 16, "FC-2")
    r = {}
    for k, kw in (("drain", {}), ("bank_heads", dict(mc_scheduler="bank_heads"))):
        for nb in (False, True):
            s = config.system(16).scaled(wg_retire=nb, **kw)
            r[k, nb] = overlap.simulate(s, gemm.plan(s, d, cached_output=False), comm=False)
    assert r["drain", True].time > 1.25 * r["drain", False].time
    assert r["drain", True].mean_occupancy > 30 > r["drain", False].mean_occupancy
    assert r["bank_heads", True].time < 1.02 * r["bank_heads", False].time
    assert r["bank_heads", True].mean_occupancy < 30
    assert r["drain", True].write_batches > 10 * r["drain", False].write_batches


def test_comm_first_bound_grants_rs_whenever_it_waits():
    """``comm_first`` (take-apart bound for bench t3_read_stall, not an RTL policy): a communication request is
    granted on every cycle it is valid and the MC queue has room; compute only otherwise."""
    from tessera.sim_models.t3 import dram
    rng = np.random.default_rng(7)
    n = 2000
    tr = dict(c_valid=rng.random(n) < 0.6, m_valid=rng.random(n) < 0.5, out_ready=rng.random(n) < 0.8,
              occ=rng.integers(0, 64, n), drain=rng.random(n) < 0.05)
    got = dram.arb_replay(tr, dram.POLICY_COMM_FIRST, 20, 9, 1023)
    want = np.where(~tr["out_ready"], 0, np.where(tr["m_valid"], 2, np.where(tr["c_valid"], 1, 0)))
    assert got.tolist() == want.tolist()


# ---------------- issue 15 (stop 31): the missing-cost candidates (take-apart switches, bench t3_read_stall)
def test_l2_dram_fifo_takes_grants_while_the_mc_queue_is_full():
    """``l2_dram_fifo_entries`` (Accel-Sim SM7_QV100 ``-gpgpu_dram_partition_queues 64:64:64:64``, two L2
    sub-partitions per channel): the arbiter grants into an in-order FIFO in front of the MC queue, so it keeps
    granting while the MC queue is full; without it a full queue refuses every grant.  Every request is served
    either way."""
    from tessera.sim_models.t3 import dram
    d = gemm.sublayer_dims(config.model("mega-gpt-2"), 16, "FC-2")
    r = {}
    for F in (0, 128):
        s = config.system(16).scaled(wg_retire=True, l2_dram_fifo_entries=F)
        r[F] = overlap.simulate(s, gemm.plan(s, d, cached_output=False), comm=False, window=(200_000, 20_000))
    Q = config.system(16).mc_queue_entries
    for F, x in r.items():
        w = x.window
        assert w[:, 3].max() <= Q
        granted_full = int(((w[:, 3] >= Q) & (w[:, 6] != dram.GRANT_NONE)).sum())
        assert (granted_full > 0) == (F > 0), (F, granted_full)
    assert r[128].dram["gemm_reads"] == r[0].dram["gemm_reads"]
    # mca_occupancy='all_fifo': the occupancy the arbiter sees counts the FIFO's entries too
    s = config.system(16).scaled(wg_retire=True, l2_dram_fifo_entries=128, mca_occupancy="all_fifo")
    x = overlap.simulate(s, gemm.plan(s, d, cached_output=False), comm=False, window=(200_000, 20_000))
    assert x.window[:, 3].max() > Q
    with pytest.raises(ValueError, match="l2_dram_fifo_entries"):
        config.system(16).scaled(l2_dram_fifo_entries=-1)


def _mega_op_tp16_fused(switch, values):
    """Mega-GPT-2 OP at TP16, fused GEMM-RS (round robin) once per value of system field ``switch``:
    ({value: result}, the last value's system, its plan)."""
    d = gemm.sublayer_dims(config.model("mega-gpt-2"), 16, "OP")
    r = {}
    for v in values:
        s = config.system(16).scaled(**{switch: v})
        p = gemm.plan(s, d, cached_output=False)
        r[v] = overlap.simulate(s, p, comm=True, policy="rr")
    return r, s, p


def test_rs_not_paced_by_the_link_delivers_updates_early_but_the_link_still_bounds():
    """``rs_pacing='dma'`` (§5.1.1: the RS traffic is injected through Accel-Sim's front end): the neighbour's
    updates reach the MC as its DMA engine reads them (slot 0: as its GEMM stores), so the last slots are reduced
    well before the link could have delivered them; the sends still go through the link, so the run ends no
    earlier than the link time of the sent bytes."""
    r, s, p = _mega_op_tp16_fused("rs_pacing", ("link", "dma"))
    link_time = p.slot_bytes.sum(axis=0)[:-1].sum() / s.link_bw
    assert r["dma"].slot_ready[-1] < r["link"].slot_ready[-1] - 50e-6
    assert r["dma"].time >= link_time and r["link"].time >= link_time
    assert r["dma"].dram["rs_updates"] == r["link"].dram["rs_updates"]
    with pytest.raises(ValueError, match="rs_pacing"):
        config.system(16).scaled(rs_pacing="burst")


def test_rs_dram_free_takes_only_the_gemm_through_the_dram():
    """``rs_dram='free'`` (take-apart of the RS traffic's DRAM share, bench ``t3_fc_takeapart``): the DRAM serves
    exactly the GEMM's reads and its local NMC stores (slot 0 goes to the neighbour), no DMA read and no incoming
    update; every slot is still reduced and the link still bounds the run; the default queues the RS traffic."""
    r, s, p = _mega_op_tp16_fused("rs_dram", ("queued", "free"))
    U, fc = s.unit_bytes, s.dram_clock
    R = int(np.round(p.read_bytes / U).astype(np.int64).sum())
    SB = np.round(p.slot_bytes / U).astype(np.int64)
    gemm_only = R + int(SB[:, 1:].sum())
    busy = {k: int(round(x.dram_busy * round(x.time * fc))) for k, x in r.items()}
    assert busy["free"] == gemm_only
    rs_reqs = int(SB.sum(axis=0)[1:-1].sum() + SB.sum(axis=0)[1:].sum())   # DMA reads of slots 1..N-2 + updates
    assert busy["queued"] == gemm_only + rs_reqs
    assert np.isfinite(r["free"].slot_ready[1:]).all()
    link_time = p.slot_bytes.sum(axis=0)[:-1].sum() / s.link_bw
    assert r["free"].time >= link_time
    assert r["free"].gemm_end < r["queued"].gemm_end
    with pytest.raises(ValueError, match="rs_dram"):
        config.system(16).scaled(rs_dram="none")


def test_t3_gemm_loss_on_the_ideal_maximum_is_the_rs_dram_share_not_the_gemm_reads():
    """Issue 15 stop 32 (bench t3_fc_takeapart): on T-NLG FC-1 TP16 (Fig 16's Ideal maximum) the model's GEMM is
    ~1.46x slower inside T3 than alone.  Removing the RS traffic's DRAM share (``rs_dram='free'``) removes most
    of that extra time; removing the GEMM's own DRAM reads removes little of it - the model's loss there is the
    stage's NMC stores waiting behind the RS traffic, not GEMM read stalls (§6.1.2 names read stalls)."""
    from dataclasses import replace
    d = gemm.sublayer_dims(config.model("t-nlg"), 16, "FC-1")

    def extra(s, reads0=False):
        p = gemm.plan(s, d, cached_output=False)
        if reads0:
            p = replace(p, read_bytes=np.zeros_like(p.read_bytes))
        alone = overlap.simulate(s, p, comm=False)
        return overlap.simulate(s, p, comm=True, policy="rr").gemm_end - alone.time, alone.time

    s = config.system(16)
    base, alone = extra(s)
    assert base > 0.4 * alone
    assert extra(s.scaled(rs_dram="free"))[0] < 0.3 * base
    assert extra(s, reads0=True)[0] > 0.7 * base
