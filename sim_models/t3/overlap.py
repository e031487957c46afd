"""Fused GEMM + ring reduce-scatter with track & trigger, NMC and DRAM arbitration (T3 §4, §5.3, §6.1).

One GPU is simulated; by the symmetry of the staggered schedule (§4.4, Fig 7) every GPU does the same
thing shifted by one chunk, so the traffic a GPU *receives* for chunk slot ``s`` is the traffic it
*sends* for slot ``s-1``, one link latency later (the paper's own simulation makes the same
assumption, §5.1.1).  The DRAM, the memory-controller queue and the compute/communication arbiter are
the channel-level model of :mod:`.dram` (cycle = DRAM clock, one representative channel).

GEMM (``gemm.plan``): stage ``j`` computes for ``t_compute[j]`` and needs ``read_bytes[j]`` of DRAM
reads, consumed in proportion to progress, with a bounded number in flight; at the end of the stage
its output is stored (epilogue burst, Fig 17a): plain write-back stores into L2 (Sequential, buffered
up to ``write_buffer_cached``) or uncached NMC updates (T3); the stage's WGs retire when every store
has been acknowledged by the MC (admitted to its queue).  Slot 0's chunk is stored straight into the
neighbour (``remote_map``, on the link, no local write).

Communication: the Tracker marks bytes of slot ``s >= 1`` ready once both the local update and the
incoming update are admitted (fluid form of the per-WF threshold of §4.2.1; the Tracker is checked at
MC-queue admission, §4.2.1); ready bytes of slots ``1..N-2`` are DMA-read and sent (``dma_map``);
incoming bytes are NMC updates.  One outgoing link of ``link_bw`` (slot 0 first, then lower slots).

Policies: ``rr`` round-robin with fall-back (T3), ``compute_first``, ``mca`` (T3-MCA: dynamic
threshold learned in the isolated first stage, starvation limit, drain once the GEMM is done).

Left out: the Tracker's finite entries, DMA-engine issue limits beyond its buffer, skew between GPUs
(perfect symmetry), what :mod:`.dram` leaves out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import dram as D
from .config import System
from .gemm import GemmPlan

POLICIES = tuple(D.POLICIES)
NO_LIMIT = 1 << 20          # threshold value above any queue depth ("no limit")


@dataclass
class FusedResult:
    time: float                     # GEMM + RS done (s)
    gemm_end: float                 # last stage's output acknowledged
    stage_start: np.ndarray
    stage_end: np.ndarray
    slot_ready: np.ndarray          # s: time the slot's chunk is fully reduced/ready (nan for slot 0)
    send_start: np.ndarray          # s: first byte of slot s leaves (slot 0 = remote stores)
    send_end: np.ndarray
    dram: dict                      # bytes per category
    dram_busy: float                # fraction of DRAM cycles with a column command
    mean_occupancy: float           # MC queue entries
    threshold: int                  # MCA threshold in effect after learning (entries)
    learned: bool
    max_comm_wait: int              # cycles (arbiter's starvation counter, maximum)
    trace: dict = field(default_factory=dict)
    policy: str = ""
    window: np.ndarray | None = None   # per-cycle arbiter inputs/grant (c, m, ready, occ, drain, learn, g)
    stage_compute_end: np.ndarray | None = None   # s: the stage's compute done and its stores issued
    write_batches: int = 0          # read -> write mode switches of the MC (write-drain batches)


def threshold_table(sysm: System) -> np.ndarray:
    return np.array([NO_LIMIT if x is None else int(x) for x in sysm.mca_thresholds], dtype=np.int64)


def simulate(sysm: System, plan: GemmPlan, *, comm: bool, policy: str = "rr", nmc: bool = True,
             threshold: int | None = None, starve_limit: int | None = None, dt: float | None = None,
             record: bool = False, window: tuple = (0, 0), seed: int = 1) -> FusedResult:
    """Run the GEMM alone (``comm=False``) or fused with ring RS (``comm=True``).

    ``policy='mca'`` learns its threshold from the first stage unless ``threshold`` (entries) is
    given; ``dt`` is the trace's sampling interval (s); ``window=(first_cycle, cycles)`` records the
    arbiter's per-cycle inputs and grants for replay."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; choose from {', '.join(POLICIES)}")
    n = plan.slot_bytes.shape[1]
    U = sysm.unit_bytes
    fc = sysm.dram_clock
    C = np.maximum(np.round(plan.t_compute * fc), 1.0)
    R = np.round(plan.read_bytes / U).astype(np.int64)
    SB = np.round(plan.slot_bytes / U).astype(np.int64)
    slot_req = SB.sum(axis=0)
    est = plan.t_compute_total + (plan.out_bytes.sum() / sysm.link_bw if comm else 0.0)
    maxcyc = int(20 * est * fc) + 2_000_000
    rec_every = int(round((dt or max(0.05e-6, est / 2000)) * fc)) if record else 0
    if record:
        rec_every = max(rec_every, 1)
    thr = threshold if threshold is not None else NO_LIMIT
    dyn = int(policy == "mca" and threshold is None)
    IP = np.zeros(D.I_NI, dtype=np.int64)
    IP[D.I_Q] = sysm.mc_queue_entries
    IP[D.I_NBG], IP[D.I_BPG] = sysm.bank_groups, sysm.banks_per_group
    IP[D.I_CCDS], IP[D.I_CCDL], IP[D.I_CCDWL] = sysm.tCCDS, sysm.tCCDL, sysm.tCCDWL
    IP[D.I_MISS], IP[D.I_RTW], IP[D.I_WTR] = sysm.t_row_miss, sysm.tRTW, sysm.tWTR
    IP[D.I_WHI], IP[D.I_WLO] = sysm.write_drain
    IP[D.I_LAT] = max(1, int(round(sysm.dram_latency * fc)))
    IP[D.I_OUT] = sysm.gemm_outstanding
    IP[D.I_PREF] = max(1, int(round(sysm.gemm_prefetch * fc)))
    IP[D.I_DMABUF] = max(1, int(sysm.dma_buffer_bytes // U))
    IP[D.I_COMMCAP] = sysm.comm_fifo_entries
    IP[D.I_LINKLAT] = max(1, int(round(sysm.link_latency * fc)))
    IP[D.I_POLICY] = D.POLICIES[policy]
    IP[D.I_THR] = thr
    IP[D.I_STARVE] = sysm.mca_starve_limit if starve_limit is None else starve_limit
    IP[D.I_DYN] = dyn
    IP[D.I_LEARN] = 1 << sysm.mca_learn_log2
    IP[D.I_NMC] = int(nmc and not plan.cached_output)
    IP[D.I_COMM] = int(comm)
    IP[D.I_WBUF] = int(sysm.write_buffer_cached // U) if plan.cached_output else sysm.write_path_entries
    IP[D.I_REMCAP] = max(1, int(sysm.remote_store_buffer_bytes // U))
    IP[D.I_REC] = rec_every
    IP[D.I_W0], IP[D.I_WLEN] = window
    IP[D.I_SEED] = seed
    IP[D.I_MAXCYC] = maxcyc
    IP[D.I_XHIT] = int(not sysm.row_interference)
    IP[D.I_RAS] = sysm.tRAS
    IP[D.I_WGR] = int(sysm.wg_retire)
    IP[D.I_RGRP] = int(sysm.row_locality == "region")
    IP[D.I_WQ] = sysm.write_queue_entries
    IP[D.I_OCCR] = {"all": 0, "reads": 1, "all_fifo": 2}[sysm.mca_occupancy]
    IP[D.I_SPREAD] = {"burst": 0, "progress": 1, "remote_progress": 2}[sysm.store_issue]
    IP[D.I_SCHED] = int(sysm.mc_scheduler == "bank_heads")
    IP[D.I_WRULE] = int(sysm.write_drain_rule == "watermark")
    IP[D.I_FIFO] = sysm.l2_dram_fifo_entries
    IP[D.I_RSP] = int(sysm.rs_pacing == "dma")
    IP[D.I_RSF] = int(sysm.rs_dram == "free")
    FP = np.zeros(D.F_NF)
    FP[D.F_LINK] = sysm.link_bw / U / fc
    FP[D.F_PH_GR:D.F_PH_UPD + 1] = sysm.row_hit
    bins = np.array(sysm.mca_bins, dtype=np.int64)
    out = D.fused_kernel(IP, FP, C, R, SB, slot_req.astype(np.int64), threshold_table(sysm), bins)
    (t, gend, j, st, se, sr, ss, sen, cnt, busy, occ, dthr, dvalid, mwait, rt, rsrv, rprod, rinc,
     win, sce, nwsw) = out
    if t < 0:
        raise RuntimeError(f"fused simulation did not finish in {maxcyc} cycles (stage {j}/{plan.stages})")
    sec = 1.0 / fc
    nan = lambda a: np.where(np.asarray(a) < 0, np.nan, np.asarray(a) * sec)   # noqa: E731
    tot = plan.slot_bytes.sum(axis=0)
    per_req = np.where(slot_req > 0, tot / np.maximum(slot_req, 1), 0.0)
    rb = plan.read_bytes.sum() / max(R.sum(), 1)
    dramb = dict(gemm_reads=cnt[0] * rb, gemm_writes=0.0, gemm_updates=0.0, rs_reads=0.0, rs_updates=0.0)
    wkey = "gemm_writes" if plan.cached_output or not nmc else "gemm_updates"
    dramb[wkey] = float(tot.sum() - (tot[0] if comm else 0.0))
    if comm:
        dramb["rs_reads"] = float(tot[1:n - 1].sum())
        dramb["rs_updates" if nmc else "gemm_writes"] += float(tot[1:].sum())
    sr = nan(sr)
    if comm:
        sr[0] = np.nan
    trace = {}
    if record:
        tt = rt * sec
        dts = np.diff(np.concatenate([[0.0], tt]))
        dts[dts <= 0] = sec
        trace = dict(t=tt, gemm_read=rsrv[:, 0] * U / dts, gemm_write=rsrv[:, 1] * U / dts,
                     comm=(rsrv[:, 2] + rsrv[:, 3]) * U / dts, link=rsrv[:, 4] * U / dts,
                     produced=rprod * per_req, incoming=rinc * per_req)
    return FusedResult(t * sec, gend * sec, nan(st), nan(se), sr, nan(ss), nan(sen), dramb,
                       busy / max(t, 1.0), occ / max(t, 1.0),
                       int(dthr if dvalid else thr), bool(dvalid), int(mwait), trace, policy,
                       win if window[1] else None, nan(sce), int(nwsw))
