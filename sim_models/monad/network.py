"""Contention-aware in-package network model -- Monad §III-C (Fig. 5b).

Topologies (the paper's *network* field = topology + routing id):
  0 mesh, XY routing      1 mesh, YX routing
  2 ring, shortest direction (ties clockwise)      3 ring, unidirectional clockwise
  4 point-to-point (a dedicated channel for every chiplet pair)
Memory controllers are extra nodes ``M0, M1`` attached to fixed network nodes
(mesh: the two opposite corners; ring/p2p: nodes 0 and N/2).  Routing is
deterministic.  Channels are unidirectional.

Bandwidth is shared in proportion to the requirements bwr of the flows on a
channel (work-conserving: a lone flow gets the whole channel), and

    D(e) = max_{f in e} ( |f| * t_s + |f volume| / min_{c in f} ebw_c^f ).

Left out: flit-level effects (virtual channels, credit stalls), adaptive
routing, and DRAM-internal timing (a memory controller is one channel of
fixed bandwidth).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

NETWORKS = {0: "mesh-xy", 1: "mesh-yx", 2: "ring-bidir", 3: "ring-unidir", 4: "p2p"}


class NetworkError(ValueError):
    pass


def mesh_dims(n: int) -> tuple:
    """Smallest near-square R x C >= n (R <= C)."""
    if n < 1:
        raise NetworkError("need at least one node")
    r = int(math.floor(math.sqrt(n)))
    while r > 1 and n % r and r * (-(-n // r)) - n >= r:
        r -= 1
    return r, -(-n // r)


@dataclass(frozen=True)
class Topology:
    kind: int
    n: int                  # network nodes (chiplet slots)

    def __post_init__(self):
        if self.kind not in NETWORKS:
            raise NetworkError(f"network id must be one of {sorted(NETWORKS)}, got {self.kind}")
        if self.n < 1:
            raise NetworkError("need at least one node")

    @property
    def name(self) -> str:
        return NETWORKS[self.kind]

    @property
    def dims(self) -> tuple:
        return mesh_dims(self.n)

    def mc_nodes(self) -> tuple:
        if self.kind in (0, 1):
            return (0, self.n - 1) if self.n > 1 else (0,)
        return (0, self.n // 2) if self.n > 1 else (0,)

    def degree(self, node: int) -> int:
        """Number of neighbour links of a node (each is an in+out channel pair)."""
        if self.n == 1:
            return 0
        if self.kind in (0, 1):
            R, C = self.dims
            r, c = divmod(node, C)
            d = 0
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                if 0 <= rr < R and 0 <= cc < C and rr * C + cc < self.n:
                    d += 1
            return d
        if self.kind == 2:
            return 1 if self.n == 2 else 2
        if self.kind == 3:
            return 1          # one out + one in channel == one link pair
        return self.n - 1

    def route(self, a: int, b: int) -> list:
        """Channels (u, v) from node a to node b (cached per topology; do not modify)."""
        return _route(self, a, b)

    def _route(self, a: int, b: int) -> list:
        if a == b:
            return []
        if self.kind in (0, 1):
            R, C = self.dims
            (ra, ca), (rb, cb) = divmod(a, C), divmod(b, C)
            path, r, c = [], ra, ca

            def step_x():
                nonlocal c
                while c != cb:
                    nc = c + (1 if cb > c else -1)
                    path.append((r * C + c, r * C + nc))
                    c = nc

            def step_y():
                nonlocal r
                while r != rb:
                    nr = r + (1 if rb > r else -1)
                    path.append((r * C + c, nr * C + c))
                    r = nr
            if self.kind == 0:
                step_x(), step_y()
            else:
                step_y(), step_x()
            return path
        if self.kind in (2, 3):
            n = self.n
            cw = (b - a) % n
            if self.kind == 3 or cw <= n - cw:
                return [((a + i) % n, (a + i + 1) % n) for i in range(cw)]
            return [((a - i) % n, (a - i - 1) % n) for i in range(n - cw)]
        return [(a, b)]

    def channels(self) -> list:
        """All unidirectional chiplet-to-chiplet channels."""
        out = set()
        for a in range(self.n):
            for b in range(self.n):
                if a != b:
                    p = self.route(a, b)
                    if len(p) == 1:
                        out.add(p[0])
        return sorted(out)


@lru_cache(maxsize=200000)
def _route(topo: Topology, a: int, b: int) -> list:
    return topo._route(a, b)


@dataclass
class Flow:
    src: object             # network node int, or "M0"/"M1" (memory controller)
    dst: object
    volume: float           # bytes (per pipeline step)
    bwr: float              # requirement, bytes/cycle
    stage: str              # data-transfer stage id


def flow_path(topo: Topology, f: Flow) -> list:
    """Channels of a flow; memory-controller links are ('M0', node) / (node, 'M0')."""
    return list(_path(topo, f.src, f.dst)[0])


@lru_cache(maxsize=200000)
def _path(topo: Topology, a, b) -> tuple:
    """(channels, chiplet-to-chiplet hop count) from a to b (nodes or memory controllers)."""
    path = []
    if isinstance(a, str):
        at = topo.mc_nodes()[int(a[1:])]
        path.append((a, at))
        a = at
    tail = []
    if isinstance(b, str):
        bt = topo.mc_nodes()[int(b[1:])]
        tail.append((bt, b))
        b = bt
    mid = topo.route(a, b)
    return tuple(path + mid + tail), len(mid)


def hotspot(topo: Topology, flows: list) -> float:
    """Highest summed bandwidth requirement over chiplet-to-chiplet channels."""
    load = {}
    for f in flows:
        for c in flow_path(topo, f):
            if isinstance(c[0], str) or isinstance(c[1], str):
                continue
            load[c] = load.get(c, 0.0) + f.bwr
    return max(load.values(), default=0.0)


def stage_delays(topo: Topology, flows: list, link_bw, mc_bw: float, t_s: float) -> tuple:
    """(delay per stage id, hops per flow) with proportional bandwidth sharing.
    ``link_bw``: one bandwidth for every chiplet channel, or a list of per-node
    port bandwidths (a channel runs at the smaller of its two ends)."""
    node_bw = list(link_bw) if isinstance(link_bw, (list, tuple)) else None
    if (min(node_bw) if node_bw else link_bw) <= 0 or mc_bw <= 0:
        raise NetworkError("bandwidths must be > 0")
    if node_bw is not None and len(node_bw) != topo.n:
        raise NetworkError(f"need {topo.n} node bandwidths, got {len(node_bw)}")

    def chan_bw(c):
        if isinstance(c[0], str) or isinstance(c[1], str):
            return mc_bw
        return min(node_bw[c[0]], node_bw[c[1]]) if node_bw else link_bw
    paths = [_path(topo, f.src, f.dst) for f in flows]
    load = {}
    for f, (p, _) in zip(flows, paths):
        w = max(f.bwr, 1e-12)
        for c in p:
            load[c] = load.get(c, 0.0) + w
    cbw = {c: chan_bw(c) for c in load}
    delays, hops = {}, []
    for f, (p, h) in zip(flows, paths):
        hops.append(h)
        if not p or f.volume <= 0:
            d = 0.0
        else:
            ebw = max(f.bwr, 1e-12) * min(cbw[c] / load[c] for c in p)
            d = h * t_s + f.volume / ebw
        delays[f.stage] = max(delays.get(f.stage, 0.0), d)
    return delays, hops
