"""Per-workload hierarchical dataflow model -- Monad §III-B/C (and §IV-B encoding).

A workload is a loop nest (matmul, convolution) over tensors.  A mapping per
level (package -> chiplets, chiplet -> cores, core -> PEs) has the paper's
encoding fields: ``shape`` (2-D engine array), ``spatial`` (one loop per array
dimension), ``order`` (temporal loop order, outer -> inner) and ``tiling``
(buffer tile per loop).  Buffer sizes follow from the tiles (double-buffered).

Data-reuse analysis (``traffic``): iterating a region in tiles with a loop
order, a tensor's tile is re-fetched every time a loop that indexes it, or any
loop outside the innermost such loop, advances; irrelevant loops inside it give
temporal reuse (stationarity).  Outputs add partial-sum read-backs.  Tensors not
indexed by a spatial loop are multicast (read once from the parent buffer).

Computing-stage delay (§III-C): D_C^L = |V_L|/(U_L N) x max(D_C, D_B, D_A) of
the lower level, with the utilisation U implicit in the ceil() of the split.
Chiplet-level D_A (package data movement) is left to the network model
(system.py) as data-transfer stages.

Left out: strides > 1, halo sharing between neighbouring tiles, bank conflicts,
sparsity, and the Reduce/Bind
multi-workload-per-chiplet sequencing (every workload gets its own chiplets).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from contextlib import contextmanager
from pathlib import Path

DATA = Path(__file__).with_name("data")


class ModelError(ValueError):
    """Invalid workload or mapping."""


@lru_cache(maxsize=None)
def _load(name):
    with open(DATA / name) as f:
        return json.load(f)


def hardware() -> dict:
    return _load("hardware.json")


@contextmanager
def hardware_overrides(**values):
    """Replace hardware.json values inside the block (sensitivity experiments:
    e.g. ``dram_bw_bytes_per_cycle``, ``link_bw_rule``).  Process-pool workers
    see them only if forked inside the block; the op cache is cleared on both
    ends."""
    hw = hardware()
    missing = object()
    saved = {k: hw.get(k, missing) for k in values}
    hw.update(values)
    _clear_caches()
    try:
        yield hw
    finally:
        for k, v in saved.items():
            if v is missing:
                hw.pop(k, None)
            else:
                hw[k] = v
        _clear_caches()


def _clear_caches():
    from . import system
    system._op_cache.cache_clear()


# ------------------------------------------------------------------ workloads
@dataclass(frozen=True)
class Tensor:
    name: str
    idx: tuple            # tuple of tuples of loop names
    src: tuple = ()       # producer op names ("" = DRAM)


@dataclass(frozen=True)
class Op:
    name: str
    kind: str
    loops: tuple          # ((name, bound), ...) in declaration order
    inputs: tuple
    output: Tensor

    @property
    def bounds(self) -> dict:
        return dict(self.loops)

    @property
    def loop_names(self) -> tuple:
        return tuple(n for n, _ in self.loops)

    @property
    def macs(self) -> int:
        return math.prod(b for _, b in self.loops)

    @property
    def tensors(self) -> tuple:
        return self.inputs + (self.output,)


@dataclass(frozen=True)
class Workload:
    name: str
    ops: tuple
    pipeline_steps: int = 1

    def op(self, name) -> Op:
        for o in self.ops:
            if o.name == name:
                return o
        raise ModelError(f"no op {name!r} in workload {self.name!r}")

    def consumers(self, name) -> list:
        return [o for o in self.ops for t in o.inputs if name in t.src]


def _tensor(d) -> Tensor:
    src = d.get("from", ())
    if isinstance(src, str):
        src = (src,)
    return Tensor(d["name"], tuple(tuple(x) for x in d["idx"]), tuple(src))


def make_op(d) -> Op:
    loops = tuple((k, int(v)) for k, v in d["loops"].items())
    names = {k for k, _ in loops}
    if any(b < 1 for _, b in loops):
        raise ModelError(f"op {d['name']}: loop bounds must be >= 1")
    op = Op(d["name"], d.get("kind", "matmul"), loops,
            tuple(_tensor(t) for t in d["inputs"]), _tensor(d["output"]))
    for t in op.tensors:
        for dim in t.idx:
            for l in dim:
                if l not in names:
                    raise ModelError(f"op {op.name}: tensor {t.name} uses unknown loop {l!r}")
    return op


def workload_names() -> list:
    return sorted(_load("workloads.json")["workloads"])


def load_workload(name: str) -> Workload:
    table = _load("workloads.json")["workloads"]
    if name not in table:
        raise ModelError(f"unknown workload {name!r} (known: {', '.join(sorted(table))})")
    w = table[name]
    ops = tuple(make_op(o) for o in w["ops"])
    names = {o.name for o in ops}
    for o in ops:
        for t in o.inputs:
            for s in t.src:
                if s not in names:
                    raise ModelError(f"op {o.name}: producer {s!r} unknown")
    return Workload(name, ops, int(w.get("pipeline_steps", 1)))


# ------------------------------------------------------------------ mapping
@dataclass(frozen=True)
class Level:
    """One level of the encoding: engines ``shape`` = (a, b); ``spatial`` =
    (loop on a, loop on b); ``order`` outer->inner; ``tile`` per loop (the
    buffer tile iterated at this level; None = whole share)."""
    shape: tuple = (1, 1)
    spatial: tuple = ("", "")
    order: tuple = ()
    tile: tuple = ()          # ((loop, size), ...)

    @property
    def n(self) -> int:
        return self.shape[0] * self.shape[1]


@dataclass(frozen=True)
class Mapping:
    """Mapping of one op: package (chiplets), chiplet (cores), core (PEs)."""
    pkg: Level
    chip: Level
    core: Level
    share: int = 0            # 0: every chiplet fetches shared data; 1: forward along the cluster

    @property
    def n_chiplets(self) -> int:
        return self.pkg.n

    @property
    def n_pes(self) -> int:
        return self.pkg.n * self.chip.n * self.core.n


def _split(bounds: dict, lv: Level) -> dict:
    """Per-engine share of ``bounds`` after the spatial split of ``lv``."""
    out = dict(bounds)
    for dim, loop in zip(lv.shape, lv.spatial):
        if loop and dim > 1:
            out[loop] = -(-out[loop] // dim)
    return out


def _tile(share: dict, lv: Level) -> dict:
    t = dict(share)
    for l, s in lv.tile:
        if l in t:
            t[l] = max(1, min(t[l], int(s)))
    return t


def footprint(t: Tensor, tile: dict) -> int:
    n = 1
    for dim in t.idx:
        n *= sum(tile[l] for l in dim) - (len(dim) - 1)
    return n


def relevant(t: Tensor) -> set:
    return {l for dim in t.idx for l in dim}


def traffic(region: dict, tile: dict, order, t: Tensor, is_output: bool = False) -> tuple:
    """(reads, writes) in elements moved between a buffer holding ``tile`` and
    its parent while iterating ``region`` in tiles with ``order`` (outer->inner).
    Loops missing from ``order`` are treated as outermost in declaration order."""
    rel = relevant(t)
    order = tuple(l for l in region if l not in order) + tuple(order)
    trips = [(l, -(-region[l] // tile[l])) for l in order]
    inner = -1
    for i, (l, n) in enumerate(trips):
        if l in rel and n > 1:
            inner = i
    fetches = math.prod(n for _, n in trips[:inner + 1]) if inner >= 0 else 1
    fp = footprint(t, tile)
    if not is_output:
        return fetches * fp, 0
    distinct = math.prod(n for l, n in trips if l in rel) * fp
    writes = fetches * fp
    return writes - distinct, writes


@dataclass
class OpResult:
    """Result of one op on its chiplet cluster (all chiplets identical)."""
    name: str
    macs: int
    n_chiplets: int
    n_pes: int
    compute_cycles: float                 # D(v): whole op on one chiplet
    util: float
    gb_bytes: int
    core_buf_bytes: int
    ext_in: dict = field(default_factory=dict)     # tensor -> bytes into ONE chiplet from outside
    ext_out: int = 0                               # bytes of final output leaving ONE chiplet
    energy_pj: dict = field(default_factory=dict)
    area_mm2: float = 0.0                          # compute + SRAM of one chiplet (no I/O)
    regions: dict = field(default_factory=dict)    # chiplet index -> {loop: (lo, hi)}


def sram_pj_per_bit(kib: float) -> float:
    hw = hardware()
    return max(0.1, hw["sram_pj_per_bit_ref"] * math.sqrt(max(kib, 1e-9) / hw["sram_ref_kib"]))


def validate(op: Op, m: Mapping):
    names = set(op.loop_names)
    for lvname, lv in (("pkg", m.pkg), ("chip", m.chip), ("core", m.core)):
        if len(lv.shape) != 2 or min(lv.shape) < 1:
            raise ModelError(f"{op.name}.{lvname}: shape must be two positive ints")
        for l in lv.spatial:
            if l and l not in names:
                raise ModelError(f"{op.name}.{lvname}: spatial loop {l!r} not in {sorted(names)}")
        for l in lv.order:
            if l not in names:
                raise ModelError(f"{op.name}.{lvname}: order loop {l!r} not in {sorted(names)}")


def chiplet_regions(op: Op, lv: Level) -> dict:
    """Loop ranges assigned to each chiplet (row-major over the pkg shape)."""
    out = {}
    b = op.bounds
    for ia in range(lv.shape[0]):
        for ib in range(lv.shape[1]):
            r = {l: (0, n) for l, n in b.items()}
            for dim, idx, loop in ((lv.shape[0], ia, lv.spatial[0]), (lv.shape[1], ib, lv.spatial[1])):
                if loop and dim > 1:
                    lo, hi = r[loop]
                    step = -(-(hi - lo) // dim)
                    r[loop] = (lo + idx * step, min(hi, lo + (idx + 1) * step))
            if lv.spatial[0] and lv.spatial[0] == lv.spatial[1] and lv.shape[0] > 1 and lv.shape[1] > 1:
                n = b[lv.spatial[0]]
                step = -(-n // lv.n)
                k = ia * lv.shape[1] + ib
                r[lv.spatial[0]] = (k * step, min(n, (k + 1) * step))
            out[ia * lv.shape[1] + ib] = r
    return out


def _spatial_share(bounds: dict, lv: Level) -> dict:
    if lv.spatial[0] and lv.spatial[0] == lv.spatial[1]:
        out = dict(bounds)
        out[lv.spatial[0]] = -(-out[lv.spatial[0]] // lv.n)
        return out
    return _split(bounds, lv)


def _multicast_groups(t: Tensor, lv: Level) -> int:
    """Number of distinct tiles a tensor has across the engines of ``lv``."""
    rel = relevant(t)
    g = 1
    if lv.spatial[0] and lv.spatial[0] == lv.spatial[1]:
        return lv.n if lv.spatial[0] in rel else 1
    for dim, loop in zip(lv.shape, lv.spatial):
        if loop and loop in rel:
            g *= dim
    return g


def evaluate_op(op: Op, m: Mapping, node_nm=None) -> OpResult:
    """Hierarchical reuse + delay + energy analysis of one op (per chiplet)."""
    from ..cost import model as cm
    validate(op, m)
    hw = hardware()
    nm = node_nm or hw["node_nm"]
    wb = hw["word_bytes"]
    B = op.bounds
    # package level: share of one chiplet, iterated in chiplet tiles T1 (order pkg.order)
    S1 = _spatial_share(B, m.pkg)
    T1 = _tile(S1, m.pkg)
    n1 = math.prod(-(-S1[l] // T1[l]) for l in S1)
    # chiplet level: T1 split over cores, each core iterates its share in T2
    S2 = _spatial_share(T1, m.chip)
    T2 = _tile(S2, m.chip)
    n2 = math.prod(-(-S2[l] // T2[l]) for l in S2)
    # core level: T2 split over the PE array; each PE runs S3 MACs per core tile
    S3 = _spatial_share(T2, m.core)
    pe_steps = math.prod(S3.values())
    n_cores, n_pe = m.chip.n, m.core.n
    px, py = m.core.shape
    ext_in, gb_rd, gb_wr, cb_rd, cb_wr, noc_bytes = {}, 0.0, 0.0, 0.0, 0.0, 0.0
    gb_bytes = cb_bytes = 0
    cb_rd_tile = 0.0
    fill_tile = 0.0
    for t in op.tensors:
        out = t is op.output
        # outside -> chiplet buffer (per chiplet, whole op)
        r1, w1 = traffic(S1, T1, m.pkg.order, t, out)
        if out:
            ext_out = w1 * wb
            ext_in_out = r1 * wb        # partial sums read back from outside
            if ext_in_out:
                ext_in[t.name + "#psum"] = ext_in_out
        else:
            ext_in[t.name] = r1 * wb
        # chiplet buffer <-> core buffers (per chiplet tile; x n1 tiles)
        r2, w2 = traffic(S2, T2, m.chip.order, t, out)
        groups = _multicast_groups(t, m.chip)
        noc_bytes += n1 * (r2 + w2) * n_cores * wb   # delivered to / collected from every core
        gb_rd += n1 * r2 * groups                     # multicast: one read per distinct tile
        gb_wr += r1                                   # fills from outside (inputs, psum read-back)
        if out:
            gb_wr += n1 * w2 * groups                 # results from the cores
            gb_rd += w1                               # drain to outside
        fill_tile += (r2 + w2) * wb / max(1, n2)      # per core tile
        # core buffer <-> PEs (per core tile; x n1 * n2 tiles)
        ones = {l: 1 for l in S3}
        r3, w3 = traffic(S3, ones, m.core.order, t, out)
        g3 = _multicast_groups(t, m.core)
        cb_rd_tile += (r3 + w3) * g3
        cb_rd += n1 * n2 * n_cores * (r3 + w3) * g3
        cb_wr += n1 * (r2 + w2) * n_cores
        gb_bytes += 2 * footprint(t, T1) * wb
        cb_bytes += 2 * footprint(t, T2) * wb
    # delays (cycles), D = |V|/(U N) x max(D_C, D_B, D_A) per level
    d_pe = pe_steps
    d_b_core = cb_rd_tile / (hw["core_buf_words_per_cycle_per_pe_edge"] * (px + py))
    d_a_core = fill_tile / hw["core_noc_bytes_per_cycle"]
    d_core_tile = max(d_pe, d_b_core, d_a_core)
    d_chip_tile_c = n2 * d_core_tile
    d_chip_tile_b = (gb_rd / n1) * wb / (hw["gb_bytes_per_cycle_per_core"] * n_cores)
    compute = n1 * max(d_chip_tile_c, d_chip_tile_b)
    ideal = op.macs / m.n_pes
    util = ideal / compute if compute else 0.0
    # energy (pJ), for the whole cluster
    nc = m.pkg.n
    bits = 8 * wb
    e = {
        "mac": op.macs * cm.mac_energy_pj(nm),
        "core_buf": nc * (cb_rd + cb_wr) * bits * sram_pj_per_bit(cb_bytes / 1024),
        "global_buf": nc * (gb_rd + gb_wr) * bits * sram_pj_per_bit(gb_bytes / 1024),
        "noc": nc * noc_bytes * 8 * hw["noc_pj_per_bit_hop"] * max(1.0, (m.chip.shape[0] + m.chip.shape[1]) / 2),
    }
    area = (n_cores * n_pe * cm.pe_area_mm2(nm) + cm.sram_area_mm2((gb_bytes + n_cores * cb_bytes) / 1024, nm)
            + hw["chiplet_overhead_mm2"] * (float(nm) / 28.0) ** 2)
    return OpResult(op.name, op.macs, nc, m.n_pes, compute, util, gb_bytes, cb_bytes,
                    ext_in, ext_out, e, area, chiplet_regions(op, m.pkg))
