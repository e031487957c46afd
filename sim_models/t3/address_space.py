"""T3 address-space configuration: ``remote_map`` / ``dma_map`` for a fused GEMM + ring reduce-scatter.

Implements the producer-output configuration of T3 (Pati et al., ASPLOS'24) §4.4 (Figs 11-12),
in the terms of §4.2 (Tracker, DMA trigger, Fig 9) and the staggered schedule of Fig 7:

* The GEMM output (``M x N``, column-major as in BLAS, §4.2.1) is tiled into workgroup (WG) tiles,
  numbered row-major (the GPU's WG dispatch order), and each WG tile into wavefront (WF) tiles
  (at most 8 WFs per WG: ``wf_id`` is 3 bits).  Edge tiles are clipped (fewer elements).
* The WG tiles are split into ``n_devices`` contiguous, balanced *chunks* (the ring-RS chunks).
* Staggering (§4.4): device ``d`` produces chunks in the order ``(d + s) % n_devices`` for slot
  ``s = 0 .. n_devices-1``, i.e. it starts its WG dispatch at chunk ``d`` and wraps around.  Its
  ``stages`` GEMM stages cut this rotated WG order into equal groups of WGs.
* Data moves from device ``d`` to its ring neighbour ``dst = (d - 1) % n_devices`` (GPU-0 -> GPU-3
  in Fig 7).  Slot 0's chunk is written straight into ``dst``'s memory (``remote_map``, fine-grained
  remote updates; it is neither written nor tracked locally).  Chunks of slots ``1 .. n-2`` are
  updated locally and by the neighbour's DMA; when the Tracker has seen ``updates_per_element`` (=2
  for ring RS: one local + one incoming) updates for every element of a WF tile, it marks the DMA
  block ready; a DMA block of ``dma_granularity`` WF tiles is sent (op ``update``) to ``dst``
  (``dma_map``).  The last slot's chunk ends fully reduced on ``d``: it is tracked (completion only,
  ``dma_entry == -1``) and never DMA'd.
* Tracker entries are indexed by ``wg_id`` LSBs (``tracker_sets`` = 256 sets) and tagged by
  ``(wg_id >> 8, wf_id)`` as in §4.2.1.  The threshold is ``wf_tile_elems x updates_per_element``.

All writes to the output buffer are NMC ``update`` (op-and-store) commands, so the buffer must be
zero-initialised before the GEMM (the paper's "update" flag, §4.3); order of arrival then does not
matter.  Every device uses the same buffer layout; ``buffer_base[d]`` is its base virtual address, and
a destination address is the destination's base plus the same offset.

Deliberately left out: other collectives (all-gather / all-to-all reuse this with op ``store`` and
1 update per element, §7.1) and other topologies (direct RS); split-K GEMMs (§7.7); virtual-to-
physical translation.  Dependencies: dataclasses + numpy only (the T3 RTL imports this module).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = [
    "OP_STORE", "OP_UPDATE", "OutputLayout", "RemoteMap", "DmaMap", "TrackerProgram", "DmaTable",
    "DeviceConfig", "AddressSpaceConfig", "stagger_order", "configure_gemm_rs", "wf_tile_segments",
]

OP_STORE = 0        #: DMA / remote operation: plain store
OP_UPDATE = 1       #: DMA / remote operation: near-memory op-and-store (add)
_OP_NAMES = {OP_STORE: "store", OP_UPDATE: "update"}

MAX_WF_PER_WG = 8   #: wf_id is 3 bits (§4.2.1)


def _check_int(name: str, value, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    return int(value)


@dataclass(frozen=True)
class OutputLayout:
    """Tiling of a column-major ``m x n`` GEMM output into WG tiles and WF tiles.

    WG ids are row-major over the WG-tile grid; WF ids are row-major over the WF-tile grid inside a
    WG tile.  Tiles on the right/bottom edge are clipped.
    """
    m: int
    n: int
    wg_tile: tuple[int, int]           # (rows, cols) of a WG tile
    wf_tile: tuple[int, int]           # (rows, cols) of a WF tile
    elem_bytes: int = 2                # FP16

    def __post_init__(self):
        _check_int("m", self.m)
        _check_int("n", self.n)
        _check_int("elem_bytes", self.elem_bytes)
        for nm, t in (("wg_tile", self.wg_tile), ("wf_tile", self.wf_tile)):
            if len(t) != 2:
                raise ValueError(f"{nm} must be (rows, cols), got {t!r}")
            _check_int(f"{nm} rows", t[0])
            _check_int(f"{nm} cols", t[1])
        if self.wg_tile[0] % self.wf_tile[0] or self.wg_tile[1] % self.wf_tile[1]:
            raise ValueError(f"wf_tile {self.wf_tile} must divide wg_tile {self.wg_tile}")
        if self.wf_per_wg > MAX_WF_PER_WG:
            raise ValueError(f"{self.wf_per_wg} WFs per WG exceeds {MAX_WF_PER_WG} (wf_id is 3 bits)")

    @property
    def wg_grid(self) -> tuple[int, int]:
        return (-(-self.m // self.wg_tile[0]), -(-self.n // self.wg_tile[1]))

    @property
    def n_wg(self) -> int:
        r, c = self.wg_grid
        return r * c

    @property
    def wf_grid(self) -> tuple[int, int]:
        return (self.wg_tile[0] // self.wf_tile[0], self.wg_tile[1] // self.wf_tile[1])

    @property
    def wf_per_wg(self) -> int:
        r, c = self.wf_grid
        return r * c

    @property
    def wf_tile_elems(self) -> int:
        """Nominal (unclipped) WF tile size, the ``wf_tile_size`` of §4.2.1."""
        return self.wf_tile[0] * self.wf_tile[1]

    def wf_tile_box(self, wg_id, wf_id):
        """(row0, col0, rows, cols) of WF tile(s), clipped to the matrix (numpy-vectorised)."""
        wg_id = np.asarray(wg_id, dtype=np.int64)
        wf_id = np.asarray(wf_id, dtype=np.int64)
        gc = self.wg_grid[1]
        fc = self.wf_grid[1]
        r0 = (wg_id // gc) * self.wg_tile[0] + (wf_id // fc) * self.wf_tile[0]
        c0 = (wg_id % gc) * self.wg_tile[1] + (wf_id % fc) * self.wf_tile[1]
        rows = np.clip(self.m - r0, 0, self.wf_tile[0])
        cols = np.clip(self.n - c0, 0, self.wf_tile[1])
        return r0, c0, rows, cols

    def offset_bytes(self, row, col):
        """Byte offset of element (row, col) in the column-major buffer."""
        return (np.asarray(col, dtype=np.int64) * self.m + np.asarray(row, dtype=np.int64)) * self.elem_bytes


@dataclass(frozen=True)
class RemoteMap:
    """One ``remote_map`` call (Fig 12): a chunk whose GEMM stores go straight to a remote device."""
    device: int
    chunk: int
    wg_range: tuple[int, int]          # [first, last) WG ids of the chunk
    dst_device: int
    dst_base: int                      # destination device's buffer base VA
    op: int = OP_UPDATE

    @property
    def op_name(self) -> str:
        return _OP_NAMES[self.op]


@dataclass(frozen=True)
class DmaMap:
    """One ``dma_map`` call (Fig 12): a locally produced chunk DMA'd to ``dst_device`` when ready."""
    device: int
    chunk: int
    wg_range: tuple[int, int]
    dst_device: int
    dst_base: int
    op: int = OP_UPDATE
    updates_per_element: int = 2       # trigger condition
    granularity: int = 1               # WF tiles per DMA block

    @property
    def op_name(self) -> str:
        return _OP_NAMES[self.op]


@dataclass(frozen=True)
class TrackerProgram:
    """Tracker contents for one device: one row per tracked WF tile (numpy arrays, equal length).

    ``threshold[i] = elems[i] * updates_per_element``; for unclipped tiles this equals
    ``wf_tile_elems * updates_per_element`` (:attr:`nominal_threshold`).
    """
    wf_tile_elems: int
    updates_per_element: int
    tracker_sets: int
    wg_id: np.ndarray
    wf_id: np.ndarray
    chunk: np.ndarray
    set_index: np.ndarray              # wg_id % tracker_sets  (wg_lsb)
    tag_wg_msb: np.ndarray             # wg_id // tracker_sets (wg_msb)
    start_va: np.ndarray               # smallest VA of the WF tile (§4.2.1)
    elems: np.ndarray
    threshold: np.ndarray
    dma_entry: np.ndarray              # index into DmaTable, -1 = completion only

    @property
    def nominal_threshold(self) -> int:
        return self.wf_tile_elems * self.updates_per_element

    def __len__(self) -> int:
        return int(self.wg_id.size)

    def lookup(self, wg_id: int, wf_id: int) -> int:
        """Row of the entry for (wg_id, wf_id); KeyError if untracked."""
        hit = np.flatnonzero((self.wg_id == wg_id) & (self.wf_id == wf_id))
        if hit.size != 1:
            raise KeyError((wg_id, wf_id))
        return int(hit[0])


@dataclass(frozen=True)
class DmaTable:
    """Pre-programmed DMA commands for one device: one row per DMA block (numpy arrays)."""
    chunk: np.ndarray
    first_wg: np.ndarray               # (wg_id, wf_id) of the block's first WF tile
    first_wf: np.ndarray
    n_wf_tiles: np.ndarray             # granularity (last block of a chunk may be shorter)
    src_va: np.ndarray                 # start VA of the first WF tile, local buffer
    dst_device: np.ndarray
    dst_va: np.ndarray                 # same offset in the destination's buffer
    op: np.ndarray
    bytes: np.ndarray                  # payload bytes of the block

    def __len__(self) -> int:
        return int(self.chunk.size)


@dataclass(frozen=True)
class DeviceConfig:
    """Everything programmed on one device before the fused GEMM-RS kernel runs."""
    device: int
    chunk_order: np.ndarray            # chunk produced in slot s (Fig 7 stagger)
    wg_order: np.ndarray               # WG dispatch order (rotated so chunk_order[0] comes first)
    stage_wgs: list                    # stage j -> array of WG ids (consecutive in wg_order)
    stage_chunks: list                 # stage j -> tuple of chunks the stage writes
    remote_maps: list                  # [RemoteMap]
    dma_maps: list                     # [DmaMap]
    tracker: TrackerProgram
    dma_table: DmaTable
    final_chunk: int                   # chunk fully reduced on this device at the end


@dataclass(frozen=True)
class AddressSpaceConfig:
    layout: OutputLayout
    n_devices: int
    stages: int
    chunk_wg_bounds: np.ndarray        # chunk c = WG ids [bounds[c], bounds[c+1])
    devices: list = field(default_factory=list)   # [DeviceConfig]


def stagger_order(n_devices: int) -> np.ndarray:
    """``order[d, s]``: chunk device ``d`` produces in slot ``s`` (= ``(d + s) % n``, Fig 7)."""
    n = _check_int("n_devices", n_devices, 2)
    return (np.arange(n)[:, None] + np.arange(n)[None, :]) % n


def _chunk_bounds(n_wg: int, n: int) -> np.ndarray:
    # balanced contiguous split: the first (n_wg % n) chunks get one extra WG
    sizes = np.full(n, n_wg // n, dtype=np.int64)
    sizes[: n_wg % n] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def configure_gemm_rs(m: int, n: int, wg_tile: tuple[int, int], wf_tile: tuple[int, int],
                      stages: int, n_devices: int, *, dma_granularity: int = 1,
                      updates_per_element: int = 2, buffer_base: int | Sequence[int] = 0,
                      elem_bytes: int = 2, tracker_sets: int = 256) -> AddressSpaceConfig:
    """Address-space configuration of a GEMM fused with a ring reduce-scatter (§4.4, Figs 11-12).

    Returns per device the ``remote_map`` / ``dma_map`` calls, the expanded Tracker programming and
    DMA table, the staggered chunk order and the WGs of each GEMM stage.  Pure function.
    """
    layout = OutputLayout(m, n, tuple(wg_tile), tuple(wf_tile), elem_bytes)
    nd = _check_int("n_devices", n_devices, 2)
    stages = _check_int("stages", stages)
    gran = _check_int("dma_granularity", dma_granularity)
    upe = _check_int("updates_per_element", updates_per_element)
    sets = _check_int("tracker_sets", tracker_sets)
    if layout.n_wg < nd:
        raise ValueError(f"{layout.n_wg} WG tiles cannot be chunked {nd} ways")
    if stages > layout.n_wg:
        raise ValueError(f"stages={stages} exceeds the {layout.n_wg} WG tiles")
    if isinstance(buffer_base, (int, np.integer)):
        bases = [int(buffer_base)] * nd
    else:
        bases = [int(b) for b in buffer_base]
        if len(bases) != nd:
            raise ValueError(f"buffer_base needs {nd} entries, got {len(bases)}")
    if any(b < 0 for b in bases):
        raise ValueError("buffer_base must be non-negative")

    bounds = _chunk_bounds(layout.n_wg, nd)
    order = stagger_order(nd)
    wpf = layout.wf_per_wg
    devices = []
    for d in range(nd):
        dst = (d - 1) % nd
        corder = order[d]
        wg_order = np.concatenate([np.arange(bounds[c], bounds[c + 1]) for c in corder])
        cut = np.linspace(0, layout.n_wg, stages + 1).round().astype(np.int64)
        stage_wgs = [wg_order[cut[j]:cut[j + 1]] for j in range(stages)]
        chunk_of_wg = np.searchsorted(bounds, np.arange(layout.n_wg), side="right") - 1
        stage_chunks = [tuple(dict.fromkeys(int(c) for c in chunk_of_wg[w])) for w in stage_wgs]

        remote_maps, dma_maps = [], []
        t_rows = {k: [] for k in ("wg", "wf", "chunk", "dma")}
        dma_rows = {k: [] for k in ("chunk", "wg", "wf", "nt", "dst", "op")}
        for s, c in enumerate(corder):
            c = int(c)
            rng = (int(bounds[c]), int(bounds[c + 1]))
            if s == 0:
                remote_maps.append(RemoteMap(d, c, rng, dst, bases[dst], OP_UPDATE))
                continue
            wgs = np.repeat(np.arange(*rng), wpf)
            wfs = np.tile(np.arange(wpf), rng[1] - rng[0])
            _, _, rr, cc = layout.wf_tile_box(wgs, wfs)
            keep = (rr * cc) > 0                      # WF tiles entirely outside the matrix
            wgs, wfs = wgs[keep], wfs[keep]
            if s < nd - 1:
                dma_maps.append(DmaMap(d, c, rng, dst, bases[dst], OP_UPDATE, upe, gran))
                blk = np.arange(wgs.size) // gran
                first = np.flatnonzero(np.r_[True, blk[1:] != blk[:-1]])
                base_entry = len(dma_rows["chunk"])
                dma_rows["chunk"] += [c] * first.size
                dma_rows["wg"] += wgs[first].tolist()
                dma_rows["wf"] += wfs[first].tolist()
                dma_rows["nt"] += np.diff(np.r_[first, wgs.size]).tolist()
                dma_rows["dst"] += [dst] * first.size
                dma_rows["op"] += [OP_UPDATE] * first.size
                t_rows["dma"] += (base_entry + blk).tolist()
            else:
                t_rows["dma"] += [-1] * wgs.size
            t_rows["wg"] += wgs.tolist()
            t_rows["wf"] += wfs.tolist()
            t_rows["chunk"] += [c] * wgs.size

        twg = np.asarray(t_rows["wg"], dtype=np.int64)
        twf = np.asarray(t_rows["wf"], dtype=np.int64)
        r0, c0, rr, cc = layout.wf_tile_box(twg, twf)
        elems = rr * cc
        tracker = TrackerProgram(
            wf_tile_elems=layout.wf_tile_elems, updates_per_element=upe, tracker_sets=sets,
            wg_id=twg, wf_id=twf, chunk=np.asarray(t_rows["chunk"], dtype=np.int64),
            set_index=twg % sets, tag_wg_msb=twg // sets,
            start_va=bases[d] + layout.offset_bytes(r0, c0), elems=elems, threshold=elems * upe,
            dma_entry=np.asarray(t_rows["dma"], dtype=np.int64))

        dwg = np.asarray(dma_rows["wg"], dtype=np.int64)
        dwf = np.asarray(dma_rows["wf"], dtype=np.int64)
        nt = np.asarray(dma_rows["nt"], dtype=np.int64)
        dr0, dc0, _, _ = layout.wf_tile_box(dwg, dwf)
        off = layout.offset_bytes(dr0, dc0)
        # payload bytes per block = sum of the elems of its WF tiles
        blk_bytes = np.zeros(nt.size, dtype=np.int64)
        has = tracker.dma_entry >= 0
        np.add.at(blk_bytes, tracker.dma_entry[has], elems[has] * elem_bytes)
        dstv = np.asarray(dma_rows["dst"], dtype=np.int64)
        table = DmaTable(
            chunk=np.asarray(dma_rows["chunk"], dtype=np.int64), first_wg=dwg, first_wf=dwf,
            n_wf_tiles=nt, src_va=bases[d] + off, dst_device=dstv,
            dst_va=np.asarray([bases[x] for x in dstv], dtype=np.int64) + off,
            op=np.asarray(dma_rows["op"], dtype=np.int64), bytes=blk_bytes)
        devices.append(DeviceConfig(d, corder.copy(), wg_order, stage_wgs, stage_chunks,
                                    remote_maps, dma_maps, tracker, table,
                                    final_chunk=int(corder[-1])))
    return AddressSpaceConfig(layout, nd, stages, bounds, devices)


def wf_tile_segments(layout: OutputLayout, wg_id: int, wf_id: int, base: int = 0):
    """Contiguous (start_va, n_bytes) column segments of one WF tile, as the DMA engine generates
    them from the start VA, the WF tile size and (M, N) (§4.2.2)."""
    r0, c0, rr, cc = (int(x) for x in layout.wf_tile_box(wg_id, wf_id))
    return [(base + int(layout.offset_bytes(r0, c0 + j)), rr * layout.elem_bytes) for j in range(cc)]
