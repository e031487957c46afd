"""Channel-level DRAM + memory-controller arbitration for the fused T3 GEMM-RS (T3 §4.3, §4.5, §5.1.1,
§6.1.2, Fig 17).

One *representative* HBM2 channel is simulated cycle by cycle at the DRAM command clock (Table 1:
1 GHz); addresses interleave uniformly over the ``dram_channels`` channels, so every channel sees
the same mix and one request of the model stands for one access on every channel
(``unit_bytes = channels x access_bytes`` of global traffic).

Per cycle:

* **sources** - the GEMM issues its stage's reads in a read phase paced by its compute progress, at
  most ``gemm_outstanding`` reads in flight (Little's law: queueing delay slows it), then writes the
  stage's output as a burst (Fig 17a); the WGs retire once every store is *acknowledged* by the MC
  (admitted to its queue; cached stores instead once they fit the L2 dirty budget).  Default: a stage
  barrier (the next stage starts when the last store is acknowledged); ``wg_retire`` (take-apart
  switch) lets WGs retire one by one, the next stage computing at the retired fraction's rate.  Communication:
  incoming ring updates (NMC op-and-store) and tracker-triggered DMA reads (bounded by the DMA
  buffer) share one FIFO; DMA data leaves on the link at ``link_bw``.
* **arbiter** - :func:`arb_step`, the single definition of round-robin / compute-first / MCA with
  the semantics of ``hdl/t3/mca.py`` (one grant per cycle into the MC queue; MCA: compute first,
  communication only while ``occupancy < threshold``, starvation limit in cycles, drain at the
  producer-kernel boundary, dynamic threshold from the mean occupancy of the isolated first stage).
* **MC queue + banks** - one unified queue of ``mc_queue_entries``; FR-FCFS (oldest row hit
  first, one activate per cycle for the oldest miss), write-drain mode with high/low watermarks and
  read/write turnaround (tRTW, tWTR), 4 bank groups x 4 banks: column commands ``tCCDS`` apart,
  ``tCCDL`` in one bank group, ``tCCDWL`` after an NMC update (read-modify-write in the bank, one
  data burst on the bus, §5.1.1); row miss = tRP + tRCD on that bank (Accel-Sim's 1 GHz HBM2 line,
  Table 1's clock); ``tRAS`` (ACT to PRE, take-apart switch, 0 = off) bounds the row cycle.
  Row locality: a request hits with its stream's probability if its bank's open row was opened by
  the same row group, else misses.  Groups (``row_locality``): ``region`` - the GEMM's operand reads
  apart, chunk traffic (NMC output stores, incoming updates, DMA reads) by chunk slot, since T3's
  three streams of a stage address the chunk being reduced (§4.1, Fig 7); ``stream`` - by request
  source (first pass).  Groups interleaving in a bank destroy each other's locality;
  ``row_interference=False`` turns this off for take-apart experiments.

Take-apart switches (bench ``t3_max_mechanism``): ``write_queue_entries`` > 0 gives writes their own queue
(drain watermarks inside it; the MCA then sees all entries or, ``mca_occupancy='reads'``, the read queue);
``mc_scheduler='bank_heads'`` is GPGPU-Sim's structure (each bank holds one request taken by in-bank
FR-FCFS, one bank filled per cycle, the first ready bank issues, direction-agnostic with tRTW/tWTR, no
write drain); ``store_issue='progress'`` issues a stage's stores as it computes instead of as a burst;
``store_issue='remote_progress'`` does so only for slot 0's remote stores (the link busy from the first stage's
start; local stores stay a burst).  ``write_drain_rule='watermark'`` is GPGPU-Sim's frfcfs write queue
(dram_sched.cc): write mode only from >= high until < low, writes never issue in read mode, with an end-of-kernel
flush (GEMM done, every incoming update arrived, the MC idle) so the run ends; with ``bank_heads`` and a
separate write queue the banks are filled from the current mode's queue (bench ``t3_read_stall``; the
default 'idle' rule also drains whenever no read waits).
``l2_dram_fifo_entries`` > 0 puts an in-order FIFO between the arbiter and the MC queue (Accel-Sim SM7_QV100
``-gpgpu_dram_partition_queues 64:64:64:64``: each of a channel's two L2 sub-partitions feeds the DRAM through a
64-entry L2->DRAM FIFO; one entry moves into the MC queue per cycle; a grant into the FIFO acknowledges a store;
``mca_occupancy='all_fifo'`` lets the MCA count the FIFO's entries).  ``rs_pacing='dma'`` makes the neighbour's
RS traffic reach this MC when the neighbour's DMA engine reads it (slot 0: when its GEMM stores it), i.e. at the
DMA's rate within the DMA buffer, not at the link's (§5.1.1: the paper injects the inter-GPU traffic through
Accel-Sim's front end); the sends still take the link.  Both are take-apart switches of issue 15's stop-31
candidates (bench ``t3_read_stall --bound-only``), off by default.
``rs_dram='free'`` (take-apart, stop 32, bench ``t3_fc_takeapart``): the RS traffic - incoming NMC updates and
tracker-triggered DMA reads - costs no DRAM time (updates land on arrival, DMA reads return after the unloaded
latency); the link still paces it.  It measures how much of the fused GEMM's slowdown the RS traffic's DRAM
share carries.

Left out: refresh, per-channel imbalance, the return path's own contention, address-exact rows, tRAS/tRC
(switch only), buffering between the CUs and the MC queue (``write_path_entries``, switch only).
"""
from __future__ import annotations

import numpy as np
from numba import njit

POLICY_RR, POLICY_COMPUTE_FIRST, POLICY_MCA, POLICY_COMM_FIRST = 0, 1, 2, 3
POLICIES = {"rr": POLICY_RR, "compute_first": POLICY_COMPUTE_FIRST, "mca": POLICY_MCA,
            "comm_first": POLICY_COMM_FIRST}   # comm_first: take-apart bound only, not an RTL policy
GRANT_NONE, GRANT_COMP, GRANT_COMM = 0, 1, 2
SRC_GREAD, SRC_GWRITE, SRC_DMA, SRC_UPD = 0, 1, 2, 3

# integer parameter vector layout (see ``simulate`` in overlap.py)
(I_Q, I_NBG, I_BPG, I_CCDS, I_CCDL, I_CCDWL, I_MISS, I_RTW, I_WTR, I_WHI, I_WLO, I_LAT, I_OUT,
 I_DMABUF, I_COMMCAP, I_LINKLAT, I_POLICY, I_THR, I_STARVE, I_DYN, I_LEARN, I_NMC, I_COMM,
 I_WBUF, I_REMCAP, I_REC, I_W0, I_WLEN, I_SEED, I_MAXCYC, I_PREF, I_XHIT, I_RAS, I_WGR, I_RGRP, I_WQ, I_OCCR, I_SPREAD, I_SCHED, I_WRULE, I_FIFO, I_RSP,
 I_RSF, I_NI) = range(44)
(F_LINK, F_PH_GR, F_PH_GW, F_PH_DMA, F_PH_UPD, F_NF) = range(6)


@njit(cache=True)
def arb_step(st, c_valid, m_valid, out_ready, occ, policy, thr, starve_limit, drain, wait_max):
    """One arbiter cycle (semantics of ``hdl/t3/mca.py``).  ``st = [last_comm, wait]`` is updated in
    place.  Returns GRANT_NONE / GRANT_COMP / GRANT_COMM (a grant needs ``out_ready``)."""
    last_comm = st[0]
    wait = st[1]
    starving = m_valid and wait >= starve_limit
    if policy == POLICY_RR:
        sel = (m_valid and not c_valid) if last_comm else m_valid
        valid = c_valid or m_valid
    elif policy == POLICY_COMPUTE_FIRST:
        sel = m_valid and not c_valid
        valid = c_valid or m_valid
    elif policy == POLICY_COMM_FIRST:       # take-apart bound (not in hdl/t3/mca.py): RS traffic always first
        sel = m_valid
        valid = c_valid or m_valid
    else:
        if drain:
            sel = m_valid
        elif starving:
            sel = True
        else:
            sel = m_valid and occ < thr and not c_valid
        valid = c_valid or sel
    c_ready = out_ready and valid and not sel
    m_ready = out_ready and valid and sel
    if c_ready and c_valid:
        st[0] = 0
    if m_ready:
        st[0] = 1
        st[1] = 0
    elif m_valid:
        st[1] = min(wait + 1, wait_max)
    if m_ready:
        return GRANT_COMM
    if c_ready:
        return GRANT_COMP
    return GRANT_NONE


def arb_replay(trace: dict, policy: int, thr: int, starve_limit: int, wait_max: int) -> np.ndarray:
    """Grants of :func:`arb_step` for recorded inputs (``c_valid, m_valid, out_ready, occ, drain``),
    from reset state."""
    st = np.array([1, 0], dtype=np.int64)
    out = np.zeros(len(trace["occ"]), dtype=np.int64)
    for k in range(len(out)):
        out[k] = arb_step(st, bool(trace["c_valid"][k]), bool(trace["m_valid"][k]),
                          bool(trace["out_ready"][k]), int(trace["occ"][k]), policy, thr,
                          starve_limit, bool(trace["drain"][k]), wait_max)
    return out


@njit(cache=True)
def mcq_remove(pick, qn, q_src, q_slot, q_bank, q_id, q_u):
    """Take entry ``pick`` out of the ordered MC queue of ``qn`` entries (the older ones keep
    their order); returns True if it was a read (GEMM read or DMA read)."""
    read = q_src[pick] == SRC_GREAD or q_src[pick] == SRC_DMA
    for k in range(pick, qn - 1):
        q_src[k] = q_src[k + 1]
        q_slot[k] = q_slot[k + 1]
        q_bank[k] = q_bank[k + 1]
        q_id[k] = q_id[k + 1]
        q_u[k] = q_u[k + 1]
    return read


@njit(cache=True)
def fused_kernel(IP, FP, C, R, SB, slot_req, table, bins):
    """Cycle loop.  C: stage compute cycles, R: stage read requests, SB[j, s]: output requests of
    slot s in stage j, slot_req[s]: total requests of slot s.  Returns (scalars, arrays...)."""
    np.random.seed(IP[I_SEED])
    Q = IP[I_Q]
    nbg, bpg = IP[I_NBG], IP[I_BPG]
    nb = nbg * bpg
    CCDS, CCDL, CCDWL, MISS = IP[I_CCDS], IP[I_CCDL], IP[I_CCDWL], IP[I_MISS]
    RTW, WTR, WHI, WLO = IP[I_RTW], IP[I_WTR], IP[I_WHI], IP[I_WLO]
    LAT, OUTMAX, PREF = IP[I_LAT], IP[I_OUT], IP[I_PREF]
    DMABUF, COMMCAP, LL = IP[I_DMABUF], IP[I_COMMCAP], IP[I_LINKLAT]
    policy, thr0, starve = IP[I_POLICY], IP[I_THR], IP[I_STARVE]
    dynamic, learn_n, nmc, comm = IP[I_DYN], IP[I_LEARN], IP[I_NMC], IP[I_COMM]
    wbuf, remcap, rec_every = IP[I_WBUF], IP[I_REMCAP], IP[I_REC]
    w0, wlen, maxcyc = IP[I_W0], IP[I_WLEN], IP[I_MAXCYC]
    xhit = IP[I_XHIT]                 # 1: another stream's open row does not destroy locality
    rgrp = IP[I_RGRP]                 # row locality by 0: stream, 1: address region (chunk slot)
    wgr = IP[I_WGR]                   # 1: WG-granular retirement, 0: stage barrier
    RAS = IP[I_RAS]                   # tRAS: an open row is precharged no earlier than this after its ACT
    WQ = IP[I_WQ]                     # separate write queue entries (0: one unified queue of Q)
    occr = IP[I_OCCR]                 # the arbiter's occupancy: 0 all MC-queue entries, 1 the read queue, 2 MC queue + L2->DRAM FIFO
    QT = Q + WQ
    spread = IP[I_SPREAD]             # 1: a stage's stores issued as its compute progresses (take-apart)
    #                                   2: only slot 0's remote stores (comm) as it computes (take-apart)
    sched = IP[I_SCHED]               # 0: FR-FCFS over the queue with write drain; 1: GPGPU-Sim bank heads
    wrule = IP[I_WRULE]               # 0: drain writes also when no read waits (model); 1: GPGPU-Sim's frfcfs
    #                                   write queue: write mode only from >= high until < low (writes never
    #                                   issue in read mode), plus a flush once the GEMM is done and the MC has
    #                                   nothing else to do (no read queued, nothing at the arbiter); with sched 1 and WQ > 0 the
    #                                   banks are filled from the current mode's queue only
    FF = IP[I_FIFO]                   # > 0: in-order L2 -> DRAM FIFO of FF entries between the arbiter and the MC
    #                                   queue (Accel-Sim's memory-partition queue), one entry into the MC per cycle
    rsp = IP[I_RSP]                   # 1: the neighbour's RS traffic reaches my MC when its DMA reads (or its GEMM
    #                                   stores slot 0), not when the link delivers it (RS not paced by the link)
    rsf = IP[I_RSF]                   # 1: RS traffic (incoming NMC updates, DMA reads) costs no DRAM time: it never
    #                                   enters the arbiter or the MC queue (take-apart switch, issue 15 stop 32)
    f_src = np.zeros(max(FF, 1), np.int64)
    f_slot = np.zeros(max(FF, 1), np.int64)
    f_h = 0
    f_n = 0
    mrq_src = np.full(nb, -1, np.int64)   # sched 1: the request each bank holds (source, slot, row open for it)
    mrq_slot = np.zeros(nb, np.int64)
    mrq_ok = np.zeros(nb, np.int64)
    prio = 0
    iprio = 0
    rtw_until = 0                     # no write column command before (after a read)
    wtr_until = 0                     # no read column command before (after a write)
    TRP = MISS // 2                   # tRP = tRCD (the miss is tRP + tRCD)
    link_rate = FP[F_LINK]
    ph = np.array([FP[F_PH_GR], FP[F_PH_GW], FP[F_PH_DMA], FP[F_PH_UPD]])
    S = C.shape[0]
    n = SB.shape[1]
    wait_max = 1 << 30

    # MC queue (ordered, oldest first)
    q_src = np.zeros(QT, np.int64)
    q_slot = np.zeros(QT, np.int64)
    q_bank = np.zeros(QT, np.int64)
    q_id = np.zeros(QT, np.int64)
    q_u = np.zeros(QT)
    qn = 0
    nreads_q = 0
    nwrites_q = 0
    next_id = 1
    bank_ready = np.zeros(nb, np.int64)
    bank_act = np.full(nb, -(1 << 40), np.int64)   # ACT time of the open row
    bank_src = np.full(nb, -1, np.int64)
    bank_owner = np.zeros(nb, np.int64)
    hitpend = np.zeros(nb, np.int64)
    bg_next = np.zeros(nbg, np.int64)
    bus_next = 0
    mode = 0                          # 0 read, 1 write
    n_wsw = 0                         # read -> write mode switches (write batches)
    # GEMM
    j = 0
    p = 0.0
    issued = 0
    returned = 0
    cf_reads = 0                      # issued reads not yet granted
    rcap = OUTMAX + 4
    g_ret = np.zeros(rcap, np.int64)  # return times (ring, monotonic)
    g_h = 0
    g_t = 0
    epi = False
    ret_j = -1                        # stage whose WGs are still retiring (wgr=1)
    ret_tot = 1
    wqcap = S * n + 1 + (int(SB.sum()) if spread == 1 else 0)
    wq_slot = np.zeros(wqcap, np.int64)
    wq_cnt = np.zeros(wqcap, np.int64)
    o_done = 0                        # stores of the current stage already issued (spread = 1)
    o_s = 0                           # slot of the next store, and stores left in it
    o_left = SB[0, 0]
    wq_h = 0
    wq_t = 0
    wq_total = 0
    remote_q = 0
    stage_start = np.full(S, -1.0)
    stage_end = np.full(S, -1.0)
    stage_cend = np.full(S, -1.0)      # compute (read phase) of the stage done, stores issued
    stage_start[0] = 0.0
    gemm_end = -1
    # communication
    cfifo = np.zeros(COMMCAP, np.int64)
    cf_h = 0
    cf_n = 0
    inbox = np.zeros(n, np.int64)
    inc_arr = np.zeros(n, np.int64)
    sent_arr = np.zeros(n, np.int64)
    produced = np.zeros(n, np.int64)
    written = np.zeros(n, np.int64)
    dma_iss = np.zeros(n, np.int64)
    sendbuf = np.zeros(n, np.int64)
    sent = np.zeros(n, np.int64)
    dma_inflight = 0
    d_ret = np.zeros(DMABUF + QT + 4, np.int64)
    d_slot = np.zeros(DMABUF + QT + 4, np.int64)
    dcap = DMABUF + QT + 4
    d_h = 0
    d_t = 0
    hist = np.zeros((LL + 1, n), np.int64)
    hist_any = np.zeros(LL + 1, np.int64)
    link_acc = 0.0
    slot_ready = np.full(n, -1.0)
    send_start = np.full(n, -1.0)
    send_end = np.full(n, -1.0)
    # arbiter
    ast = np.array([1, 0], np.int64)
    learn_sum = 0
    learn_cnt = 0
    dyn_thr = 0
    dyn_valid = 0
    max_wait = 0
    # stats
    cnt = np.zeros(4, np.int64)        # serviced per source
    busy = 0
    occ_sum = 0
    nrec = maxcyc // rec_every + 2 if rec_every > 0 else 1
    rec_t = np.zeros(nrec)
    rec_srv = np.zeros((nrec, 5))      # gread, gwrite, dma, upd, link sends
    rec_prod = np.zeros((nrec, n))
    rec_inc = np.zeros((nrec, n))
    nr = 0
    acc = np.zeros(5)
    win = np.zeros((max(wlen, 1), 7), np.int64)   # c_valid m_valid out_ready occ drain learn grant
    t = 0
    done = False
    while not done:
        if t >= maxcyc:
            return (-1.0, -1.0, j, stage_start, stage_end, slot_ready, send_start, send_end, cnt,
                    busy, occ_sum, dyn_thr, dyn_valid, max_wait, rec_t[:nr], rec_srv[:nr],
                    rec_prod[:nr], rec_inc[:nr], win, stage_cend, n_wsw)
        # ---------------- returns
        while g_h != g_t and g_ret[g_h % rcap] <= t:
            g_h += 1
            returned += 1
        while d_h != d_t and d_ret[d_h % dcap] <= t:
            sendbuf[d_slot[d_h % dcap]] += 1
            if rsp == 1:
                hj = (t + LL) % (LL + 1)
                hist[hj, d_slot[d_h % dcap]] += 1
                hist_any[hj] = 1
            d_h += 1
        # ---------------- link arrivals (symmetry: my sends of slot s-1 are my incoming of slot s)
        if comm == 1:
            hi = t % (LL + 1)
            if hist_any[hi]:
                for s in range(n - 1):
                    if hist[hi, s]:
                        sent_arr[s] += hist[hi, s]
                        hist[hi, s] = 0
                        if sent_arr[s] == slot_req[s]:
                            tgt = slot_req[s + 1]
                        else:
                            tgt = (sent_arr[s] * slot_req[s + 1]) // max(slot_req[s], 1)
                        inbox[s + 1] += tgt - inc_arr[s + 1]
                        inc_arr[s + 1] = tgt
                hist_any[hi] = 0
            # incoming updates into the communication FIFO (one per cycle)
            if rsf == 1:                  # take-apart: updates land without a DRAM access
                for s in range(1, n):
                    if inbox[s] > 0:
                        written[s] += inbox[s]
                        inbox[s] = 0
            elif cf_n < COMMCAP:
                for s in range(1, n):
                    if inbox[s] > 0:
                        inbox[s] -= 1
                        cfifo[(cf_h + cf_n) % COMMCAP] = SRC_UPD * 256 + s
                        cf_n += 1
                        break
            # tracker-triggered DMA reads (lowest ready slot first, bounded by the DMA buffer)
            if cf_n < COMMCAP and dma_inflight < DMABUF:
                for s in range(1, n - 1):
                    if min(produced[s], written[s]) > dma_iss[s]:
                        dma_iss[s] += 1
                        dma_inflight += 1
                        if rsf == 1:      # take-apart: the read returns after the unloaded latency, no DRAM access
                            d_ret[d_t % dcap] = t + LAT
                            d_slot[d_t % dcap] = s
                            d_t += 1
                        else:
                            cfifo[(cf_h + cf_n) % COMMCAP] = SRC_DMA * 256 + s
                            cf_n += 1
                        break
            # link: slot-0 remote stores first, then DMA data in slot order
            link_acc += link_rate
            if link_acc >= 1.0:
                ss = -1
                if remote_q > 0:
                    ss = 0
                    remote_q -= 1
                else:
                    for s in range(1, n - 1):
                        if sendbuf[s] > 0:
                            ss = s
                            sendbuf[s] -= 1
                            dma_inflight -= 1
                            break
                if ss >= 0:
                    link_acc -= 1.0
                    sent[ss] += 1
                    acc[4] += 1
                    if send_start[ss] < 0:
                        send_start[ss] = t
                    if sent[ss] == slot_req[ss]:
                        send_end[ss] = t
                    if rsp == 0:
                        hj = (t + LL) % (LL + 1)
                        hist[hj, ss] += 1
                        hist_any[hj] = 1
                else:
                    link_acc = min(link_acc, 1.0)
        # ---------------- GEMM: read phase paced by compute, then output burst, retire on ack
        # wgr=0: stage barrier (the next stage starts once every store of this one is acknowledged);
        # wgr=1: WGs retire one by one as their stores are acknowledged (FIFO), each freeing its CU
        # slot for a WG of the next stage, so the next stage computes at the retired fraction's rate
        rate = 1.0
        if wgr == 1 and ret_j >= 0:
            unret = max(0, wq_total - wbuf) + max(0, remote_q - remcap)
            if unret > ret_tot:
                unret = ret_tot
            if unret == 0:
                stage_end[ret_j] = t
                ret_j = -1
            else:
                rate = 1.0 - unret / ret_tot
        if j < S and not epi:
            Rj = R[j]
            Cj = C[j]
            ahead = (Rj * (p + PREF)) / Cj   # reads the WGs have asked for PREF cycles ahead of use
            for _k in range(2):           # up to 2 read requests per cycle into the compute stream
                if issued < Rj and issued - returned < OUTMAX and issued < ahead:
                    issued += 1
                    cf_reads += 1
            if p < Cj and returned >= min(Rj, Rj * (p + 1.0) / Cj) - 1e-9:
                p += rate
            if spread == 1:
                # stores follow the compute: the stage's output in slot order, pro rata to progress
                tgt = int(SB[j].sum() * min(p, Cj) / Cj)
                while o_done < tgt:
                    while o_left == 0 and o_s < n - 1:
                        o_s += 1
                        o_left = SB[j, o_s]
                    if o_left == 0:
                        break
                    o_left -= 1
                    o_done += 1
                    if comm == 1 and o_s == 0:
                        remote_q += 1
                        if rsp == 1:
                            hj = (t + LL) % (LL + 1)
                            hist[hj, 0] += 1
                            hist_any[hj] = 1
                    elif wq_t > wq_h and wq_slot[wq_t - 1] == o_s:
                        wq_cnt[wq_t - 1] += 1
                        wq_total += 1
                    else:
                        wq_slot[wq_t] = o_s
                        wq_cnt[wq_t] = 1
                        wq_t += 1
                        wq_total += 1
            elif spread == 2 and comm == 1:
                # slot 0's remote stores follow the compute (pro rata to progress); local stores burst
                tgt = int(SB[j, 0] * min(p, Cj) / Cj)
                if tgt > o_done:
                    remote_q += tgt - o_done
                    if rsp == 1:
                        hj = (t + LL) % (LL + 1)
                        hist[hj, 0] += tgt - o_done
                        hist_any[hj] = 1
                    o_done = tgt
            if p >= Cj and returned >= Rj and ret_j < 0:
                epi = True
                stage_cend[j] = t
                tot = 0
                for s in range(n):
                    b = SB[j, s]
                    if spread == 1:         # what the compute has not issued yet
                        if s < o_s:
                            b = 0
                        elif s == o_s:
                            b = o_left
                    elif spread == 2 and comm == 1 and s == 0:
                        b = SB[j, 0] - o_done   # what the compute has not sent yet
                    if b <= 0:
                        continue
                    tot += b
                    if comm == 1 and s == 0:
                        remote_q += b
                        if rsp == 1:
                            hj = (t + LL) % (LL + 1)
                            hist[hj, 0] += b
                            hist_any[hj] = 1
                    else:
                        wq_slot[wq_t] = s
                        wq_cnt[wq_t] = b
                        wq_t += 1
                        wq_total += b
                if wgr == 1:
                    ret_j = j
                    ret_tot = max(tot, 1)
        if epi and (wgr == 1 or (wq_total <= wbuf and remote_q <= remcap)):
            if wgr == 0:
                stage_end[j] = t
            epi = False
            j += 1
            p = 0.0
            issued = 0
            returned = 0
            o_done = 0
            o_s = 0
            if j < S:
                o_left = SB[j, 0]
            if j < S:
                stage_start[j] = t
        drain = 0
        if j >= S and gemm_end < 0 and wq_total == 0 and remote_q == 0:
            gemm_end = t
        if j >= S and ret_j < 0:
            drain = 1
        # ---------------- arbiter (one grant per cycle into the MC queue)
        learn = 1 if (dynamic == 1 and j == 0 and not epi) else 0
        thr = dyn_thr if (dynamic == 1 and dyn_valid == 1) else thr0
        c_valid = cf_reads > 0 or wq_total > 0
        m_valid = cf_n > 0
        ins_src = -1
        ins_sl = 0
        if FF > 0 and f_n > 0:
            hs = f_src[f_h]
            if WQ == 0:
                room = qn < Q
            elif hs == SRC_GREAD or hs == SRC_DMA:
                room = nreads_q < Q
            else:
                room = nwrites_q < WQ
            if room:
                ins_src = hs
                ins_sl = f_slot[f_h]
                f_h = (f_h + 1) % FF
                f_n -= 1
        if FF > 0:
            out_ready = f_n < FF
        elif WQ == 0:
            out_ready = qn < Q
        else:
            out_ready = nreads_q < Q and nwrites_q < WQ
        occ = nreads_q if occr == 1 else (qn + f_n if occr == 2 else qn)
        g = arb_step(ast, c_valid, m_valid, out_ready, occ, policy, thr, starve, drain == 1, wait_max)
        if ast[1] > max_wait:
            max_wait = ast[1]
        if learn == 1:
            if learn_cnt < learn_n:
                learn_sum += occ
                learn_cnt += 1
                if learn_cnt == learn_n:
                    mean = learn_sum // learn_n
                    if mean >= bins[0]:
                        dyn_thr = table[0]
                    elif mean >= bins[1]:
                        dyn_thr = table[1]
                    elif mean >= bins[2]:
                        dyn_thr = table[2]
                    else:
                        dyn_thr = table[3]
                    dyn_valid = 1
        else:
            learn_cnt = 0
            learn_sum = 0
        if wlen > 0 and w0 <= t < w0 + wlen:
            k = t - w0
            win[k, 0] = 1 if c_valid else 0
            win[k, 1] = 1 if m_valid else 0
            win[k, 2] = 1 if out_ready else 0
            win[k, 3] = occ
            win[k, 4] = drain
            win[k, 5] = learn
            win[k, 6] = g
        if g != GRANT_NONE:
            if g == GRANT_COMP:
                if cf_reads > 0:
                    cf_reads -= 1
                    src = SRC_GREAD
                    sl = 0
                else:
                    src = SRC_GWRITE
                    sl = wq_slot[wq_h]
                    wq_cnt[wq_h] -= 1
                    wq_total -= 1
                    produced[sl] += 1
                    if wq_cnt[wq_h] == 0:
                        wq_h += 1
            else:
                code = cfifo[cf_h]
                cf_h = (cf_h + 1) % COMMCAP
                cf_n -= 1
                src = code // 256
                sl = code % 256
                if src == SRC_UPD:
                    written[sl] += 1
            if FF > 0:
                f_src[(f_h + f_n) % FF] = src
                f_slot[(f_h + f_n) % FF] = sl
                f_n += 1
            else:
                ins_src = src
                ins_sl = sl
        if ins_src >= 0:
            q_src[qn] = ins_src
            q_slot[qn] = ins_sl
            q_bank[qn] = np.random.randint(0, nb)
            q_u[qn] = np.random.random()
            q_id[qn] = next_id
            next_id += 1
            qn += 1
            if ins_src == SRC_GREAD or ins_src == SRC_DMA:
                nreads_q += 1
            else:
                nwrites_q += 1
        occ_sum += qn
        mc_idle = False                  # wrule 1: end-of-kernel flush (nothing more can arrive)
        if wrule == 1 and gemm_end >= 0 and (not c_valid) and (not m_valid) and nreads_q == 0 and f_n == 0:
            mc_idle = True
            if comm == 1:
                for s in range(1, n):
                    if inc_arr[s] < slot_req[s] or inbox[s] > 0:
                        mc_idle = False
                        break
        # ---------------- DRAM service, GPGPU-Sim structure (sched = 1): each bank holds one request,
        # taken from the queue by FR-FCFS within the bank (open-row hit first, else oldest), one bank
        # filled per cycle; one row command and one column command per cycle (dual bus); a column
        # command goes to the first bank (rotating) whose request is ready, direction-agnostic, with
        # tRTW after a read before a write and tWTR after a write before a read (no write drain mode)
        if sched == 1:
            if wrule == 1 and WQ > 0:
                if mode == 0 and nwrites_q > 0 and (nwrites_q >= WHI or (nreads_q == 0 and mc_idle)):
                    mode = 1
                    n_wsw += 1
                elif mode == 1 and nwrites_q < WLO:
                    mode = 0
            for i in range(nb):
                b = (i + prio) % nb
                if mrq_src[b] >= 0:
                    continue
                pick = -1
                first = -1
                for k in range(qn):
                    if q_bank[k] != b:
                        continue
                    if wrule == 1 and WQ > 0:
                        isw = 1 if (q_src[k] == SRC_GWRITE or q_src[k] == SRC_UPD) else 0
                        if isw != mode:
                            continue
                    if first < 0:
                        first = k
                    sk = q_src[k]
                    rk = sk if (rgrp == 0 or sk == SRC_GREAD) else 16 + q_slot[k]
                    if (bank_src[b] == rk or xhit == 1) and q_u[k] < ph[sk]:
                        pick = k
                        break
                ok = 1
                if pick < 0:
                    pick = first
                    ok = 0
                if pick < 0:
                    continue
                mrq_src[b] = q_src[pick]
                mrq_slot[b] = q_slot[pick]
                mrq_ok[b] = ok
                if mcq_remove(pick, qn, q_src, q_slot, q_bank, q_id, q_u):
                    nreads_q -= 1
                else:
                    nwrites_q -= 1
                qn -= 1
                prio = (prio + 1) % nb
                break
            for i in range(nb):           # row command: activate the first bank whose request misses
                b = (i + prio) % nb
                if mrq_src[b] >= 0 and mrq_ok[b] == 0 and bank_ready[b] <= t and t >= bank_act[b] + RAS:
                    bank_ready[b] = t + MISS
                    bank_act[b] = t + TRP
                    sk = mrq_src[b]
                    bank_src[b] = sk if (rgrp == 0 or sk == SRC_GREAD) else 16 + mrq_slot[b]
                    mrq_ok[b] = 1
                    break
            if t >= bus_next:
                for i in range(nb):
                    b = (i + iprio) % nb
                    sk = mrq_src[b]
                    if sk < 0 or mrq_ok[b] == 0 or bank_ready[b] > t or bg_next[b // bpg] > t:
                        continue
                    isw = sk == SRC_GWRITE or sk == SRC_UPD
                    if (isw and t < rtw_until) or ((not isw) and t < wtr_until):
                        continue
                    upd = sk == SRC_UPD or (sk == SRC_GWRITE and nmc == 1)
                    bg_next[b // bpg] = t + (CCDWL if upd else CCDL)
                    bus_next = t + CCDS
                    if isw:
                        wtr_until = t + WTR
                    else:
                        rtw_until = t + RTW
                    cnt[sk] += 1
                    acc[sk] += 1
                    busy += 1
                    if sk == SRC_GREAD:
                        g_ret[g_t % rcap] = t + LAT
                        g_t += 1
                    elif sk == SRC_DMA:
                        d_ret[d_t % dcap] = t + LAT
                        d_slot[d_t % dcap] = mrq_slot[b]
                        d_t += 1
                    mrq_src[b] = -1
                    iprio = (b + 1) % nb
                    break
        elif qn > 0 and t >= bus_next:
            if mode == 0 and nwrites_q > 0 and (nwrites_q >= WHI or (nreads_q == 0 and (wrule == 0 or mc_idle))):
                mode = 1
                n_wsw += 1
                bus_next = t + RTW
            elif mode == 1 and nreads_q > 0 and (nwrites_q < WLO if wrule == 1 else nwrites_q <= WLO):
                mode = 0
                bus_next = t + WTR
            else:
                pick = -1
                for bb in range(nb):
                    hitpend[bb] = 0
                for k in range(qn):
                    sk = q_src[k]
                    isw = 1 if (sk == SRC_GWRITE or sk == SRC_UPD) else 0
                    if isw != mode:
                        continue
                    b = q_bank[k]
                    rk = sk if (rgrp == 0 or sk == SRC_GREAD) else 16 + q_slot[k]
                    if bank_owner[b] == q_id[k] or ((bank_src[b] == rk or xhit == 1) and q_u[k] < ph[sk]):
                        hitpend[b] = 1
                        if pick < 0 and bank_ready[b] <= t and bg_next[b // bpg] <= t:
                            pick = k
                # row commands are on their own bus: activate, in parallel, the bank of the oldest
                # request of this direction that misses and whose bank no queued hit is waiting for
                for k in range(qn):
                    sk = q_src[k]
                    isw = 1 if (sk == SRC_GWRITE or sk == SRC_UPD) else 0
                    if isw != mode:
                        continue
                    b = q_bank[k]
                    if bank_ready[b] > t or hitpend[b] == 1 or t < bank_act[b] + RAS:
                        continue
                    bank_ready[b] = t + MISS
                    bank_act[b] = t + TRP
                    bank_src[b] = sk if (rgrp == 0 or sk == SRC_GREAD) else 16 + q_slot[k]
                    bank_owner[b] = q_id[k]
                    break
                if pick < 0:
                    pass
                else:
                    sk = q_src[pick]
                    b = q_bank[pick]
                    bg = b // bpg
                    upd = sk == SRC_UPD or (sk == SRC_GWRITE and nmc == 1)
                    bg_next[bg] = t + (CCDWL if upd else CCDL)
                    bus_next = t + CCDS
                    bank_src[b] = sk if (rgrp == 0 or sk == SRC_GREAD) else 16 + q_slot[pick]
                    cnt[sk] += 1
                    acc[sk] += 1
                    busy += 1
                    if sk == SRC_GREAD:
                        g_ret[g_t % rcap] = t + LAT
                        g_t += 1
                    elif sk == SRC_DMA:
                        d_ret[d_t % dcap] = t + LAT
                        d_slot[d_t % dcap] = q_slot[pick]
                        d_t += 1
                    if mcq_remove(pick, qn, q_src, q_slot, q_bank, q_id, q_u):
                        nreads_q -= 1
                    else:
                        nwrites_q -= 1
                    qn -= 1
        # ---------------- bookkeeping
        t += 1
        if comm == 1:
            for s in range(1, n):
                if slot_ready[s] < 0 and produced[s] == slot_req[s] and written[s] == slot_req[s]:
                    slot_ready[s] = t
        if rec_every > 0 and t % rec_every == 0:
            rec_t[nr] = t
            for k in range(5):
                rec_srv[nr, k] = acc[k]
                acc[k] = 0
            for s in range(n):
                rec_prod[nr, s] = produced[s]
                rec_inc[nr, s] = written[s]
            nr += 1
        if gemm_end >= 0:
            if comm == 0:
                done = True
            elif qn == 0 and cf_n == 0 and f_n == 0 and mrq_src.max() < 0:
                done = True
                for s in range(1, n):
                    if slot_ready[s] < 0:
                        done = False
                for s in range(n - 1):
                    if sent[s] < slot_req[s]:
                        done = False
    if rec_every > 0:
        rec_t[nr] = t
        for k in range(5):
            rec_srv[nr, k] = acc[k]
        for s in range(n):
            rec_prod[nr, s] = produced[s]
            rec_inc[nr, s] = written[s]
        nr += 1
    return (float(t), float(gemm_end), j, stage_start, stage_end, slot_ready, send_start, send_end,
            cnt, busy, occ_sum, dyn_thr, dyn_valid, max_wait, rec_t[:nr], rec_srv[:nr], rec_prod[:nr],
            rec_inc[:nr], win, stage_cend, n_wsw)
