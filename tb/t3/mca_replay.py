"""A window of the T3 system model's arbiter trace (``sim_models/t3/dram.py``) for replay through
the MCA golden model (``golden.t3.ArbiterModel``) and the RTL (``hdl/t3/mca.py``, cocotb
``test_mca_replay``): same per-cycle inputs (compute valid, communication valid, queue ready,
occupancy, drain), grants must be identical.

The window starts right after a communication grant, so the model's arbiter state then equals the
RTL's reset state (``last_comm = 1``, starvation counter 0).  Instance: the 4-GPU x 4-stage fused
GEMM-RS of the tracker cross-check, MCA with a static threshold of 10 entries and a starvation limit
of 40 cycles (so threshold blocking and starvation grants both occur in a short window), and the
same window under round-robin and compute-first.
"""
from __future__ import annotations

import numpy as np

from tessera.golden.t3 import ArbiterModel

RTL_PARAMS = {"req_width": 8, "occ_width": 7, "wait_width": 10, "learn_log2": 4}
THRESHOLD, STARVE = 10, 40
WINDOW = 1500
POLICIES = {"rr": 0, "compute_first": 1, "mca": 2}


def model_window(policy: str = "mca", length: int = WINDOW) -> dict:
    from tessera.sim_models.t3 import config, gemm, overlap
    sx = config.system(4).scaled(cus=8, dma_buffer_bytes=2 * 2 ** 20)   # shorter DMA bursts: mixed grants
    px = gemm.plan(sx, gemm.GemmDims("xcheck", 1024, 1024, 512), cached_output=False)
    big = 400_000
    r = overlap.simulate(sx, px, comm=True, policy=policy, threshold=THRESHOLD, starve_limit=STARVE,
                         window=(0, big))
    w = r.window
    # first cycle after a communication grant whose window holds at least 60 grants of each stream
    starts = np.flatnonzero(w[:-1, 6] == 2) + 1
    cc = np.concatenate([[0], np.cumsum(w[:, 6] == 1)])
    cm = np.concatenate([[0], np.cumsum(w[:, 6] == 2)])
    for L in (length, 2 * length, 4 * length, 8 * length):     # compute-first separates the streams
        ok = [k for k in starts.tolist() if k + L <= len(w) and cc[k + L] - cc[k] >= 60
              and cm[k + L] - cm[k] >= 60]
        if ok:
            length = L
            break
    k = int(ok[0])
    w = w[k:k + length]
    cols = ("c_valid", "m_valid", "out_ready", "occ", "drain", "learn", "grant")
    return dict({c: w[:, i].tolist() for i, c in enumerate(cols)}, policy=POLICIES[policy],
                threshold=THRESHOLD, starve_limit=STARVE, max_occ=int(w[:, 3].max()))


def golden_grants(tr: dict) -> list:
    g = ArbiterModel(RTL_PARAMS["occ_width"], RTL_PARAMS["wait_width"], RTL_PARAMS["learn_log2"])
    out = []
    for k in range(len(tr["occ"])):
        o = g.step(bool(tr["c_valid"][k]), bool(tr["m_valid"][k]), bool(tr["out_ready"][k]),
                   int(tr["occ"][k]), policy=tr["policy"], threshold=tr["threshold"],
                   starve_limit=tr["starve_limit"], drain=bool(tr["drain"][k]))
        out.append(2 if o["m_ready"] else 1 if o["c_ready"] else 0)
    return out


def stats(tr: dict) -> dict:
    """How much of the arbiter the window exercises."""
    g = np.asarray(tr["grant"])
    c, m, occ = (np.asarray(tr[k]) for k in ("c_valid", "m_valid", "occ"))
    blocked = (m == 1) & (c == 0) & (occ >= tr["threshold"]) & (g == 0)
    over = (g == 2) & (c == 1)          # communication granted over a compute request
    return dict(cycles=len(g), comp=int((g == 1).sum()), comm=int((g == 2).sum()),
                threshold_blocked=int(blocked.sum()), comm_over_comp=int(over.sum()),
                not_ready=int((np.asarray(tr["out_ready"]) == 0).sum()))
