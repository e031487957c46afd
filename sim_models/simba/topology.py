"""Package and chiplet meshes with dimension-ordered XY routing (seed paper Sec. 3.1, Sec. 4.1).

Chiplets are numbered row-major on the ``mesh_rows x mesh_cols`` package mesh; NoP links are
directed neighbour links.  ``path[s, d]`` is the boolean link set of the XY route s -> d, from
which multicast trees (union of XY routes, as cut-through multicast replicates at branch
points) and link loads follow.  Inside a chiplet only hop counts between the Global PE, the NoP
router and the PEs are modelled (no intra-chiplet link contention beyond the ports).
Left out: virtual channels, wormhole blocking, router pipeline details.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .arch import Arch


@dataclass(frozen=True)
class Mesh:
    rows: int
    cols: int
    links: tuple          # ((src, dst), ...) directed neighbour links
    path: np.ndarray      # [N, N, L] bool: links on the XY route
    hops: np.ndarray      # [N, N] int Manhattan distance

    @property
    def n(self) -> int:
        return self.rows * self.cols

    def xy(self, i: int) -> tuple[int, int]:
        return i % self.cols, i // self.cols

    def tree(self, src: int, dests) -> np.ndarray:
        """Links of the XY multicast tree from src to dests."""
        d = np.asarray(list(dests), dtype=int)
        if d.size == 0:
            return np.zeros(len(self.links), bool)
        return self.path[src, d].any(axis=0)


def xy_route(cols: int, s: int, d: int) -> list[tuple[int, int]]:
    """Dimension-ordered route: first along X (columns), then along Y; list of (from, to)."""
    x, y = s % cols, s // cols
    dx, dy = d % cols, d // cols
    hopsl = []
    while x != dx:
        nx = x + (1 if dx > x else -1)
        hopsl.append((y * cols + x, y * cols + nx))
        x = nx
    while y != dy:
        ny = y + (1 if dy > y else -1)
        hopsl.append((y * cols + x, ny * cols + x))
        y = ny
    return hopsl


@lru_cache(maxsize=8)
def mesh(rows: int, cols: int) -> Mesh:
    n = rows * cols
    links = []
    for i in range(n):
        x, y = i % cols, i // cols
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < cols and 0 <= ny < rows:
                links.append((i, ny * cols + nx))
    index = {l: k for k, l in enumerate(links)}
    path = np.zeros((n, n, len(links)), bool)
    hops = np.zeros((n, n), int)
    for s in range(n):
        for d in range(n):
            r = xy_route(cols, s, d)
            hops[s, d] = len(r)
            for l in r:
                path[s, d, index[l]] = True
    path.setflags(write=False)
    hops.setflags(write=False)
    return Mesh(rows, cols, tuple(links), path, hops)


@dataclass(frozen=True)
class ChipletNoC:
    """Hop counts on the chiplet NoC (PEs fill columns 0..3; GPE and NoP router in column 4)."""
    gpe_to_pe_max: int
    nop_to_pe_max: int
    gpe_to_nop: int
    gpe_to_pe_avg: float
    nop_to_pe_avg: float


def chiplet_noc(arch: Arch) -> ChipletNoC:
    pes = []
    for y in range(arch.noc_rows):
        for x in range(arch.noc_cols):
            if (x, y) not in (tuple(arch.noc_gpe_xy), tuple(arch.noc_nop_xy)):
                pes.append((x, y))
    pes = pes[:arch.pes_per_chiplet]
    g, r = tuple(arch.noc_gpe_xy), tuple(arch.noc_nop_xy)
    d = lambda a, b: abs(a[0] - b[0]) + abs(a[1] - b[1])
    dg = [d(g, p) for p in pes]
    dr = [d(r, p) for p in pes]
    return ChipletNoC(max(dg), max(dr), d(g, r), float(np.mean(dg)), float(np.mean(dr)))


def bind(n_used: int, order: str | tuple = "row-major", rows: int = 6, cols: int = 6) -> tuple:
    """Binder: logical chiplet i -> physical chiplet.  Orders: 'row-major' (baseline),
    'snake' (boustrophedon, consecutive logical chiplets always adjacent), 'centre'
    (closest to the package centre first), or an explicit tuple of physical ids."""
    n = rows * cols
    if isinstance(order, (tuple, list)):
        phys = tuple(int(p) for p in order)
        if len(phys) != n_used or len(set(phys)) != n_used or not all(0 <= p < n for p in phys):
            raise ValueError(f"explicit binding must list {n_used} distinct chiplets in [0, {n})")
        return phys
    if n_used > n:
        raise ValueError(f"{n_used} chiplets requested, package has {n}")
    if order == "row-major":
        seq = list(range(n))
    elif order == "snake":
        seq = [y * cols + (x if y % 2 == 0 else cols - 1 - x) for y in range(rows) for x in range(cols)]
    elif order == "centre":
        cx, cy = (cols - 1) / 2, (rows - 1) / 2
        snake = [y * cols + (x if y % 2 == 0 else cols - 1 - x) for y in range(rows) for x in range(cols)]
        seq = sorted(snake, key=lambda i: (abs(i % cols - cx) + abs(i // cols - cy), snake.index(i)))
    else:
        raise ValueError(f"unknown binding order {order!r}")
    return tuple(seq[:n_used])
