"""Cross-check of the fused model against a cycle-level Tracker reference (T3 §4.2, Fig 9).

``replay`` takes a fused run recorded on a small instance (``simulate(..., record=True)``), turns the
model's fluid local-update and incoming-update streams of device 0 into per-WF-tile update events
(time the cumulative bytes of a chunk slot pass the end of the tile, in GPU cycles), and feeds them
to ``TrackerRef``: 256-set, (wg_msb, wf_id)-tagged counters programmed from
``address_space.configure_gemm_rs`` that fire when a counter reaches its threshold (WF elements x
updates per element).  The report lists, per slot, the first/last trigger cycles, the model's ready
and DMA times, and every violated assumption.  ``update_events`` exposes the event stream so that the
real Tracker implementations (golden ``TrackerModel`` and the RTL, ``tessera.tb.t3.xcheck``) can
replay it as well.

This is a reference of the *behaviour* the model assumes (threshold counting, trigger order), written
independently of ``overlap``; it is not the RTL.  Left out: finite associativity/eviction, MC queue
timing between enqueue and Tracker update.
"""
from __future__ import annotations

import numpy as np

from .address_space import AddressSpaceConfig


class TrackerRef:
    """Counters keyed by (set, tag); ``update`` returns the DMA entry (or -1) when a tile fires."""

    def __init__(self, prog):
        self.prog = prog
        self.count = {}
        self.row = {}
        for i in range(len(prog)):
            key = (int(prog.set_index[i]), int(prog.tag_wg_msb[i]), int(prog.wf_id[i]))
            self.row[key] = i
            self.count[key] = 0

    def update(self, wg_id: int, wf_id: int, elems: int):
        sets = self.prog.tracker_sets
        key = (wg_id % sets, wg_id // sets, wf_id)
        if key not in self.row:
            raise KeyError(f"untracked WF tile wg={wg_id} wf={wf_id}")
        i = self.row[key]
        self.count[key] += elems
        thr = int(self.prog.threshold[i])
        if self.count[key] > thr:
            raise AssertionError(f"tracker overflow at wg={wg_id} wf={wf_id}: {self.count[key]} > {thr}")
        return (i, int(self.prog.dma_entry[i])) if self.count[key] == thr else None


def _cross_time(t, cum, target):
    """First recorded time at which the cumulative series reaches ``target`` bytes."""
    k = int(np.searchsorted(cum, target - 1e-6 * max(target, 1.0), side="left"))
    return t[min(k, len(t) - 1)]


SRC_LOCAL, SRC_INCOMING = 0, 1       # event sources: local GEMM output / neighbour's DMA update


def update_events(cfg: AddressSpaceConfig, fused, clock_hz: float, elem_bytes: int = 2) -> list:
    """Device 0's per-WF-tile update events in the model's time order:
    ``(cycle, order, wg, wf, elems, src)`` sorted by (cycle, order); ``cycle`` is the first GPU
    cycle at or after the model time the tile's bytes are covered (``ceil(t * clock_hz)``)."""
    dev = cfg.devices[0]
    prog = dev.tracker
    tr = fused.trace
    t = tr["t"]
    prod = np.asarray(tr["produced"])
    inc = np.asarray(tr["incoming"])
    events = []
    order = 0
    for s in range(1, cfg.n_devices):
        chunk = int(dev.chunk_order[s])
        rows = np.flatnonzero(prog.chunk == chunk)
        cum = np.cumsum(prog.elems[rows]) * elem_bytes
        for code, src in ((SRC_LOCAL, prod), (SRC_INCOMING, inc)):
            for r, end in zip(rows, cum):
                cyc = int(np.ceil(_cross_time(t, src[:, s], float(end)) * clock_hz))
                events.append((cyc, order, int(prog.wg_id[r]), int(prog.wf_id[r]),
                               int(prog.elems[r]), code))
                order += 1
    events.sort()
    return events


def replay(cfg: AddressSpaceConfig, fused, clock_hz: float, elem_bytes: int = 2) -> dict:
    dev = cfg.devices[0]
    prog = dev.tracker
    t = fused.trace["t"]
    n = cfg.n_devices
    events = update_events(cfg, fused, clock_hz, elem_bytes)
    ref = TrackerRef(prog)
    fired = {}
    for cyc, _, wg, wf, el, _src in events:
        hit = ref.update(wg, wf, el)
        if hit is not None:
            fired[hit[0]] = (cyc, hit[1])
    problems = []
    if len(fired) != len(prog):
        problems.append(f"{len(prog) - len(fired)} tracker entries never fired")
    slots = []
    for s in range(1, n):
        chunk = int(dev.chunk_order[s])
        rows = np.flatnonzero(prog.chunk == chunk)
        cyc = np.array([fired[r][0] for r in rows if r in fired])
        if cyc.size == 0:
            continue
        if np.any(np.diff(cyc) < 0):
            problems.append(f"slot {s}: triggers out of tile order")
        ready_cyc = fused.slot_ready[s] * clock_hz
        dt_cyc = (t[1] - t[0]) * clock_hz
        if abs(cyc.max() - ready_cyc) > dt_cyc + 1:
            problems.append(f"slot {s}: last trigger at cycle {cyc.max()} but model ready at {ready_cyc:.0f}")
        row = dict(slot=s, chunk=chunk, tiles=int(rows.size), first_trigger=int(cyc.min()),
                   last_trigger=int(cyc.max()), model_ready=float(ready_cyc))
        if s < n - 1:
            ss, se = fused.send_start[s] * clock_hz, fused.send_end[s] * clock_hz
            if ss + dt_cyc + 1 < cyc.min():
                problems.append(f"slot {s}: model DMA starts at {ss:.0f} before first trigger {cyc.min()}")
            if se + dt_cyc + 1 < cyc.max():
                problems.append(f"slot {s}: model DMA ends at {se:.0f} before last trigger {cyc.max()}")
            ents = [fired[r][1] for r in rows if r in fired]
            if any(e < 0 for e in ents):
                problems.append(f"slot {s}: a DMA'd chunk has completion-only entries")
            row.update(model_dma_start=float(ss), model_dma_end=float(se))
        elif any(fired[r][1] >= 0 for r in rows if r in fired):
            problems.append("last slot triggered a DMA")
        slots.append(row)
    firsts = [r["first_trigger"] for r in slots]
    if firsts != sorted(firsts):
        problems.append("slots start triggering out of ring order")
    return dict(events=len(events), fired=len(fired), entries=len(prog), slots=slots,
                problems=problems)
