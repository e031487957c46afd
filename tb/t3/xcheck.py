"""Cross-check of the T3 system model's trigger timing with the real Tracker (T3 §4.2.1, Fig 9;
issue 7 "Cross-check with the RTL").  Pure Python, no cocotb import.

The fused GEMM + ring-RS model is run on a small instance (4 GPUs x 4 stages, 1024x1024x512 GEMM,
8 CUs, as in ``tessera t3``'s demo) and device 0's per-WF-tile update stream is taken from
``sim_models.t3.tracker_ref.update_events`` (local output and incoming DMA update of every tracked
tile, model time converted to GPU cycles with ``ceil(t * clock)``).  Each event becomes one Tracker
update ``(wg, wf, tile start VA, tile elements, src)`` offered at its model cycle, in the model's
order, one per cycle when events are back-to-back; the trigger output is always ready.

:func:`run_golden` feeds it to ``golden.t3.TrackerModel`` cycle by cycle; ``tb/t3/test_xcheck.py``
feeds it to the RTL on Verilator with the same :class:`StreamDriver`.  :func:`check` verifies that
every tracked tile triggers exactly once, with its start address, in the order the model completes
the tiles, and at the model's ready cycle (the tile's completing event) plus the Tracker latency (5
cycles, ``hdl.t3.tracker``) plus the serialisation delay of the one-update-per-cycle Tracker --
exactly.  That delay is reported as ``max_lateness``: the model stamps events with the end of its
time step (``model_step_cycles``), so up to a few tile updates share one cycle; lateness at or
beyond one model time step is an error, as is a slot whose last trigger is a step after the
model's chunk-ready time.

Left out (by design of the stream, not of the Tracker): the model's updates are per WF tile (one
update carries the tile's elements), not per DRAM request, so Tracker throughput at request
granularity is not exercised; the DMA table is not in the loop.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tessera.golden.t3 import SRC_DMA, SRC_LOCAL, TrackerModel

LATENCY = 6          # accepted update -> trig.valid (hdl.t3.tracker docstring: 4 + read_latency,
#                      default 2; was 5 with read latency 1, 3 with the three-stage pipeline)
# RTL parameters of the cross-check: paper organisation (256 sets x 8 ways, §4.2.1) with widths cut
# to the instance (VAs < 2 MB, wg_id < 64) and n_width = 12 so one update carries a 32x64 WF tile.
XCHECK_PARAMS = {"sets": 256, "ways": 8, "wg_width": 8, "wf_width": 3, "addr_width": 24,
                 "count_width": 16, "n_width": 12, "overflow": 4, "trig_depth": 4,
                 "victims": 4}


@dataclass
class Instance:
    system: object
    plan: object
    fused: object
    cfg: object
    events: list          # tracker_ref.update_events

    @property
    def clock(self) -> float:
        return self.system.clock


def small_instance() -> Instance:
    from tessera.sim_models.t3 import address_space as A
    from tessera.sim_models.t3 import config, gemm, overlap, tracker_ref
    sx = config.system(4).scaled(cus=8)
    px = gemm.plan(sx, gemm.GemmDims("xcheck", 1024, 1024, 512), cached_output=False)
    fx = overlap.simulate(sx, px, comm=True, record=True, dt=0.05e-6)
    cx = A.configure_gemm_rs(1024, 1024, sx.wg_tile, sx.wf_tile, px.stages, 4)
    if px.stages != 4:
        raise AssertionError(f"small instance expected 4 stages, plan has {px.stages}")
    return Instance(sx, px, fx, cx, tracker_ref.update_events(cx, fx, sx.clock))


def tracker_stream(inst: Instance):
    """[(model_cycle, update)] in the model's order; update = (wg, wf, addr, n, src)."""
    from tessera.sim_models.t3.tracker_ref import SRC_LOCAL as M_LOCAL
    prog = inst.cfg.devices[0].tracker
    out = []
    for cyc, _order, wg, wf, elems, src in inst.events:
        r = prog.lookup(wg, wf)
        out.append((cyc, (wg, wf, int(prog.start_va[r]), elems,
                          SRC_LOCAL if src == M_LOCAL else SRC_DMA)))
    return out


def threshold(inst: Instance) -> int:
    thr = np.unique(inst.cfg.devices[0].tracker.threshold)
    if thr.size != 1:
        raise ValueError(f"per-tile thresholds {thr.tolist()}: the Tracker has one register")
    return int(thr[0])


class StreamDriver:
    """Offers each update from its model cycle on, in order, holding it until accepted."""

    def __init__(self, timed):
        self.timed = list(timed)
        self.pos = 0
        self.cur = None
        self.accepted = []        # (cycle, update)

    def inputs(self, cycle):
        if self.cur is None and self.pos < len(self.timed) and self.timed[self.pos][0] <= cycle:
            self.cur = self.timed[self.pos][1]
            self.pos += 1
        return self.cur is not None, self.cur

    def observe(self, cycle, valid, ready):
        if valid and ready:
            self.accepted.append((cycle, self.cur))
            self.cur = None

    def next_cycle(self):
        """Model cycle of the next update not yet offered (None when all were offered)."""
        return self.timed[self.pos][0] if self.pos < len(self.timed) else None

    def done(self):
        return self.pos >= len(self.timed) and self.cur is None


def run_golden(timed, thr, params=XCHECK_PARAMS, max_cycles=10_000_000) -> dict:
    """Cycle 0 = first cycle after the reset clear sweep; every cycle is stepped."""
    m = TrackerModel(sets=params["sets"], ways=params["ways"], overflow=params["overflow"],
                     trig_depth=params["trig_depth"], threshold=thr, victims=params["victims"])
    while m.step(False, None, True)["busy"]:
        pass
    drv = StreamDriver(timed)
    trigs = []
    cycle = 0
    while not (drv.done() and m.idle()):
        if cycle >= max_cycles:
            raise AssertionError(f"stream not finished after {max_cycles} cycles")
        v, u = drv.inputs(cycle)
        o = m.step(v, u, True)
        if o["trig_valid"]:
            trigs.append((cycle,) + tuple(o["trig"]))
        drv.observe(cycle, v, o["upd_ready"])
        cycle += 1
    return dict(triggers=trigs, accepted=drv.accepted, cycles=cycle, err=m.err,
                conflicts=m.conflicts, occupancy=m.occupancy)


def check(inst: Instance, timed, run: dict) -> dict:
    """Trigger sequence ``run['triggers']`` [(cycle, wg, wf, addr)] against the model's assumptions."""
    prog = inst.cfg.devices[0].tracker
    problems = []
    trigs = run["triggers"]
    if [u for _, u in run["accepted"]] != [u for _, u in timed]:
        problems.append("updates not all accepted in stream order")
    # model: tile ready at its completing event; expected trigger order = completing-event order
    ready, seen_n, order = {}, {}, []
    for cyc, u in timed:
        key = (u[0], u[1])
        seen_n[key] = seen_n.get(key, 0) + u[3]
        if seen_n[key] == int(prog.threshold[prog.lookup(*key)]):
            ready[key] = cyc
            order.append(key)
    tiles = [(int(a), int(b)) for a, b in zip(prog.wg_id, prog.wf_id)]
    if sorted(order) != sorted(tiles):
        problems.append(f"model stream completes {len(order)} of {len(tiles)} tiles")
    got = [(wg, wf) for _, wg, wf, _ in trigs]
    if len(set(got)) != len(got):
        problems.append(f"{len(got) - len(set(got))} duplicate triggers")
    if sorted(set(got)) != sorted(tiles):
        problems.append(f"{len(set(tiles) - set(got))} tiles never triggered, "
                        f"{len(set(got) - set(tiles))} untracked tiles triggered")
    if got != order:
        k = next((i for i, (a, b) in enumerate(zip(got, order)) if a != b), min(len(got), len(order)))
        problems.append(f"trigger order differs from the model's tile order at position {k}")
    # The Tracker accepts one update per cycle: an update offered at model cycle t_i is accepted at
    # a_i = max(t_i, a_{i-1} + 1) (trigger output always ready, no set conflicts), and a tile
    # triggers at a + LATENCY of its completing update.  Lateness w.r.t. the model's ready cycle is
    # therefore exactly the serialisation delay a - t of same-cycle model events.
    acc, prev = {}, None
    for i, (t, _u) in enumerate(timed):
        prev = t if prev is None else max(t, prev + 1)
        acc[i] = prev
    if [c for c, _ in run["accepted"]] != [acc[i] for i in range(len(timed))]:
        problems.append("update acceptance cycles differ from one update per cycle")
    done_idx, seen2 = {}, {}
    for i, (_t, u) in enumerate(timed):
        key = (u[0], u[1])
        seen2[key] = seen2.get(key, 0) + u[3]
        if key in ready and seen2[key] == int(prog.threshold[prog.lookup(*key)]):
            done_idx[key] = i
    late, bad_time = [], 0
    for cyc, wg, wf, addr in trigs:
        key = (wg, wf)
        if key in ready:
            late.append(cyc - ready[key] - LATENCY)
            bad_time += cyc != acc[done_idx[key]] + LATENCY
            sva = int(prog.start_va[prog.lookup(wg, wf)])
            if addr != sva:
                problems.append(f"tile {key}: start address {addr:#x}, expected {sva:#x}")
    if bad_time:
        problems.append(f"{bad_time} triggers not at (acceptance of the completing update) + {LATENCY}")
    late = np.asarray(late)
    if late.size and late.min() < 0:
        problems.append(f"{int((late < 0).sum())} triggers before the model's ready cycle + {LATENCY}")
    dt_cyc = (inst.fused.trace["t"][1] - inst.fused.trace["t"][0]) * inst.clock
    if late.size and late.max() >= dt_cyc:
        problems.append(f"trigger {int(late.max())} cycles late, beyond the model's time step "
                        f"({dt_cyc:.0f} cycles)")
    slots = []
    dev = inst.cfg.devices[0]
    tcyc = {(wg, wf): cyc for cyc, wg, wf, _ in trigs}
    for s in range(1, inst.cfg.n_devices):
        rows = np.flatnonzero(prog.chunk == int(dev.chunk_order[s]))
        cyc = [tcyc[tiles[r]] for r in rows if tiles[r] in tcyc]
        if not cyc:
            continue
        ready_cyc = math.ceil(inst.fused.slot_ready[s] * inst.clock)
        slots.append(dict(slot=s, tiles=int(rows.size), first_trigger=min(cyc), last_trigger=max(cyc),
                          model_ready=ready_cyc, slack=ready_cyc + LATENCY - max(cyc)))
        if max(cyc) >= ready_cyc + LATENCY + dt_cyc:
            problems.append(f"slot {s}: last trigger {max(cyc)} a model time step after ready {ready_cyc}")
    if run.get("err") or run.get("occupancy"):
        problems.append(f"tracker error count {run.get('err')}, {run.get('occupancy')} entries left")
    accept_delay = [c - t for (c, _), (t, _) in zip(run["accepted"], timed)]
    return dict(updates=len(timed), triggers=len(trigs), tiles=len(tiles),
                max_lateness=int(late.max()) if late.size else None,
                min_lateness=int(late.min()) if late.size else None,
                late_triggers=int((late > 0).sum()), model_step_cycles=round(dt_cyc),
                max_accept_delay=max(accept_delay) if accept_delay else None,
                back_to_back=sum(1 for d in accept_delay if d > 0),
                conflicts=run.get("conflicts"), cycles=run["cycles"], slots=slots, problems=problems)


def golden_crosscheck() -> dict:
    """Small instance through the golden Tracker; returns :func:`check`'s report."""
    inst = small_instance()
    timed = tracker_stream(inst)
    return check(inst, timed, run_golden(timed, threshold(inst)))
