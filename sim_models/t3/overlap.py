"""Fused GEMM + ring reduce-scatter with track & trigger, NMC and DRAM arbitration (T3 §4, §5.3).

One GPU is simulated; by the symmetry of the staggered schedule (§4.4, Fig 7) every GPU does the same
thing shifted by one chunk, so the traffic a GPU *receives* for chunk slot ``s`` is the traffic it
*sends* for slot ``s-1``, one link latency later (the paper's own simulation makes the same
assumption, §5.1.1).  Time advances in fixed steps ``dt``; quantities are fluid (bytes).

GEMM (``gemm.plan``): stage ``j`` needs ``t_compute[j]`` at full speed and ``read_bytes[j]`` of DRAM
reads, consumed in proportion to progress.  Its reads are limited by (a) the DRAM share the
arbitration grants the compute stream and (b) Little's law: at most ``gemm_mlp_bytes`` in flight, so
its read rate is ``mlp / (latency + queueing delay)``; the queueing delay is the DRAM-queue occupancy
ahead of it (its own queued writes and the communication requests the policy lets in) divided by the
DRAM bandwidth.  At the end of a stage its output is written (epilogue): plain stores into a write-back
L2 (baseline, buffered up to ``write_buffer_cached``) or uncached NMC updates costing
``nmc_update_cost`` DRAM slots each (T3, buffered only by the MC queue); the stage's WGs retire and
the next stage starts only once the stores fit in that buffer, so an uncached write burst is on the
critical path and competes with communication traffic for DRAM.  Slot 0's chunk is stored straight into the neighbour (``remote_map``, no local
write).

Communication: the Tracker marks bytes of slot ``s >= 1`` ready once both the local update and the
incoming update are in DRAM (fluid form of the per-WF threshold of §4.2.1); ready bytes of slots
``1..N-2`` are DMA-read (1 access) and sent (``dma_map``); incoming bytes are NMC updates.  One
outgoing link of ``link_bw`` (lower slots first); the inbox is bounded by the MC queue (back-pressure).

DRAM arbitration of compute vs communication stream per step (§4.5):
``rr`` round-robin with fall-back (T3 baseline), ``compute_first``, ``mca`` (compute first, comm only
below an occupancy threshold, anti-starvation share).  Occupancy caps of the comm stream: ``rr``
half the queue, ``compute_first`` the whole queue, ``mca`` the threshold.

Left out: per-bank DRAM timing (an update costs a fixed multiple of an access), the Tracker's finite
entries, DMA-engine issue limits, skew between GPUs (perfect symmetry).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import System
from .gemm import GemmPlan

POLICIES = ("rr", "compute_first", "mca")


@dataclass
class FusedResult:
    time: float                     # GEMM + RS done (s)
    gemm_end: float                 # last stage's output written
    stage_start: np.ndarray
    stage_end: np.ndarray
    slot_ready: np.ndarray          # s: time the slot's chunk is fully reduced/ready (nan for slot 0)
    send_start: np.ndarray          # s: first byte of slot s leaves (slot 0 = remote stores)
    send_end: np.ndarray
    dram: dict                      # bytes per category
    dram_busy: float                # fraction of the run the DRAM was busy
    trace: dict = field(default_factory=dict)
    policy: str = ""
    threshold_bytes: float = float("inf")


def arbitrate(policy: str, cap: float, dc: float, dm: float, min_share: float) -> tuple[float, float]:
    """DRAM slots (cost units) granted to the compute and the communication stream in one step."""
    if policy == "rr":
        gc = min(dc, max(cap / 2, cap - dm))
    elif policy == "compute_first":
        gc = min(dc, cap)
    elif policy == "mca":
        reserve = min(dm, min_share * cap)
        gc = min(dc, cap - reserve)
    else:
        raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    gm = min(dm, cap - gc)
    return gc, gm


def mca_threshold(sysm: System, gemm_dram_util: float) -> float:
    """Occupancy threshold (bytes) chosen from the isolated GEMM's DRAM utilisation (§4.5, §6.1.3)."""
    for bound, entries in zip(sysm.mca_bounds, sysm.mca_thresholds):
        if gemm_dram_util > bound:
            return entries * sysm.mc_entry_bytes
    last = sysm.mca_thresholds[len(sysm.mca_bounds)]
    return float("inf") if last is None else last * sysm.mc_entry_bytes


def simulate(sysm: System, plan: GemmPlan, *, comm: bool, policy: str = "rr", nmc: bool = True,
             threshold_bytes: float = float("inf"), dt: float | None = None,
             record: bool = False) -> FusedResult:
    """Run the GEMM alone (``comm=False``) or fused with ring RS (``comm=True``)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    n = plan.slot_bytes.shape[1]
    B = sysm.dram_bw
    u = sysm.nmc_update_cost if nmc else 1.0
    wcost = u if not plan.cached_output else 1.0
    wbuf = sysm.write_buffer_cached if plan.cached_output else sysm.write_buffer_uncached
    Q = sysm.mc_queue_bytes
    occ_cap = {"rr": Q / 2, "compute_first": Q, "mca": min(threshold_bytes, Q)}[policy]
    est = plan.t_compute_total + (plan.out_bytes.sum() / sysm.link_bw if comm else 0.0)
    dt = dt or max(0.2e-6, est / 4000)
    cap = B * dt
    link_cap = sysm.link_bw * dt
    lat_steps = max(0, int(round(sysm.link_latency / dt)))
    mlp = sysm.gemm_mlp_bytes
    L0 = sysm.dram_latency

    slot_total = plan.slot_bytes.sum(axis=0)            # bytes of each chunk slot
    S = plan.stages
    stage_start = np.full(S, np.nan)
    stage_end = np.full(S, np.nan)
    produced = np.zeros(n)                              # local update bytes in DRAM per slot
    written_in = np.zeros(n)                            # incoming update bytes in DRAM per slot
    inbox = np.zeros(n)                                 # arrived, not yet applied
    sent = np.zeros(n)
    remote_q = 0.0                                      # slot-0 remote stores waiting for the link
    wq: list = []                                       # GEMM write backlog FIFO [slot, bytes]
    wq_bytes = 0.0
    hist = np.zeros((lat_steps + 1, n))                 # sends in flight on the link
    send_start = np.full(n, np.nan)
    send_end = np.full(n, np.nan)
    slot_ready = np.full(n, np.nan)
    dram = dict(gemm_reads=0.0, gemm_writes=0.0, gemm_updates=0.0, rs_reads=0.0, rs_updates=0.0)
    busy = 0.0
    tr = ({k: [] for k in ("t", "gemm_read", "gemm_write", "comm", "link", "produced", "incoming")}
          if record else {})

    j, prog, t, i = 0, 0.0, 0.0, 0
    epilogue = False
    stage_start[0] = 0.0
    gemm_done_t = np.nan
    max_steps = int(50 * est / dt) + 100000
    scale_in = np.ones(n)
    scale_in[1:] = slot_total[1:] / np.maximum(slot_total[:-1], 1e-30)
    while True:
        # ---- arrivals (symmetry: my sends of slot s-1, lat ago, are my incoming of slot s)
        if comm:
            arr = hist[i % (lat_steps + 1)].copy()
            hist[i % (lat_steps + 1)] = 0.0
            inbox[1:] += arr[:-1] * scale_in[1:]
        # ---- demands
        gemm_active = j < S
        if gemm_active and plan.read_bytes[j] > 0:
            want_r = plan.read_bytes[j] * min(1.0 - prog, dt / plan.t_compute[j])
        else:
            want_r = 0.0
        comm_pending = (u * inbox.sum()) if comm else 0.0
        if comm:
            ready = np.minimum(produced, written_in) - sent
            ready[0] = 0.0
            ready[n - 1] = 0.0
            ready = np.maximum(ready, 0.0)
            comm_pending += ready.sum()
        occ = min(comm_pending, occ_cap) + min(wq_bytes * wcost, Q)
        mlp_cap = mlp / (L0 + occ / B) * dt
        want_r = min(want_r, mlp_cap)
        dc = want_r + wq_bytes * wcost
        # link: slot-0 remote stores first (no DRAM read), then DMAs
        link_left = link_cap
        r0 = min(remote_q, link_left) if comm else 0.0
        link_left -= r0
        dma_want = 0.0
        if comm and inbox.sum() < Q:                    # back-pressure
            dma_want = min(ready.sum(), link_left)
        dm = (u * inbox.sum() if comm else 0.0) + dma_want
        gc, gm = arbitrate(policy, cap, dc, dm, sysm.mca_min_comm_share)
        busy += (gc + gm) / cap
        # ---- compute stream: reads first, then writes
        g_read = min(want_r, gc)
        g_write = (gc - g_read) / wcost
        # ---- comm stream: incoming updates first, then DMA reads
        if comm:
            g_upd = min(u * inbox.sum(), gm) / u
            g_dma = min(dma_want, gm - g_upd * u)
            tot_in = inbox.sum()
            if tot_in > 0:
                take = inbox * (g_upd / tot_in)
                inbox -= take
                written_in += take
            dram["rs_updates" if nmc else "gemm_writes"] += g_upd
            # DMA sends in slot order
            snd = np.zeros(n)
            left = g_dma
            for s in range(1, n - 1):
                if left <= 0:
                    break
                x = min(ready[s], left)
                snd[s] = x
                left -= x
            snd[0] = r0
            remote_q -= r0
            sent += snd
            dram["rs_reads"] += snd[1:].sum()
            hist[(i + lat_steps) % (lat_steps + 1)] += snd if lat_steps else 0.0
            if lat_steps == 0:
                inbox[1:] += snd[:-1] * scale_in[1:]
            nz = (snd > 0) & np.isnan(send_start)
            send_start[nz] = t
        # ---- GEMM progress
        if gemm_active:
            dram["gemm_reads"] += g_read
            if plan.read_bytes[j] > 0:
                dp = min(dt / plan.t_compute[j], g_read / plan.read_bytes[j])
            else:
                dp = dt / plan.t_compute[j]
            prog = min(1.0, prog + dp)
        # drain writes FIFO
        left = g_write
        while left > 0 and wq:
            s, b = wq[0]
            x = min(b, left)
            produced[s] += x
            left -= x
            wq_bytes -= x
            dram["gemm_updates" if not plan.cached_output else "gemm_writes"] += x
            if x >= b - 1e-3:
                produced[s] += b - x
                wq.pop(0)
            else:
                wq[0][1] = b - x
        wq_bytes = sum(b for _, b in wq)
        t += dt
        i += 1
        if gemm_active and prog >= 1.0 - 1e-12 and not epilogue:
            # epilogue: the stage's WGs store their tiles; they retire (and the next stage's WGs
            # launch) only once the stores are accepted by the write buffer (L2 or MC queue)
            epilogue = True
            for s in range(n):
                b = plan.slot_bytes[j, s]
                if b <= 0:
                    continue
                if comm and s == 0:
                    remote_q += b
                else:
                    wq.append([s, b])
                    wq_bytes += b
        if epilogue and wq_bytes <= wbuf + 1e-3 and remote_q <= Q:
            stage_end[j] = t
            epilogue = False
            j += 1
            prog = 0.0
            if j < S:
                stage_start[j] = t
        if record:
            tr["t"].append(t)
            tr["gemm_read"].append(g_read / dt)
            tr["gemm_write"].append((gc - g_read) / dt)
            tr["comm"].append(gm / dt)
            tr["link"].append((snd.sum() if comm else 0.0) / dt)
            tr["produced"].append(produced.copy())
            tr["incoming"].append(written_in.copy())
        # ---- bookkeeping / termination
        if comm:
            tol = 1e-6 * slot_total + 1e-9
            done_s = np.abs(np.minimum(produced, written_in) - slot_total) <= tol
            newly = done_s & np.isnan(slot_ready)
            newly[0] = False
            slot_ready[newly] = t
            fin = np.abs(sent - slot_total) <= tol
            newly = fin & np.isnan(send_end)
            newly[n - 1] = False
            send_end[newly] = t
        if j >= S and not wq and np.isnan(gemm_done_t) and remote_q <= 1e-3:
            gemm_done_t = t
        if not np.isnan(gemm_done_t):
            if not comm:
                break
            if (not np.isnan(slot_ready[1:]).any()) and not np.isnan(send_end[:n - 1]).any():
                break
        if i > max_steps:
            raise RuntimeError(
                f"fused simulation did not converge: stage {j}/{S}, produced {produced}, "
                f"incoming {written_in}, sent {sent}, inbox {inbox}, writes {wq_bytes}")
    produced[0] = slot_total[0]
    return FusedResult(t, gemm_done_t, stage_start, stage_end, slot_ready, send_start, send_end,
                       dram, busy / i, {k: np.asarray(v) for k, v in tr.items()}, policy,
                       threshold_bytes)
