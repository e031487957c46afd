"""The non-uniform tiling optimisations of seed paper Sec. 5.

* ``nonuniform`` (Sec. 5.1): starting from the best uniform tiling, move work (output channels
  K between k-partitions, or output rows P between p-partitions) from the partition that
  finishes last to the one that finishes first, one PE-sized granule at a time, keeping a move
  only if the modelled layer latency drops -- the model stands in for the paper's performance
  counters.  Weight/accumulation capacities are re-checked for every move.
* ``placement`` (Sec. 5.2): same tiling, re-bind logical chiplets (row-major / snake / centre)
  and place input- and output-activation tiles greedily (min aggregate multicast hop count),
  keeping the best including the baseline (runtime "local" homes, or the Fig. 11b sequential fill).
* ``pipeline_block`` (Sec. 5, cross-layer pipelining): the layers of a residual block run on
  disjoint chiplet partitions; each stage starts when its producer has emitted the rows its
  first output row needs and they have crossed to the consumer's partition (interlayer.py
  move: latency + bandwidth share); the block takes at least as long as the busiest NoP link
  needs for all stages' traffic plus the moves (the stages share the package links).  With the
  runtime's interrupt barrier on (``ctrl_irq_barrier``, rtcontrol.py) each stage after the first
  is triggered by a cross-partition hand-off over the same memory-mapped interrupts
  (rtcontrol.handoff: the producer's chiplets interrupt the consumer partition's master, which
  releases its chiplets by serial MMIO writes), and a stage's end barrier is not divisible across
  its steps (charged whole after its last step); with ``pipeline_handoff`` 1 (the default since
  stop 30, an assumption) a hand-off per producer row-step, serialised at the consumer's master.
  Partition sizes are searched over powers of two.

Every optimisation returns the baseline when it cannot improve, so it never loses to it.
Left out: runtime re-measurement loops, non-uniform splits along C (Sec. 5.1 mentions them
for output activations), interference inside a chiplet's NoC between pipelined stages.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .arch import Arch
from .layers import Layer
from . import rtcontrol
from .model import LayerResult, Mapping, MappingError, barrier_master, build_structure, evaluate, split
from .topology import bind, chiplet_noc, mesh


def _try(layer, arch, mp, binding, placement):
    try:
        return evaluate(layer, arch, mp, binding, placement)
    except MappingError:
        return None


def nonuniform(layer: Layer, arch: Arch, base: LayerResult, max_evals: int = 40) -> LayerResult:
    mp0 = base.mapping
    binding, placement = base.binding, base.placement
    best = base
    kext = list(mp0.k_ext or split(layer.K, mp0.kc))
    pext = list(mp0.p_ext or split(layer.P, mp0.pc))
    idx = None
    evals = 0
    while evals < max_evals:
        st = build_structure(layer, arch, mp0.kc, mp0.cc, mp0.pc, mp0.qc, binding, placement,
                             tuple(kext), tuple(pext))
        idx = st.idx
        own = np.asarray(best.own)
        moves = []
        for dim, ext, col, gran in (("K", kext, 0, [mp0.kp * arch.k0, arch.k0, 1]),
                                    ("P", pext, 2, [mp0.pp, 1])):
            if len(ext) < 2:
                continue
            t = np.array([own[idx[:, col] == j].max() for j in range(len(ext))])
            slow = int(np.argmax(t))
            for fast in np.argsort(t):
                if fast == slow:
                    continue
                for g in sorted(set(gran), reverse=True):
                    if ext[slow] - g >= 1:
                        moves.append((t[slow] - t[fast], dim, slow, int(fast), g))
                break
        moves.sort(key=lambda m: -m[0])
        improved = False
        for _, dim, slow, fast, g in moves:
            ke, pe = list(kext), list(pext)
            ext = ke if dim == "K" else pe
            ext[slow] -= g
            ext[fast] += g
            mp = Mapping(mp0.kc, mp0.cc, mp0.pc, mp0.qc, mp0.kp, mp0.cp, mp0.pp, mp0.qp, mp0.p1, mp0.q1,
                         tuple(ke) if ke != split(layer.K, mp0.kc) else None,
                         tuple(pe) if pe != split(layer.P, mp0.pc) else None)
            evals += 1
            r = _try(layer, arch, mp, binding, placement)
            if r is not None and r.latency_cycles < best.latency_cycles - 1e-9:
                best, kext, pext, improved = r, ke, pe, True
                break
            if evals >= max_evals:
                break
        if not improved:
            break
    best.samples = base.samples
    return best


BINDINGS = ("row-major", "snake", "centre")


def placement(layer: Layer, arch: Arch, base: LayerResult) -> LayerResult:
    best = base
    for b in BINDINGS:
        for p in ("local", "sequential", "greedy"):
            r = _try(layer, arch, base.mapping, b, p)
            if r is not None and r.latency_cycles < best.latency_cycles - 1e-9:
                best = r
    best.samples = base.samples
    return best


def _first_fraction(res: LayerResult, layer: Layer, nxt: Layer) -> tuple[float, int]:
    """Fraction of a producer's run after which its consumer can start, and its step count."""
    mp = res.mapping
    ppe = math.ceil(math.ceil(layer.P / mp.pc) / mp.pp)
    qpe = math.ceil(math.ceil(layer.Q / mp.qc) / mp.qp)
    p1 = min(mp.p1, ppe)
    P2 = math.ceil(ppe / p1)
    Q2 = math.ceil(qpe / min(mp.q1, qpe))
    need_rows = max(1, nxt.R - nxt.pad)
    return min(1.0, math.ceil(need_rows / p1) / P2), P2 * Q2


def pipeline_time(stages: list[tuple[LayerResult, Layer]], side: list[LayerResult] = (),
                  moves: list[tuple[float, float]] | None = None,
                  handoffs: list[float] | None = None, per_step: bool = False) -> float:
    """Latency of a chain of pipelined stages (cycles).  ``side``: stages that run
    concurrently from time 0 on their own partitions (e.g. branch1).  ``moves[i]``: (bandwidth
    time, latency) of moving stage i-1's outputs to stage i's partition (interlayer.py).
    ``handoffs[i]`` (runtime interrupt barrier on; rtcontrol.handoff): the cross-partition
    synchronisation before stage i starts; with it a stage's own sync (its end barrier,
    ``sync_cycles``) is charged whole after its last step instead of spread over its steps.
    ``per_step`` (``pipeline_handoff`` 1): a hand-off for every producer row-step, serialised."""
    start, fin = 0.0, 0.0
    for i, (res, layer) in enumerate(stages):
        t = res.latency_cycles
        if i == 0:
            start, fin = 0.0, t
        else:
            prev_res, prev_layer = stages[i - 1]
            f, psteps = _first_fraction(prev_res, prev_layer, layer)
            _, steps = _first_fraction(res, layer, layer)
            mv, lat = moves[i] if moves else (0.0, 0.0)
            h = handoffs[i] if handoffs else 0.0
            s = res.sync_cycles if handoffs else 0.0
            # the first rows cross after the producer made them; the move streams alongside
            start = start + f * max(prev_res.latency_cycles, mv) + lat + h
            fin = max(start + t, fin + lat + mv / psteps + (t - s) / steps + s)
            if per_step:
                # one hand-off per producer row-step, taken one after another by the consumer's
                # master: the last arrives (psteps - 1) hand-offs after the first
                fin = max(fin, start + (psteps - 1) * h + (t - s) / steps + s)
        last = fin
    return max([last] + [s.latency_cycles for s in side])


def pipeline_block(layers: list[Layer], per_count: list[dict], arch: Arch, n_total: int):
    """Choose disjoint power-of-two partitions for the layers of one residual block.
    ``layers`` = [branch1?] + [2a, 2b, 2c]; branch1 (if any) runs beside 2a.  ``per_count``:
    for each layer, chiplet count -> best uniform LayerResult.  Returns (latency, plan) where
    plan lists (layer, count, physical chiplets, LayerResult re-evaluated on them)."""
    has_b1 = layers[0].name.endswith("branch1")
    options = [sorted(pc) for pc in per_count]
    best = None
    for combo in itertools.product(*options):
        if sum(combo) > n_total:
            continue
        res = [per_count[i][n] for i, n in enumerate(combo)]
        main = list(zip(res[1:] if has_b1 else res, layers[1:] if has_b1 else layers))
        t = pipeline_time(main, res[:1] if has_b1 else [])
        if best is None or t < best[0]:
            best = (t, combo)
    if best is None:
        return None
    # bind the chosen partitions to disjoint physical chiplets (snake order) and re-evaluate
    from .interlayer import link_loads, move_bytes, move_time
    order = bind(arch.n_chiplets, "snake", arch.mesh_rows, arch.mesh_cols)
    off, plan = 0, []
    for i, n in enumerate(best[1]):
        phys = tuple(order[off:off + n])
        off += n
        r = _try(layers[i], arch, per_count[i][n].mapping, phys, "local")
        if r is None:
            return None
        r.samples = per_count[i][n].samples
        plan.append((layers[i], n, phys, r))
    res = [p[3] for p in plan]
    lay = layers[1:] if has_b1 else layers
    main = list(zip(res[1:] if has_b1 else res, lay))
    moves, shared = [(0.0, 0.0)], np.sum([np.asarray(r.link_bytes) for r in res], axis=0)
    for i in range(1, len(main)):
        mb = move_bytes(main[i - 1][1], main[i - 1][0], main[i][1], main[i][0], arch)
        moves.append(move_time(mb, arch))
        shared = shared + link_loads(mb, arch)
    handoffs = None
    if arch.ctrl_irq_barrier:
        # each stage after the first is triggered over the runtime's memory-mapped interrupts by
        # its producer's chiplets (rtcontrol.handoff), at its own partition's master
        hops = mesh(arch.mesh_rows, arch.mesh_cols).hops
        parts = [p[2] for p in plan]
        parts = parts[1:] if has_b1 else parts
        noc = chiplet_noc(arch)
        handoffs = [0.0]
        for i in range(1, len(parts)):
            master = barrier_master(arch, hops, parts[i])
            handoffs.append(rtcontrol.handoff(arch, noc, hops[master, list(parts[i - 1])], hops[master, list(parts[i])]))
    t = pipeline_time(main, res[:1] if has_b1 else [], moves, handoffs, per_step=bool(arch.pipeline_handoff))
    t = max(t, float(shared.max()) / arch.nop_link_bytes_per_cycle)     # stages share the NoP
    return t, plan
