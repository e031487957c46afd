"""Cycle-level system around T3 nodes for a ring reduce-scatter fused with its producer GEMM
(Pati et al., ASPLOS'24, §2.3, §4.1 Fig 7, §4.4).  Pure Python; the cocotb testbench plugs one
device's RTL node in place of its golden node.

Per device: the GEMM issues one WF-tile column-segment store per cycle (with random gaps), stage
by stage in the staggered order of ``configure_gemm_rs``; stores of slot 0 are remote updates into
the ring neighbour ``(d - 1) % n`` (``remote_map``), the others local NMC updates.  All updates
(local, remote, DMA) enter the device's memory-controller queue; the node (Tracker -> DMA table)
accepts one per cycle, at which point the near-memory op-and-store adds the data into the device's
memory (numpy; the queue makes it atomic, §4.3).  DMA commands go to the device's DMA engine, which
regenerates the tile's column segments from the start address, the WF tile size and (M, N)
(§4.2.2), reads the (complete) local data and sends one segment per cycle as DMA updates over a
link with fixed latency.  No host-side copying: data only moves through these transfers.
"""
from __future__ import annotations

import random
from collections import deque

import numpy as np

from tessera.golden.t3 import SRC_DMA, SRC_LOCAL, SRC_REMOTE, DmaTableModel, TrackerModel
from tessera.hdl.t3.programming import node_program
from tessera.sim_models.t3.address_space import configure_gemm_rs, wf_tile_segments


class GoldenNode:
    """Golden Tracker -> golden DMA table, stepped together."""

    def __init__(self, tparams: dict, entries: int, wf_width: int, addr_width: int, program):
        self.tracker = TrackerModel(threshold=program.threshold, **tparams)
        self.dma = DmaTableModel(entries, wf_width, addr_width)
        for i, e in enumerate(program.entries):
            self.dma.program(i, e)
        self.tracker.clear_left = 0          # programmed and cleared before the kernel starts

    def step(self, upd_valid, upd, cmd_ready):
        trig_ready = self.dma.trig_ready(cmd_ready)
        to = self.tracker.step(upd_valid, upd, trig_ready)
        do = self.dma.step(to["trig_valid"], to["trig"], cmd_ready)
        assert do["trig_ready"] == trig_ready
        return {"upd_ready": to["upd_ready"], "cmd_valid": do["cmd_valid"], "cmd": do["cmd"],
                "err_count": to["err_count"], "occupancy": to["occupancy"],
                "conflicts": to["conflicts"], "misses": do["misses"], "done": do["done"],
                "issued": do["issued"]}


class RingRS:
    def __init__(self, m=64, n=64, wg_tile=(16, 16), wf_tile=(8, 8), n_devices=4, *, seed=1,
                 tracker_sets=16, gemm_rate=0.6, link_latency=8, cmd_ready_prob=0.8,
                 elem_bytes=2, wf_width=3, entries=8, addr_width=24, dma_granularity=1):
        self.rng = random.Random(seed)
        self.nd = n_devices
        self.bases = [0x100000 * (d + 1) for d in range(n_devices)]
        self.cfg = configure_gemm_rs(m, n, wg_tile, wf_tile, stages=n_devices,
                                     n_devices=n_devices, buffer_base=self.bases,
                                     elem_bytes=elem_bytes, tracker_sets=tracker_sets,
                                     dma_granularity=dma_granularity)
        self.layout = self.cfg.layout
        self.eb = elem_bytes
        self.programs = [node_program(dv, wf_width=wf_width, entries=entries)
                         for dv in self.cfg.devices]
        nrng = np.random.default_rng(seed)
        self.partial = [nrng.integers(-1000, 1000, size=(m, n)) for _ in range(n_devices)]
        self.mem = [np.zeros(m * n, dtype=np.int64) for _ in range(n_devices)]
        self.mcq = [deque() for _ in range(n_devices)]     # (update tuple, values)
        self.gemm = [deque(self._gemm_stores(d)) for d in range(n_devices)]
        self.link = []                                      # (arrival cycle, dst, update, values)
        self.dma_q = [deque() for _ in range(n_devices)]    # pending segments
        self.gemm_rate, self.lat, self.cmd_ready_prob = gemm_rate, link_latency, cmd_ready_prob
        self.cycle = 0
        self.gemm_cycles = None                             # cycle the last GEMM store issued
        self.commands = [[] for _ in range(n_devices)]
        self.cmd_ready = [True] * n_devices
        self.status = [None] * n_devices

    # -- stimulus ---------------------------------------------------------------------------
    def _gemm_stores(self, d):
        dv = self.cfg.devices[d]
        remote = {r.chunk: r for r in dv.remote_maps}
        bounds = self.cfg.chunk_wg_bounds
        out = []
        for wgs in dv.stage_wgs:
            for wg in wgs:
                chunk = int(np.searchsorted(bounds, wg, side="right") - 1)
                for wf in range(self.layout.wf_per_wg):
                    r0, c0, rr, cc = (int(x) for x in self.layout.wf_tile_box(wg, wf))
                    if rr * cc == 0:
                        continue
                    if chunk in remote:
                        dst, base, src = remote[chunk].dst_device, self.bases[remote[chunk].dst_device], SRC_REMOTE
                    else:
                        dst, base, src = d, self.bases[d], SRC_LOCAL
                    for j in range(cc):
                        va = base + int(self.layout.offset_bytes(r0, c0 + j))
                        vals = self.partial[d][r0:r0 + rr, c0 + j].copy()
                        out.append((dst, (int(wg), wf, va, rr, src), vals))
        return out

    # -- per-cycle protocol -------------------------------------------------------------------
    def inputs(self, d):
        """(upd_valid, upd, cmd_ready) of device d this cycle."""
        self.cmd_ready[d] = self.rng.random() < self.cmd_ready_prob
        q = self.mcq[d]
        return (bool(q), q[0][0] if q else None, self.cmd_ready[d])

    def outputs(self, d, o):
        """Apply device d's outputs of this cycle (same dict keys as GoldenNode.step)."""
        self.status[d] = o
        q = self.mcq[d]
        if q and o["upd_ready"]:
            (wg, wf, va, n, src), vals = q.popleft()
            i = (va - self.bases[d]) // self.eb
            self.mem[d][i:i + n] += vals                 # near-memory op-and-store
        if o["cmd_valid"] and self.cmd_ready[d]:
            c = dict(o["cmd"])
            self.commands[d].append(c)
            for t in range(c["tiles"]):
                wg, wf = self._tile_after(c["wg"], c["wf"], t)
                for va, nbytes in wf_tile_segments(self.layout, wg, wf, self.bases[d]):
                    # same offset in the destination buffer (dst - src is constant)
                    self.dma_q[d].append((c["dst_dev"], va + c["dst"] - c["src"], va,
                                          nbytes // self.eb, wg, wf))

    def _tile_after(self, wg, wf, t):
        k = wg * self.layout.wf_per_wg + wf + t
        return k // self.layout.wf_per_wg, k % self.layout.wf_per_wg

    def advance(self):
        """End of cycle: GEMM issue, DMA engines, link deliveries."""
        for d in range(self.nd):
            if self.gemm[d] and self.rng.random() < self.gemm_rate:
                dst, upd, vals = self.gemm[d].popleft()
                if dst == d:
                    self.mcq[d].append((upd, vals))
                else:
                    self.link.append((self.cycle + self.lat, dst, upd, vals))
            if self.dma_q[d]:
                dst, dva, sva, n, wg, wf = self.dma_q[d].popleft()
                i = (sva - self.bases[d]) // self.eb
                vals = self.mem[d][i:i + n].copy()        # the one read of the local copy (Fig 10)
                self.link.append((self.cycle + self.lat, dst, (wg, wf, dva, n, SRC_DMA), vals))
        if self.gemm_cycles is None and not any(self.gemm):
            self.gemm_cycles = self.cycle + 1
        keep = []
        for item in self.link:
            if item[0] <= self.cycle:
                self.mcq[item[1]].append((item[2], item[3]))
            else:
                keep.append(item)
        self.link = keep
        self.cycle += 1

    def quiet(self):
        return not (self.link or any(self.gemm) or any(self.mcq) or any(self.dma_q))

    def finished(self):
        need = [int((self.cfg.devices[d].tracker.dma_entry < 0).sum()) for d in range(self.nd)]
        return self.quiet() and all(s is not None and s["done"] == need[d]
                                    for d, s in enumerate(self.status))

    # -- results ------------------------------------------------------------------------------
    def final_chunk_check(self):
        """[(device, chunk, got, expected)] for each device's fully reduced chunk."""
        total = sum(self.partial)
        lay = self.layout
        res = []
        for d, dv in enumerate(self.cfg.devices):
            c = dv.final_chunk
            lo, hi = self.cfg.chunk_wg_bounds[c], self.cfg.chunk_wg_bounds[c + 1]
            got, exp = [], []
            for wg in range(lo, hi):
                for wf in range(lay.wf_per_wg):
                    r0, c0, rr, cc = (int(x) for x in lay.wf_tile_box(wg, wf))
                    for j in range(cc):
                        i = int(lay.offset_bytes(r0, c0 + j)) // self.eb
                        got.append(self.mem[d][i:i + rr])
                        exp.append(total[r0:r0 + rr, c0 + j])
            res.append((d, c, np.concatenate(got), np.concatenate(exp)))
        return res


def run_golden(**kw):
    """All devices golden (reference run used by tests of the harness itself)."""
    sim = RingRS(**kw)
    tp = {"sets": kw.get("tracker_sets", 16), "ways": 4, "overflow": 4, "trig_depth": 4,
          "victims": 4}
    nodes = [GoldenNode(tp, 8, 3, 24, p) for p in sim.programs]
    while not sim.finished():
        for d in range(sim.nd):
            v, u, cr = sim.inputs(d)
            sim.outputs(d, nodes[d].step(v, u, cr))
        sim.advance()
        if sim.cycle > 100000:
            raise RuntimeError("ring did not finish")
    return sim
