"""Mapper and binder (seed paper Sec. 3.3): seeded random search over valid tilings.

The mapper samples the Listing 1 factors over the full space Sec. 3.3 describes -- chiplet-level
spatial (kc, cc, pc, qc) over a chiplet count ("Simba can also uniformly partition along P and
Q across chiplets and PEs"), PE-level spatial (kp, cp, pp, qp) and PE temporal tiles (P1, Q1);
``spatial_pq=False`` restricts it to Listing 1's default K/C-only dataflow (the ablation) -- rejects
those that overflow a PE buffer (weight 32 KB, input 8 KB double-buffered, accumulation
128 entries per vector MAC) and scores the rest with the performance model (latency first,
energy as tie-break).  Samples sharing chiplet-level factors are scored in one vectorised
batch.  The binder maps logical chiplets to physical ones ('row-major' baseline).
Left out: loop-order permutations (Listing 1's order is fixed), C/K temporal tiling above the
PE (weights must fit in the PEs used, as in the preloaded-weight measurements).
"""
from __future__ import annotations

import itertools
from functools import lru_cache

import numpy as np

from .arch import Arch
from .layers import Layer
from .model import LayerResult, Mapping, MappingError, build_structure, evaluate_batch


@lru_cache(maxsize=None)
def factorisations(n: int, parts: int) -> tuple:
    """Ordered factorisations of n into ``parts`` positive factors."""
    if parts == 1:
        return ((n,),)
    out = []
    for d in range(1, n + 1):
        if n % d == 0:
            out.extend((d,) + rest for rest in factorisations(n // d, parts - 1))
    return tuple(out)


def chiplet_splits(layer: Layer, n: int) -> list[tuple]:
    return [f for f in factorisations(n, 4)
            if f[0] <= layer.K and f[1] <= layer.C and f[2] <= layer.P and f[3] <= layer.Q]


def pe_splits(arch: Arch) -> list[tuple]:
    out = []
    for used in range(1, arch.pes_per_chiplet + 1):
        if arch.pes_per_chiplet % used == 0:
            out.extend(factorisations(used, 4))
    return out


def chiplet_counts(n_max: int) -> list[int]:
    """Chiplet counts the mapper may use: powers of two up to n_max (Sec. 4.1), plus n_max."""
    out = [1 << i for i in range(n_max.bit_length()) if 1 << i <= n_max]
    return sorted(set(out + [n_max]))


CHUNK = 1024

# Dataflow premises (issue 14, "one premise for all figures"): which levels of Listing 1 may split
# P/Q spatially.  Listing 1 writes p3/q3 and p2/q2 as temporal ``for`` loops and k/c as
# ``parallel_for`` at both the package (across chiplets) and chiplet (across PEs) levels; Sec. 3.3
# adds that Simba "can also uniformly partition along ... P and Q ... across chiplets and PEs".
# name -> (chip_pq, pe_pq)
DATAFLOWS = {
    "free": (True, True),          # Sec. 3.3 full space (default)
    "chip-kc": (False, True),      # chiplets K/C only (Listing 1 package level), PEs free
    "pe-kc": (True, False),        # chiplets free, PEs K/C only (Listing 1 chiplet level)
    "kc-only": (False, False),     # Listing 1 literally at both levels
}


def dataflow_kwargs(name: str) -> dict:
    """search() keyword arguments of a dataflow premise (see DATAFLOWS)."""
    if name not in DATAFLOWS:
        raise ValueError(f"unknown dataflow {name!r} (choose from {', '.join(DATAFLOWS)})")
    chip_pq, pe_pq = DATAFLOWS[name]
    return {"chip_pq": chip_pq, "pe_pq": pe_pq}


def _pick(x, j) -> float:
    """Element j of a batch term that may be a scalar (shared by the batch)."""
    x = np.asarray(x, float).ravel()
    return float(x[j] if x.size > 1 else x[0])


def search(layer: Layer, arch: Arch, counts, samples: int = 1000, seed: int = 0,
           binding="row-major", placement="local", keep_per_count: bool = False,
           spatial_pq: bool = True, splits=None, chip_pq: bool = True, pe_pq: bool = True):
    """Random search.  ``counts``: chiplet counts to try (int or list).  Returns the best
    LayerResult (or a dict count -> best if keep_per_count).  ``samples`` valid mappings are
    evaluated at least (64 chunks of candidates at most).  ``spatial_pq``: also split P and Q
    spatially across chiplets and PEs (Sec. 3.3); False = Listing 1's K/C-only parallel_for
    dataflow (p3, q3, p2, q2 temporal), kept for the ablation.  ``splits``: only these chiplet
    splits (kc, cc, pc, qc), e.g. a tiling the paper states (Sec. 5.2: res4a_branch1 broadcasts
    from one chiplet to all 32, i.e. K over 32 chiplets).  ``chip_pq=False``: chiplets split only
    K and C (Sec. 4.1: "easier to partition computation by powers of two because ... C and K"),
    P/Q still split across PEs.  ``pe_pq=False``: PEs split only K and C (Listing 1's chiplet
    level), chiplets as ``chip_pq`` says.  See DATAFLOWS for the named premises."""
    if isinstance(counts, int):
        counts = [counts]
    if samples < 1:
        raise ValueError("samples must be >= 1")
    rng = np.random.default_rng(seed)
    pes = np.array([f for f in pe_splits(arch) if (spatial_pq and pe_pq) or f[2] == f[3] == 1])
    groups = [(n, s) for n in counts for s in chiplet_splits(layer, n)
              if ((spatial_pq and chip_pq) or s[2] == s[3] == 1) and (splits is None or tuple(s) in map(tuple, splits))]
    if not groups:
        raise MappingError(f"{layer.name}: no chiplet split for counts {counts}")
    # every chiplet count gets the same share of candidates, split evenly over its splits
    per_n = {n: sum(g[0] == n for g in groups) for n in counts}
    gw = np.array([1.0 / per_n[g[0]] for g in groups])
    gw /= gw.sum()
    best = {}
    n_valid = 0
    structures = {}
    # Candidates come in fixed-size chunks from one seeded stream, so a larger budget evaluates
    # a superset of a smaller one; every valid candidate evaluated counts (>= samples).
    for chunk in range(64):
        if n_valid >= samples:
            break
        which = rng.choice(len(groups), CHUNK, p=gw)
        pe_i = rng.integers(0, len(pes), CHUNK)
        u = rng.random((CHUNK, 2))
        for g in np.unique(which):
            sel = which == g
            n, (kc, cc, pc, qc) = groups[g]
            key = (n, kc, cc, pc, qc)
            if key not in structures:
                try:
                    structures[key] = build_structure(layer, arch, kc, cc, pc, qc, binding_for(binding, n),
                                                      placement)
                except MappingError:
                    structures[key] = None
            st = structures[key]
            if st is None:
                continue
            pe = pes[pe_i[sel]]
            p1 = 1 + (u[sel, 0] * int(st.p.max())).astype(int)
            q1 = 1 + (u[sel, 1] * int(st.q.max())).astype(int)
            r = evaluate_batch(st, arch, pe[:, 0], pe[:, 1], pe[:, 2], pe[:, 3], p1, q1)
            ok = np.flatnonzero(r.valid)
            n_valid += ok.size
            if ok.size == 0:
                continue
            score = r.latency[ok] * (1 + 1e-9) + r.energy_total[ok] * 1e-12
            j = ok[int(np.argmin(score))]
            res = LayerResult(layer.name, Mapping(kc, cc, pc, qc, *map(int, pe[j]), int(p1[j]), int(q1[j])),
                              n, float(r.latency[j]), float(r.energy_total[j]),
                              {k: float(v[j]) for k, v in r.energy.items()}, r.own[j].tolist(),
                              binding_for(binding, n), placement,
                              link_bytes=r.link_bytes[j].tolist(), sync_cycles=_pick(r.terms["sync"], j))
            if n not in best or (res.latency_cycles, res.energy_pj) < (best[n].latency_cycles, best[n].energy_pj):
                best[n] = res
    if not best:
        raise MappingError(f"{layer.name}: no valid mapping found on {counts} chiplets")
    for b in best.values():
        b.samples = n_valid
    if keep_per_count:
        return best
    return min(best.values(), key=lambda b: (b.latency_cycles, b.energy_pj))


def binding_for(binding, n):
    """A binding given per count (dict) or one order for all."""
    if isinstance(binding, dict):
        return binding[n]
    return binding
