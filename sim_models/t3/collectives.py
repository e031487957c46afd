"""Ring collectives (T3 §2.3, §4.3, Fig 3, Fig 10): reduce-scatter, all-gather, all-reduce.

Each has ``N - 1`` steps; a step moves one chunk ``C = S / N`` of the ``S``-byte array to the ring
neighbour: ``t_step = alpha + max(C / link_bw, dram_cost_step / dram_bw)`` (alpha-beta, plus the
step's local DRAM traffic as a second bound since the step's reads, incoming writes and transfer are
pipelined).  Per-step DRAM accesses per GPU (Fig 10):

* baseline RS (CUs reduce): step 1 reads the local chunk (sent to the neighbour's memory) and
  receives one chunk (1 write); steps 2..N-1 read the local and the received copy (2 reads), the
  reduced chunk goes to the neighbour, one chunk is received (1 write); after the last step the
  received chunk is reduced locally (2 reads + 1 write), which is not overlapped with any transfer;
  that reduction kernel sustains ``rs_final_reduction_efficiency`` of HBM peak (its own parameter).
* RS with NMC (T3, Ideal-RS+NMC): each step reads only the chunk that feeds the next DMA (1 read) and
  the received chunk is applied as a near-memory update (1 update, costing ``nmc_update_cost``
  accesses); there is no final local reduction.
* AG: 1 read (send) + 1 write (received) per step.

Bus bandwidth follows the nccl-tests convention: ``algbw = S / t``; ``busbw = algbw * (N-1)/N`` for
RS and AG and ``algbw * 2(N-1)/N`` for AR, so a latency-free ring reports ``busbw == link_bw``.

Left out: protocol/packet overheads, multiple channels per direction, tree/direct algorithms (§7.1).
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import System

KINDS = ("rs", "rs_nmc", "ag", "ar")


@dataclass(frozen=True)
class CollectiveResult:
    kind: str
    n: int
    size: float               # S, bytes of the full array
    time: float               # s
    steps: int
    step_time: float          # s, one steady step
    tail_time: float          # s, unoverlapped work after the last step (baseline RS reduction)
    dram_reads: float         # bytes per GPU
    dram_writes: float        # bytes per GPU (plain writes)
    dram_updates: float       # bytes per GPU (NMC op-and-store)
    per_step: tuple = ()      # ((reads, writes, updates), ...) per step; baseline RS adds the tail


    @property
    def dram_bytes(self) -> float:
        return self.dram_reads + self.dram_writes + self.dram_updates


def ring(kind: str, sysm: System, size: float, n: int | None = None) -> CollectiveResult:
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; choose from {', '.join(KINDS)}")
    n = sysm.n_gpus if n is None else n
    if n < 2:
        raise ValueError(f"a ring needs >= 2 devices, got {n}")
    if size <= 0:
        raise ValueError(f"size must be > 0, got {size}")
    if kind == "ar":
        rs = ring("rs", sysm, size, n)
        ag = ring("ag", sysm, size, n)
        return CollectiveResult("ar", n, size, rs.time + ag.time, rs.steps + ag.steps,
                                rs.step_time, rs.tail_time, rs.dram_reads + ag.dram_reads,
                                rs.dram_writes + ag.dram_writes, rs.dram_updates + ag.dram_updates,
                                rs.per_step + ag.per_step)
    c = size / n
    a, bw, B = sysm.link_latency, sysm.link_bw, sysm.dram_bw
    steps = n - 1
    if kind == "rs":
        first = a + max(c / bw, 2 * c / B)                 # read local + incoming write
        steady = a + max(c / bw, 3 * c / B)                # 2 reads + incoming write
        tail = 3 * c / (sysm.hbm_bw * sysm.rs_final_eff)   # final local reduction (CU kernel)
        time = first + (steps - 1) * steady + tail
        per = ((c, c, 0.0),) + ((2 * c, c, 0.0),) * (steps - 1) + ((2 * c, c, 0.0),)
    elif kind == "rs_nmc":
        u = sysm.nmc_update_cost
        steady = a + max(c / bw, (c + u * c) / B)
        tail = 0.0
        time = steps * steady
        per = ((c, 0.0, c),) * steps
    else:  # ag
        steady = a + max(c / bw, 2 * c / B)
        tail = 0.0
        time = steps * steady
        per = ((c, c, 0.0),) * steps
    reads, writes, updates = (float(sum(p[i] for p in per)) for i in range(3))
    return CollectiveResult(kind, n, size, time, steps, steady, tail, reads, writes, updates, per)


def alpha_beta(kind: str, size: float, n: int, alpha: float, bw: float) -> float:
    """Textbook closed form with no DRAM bound: ``(N-1)(alpha + S/(N bw))`` per RS/AG, twice for AR."""
    one = (n - 1) * (alpha + size / (n * bw))
    return 2 * one if kind == "ar" else one


def algbw(size: float, time: float) -> float:
    return size / time


def busbw(kind: str, size: float, time: float, n: int) -> float:
    f = 2 * (n - 1) / n if kind == "ar" else (n - 1) / n
    return algbw(size, time) * f
