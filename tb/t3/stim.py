"""Stimulus and lock-step drivers for the T3 testbenches (pure Python, no cocotb import).

* :func:`tile_updates` -- the update stream of a GEMM output (column-major, WF tiles split into
  column segments, §4.2.1 Fig 9(a)): local stores per column segment plus remote/DMA updates per
  half segment, randomly interleaved over a window of live tiles, random WG/WF order.
* :class:`TrackerDriver` -- per-cycle input decisions for the Tracker (update valid/payload held
  until accepted, trigger-ready back-pressure) from a pre-drawn random pattern, so the same
  sequence drives the golden model alone (:func:`run_tracker_golden`) and the RTL in lock-step.
"""
from __future__ import annotations

import random

from tessera.golden.t3 import SRC_DMA, SRC_LOCAL, SRC_REMOTE, TrackerModel
from tessera.sim_models.t3.address_space import OutputLayout, wf_tile_segments


def tile_updates(layout: OutputLayout, tiles, base=0, window=4, rng=None, remote_src=SRC_REMOTE):
    """Interleaved updates ``(wg, wf, addr, n, src)`` covering every element of each tile twice
    (one local, one remote/DMA update).  Returns (stream, expected) with expected[(wg, wf)] =
    (start_addr, elements)."""
    rng = rng or random.Random(0)
    eb = layout.elem_bytes
    per_tile = {}
    expected = {}
    for wg, wf in tiles:
        segs = wf_tile_segments(layout, wg, wf, base)
        ups = []
        for va, nbytes in segs:
            rows = nbytes // eb
            ups.append((wg, wf, va, rows, SRC_LOCAL))
            h = rows // 2
            if h:
                ups.append((wg, wf, va, h, remote_src))
                ups.append((wg, wf, va + h * eb, rows - h, remote_src))
            else:
                ups.append((wg, wf, va, rows, remote_src))
        rng.shuffle(ups)
        per_tile[(wg, wf)] = ups
        expected[(wg, wf)] = (min(s[0] for s in segs), sum(s[1] for s in segs) // eb)
    order = list(tiles)
    live, stream = [], []
    while order or live:
        while order and len(live) < window:
            live.append(order.pop(0))
        t = rng.choice(live)
        stream.append(per_tile[t].pop(0))
        if not per_tile[t]:
            live.remove(t)
    return stream, expected


class TrackerDriver:
    """Decides the Tracker inputs of each cycle; records accepted updates and triggers."""

    def __init__(self, stream, seed, idle_prob=0.2, ready_prob=0.7):
        self.stream = list(stream)
        self.rng = random.Random(seed)
        self.idle_prob, self.ready_prob = idle_prob, ready_prob
        self.pos = 0
        self.cur = None
        self.cycle = 0
        self.accepted = []          # (cycle, update)
        self.triggers = []          # (cycle, trigger)
        self.stall_cycles = 0       # valid & !ready

    def inputs(self):
        r_valid, r_ready = self.rng.random(), self.rng.random()
        if self.cur is None and self.pos < len(self.stream) and r_valid >= self.idle_prob:
            self.cur = self.stream[self.pos]
            self.pos += 1
        return self.cur is not None, self.cur, r_ready < self.ready_prob

    def observe(self, valid, ready, trig_ready, trig_valid, trig):
        if valid and ready:
            self.accepted.append((self.cycle, self.cur))
            self.cur = None
        elif valid:
            self.stall_cycles += 1
        if trig_valid and trig_ready:
            self.triggers.append((self.cycle, tuple(trig)))
        self.cycle += 1

    def done(self):
        return self.pos >= len(self.stream) and self.cur is None


def run_tracker_golden(stream, seed, max_cycles, idle_prob=0.2, ready_prob=0.7, **tparams):
    """Run the golden Tracker alone with the same driver; returns (driver, model, finished)."""
    threshold = tparams.pop("threshold")
    model = TrackerModel(threshold=threshold, **tparams)
    drv = TrackerDriver(stream, seed, idle_prob, ready_prob)
    idle = 0
    while drv.cycle < max_cycles:
        v, u, tr = drv.inputs()
        o = model.step(v, u, tr)
        drv.observe(v, o["upd_ready"], tr, o["trig_valid"], o["trig"])
        idle = 0 if (v and o["upd_ready"]) or o["trig_valid"] else idle + 1
        if drv.done() and not model.tfifo and model.s1 is None:
            return drv, model, True
    return drv, model, False
