"""T3 system and workload configuration loaded from ``data/*.json`` (Table 1, Table 2, §5.2).

Plain dataclasses; every number comes from a data file with its source.  ``System.scaled`` builds the
variants used in the study (TP degree, GPU-2X-CU of §7.5, link bandwidth sweeps).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("data")


@lru_cache(maxsize=None)
def load(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def _v(d, key):
    return d[key]["value"]


# The string-valued System fields and their allowed values (the dataclass default first; data/system.json may choose another).
CHOICES = {
    "mc_scheduler": ("drain", "bank_heads"),
    "write_drain_rule": ("idle", "watermark"),
    "store_issue": ("burst", "progress", "remote_progress"),
    "stage_split": ("cus", "chunk"),
    "chunking": ("wgs", "bytes"),
    "first_stage_reads": ("cold", "steady"),
    "mca_occupancy": ("all", "reads", "all_fifo"),
    "wg_fast_dim": ("tokens", "fewer_tiles"),
    "l2_retention": ("graded", "lru"),
    "rs_pacing": ("link", "dma"),
    "rs_dram": ("queued", "free"),
    "row_locality": ("stream", "region"),
}


@dataclass(frozen=True)
class System:
    n_gpus: int
    link_bw: float            # bytes/s per ring step (all rings together)
    link_latency: float       # s
    cus: int
    clock: float              # Hz
    flops_per_cu_clk: float
    mma_eff: float
    l2_bytes: int
    dram_bw: float            # bytes/s, sustained (peak x efficiency): closed-form collectives
    nmc_update_cost: float    # closed-form collectives only
    rs_final_eff: float       # baseline RS final local reduction: fraction of HBM peak
    hbm_bw: float             # bytes/s peak
    dram_latency: float       # s, unloaded read latency
    dram_clock: float         # Hz, the channel model's cycle
    dram_channels: int
    dram_access_bytes: int
    bank_groups: int
    banks_per_group: int
    tCCDS: int
    tCCDL: int
    tCCDWL: int
    t_row_miss: int
    tRTW: int
    tWTR: int
    mc_queue_entries: int
    write_drain: tuple        # (high, low) watermarks, entries
    row_hit: tuple            # per stream: GEMM read, GEMM store, DMA read, RS update
    gemm_mlp_factor: float
    gemm_prefetch: float      # s, how far ahead of use the WGs request their operands
    dma_buffer_bytes: float
    comm_fifo_entries: int
    wg_tile: tuple
    wf_tile: tuple
    wgs_per_cu: int
    stage_overhead: float     # s
    write_buffer_cached: float
    remote_store_buffer_bytes: float
    mca_thresholds: tuple     # entries; None = no limit
    mca_bins: tuple           # mean occupancy bins (entries)
    mca_starve_limit: int     # DRAM cycles
    mca_learn_log2: int
    elem_bytes: int
    wg_fast_dim: str = "tokens"       # "tokens" | "fewer_tiles": output tile dimension dispatched fastest
    l2_retention: str = "graded"      # "graded" | "lru" (all-or-nothing): cross-stage operand reuse
    row_interference: bool = True     # another stream's open row is a miss (False: take-apart only)
    row_locality: str = "stream"     # rows shared by: "stream" (source) | "region" (chunk slot; GEMM reads apart)
    wg_retire: bool = False           # WGs retire one by one on store ack (False: stage barrier)
    tRAS: int = 0                     # ACT to PRE minimum (0: not modelled)
    write_path_entries: int = 0       # uncached stores buffered between the CUs and the MC queue (per channel)
    write_queue_entries: int = 0      # separate DRAM write queue per channel (0: reads and writes share mc_queue_entries)
    mca_occupancy: str = "all"        # occupancy the MCA sees: "all" queued entries | "reads" (read queue) | "all_fifo" (+ L2->DRAM FIFO)
    store_issue: str = "burst"        # a stage's stores: "burst" at its end (Fig 17a) | "progress" as it computes
    #                                   | "remote_progress": only slot 0's remote stores as it computes (take-apart)
    mc_scheduler: str = "drain"       # "drain": FR-FCFS over the queue + write drain | "bank_heads": GPGPU-Sim's
    stage_split: str = "cus"          # a stage = the WGs the CUs hold ("cus") | one ring chunk's WGs ("chunk", take-apart)
    chunking: str = "wgs"             # ring chunks = equal WG counts ("wgs") | equal bytes, whole tiles ("bytes", take-apart)
    first_stage_reads: str = "cold"   # stage 0 reads its operands cold ("cold") | as a later stage does ("steady", take-apart)
    write_drain_rule: str = "idle"    # "idle": writes drain at the high watermark or when no read waits | "watermark":
    #                                   GPGPU-Sim frfcfs write queue, only from >= high until < low (+ flush at the end)
    l2_dram_fifo_entries: int = 0     # in-order L2 -> DRAM FIFO between the arbiter and the MC queue (0: none; take-apart)
    rs_pacing: str = "link"           # the neighbour's RS traffic reaches the MC as the link delivers it ("link") | as
    #                                   its DMA engine reads it / its GEMM stores slot 0 ("dma": not link-paced, take-apart)
    rs_dram: str = "queued"           # RS traffic (updates, DMA reads) through the arbiter and MC queue ("queued") |
    #                                   at no DRAM cost ("free": take-apart of the RS traffic's DRAM share)

    @property
    def peak_flops(self) -> float:
        return self.cus * self.flops_per_cu_clk * self.clock

    @property
    def unit_bytes(self) -> int:
        """Global bytes one request of the representative channel stands for."""
        return self.dram_channels * self.dram_access_bytes

    @property
    def gemm_outstanding(self) -> int:
        """Reads the GEMM keeps in flight per channel."""
        return max(1, int(round(self.gemm_mlp_factor * self.dram_latency * self.dram_clock)))

    def scaled(self, **kw) -> "System":
        return replace(self, **kw)

    def __post_init__(self):
        for k in ("n_gpus", "link_bw", "cus", "clock", "dram_bw", "l2_bytes", "wgs_per_cu", "dram_clock",
                  "dram_channels", "dram_access_bytes", "bank_groups", "banks_per_group", "tCCDS",
                  "tCCDL", "tCCDWL", "mc_queue_entries", "rs_final_eff", "dma_buffer_bytes",
                  "comm_fifo_entries", "gemm_mlp_factor", "gemm_prefetch"):
            if getattr(self, k) <= 0:
                raise ValueError(f"system parameter {k} must be > 0, got {getattr(self, k)}")
        if self.n_gpus < 2:
            raise ValueError(f"n_gpus must be >= 2, got {self.n_gpus}")
        if self.l2_dram_fifo_entries < 0:
            raise ValueError(f"l2_dram_fifo_entries must be >= 0, got {self.l2_dram_fifo_entries}")
        if self.write_queue_entries < 0:
            raise ValueError(f"write_queue_entries must be >= 0, got {self.write_queue_entries}")
        for k, allowed in CHOICES.items():
            if getattr(self, k) not in allowed:
                raise ValueError(f"{k} must be one of {', '.join(map(repr, allowed))}, got {getattr(self, k)!r}")
        if not 0 < self.write_drain[1] < self.write_drain[0] <= (self.write_queue_entries or self.mc_queue_entries):
            raise ValueError(f"write_drain watermarks must satisfy 0 < low < high <= queue, got {self.write_drain}")
        if len(self.row_hit) != 4 or not all(0 <= x <= 1 for x in self.row_hit):
            raise ValueError(f"row_hit must be 4 probabilities, got {self.row_hit}")
        if self.tRAS < 0 or self.write_path_entries < 0:
            raise ValueError(f"tRAS and write_path_entries must be >= 0, got {self.tRAS}, {self.write_path_entries}")
        if len(self.mca_thresholds) != 4 or len(self.mca_bins) != 3:
            raise ValueError("mca_thresholds needs 4 entries and mca_bins 3")


def system(n_gpus: int = 8, **overrides) -> System:
    d = load("system")
    s = System(
        n_gpus=n_gpus,
        link_bw=_v(d, "link_bw_per_direction_GBps") * _v(d, "rings") * 1e9,
        link_latency=_v(d, "link_latency_ns") * 1e-9,
        cus=_v(d, "cus"), clock=_v(d, "clock_GHz") * 1e9,
        flops_per_cu_clk=_v(d, "fp16_flops_per_cu_per_clk"), mma_eff=_v(d, "mma_efficiency"),
        l2_bytes=_v(d, "l2_bytes"),
        dram_bw=_v(d, "hbm_GBps") * 1e9 * _v(d, "dram_efficiency"),
        nmc_update_cost=_v(d, "nmc_update_cost"), rs_final_eff=_v(d, "rs_final_reduction_efficiency"),
        hbm_bw=_v(d, "hbm_GBps") * 1e9,
        dram_latency=_v(d, "dram_latency_ns") * 1e-9, dram_clock=_v(d, "dram_clock_GHz") * 1e9,
        dram_channels=_v(d, "dram_channels"), dram_access_bytes=_v(d, "dram_access_bytes"),
        bank_groups=_v(d, "bank_groups"), banks_per_group=_v(d, "banks_per_group"),
        tCCDS=_v(d, "tCCDS"), tCCDL=_v(d, "tCCDL"), tCCDWL=_v(d, "tCCDWL"), t_row_miss=_v(d, "t_row_miss"),
        tRTW=_v(d, "tRTW"), tWTR=_v(d, "tWTR"), mc_queue_entries=_v(d, "mc_queue_entries"),
        write_drain=tuple(_v(d, "write_drain_watermarks")), row_hit=tuple(_v(d, "row_hit")),
        gemm_mlp_factor=_v(d, "gemm_mlp_factor"), gemm_prefetch=_v(d, "gemm_prefetch_ns") * 1e-9, dma_buffer_bytes=_v(d, "dma_buffer_bytes"),
        comm_fifo_entries=_v(d, "comm_fifo_entries"),
        wg_tile=tuple(_v(d, "wg_tile")), wf_tile=tuple(_v(d, "wf_tile")),
        wgs_per_cu=_v(d, "wgs_per_cu"), stage_overhead=_v(d, "stage_overhead_ns") * 1e-9,
        write_buffer_cached=_v(d, "write_buffer_cached_bytes"),
        remote_store_buffer_bytes=_v(d, "remote_store_buffer_bytes"),
        write_path_entries=_v(d, "write_path_entries"), write_queue_entries=_v(d, "write_queue_entries"),
        mca_occupancy=_v(d, "mca_occupancy"), tRAS=_v(d, "tRAS"), row_locality=_v(d, "row_locality"),
        mca_thresholds=tuple(_v(d, "mca_thresholds_entries")), mca_bins=tuple(_v(d, "mca_occupancy_bins")),
        wg_fast_dim=_v(d, "wg_dispatch_fast_dim"), l2_retention=_v(d, "l2_retention"),
        mca_starve_limit=_v(d, "mca_starve_limit_cycles"), mca_learn_log2=_v(d, "mca_learn_log2"),
        write_drain_rule=_v(d, "write_drain_rule"),
        elem_bytes=_v(d, "elem_bytes"))
    return s.scaled(**overrides) if overrides else s


@dataclass(frozen=True)
class Model:
    key: str
    name: str
    H: int
    L: int
    SL: int
    B: int
    tp: tuple
    heads: int

    @property
    def tokens(self) -> int:
        return self.SL * self.B


def models() -> dict:
    return {k: Model(k, v["name"], v["H"], v["L"], v["SL"], v["B"], tuple(v["tp"]), v["heads"])
            for k, v in load("models")["models"].items()}


def model(key: str) -> Model:
    ms = models()
    if key not in ms:
        raise ValueError(f"unknown model {key!r}; choose from {', '.join(ms)}")
    return ms[key]


SUBLAYERS = ("OP", "FC-2", "FC-1", "IP")


def paper() -> dict:
    return {k: v["value"] for k, v in load("paper").items() if not k.startswith("_")}
