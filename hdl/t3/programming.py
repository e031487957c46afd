"""Register programming of the T3 RTL from the address-space configuration API (§4.4, Figs 11-12).

Wraps ``tessera.sim_models.t3.address_space`` (the ``remote_map`` / ``dma_map`` API shared with the
T3 system model) and turns one device's configuration into what the RTL needs:

* the Tracker ``threshold`` (``wf_tile_size x updates_per_element``); the RTL has one threshold
  register, so layouts with clipped edge tiles (per-tile thresholds) are rejected;
* DMA trigger-table entries (``DmaEntry`` of :mod:`tessera.golden.t3`, the data definition shared
  with the golden model): consecutive single-tile DMA blocks of a chunk are merged into one range
  entry (``tiles = 1``); a multi-tile block (``dma_granularity > 1``) is one entry whose key range
  spans its WF tiles; the chunk that ends fully reduced on the device gets a completion-only entry
  (op none) so that its triggers are counted and not reported as misses.

Pure functions; raises ``ValueError`` when the configuration does not fit the RTL parameters.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tessera.golden.t3 import OP_NONE, DmaEntry
from tessera.sim_models.t3.address_space import DeviceConfig


@dataclass(frozen=True)
class NodeProgram:
    threshold: int
    entries: list            # [DmaEntry], table index = list index


def node_program(dev: DeviceConfig, *, wf_width: int = 3, entries: int = 16,
                 tiles_width: int = 8, count_width: int = 16) -> NodeProgram:
    tr, tb = dev.tracker, dev.dma_table
    if len(tr) == 0:
        raise ValueError(f"device {dev.device} tracks nothing")
    thr = np.unique(tr.threshold)
    if thr.size != 1:
        raise ValueError(f"device {dev.device}: per-tile thresholds {thr.tolist()} (clipped edge "
                         "tiles); the RTL Tracker has a single threshold register")
    threshold = int(thr[0])
    if threshold >= 1 << count_width:
        raise ValueError(f"threshold {threshold} does not fit count_width={count_width}")
    if int(tr.wf_id.max()) >= 1 << wf_width:
        raise ValueError(f"wf_id {int(tr.wf_id.max())} does not fit wf_width={wf_width}")
    key = (tr.wg_id << wf_width) | tr.wf_id
    out: list[DmaEntry] = []
    single_run = None                      # open merged run of single-tile blocks
    for row in range(len(tb)):
        keys = key[tr.dma_entry == row]
        lo, hi = int(keys.min()), int(keys.max())
        nt = int(tb.n_wf_tiles[row])
        if nt >= 1 << tiles_width:
            raise ValueError(f"DMA block of {nt} tiles does not fit tiles_width={tiles_width}")
        e = DmaEntry(lo, hi, int(tb.src_va[row]), int(tb.dst_device[row]), int(tb.dst_va[row]),
                     int(tb.op[row]), nt)
        if nt == 1 and single_run is not None and single_run[1] == int(tb.chunk[row]) and \
                e.dst_dev == single_run[0].dst_dev and e.op == single_run[0].op and \
                e.dst_addr - e.base == single_run[0].dst_addr - single_run[0].base:
            prev = single_run[0]
            out[-1] = single_run[0] = DmaEntry(prev.key_lo, hi, prev.base, prev.dst_dev,
                                               prev.dst_addr, prev.op, 1)
            continue
        out.append(e)
        single_run = [e, int(tb.chunk[row])] if nt == 1 else None
    final = tr.dma_entry < 0
    if final.any():
        fk = key[final]
        out.append(DmaEntry(int(fk.min()), int(fk.max()), 0, 0, 0, OP_NONE, 1))
    for i, a in enumerate(out):
        for b in out[i + 1:]:
            if a.key_lo <= b.key_hi and b.key_lo <= a.key_hi:
                raise ValueError(f"device {dev.device}: DMA entries overlap ({a}, {b})")
    if len(out) > entries:
        raise ValueError(f"device {dev.device} needs {len(out)} DMA table entries, RTL has {entries}")
    return NodeProgram(threshold, out)
