"""cocotb testbench of the T3 memory-controller arbiter (§4.5) against
``tessera.golden.t3.ArbiterModel``, cycle by cycle, for every policy.

Stimulus: a compute stream with random gaps, a bursty communication stream (bursts of DMA reads /
NMC updates, §3.2.2) and a DRAM command queue modelled in Python (fill = occupancy input, random
service, ``out.ready`` while not full).  Checked every cycle: both readies (the grants), output
valid and source, the request leaving ``out`` (granted requests in grant order), effective
threshold and starvation flag.  Checked over the run (MCA): communication never waits longer than
the starvation limit (plus cycles the queue was full); communication granted without
starving never finds the queue at or above the threshold in its grant cycle; the
dynamic threshold equals the table entry for the mean occupancy of the learning window.
"""
from __future__ import annotations

import os
import random
from collections import deque

import cocotb
from cocotb.triggers import ReadOnly, RisingEdge

from tessera.golden.t3 import POLICY_COMPUTE_FIRST, POLICY_MCA, POLICY_RR, ArbiterModel
from tessera.tb.common import TBBase

TABLE = (5, 10, 30, 31)       # paper: 5, 10, 30, no limit (31 >= queue depth here)
BINS = (12, 6, 3)


class MCATB(TBBase):
    def __init__(self, dut):
        super().__init__(dut)
        p = self.params
        self.depth = (1 << p["occ_width"]) - 1
        self.model = ArbiterModel(p["occ_width"], p["wait_width"], p["learn_log2"])
        for i, v in enumerate(TABLE):
            getattr(dut, f"table{i}").value = v
        for i, v in enumerate(BINS):
            getattr(dut, f"bin{i}").value = v
        dut.comp__valid.value = 0
        dut.comm__valid.value = 0
        dut.out__ready.value = 0
        dut.occupancy.value = 0
        dut.drain.value = 0
        dut.learn.value = 0

    async def start(self):
        await self.reset()
        self.model.reset()
        self.model.step(False, False, False, 0, policy=0)   # the cycle TBBase.reset returns after


async def run_policy(tb, policy, *, cycles, seed, threshold=8, starve_limit=12, dynamic=False,
                     learn_cycles=0, learn_start=0, drain_at=None, comp_rate=0.7, service=0.75):
    d = tb.dut
    rng = random.Random(seed)
    cfg = dict(policy=policy, threshold=threshold, starve_limit=starve_limit, dynamic=dynamic,
               table=TABLE, bins=BINS)
    d.policy.value = policy
    d.threshold.value = threshold
    d.starve_limit.value = starve_limit
    d.dynamic.value = int(dynamic)
    d.comp__valid.value = 0           # nothing offered in the cycle after reset (model: idle)
    d.comm__valid.value = 0
    d.out__ready.value = 0
    await tb.start()
    occ = 0
    comp_cur = comm_cur = None
    burst = 0
    seq = 0
    comm_wait = 0                 # cycles the current comm head has waited
    full_cycles = 0
    learn_occ = []
    granted = deque()            # (src, request) granted, not yet out
    stats = {"grants": 0, "comm": 0, "comp": 0, "max_wait_excess": 0, "thr_violations": 0,
             "starved_grants": 0}
    for cyc in range(cycles):
        learn = learn_start <= cyc < learn_start + learn_cycles
        drain = drain_at is not None and cyc >= drain_at
        if comp_cur is None and not drain and rng.random() < comp_rate:
            seq += 1
            comp_cur = seq
        if comm_cur is None:
            if burst == 0 and rng.random() < 0.04:
                burst = rng.randint(8, 40)          # bursty communication
            if burst:
                burst -= 1
                seq += 1
                comm_cur = seq | (1 << 15)
        out_ready = occ < tb.depth
        occ_in = occ                 # occupancy input of this cycle
        d.comp__valid.value = int(comp_cur is not None)
        d.comp__payload.value = comp_cur or 0
        d.comm__valid.value = int(comm_cur is not None)
        d.comm__payload.value = comm_cur or 0
        d.out__ready.value = int(out_ready)
        d.occupancy.value = occ_in
        d.drain.value = int(drain)
        d.learn.value = int(learn)
        await ReadOnly()
        exp = tb.model.step(comp_cur is not None, comm_cur is not None, out_ready, occ_in,
                            drain=drain, learn=learn, **cfg)
        got = {"out_valid": bool(d.out__valid.value), "c_ready": bool(d.comp__ready.value),
               "m_ready": bool(d.comm__ready.value), "threshold": d.eff_threshold.value.to_unsigned(),
               "starving": bool(d.starving.value)}
        for key, v in got.items():
            tb.check_equal(v, exp[key], f"policy {policy} cycle {cyc} {key}")
        if got["out_valid"]:
            word = d.out__payload.value.to_unsigned()
            src, req = word & 1, word >> 1
            tb.check_equal(src, exp["out_src"], f"policy {policy} cycle {cyc} src")
            tb.check_equal((src, req), granted[0], f"cycle {cyc} request (grant order)")
            if out_ready:
                granted.popleft()
                occ += 1
        if learn:
            learn_occ.append(occ_in)
        if got["c_ready"] or got["m_ready"]:
            stats["grants"] += 1
            if got["m_ready"]:
                granted.append((1, comm_cur))
                stats["comm"] += 1
                if policy == POLICY_MCA and not drain:
                    stats["max_wait_excess"] = max(stats["max_wait_excess"],
                                                   comm_wait - full_cycles - starve_limit)
                    if comm_wait >= starve_limit:
                        stats["starved_grants"] += 1
                    elif occ_in >= got["threshold"]:
                        stats["thr_violations"] += 1
                comm_cur = None
                comm_wait = full_cycles = 0
            else:
                granted.append((0, comp_cur))
                stats["comp"] += 1
                comp_cur = None
        if comm_cur is not None and not got["m_ready"]:
            comm_wait += 1
            full_cycles += not out_ready
        if occ and rng.random() < service:
            occ -= 1
        tb.cycles += 1
        await RisingEdge(tb.clk)
    stats["learn_occ"] = learn_occ
    return stats


@cocotb.test()
async def mca_policies(dut):
    tb = MCATB(dut)
    seed = int(os.environ.get("TESSERA_SEED", "1"))
    L = 1 << tb.params["learn_log2"]
    res = {}
    for policy in (POLICY_RR, POLICY_COMPUTE_FIRST, POLICY_MCA):
        res[policy] = await run_policy(tb, policy, cycles=1500, seed=seed * 7 + policy)
        tb.check(res[policy]["comm"] > 50 and res[policy]["comp"] > 50, f"policy {policy} mix")
    mca = res[POLICY_MCA]
    tb.check(mca["max_wait_excess"] <= 0, f"starvation limit exceeded by {mca['max_wait_excess']}")
    tb.check_equal(mca["thr_violations"], 0, "communication issued above the threshold")
    tb.check(mca["starved_grants"] > 0, "starvation path never exercised")
    # saturated: both streams always valid, queue always served -> one grant per cycle
    sat = await run_policy(tb, POLICY_MCA, cycles=400, seed=seed, comp_rate=1.0, service=1.0,
                           threshold=31)
    tb.check(sat["grants"] >= 399, f"{sat['grants']} grants in 400 saturated cycles")
    # dynamic threshold learned during an isolated-compute window, then kernel-boundary drain
    learned = []
    for service, label in ((0.55, "memory-intensive"), (0.97, "compute-bound")):
        st = await run_policy(tb, POLICY_MCA, cycles=900, seed=seed + 11, dynamic=True,
                              learn_cycles=L + 5, learn_start=30, drain_at=700, comp_rate=0.9,
                              service=service)
        mean = sum(st["learn_occ"][:L]) // L
        want = next((TABLE[i] for i, b in enumerate(BINS) if mean >= b), TABLE[3])
        tb.check_equal(dut.eff_threshold.value.to_unsigned(), want, f"{label} learned threshold")
        learned.append(want)
        tb.check_equal(st["thr_violations"], 0, f"{label} threshold respected")
        tb.check(st["max_wait_excess"] <= 0, f"{label} starvation limit")
    tb.check(learned[0] < learned[1], f"learned thresholds {learned} not ordered by intensity")
    tb.report("mca_policies", saturated_grants_per_cycle=sat["grants"] / 400,
              what=f"RR / compute-first / MCA x 1500 cycles: starvation bound, threshold, learned "
                   f"thresholds vs golden table; {sat['grants']}/400 grants saturated")
