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
    dram_bw: float            # bytes/s, sustained (peak x efficiency)
    nmc_update_cost: float
    dram_latency: float       # s
    mc_queue_bytes: float     # total MC queue capacity in bytes
    mc_entry_bytes: float     # bytes per queue entry summed over channels (threshold unit)
    gemm_mlp_factor: float
    wg_tile: tuple
    wf_tile: tuple
    wgs_per_cu: int
    stage_overhead: float     # s
    write_buffer_cached: float
    write_buffer_uncached: float
    mca_thresholds: tuple
    mca_bounds: tuple
    mca_min_comm_share: float
    elem_bytes: int

    @property
    def peak_flops(self) -> float:
        return self.cus * self.flops_per_cu_clk * self.clock

    @property
    def gemm_mlp_bytes(self) -> float:
        return self.gemm_mlp_factor * self.dram_bw * self.dram_latency

    def scaled(self, **kw) -> "System":
        return replace(self, **kw)

    def __post_init__(self):
        for k in ("n_gpus", "link_bw", "cus", "clock", "dram_bw", "l2_bytes", "wgs_per_cu"):
            if getattr(self, k) <= 0:
                raise ValueError(f"system parameter {k} must be > 0, got {getattr(self, k)}")
        if self.n_gpus < 2:
            raise ValueError(f"n_gpus must be >= 2, got {self.n_gpus}")


def system(n_gpus: int = 8, **overrides) -> System:
    d = load("system")
    ch = _v(d, "dram_channels")
    req = _v(d, "dram_request_bytes")
    s = System(
        n_gpus=n_gpus,
        link_bw=_v(d, "link_bw_per_direction_GBps") * _v(d, "rings") * 1e9,
        link_latency=_v(d, "link_latency_ns") * 1e-9,
        cus=_v(d, "cus"), clock=_v(d, "clock_GHz") * 1e9,
        flops_per_cu_clk=_v(d, "fp16_flops_per_cu_per_clk"), mma_eff=_v(d, "mma_efficiency"),
        l2_bytes=_v(d, "l2_bytes"),
        dram_bw=_v(d, "hbm_GBps") * 1e9 * _v(d, "dram_efficiency"),
        nmc_update_cost=_v(d, "nmc_update_cost"), dram_latency=_v(d, "dram_latency_ns") * 1e-9,
        mc_queue_bytes=_v(d, "mc_queue_entries_per_channel") * ch * req, mc_entry_bytes=ch * req,
        gemm_mlp_factor=_v(d, "gemm_mlp_factor"),
        wg_tile=tuple(_v(d, "wg_tile")), wf_tile=tuple(_v(d, "wf_tile")),
        wgs_per_cu=_v(d, "wgs_per_cu"), stage_overhead=_v(d, "stage_overhead_ns") * 1e-9,
        write_buffer_cached=_v(d, "write_buffer_cached_bytes"),
        write_buffer_uncached=_v(d, "write_buffer_uncached_bytes"),
        mca_thresholds=tuple(_v(d, "mca_thresholds_entries")), mca_bounds=tuple(_v(d, "mca_intensity_bounds")),
        mca_min_comm_share=_v(d, "mca_min_comm_share"), elem_bytes=_v(d, "elem_bytes"))
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
