"""Uniform design encoding -- Monad §IV-B (Fig. 6a).

Low-dimensional fields (explored by Bayesian optimisation), per op:
``shape`` (index into the factorisations of the op's PE budget into chiplet
grid x core grid x PE array), ``spatial`` (one loop pair per level: package,
chiplet, core), ``share`` (fetch shared data per chiplet or forward it along
the cluster); integration: ``packaging`` (0-2), ``network`` (topology +
routing id).

High-dimensional fields (explored by simulated annealing inside every Bayes
evaluation): ``order`` (loop permutation per level) and ``tiling`` (log2 tile
per loop at package and chiplet level) per op, and ``placement`` (network node
-> chiplet id).

The PE budget of each op is the workload budget split in proportion to MACs,
as §IV-B suggests to balance the pipeline; a shape may use any number of PEs
above 1/16 and up to that budget (PE array sides 1-64, not only powers of
two), so the PE use is part of the resource assignment.  A design has at most
36 network nodes (§IV-C); ``io`` (integration) is the die-to-die I/O area
reserved per chiplet (system.py).
Two-stage flow (Fig. 6a): with ``fixed["candidates"]`` (designs kept from the
architecture stage, each {"low": arch fields, "high": order/tiling}) the
per-op architecture fields are replaced by a *design selector* per op
(``<op>.design``), and annealing only moves the placement.
Fields can be frozen (``fixed``) to build the baselines and the ablation.
``fixed["chiplets"] = n`` keeps only shapes with n chiplets per op (Fig 7:
Monad is compared at the baselines' "same number of PEs and die-to-die
interfaces", §V-B).  ``capacity_tiling`` derives the tiling from fixed buffer
capacities (a given hardware configuration, e.g. Simba's 64 KiB global buffer),
since shape *and* tiling are the resource assignment (§IV-B).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from .network import NETWORKS
from .perf import Level, Mapping, Workload, hardware
from .system import MAX_NODES, Design, n_nodes

IO_AREAS = tuple(hardware()["io_area_mm2"])

CHIP_GRIDS = ((1, 1), (1, 2), (2, 2), (2, 3), (2, 4), (3, 3), (4, 4), (6, 6))
CORE_GRIDS = ((1, 1), (1, 2), (2, 2), (2, 4), (4, 4))
PE_SIDES = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)
LEVELS = ("pkg", "chip", "core")


def pe_budgets(wl: Workload, total: int) -> list:
    """PEs per op: the total split in proportion to MACs (§IV-B), at least 16."""
    macs = [op.macs for op in wl.ops]
    return [max(16, int(total * m / sum(macs))) for m in macs]


PE_USE_MIN = 1 / 16     # smallest PE use of a shape, as a fraction of the op's budget


def shapes(budget: int, max_chiplets: int = MAX_NODES, min_frac: float = PE_USE_MIN) -> list:
    """All (chip grid, core grid, PE array) that use more than ``min_frac`` and
    at most all of ``budget`` PEs, sorted by PEs used (then chiplets), so the
    shape index of the encoding also orders the PE use."""
    out = []
    for cg in CHIP_GRIDS:
        if cg[0] * cg[1] > max_chiplets:
            continue
        for kg in CORE_GRIDS:
            for px in PE_SIDES:
                for py in PE_SIDES:
                    n = cg[0] * cg[1] * kg[0] * kg[1] * px * py
                    if px <= py and budget * min_frac < n <= budget:
                        out.append((cg, kg, (px, py)))
    out.sort(key=lambda s: (math.prod(s[0]) * math.prod(s[1]) * math.prod(s[2]), math.prod(s[0]), s))
    return out


@dataclass
class Space:
    wl: Workload
    pe_total: int
    fixed: dict = field(default_factory=dict)   # field name -> value (see low_names)
    max_chiplets: int | None = None     # per op; None: 36 network nodes shared by the ops, at least 8

    def __post_init__(self):
        if self.max_chiplets is None:
            self.max_chiplets = max(8, MAX_NODES // len(self.wl.ops))
        self.budgets = pe_budgets(self.wl, self.pe_total)
        self.shape_opts = [shapes(b, self.max_chiplets) for b in self.budgets]
        if "chiplets" in self.fixed:
            n = self.fixed["chiplets"]
            if not isinstance(n, int) or n < 1:
                raise ValueError(f"fixed chiplets must be a positive int, got {n!r}")
            self.shape_opts = [[s for s in opts if s[0][0] * s[0][1] == n] for opts in self.shape_opts]
        self.pairs = [[(a, b) for a in op.loop_names for b in op.loop_names] for op in self.wl.ops]
        for i, s in enumerate(self.shape_opts):
            if not s:
                raise ValueError(f"op {self.wl.ops[i].name}: no shape for a budget of {self.budgets[i]} PEs")
        self.candidates = self.fixed.get("candidates")
        self.all_low = []
        for i, op in enumerate(self.wl.ops):
            if self.candidates:          # integration stage: a design selector per op
                self.all_low.append((f"{op.name}.design", len(self.candidates)))
                continue
            self.all_low.append((f"{op.name}.shape", len(self.shape_opts[i])))
            for lv in LEVELS:
                self.all_low.append((f"{op.name}.spatial.{lv}", len(self.pairs[i])))
            self.all_low.append((f"{op.name}.share", 2))
        self.all_low.append(("packaging", 3))
        self.all_low.append(("network", len(NETWORKS)))
        self.all_low.append(("io", len(IO_AREAS)))
        for k in self.fixed:
            if k not in dict(self.all_low) and k not in ("order", "tiling", "placement", "candidates", "chiplets"):
                raise ValueError(f"unknown field {k!r}")
        self.free_low = [(n, k) for n, k in self.all_low if n not in self.fixed and k > 1]

    # ---- low-dimensional part
    @staticmethod
    def default(name: str) -> int:
        """Value of a field neither free nor fixed (io: the hardware.json default)."""
        if name == "io":
            return IO_AREAS.index(hardware()["io_area_mm2_default"])
        return 0

    def low_dims(self) -> list:
        return [(0, k - 1) for _, k in self.free_low]

    def full_low(self, free: list) -> dict:
        vals = dict(zip([n for n, _ in self.free_low], (int(v) for v in free)))
        low = {n: (self.fixed[n] if n in self.fixed else vals.get(n, self.default(n))) for n, _ in self.all_low}
        if self.candidates:              # copy each op's architecture fields from its selected design
            for op in self.wl.ops:
                c = self.candidates[low[f"{op.name}.design"]]["low"]
                for k, v in c.items():
                    if k.startswith(op.name + "."):
                        low[k] = v
        return low

    def free_of(self, low: dict) -> list:
        """The free low-dimensional values of a full ``low`` dict (e.g. a known design)."""
        return [int(low[n]) for n, _ in self.free_low]

    def random_low(self, rng: random.Random) -> list:
        return [rng.randrange(k) for _, k in self.free_low]

    def n_chiplets(self, low: dict) -> int:
        return sum(self.shape_opts[i][low[f"{op.name}.shape"]][0][0] * self.shape_opts[i][low[f"{op.name}.shape"]][0][1]
                   for i, op in enumerate(self.wl.ops))

    # ---- high-dimensional part
    def random_high(self, low: dict, rng: random.Random, heuristic: bool = False) -> dict:
        """Random high-dimensional fields; ``heuristic`` gives the annealer's
        start instead: reduction loops innermost (output stationary), whole
        chiplet share as the chiplet tile, 32 per loop as the core tile, and
        chiplets placed in id order."""
        high = {"order": [], "tiling": []}
        for op in self.wl.ops:
            loops = list(op.loop_names)
            orders = []
            for _ in LEVELS:
                o = loops[:]
                rng.shuffle(o)
                if heuristic:
                    out = {l for dim in op.output.idx for l in dim}
                    o.sort(key=lambda l: l not in out)
                orders.append(tuple(o))
            high["order"].append(orders)
            if heuristic:
                high["tiling"].append([{l: self._emax(op, l) for l in loops},
                                       {l: min(5, self._emax(op, l)) for l in loops}])
            else:
                high["tiling"].append([{l: rng.randint(0, self._emax(op, l)) for l in loops} for _ in LEVELS[:2]])
        nn = n_nodes(low["network"], self.n_chiplets(low))
        p = list(range(self.n_chiplets(low))) + [-1] * (nn - self.n_chiplets(low))
        if not heuristic:
            rng.shuffle(p)
        high["placement"] = p
        if self.candidates:
            for i, op in enumerate(self.wl.ops):
                c = self.candidates[low[f"{op.name}.design"]]["high"]
                high["order"][i] = [tuple(o) for o in c["order"][i]]
                high["tiling"][i] = [dict(t) for t in c["tiling"][i]]
        for k in ("order", "tiling", "placement"):
            if k in self.fixed:
                v = self.fixed[k]
                if v == "identity":          # placement: chiplet i on node i
                    v = list(range(self.n_chiplets(low))) + [-1] * (nn - self.n_chiplets(low))
                high[k] = v
        return high

    def adapt_high(self, low: dict, high: dict) -> dict:
        """``high`` (e.g. the best mapping found so far) made valid for ``low``:
        order and tiling are kept (per-op loop permutations and log2 tiles do
        not depend on the shape), the placement is kept if it places exactly
        this design's chiplets on its network nodes, else chiplets go in id
        order; candidates and frozen fields win, as in ``random_high``."""
        base = self.random_high(low, random.Random(0), heuristic=True)
        out = {"order": [[tuple(o) for o in x] for x in high["order"]],
               "tiling": [[dict(t) for t in x] for x in high["tiling"]],
               "placement": list(high["placement"])}
        if len(out["placement"]) != len(base["placement"]) or \
                sorted(out["placement"]) != sorted(base["placement"]):
            out["placement"] = base["placement"]
        if self.candidates:
            out["order"], out["tiling"] = base["order"], base["tiling"]
        for k in ("order", "tiling", "placement"):
            if k in self.fixed:
                out[k] = base[k]
        return out

    def capacity_tiling(self, low: dict, chip_buf_bytes: int, core_buf_bytes: int) -> list:
        """Tiling (log2 tile per loop, package and chiplet level, per op) that
        fits fixed buffer capacities: start from whole shares and halve the
        largest tile until the double-buffered chiplet buffer (package-level
        tile) and core buffer (chiplet-level tile) fit -- i.e. the tiling a
        given hardware configuration's buffers impose (§IV-B: "We set the
        buffer size for each tensor based on the tile size")."""
        from .perf import _spatial_share, _tile, footprint, hardware as hw
        wb = hw()["word_bytes"]
        out = []
        for i, op in enumerate(self.wl.ops):
            cg, kg, _ = self.shape_opts[i][low[f"{op.name}.shape"]]
            sp = [self.pairs[i][low[f"{op.name}.spatial.{lv}"]] for lv in LEVELS]
            exps = [{l: self._emax(op, l) for l in op.loop_names} for _ in range(2)]
            for k, cap in ((0, chip_buf_bytes), (1, core_buf_bytes)):
                while True:
                    S1 = _spatial_share(op.bounds, Level(cg, sp[0]))
                    T1 = _tile(S1, Level(cg, sp[0], (), tuple((l, 2 ** e) for l, e in exps[0].items())))
                    T = T1
                    if k == 1:
                        S2 = _spatial_share(T1, Level(kg, sp[1]))
                        T = _tile(S2, Level(kg, sp[1], (), tuple((l, 2 ** e) for l, e in exps[1].items())))
                    if 2 * wb * sum(footprint(t, T) for t in op.tensors) <= cap:
                        break
                    big = max((l for l in op.loop_names if T[l] > 1), key=lambda l: T[l], default=None)
                    if big is None:
                        raise ValueError(f"op {op.name}: a {cap}-byte buffer cannot hold unit tiles")
                    exps[k][big] = max(0, min(exps[k][big], math.ceil(math.log2(T[big]))) - 1)
            out.append(exps)
        return out

    @staticmethod
    def _emax(op, l):
        return max(0, math.ceil(math.log2(op.bounds[l])))

    def neighbour(self, low: dict, high: dict, rng: random.Random) -> dict:
        h = {"order": [[tuple(o) for o in x] for x in high["order"]],
             "tiling": [[dict(t) for t in x] for x in high["tiling"]],
             "placement": list(high["placement"])}
        frozen = set(self.fixed) | ({"order", "tiling"} if self.candidates else set())
        moves = [k for k in ("order", "tiling", "placement") if k not in frozen]
        if not moves:
            return h
        kind = rng.choice(moves)
        if kind == "placement":
            if len(h["placement"]) > 1:
                a, b = rng.sample(range(len(h["placement"])), 2)
                h["placement"][a], h["placement"][b] = h["placement"][b], h["placement"][a]
            return h
        i = rng.randrange(len(self.wl.ops))
        op = self.wl.ops[i]
        if kind == "order":
            lv = rng.randrange(len(LEVELS))
            o = list(h["order"][i][lv])
            a, b = rng.sample(range(len(o)), 2)
            o[a], o[b] = o[b], o[a]
            h["order"][i][lv] = tuple(o)
        else:
            lv = rng.randrange(2)
            l = rng.choice(op.loop_names)
            e = h["tiling"][i][lv][l] + rng.choice((-1, 1))
            h["tiling"][i][lv][l] = min(self._emax(op, l), max(0, e))
        return h

    # ---- decode
    def decode(self, low: dict, high: dict) -> Design:
        maps = []
        for i, op in enumerate(self.wl.ops):
            cg, kg, pg = self.shape_opts[i][low[f"{op.name}.shape"]]
            sp = [self.pairs[i][low[f"{op.name}.spatial.{lv}"]] for lv in LEVELS]
            orders = high["order"][i]
            tl = high["tiling"][i]
            tiles = [tuple((l, 2 ** e) for l, e in sorted(tl[k].items())) for k in range(2)]
            maps.append(Mapping(Level(cg, sp[0], tuple(orders[0]), tiles[0]),
                                Level(kg, sp[1], tuple(orders[1]), tiles[1]),
                                Level(pg, sp[2], tuple(orders[2]), ()),
                                int(low[f"{op.name}.share"])))
        return Design(tuple(maps), int(low["packaging"]), int(low["network"]), tuple(high["placement"]),
                      io_mm2=IO_AREAS[int(low.get("io", self.default("io")))])


def default_pe_total(wl_name: str, n_ops: int) -> int:
    b = hardware()["pe_budget"]
    return b.get(wl_name, b["single"] if n_ops == 1 else b["transformer"])
