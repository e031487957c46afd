"""System-level evaluation of an integrated chiplet design -- Monad §III-C, §IV-B.

A ``Design`` = one ``Mapping`` per workload op (architecture: shape, spatial,
order, tiling per level) + integration fields (packaging 0-2, network id,
placement of chiplet ids on network nodes).  Every op owns its own cluster of
chiplets (chiplet ids are numbered op by op, as in Fig. 6a).

Pipeline (§III-C, Fig. 5a): a workload graph is streamed in
``pipeline_steps`` chunks.  Per chunk, every op is a computing stage v (delay
from perf.py) preceded by a data-transfer stage in:v (DRAM reads, producer ->
consumer data found by intersecting the producer chiplets' output ranges with
the consumer chiplets' input ranges, forwarding of shared data along the
cluster) and, for graph outputs, followed by out:v (DRAM writes).  Each flow
needs bwr = volume / min(D(v_i), D(v_j)) (the share of a channel it gets).
Link bandwidth comes from the I/O area a design affords (§IV-B: "reserves more
area for data I/O in a chiplet to support higher bandwidth"): every chiplet
reserves ``io_mm2`` of die area for die-to-die I/O, which carries
D_bw(packaging) x io_mm2 / N_link per link (the reserved area is bw / D_bw x
N_link, §IV-B, cost/model.py); a channel runs at the smaller port bandwidth of
its two ends.  So packaging (D_bw, N_link: routers in the chiplet or in
an active interposer) and network (router degree) move latency, energy and
cost.  (The paper sizes bw to the hotspot requirement; with that rule every
transfer crossing the hotspot takes the compute time of its stage whatever the
packaging, so packaging could not change latency -- §V-C says it does.)
``Design.link_bw`` overrides the bandwidth (the I/O area then follows it);
hardware ``link_bw_rule`` "hotspot" (the paper's sizing) or "unlimited" are
sensitivity settings (bench/monad_repro.py Fig 7 transfer sensitivity).
Partial sums of a package-level split of a reduction loop are written to DRAM by
every chiplet (default ``psum_reduction`` "dram"); "on_package" reduces them
along a chain of the chiplets holding the same outputs (Simba's cross-chiplet
reduction; a Fig 7 take-apart premise: it did not help Simba-like, x1.6 EDP).

    Lat = max over paths p of sum_{v in p} D(v)      (hardware ``latency_rule`` "path")
    Thr = 1 / longest stage

§III-C: "the latency refers to the delay to produce an outcome" -- one chunk's
longest path through compute and transfer stages, every D(v) (compute cycles
and transfer volumes) that of one chunk, so the latency of a fixed design scales
as 1 / pipeline_steps and Fig 8's ratios do not depend on the chunk count (the
paper's own example pipelines whole MMs; bench/monad_latency_rule.py: 1 vs 8
chunks give the same bars within 0.06x).  ``latency_rule`` "pipelined" (the
former default, an experiment setting) adds (steps - 1) x the longest stage:
the makespan of streaming all chunks, which §III-C does not define as latency
(it is Thr's reciprocal per further outcome).  The optimiser's objective and
the figures use the same ``latency_of``.

Energy = MAC + SRAM (by size) + on-chip NoC + die-to-die per bit per hop (by
packaging) + DRAM per bit.  Left out: several ops bound to one chiplet
(sequential Bind), reshapes are handled by proportional volume split (no
element-exact dependence), DRAM refresh/row effects.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ..cost import model as cm
from .network import Flow, Topology, hotspot, mesh_dims, stage_delays
from .perf import Mapping, ModelError, Workload, evaluate_op, hardware, relevant


MAX_NODES = 36          # §IV-C: "placement depends on network nodes (up to 36)"


@dataclass(frozen=True)
class Design:
    mappings: tuple               # one Mapping per op (workload order)
    packaging: int = 0            # 0 organic, 1 passive, 2 active
    network: int = 0              # see network.NETWORKS
    placement: tuple = ()         # network node -> chiplet id (-1 empty); () = identity
    link_bw: float | None = None  # bytes/cycle per channel; None = from the I/O area budget
    io_mm2: float | None = None   # die-to-die I/O area per chiplet; None = hardware.json default

    @property
    def n_chiplets(self) -> int:
        return sum(m.n_chiplets for m in self.mappings)


def n_nodes(network: int, n_chiplets: int) -> int:
    if network in (0, 1):
        r, c = mesh_dims(n_chiplets)
        return r * c
    return n_chiplets


@dataclass
class Result:
    latency_ns: float
    throughput: float             # chunks per ns
    energy_pj: float
    cost_usd: float
    area_mm2: float
    link_bw: float
    energy: dict = field(default_factory=dict)
    stages: dict = field(default_factory=dict)
    chiplet_areas: list = field(default_factory=list)
    cost: dict = field(default_factory=dict)
    util: dict = field(default_factory=dict)
    compute_area_mm2: float = 0.0  # silicon without die-to-die I/O (a monolithic equivalent)

    @property
    def edp(self) -> float:
        return self.latency_ns * self.energy_pj

    def objective(self, name: str) -> float:
        return {"latency": self.latency_ns, "energy": self.energy_pj, "edp": self.edp,
                "cost": self.cost_usd, "area": self.area_mm2}[name]

    def as_dict(self) -> dict:
        return {"latency_ns": self.latency_ns, "energy_pj": self.energy_pj, "edp": self.edp,
                "cost_usd": self.cost_usd, "area_mm2": self.area_mm2, "link_bw_GBps": self.link_bw,
                "throughput_per_ns": self.throughput, "energy_breakdown_pj": self.energy,
                "cost_breakdown_usd": self.cost, "stage_delays_ns": self.stages,
                "chiplet_areas_mm2": self.chiplet_areas, "utilisation": self.util,
                "compute_area_mm2": self.compute_area_mm2}


_op_cache = lru_cache(maxsize=200000)(evaluate_op)


def _overlap(a, b):
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _dim_range(dim, region):
    lo = sum(region[l][0] for l in dim)
    hi = sum(region[l][1] - 1 for l in dim) + 1
    return lo, hi


def _tensor_range(t, region):
    return [_dim_range(d, region) for d in t.idx]


def latency_of(wl: Workload, stages: dict, rule: str) -> float:
    """Latency from the per-chunk stage delays (keys "v:op", "in:op", "out:op";
    any unit).  ``path``: §III-C Lat = max over paths of sum D(v), one chunk;
    ``pipelined``: that path + (steps - 1) x the longest stage (all chunks)."""
    end = {}
    for op in wl.ops:                 # longest path through the stage graph (ops in topological order)
        preds = [end[s] for t in op.inputs for s in t.src]
        end[op.name] = max(preds, default=0.0) + stages.get("in:" + op.name, 0.0) + stages["v:" + op.name]
    path = max(end[o.name] + stages.get("out:" + o.name, 0.0) for o in wl.ops)
    if rule == "pipelined":           # all P chunks: fill the pipeline, then one chunk per longest stage
        return path + (wl.pipeline_steps - 1) * max(stages.values())
    if rule == "path":                # §III-C Eq.: the longest path of one chunk
        return path
    raise ModelError(f"latency_rule must be pipelined or path, got {rule!r}")


def evaluate(wl: Workload, d: Design, node_nm=None) -> Result:
    if len(d.mappings) != len(wl.ops):
        raise ModelError(f"design has {len(d.mappings)} mappings for {len(wl.ops)} ops")
    if d.packaging not in (0, 1, 2):
        raise ModelError(f"packaging must be 0-2, got {d.packaging}")
    hw = hardware()
    nm = node_nm or hw["node_nm"]
    pkg = cm.PACKAGINGS[d.packaging]
    P = wl.pipeline_steps
    res = {op.name: _op_cache(op, m, nm) for op, m in zip(wl.ops, d.mappings)}
    # chiplet ids per op, node of every chiplet
    first, ids = 0, {}
    for op, m in zip(wl.ops, d.mappings):
        ids[op.name] = list(range(first, first + m.n_chiplets))
        first += m.n_chiplets
    N = first
    nn = n_nodes(d.network, N)
    if nn > MAX_NODES:
        raise ModelError(f"{nn} network nodes, more than the {MAX_NODES} of §IV-C")
    topo = Topology(d.network, nn)
    place = d.placement or tuple(range(N)) + (-1,) * (nn - N)
    if len(place) != nn or sorted(c for c in place if c >= 0) != list(range(N)):
        raise ModelError(f"placement must assign chiplets 0..{N - 1} once each to {nn} nodes")
    node_of = {c: i for i, c in enumerate(place) if c >= 0}
    mcs = topo.mc_nodes()

    near = {}

    def nearest_mc(node):
        if node not in near:
            hops = [len(topo.route(node, x)) for x in mcs]
            near[node] = f"M{hops.index(min(hops))}"
        return near[node]

    D = {op.name: res[op.name].compute_cycles / P for op in wl.ops}
    flows = []

    def add_chain(volumes, src_of, stage, bwr_den, share, groups):
        """volumes: chiplet -> bytes; groups: lists of chiplets that need the same data."""
        for g in groups:
            if share and len(g) > 1:
                head = g[0]
                for s, v in src_of(head):
                    flows.append(Flow(s, node_of[head], v, v / bwr_den, stage))
                for a, b in zip(g, g[1:]):
                    v = volumes[b]
                    flows.append(Flow(node_of[a], node_of[b], v, v / bwr_den, stage))
            else:
                for c in g:
                    for s, v in src_of(c):
                        flows.append(Flow(s, node_of[c], v, v / bwr_den, stage))

    for op, m in zip(wl.ops, d.mappings):
        r = res[op.name]
        chips = ids[op.name]
        stage_in = "in:" + op.name
        for t in op.inputs:
            vol = r.ext_in[t.name] / P
            rel = relevant(t)
            groups = {}
            for k, c in enumerate(chips):
                key = tuple(sorted((l, rg) for l, rg in r.regions[k].items() if l in rel))
                groups.setdefault(key, []).append(c)
            groups = list(groups.values())
            volumes = {c: vol for c in chips}
            if not t.src:
                add_chain(volumes, lambda c: [(nearest_mc(node_of[c]), vol)], stage_in, D[op.name],
                          m.share, groups)
                continue
            prods = [wl.op(s) for s in t.src]
            den = min([D[op.name]] + [D[p.name] for p in prods])
            compatible = (len(prods) == 1 and len(prods[0].output.idx) == len(t.idx)
                          and all(len(x) == 1 for x in prods[0].output.idx + t.idx))
            total_out = sum(res[p.name].n_chiplets for p in prods)
            k_of = {c: k for k, c in enumerate(chips)}

            def src_of(c, prods=prods, t=t, vol=vol, compatible=compatible, total_out=total_out):
                out = []
                need = _tensor_range(t, r.regions[k_of[c]])
                size = math.prod(hi - lo for lo, hi in need)
                if size <= 0:           # an idle chiplet (empty region: more chiplets than iterations)
                    return out
                for p in prods:
                    pr = res[p.name]
                    for kp, cp in enumerate(ids[p.name]):
                        if compatible:
                            have = _tensor_range(p.output, pr.regions[kp])
                            frac = math.prod(_overlap(a, b) for a, b in zip(have, need)) / size
                        else:
                            frac = 1.0 / total_out
                        if frac > 0:
                            out.append((node_of[cp], vol * frac))
                return out
            add_chain(volumes, src_of, stage_in, den, m.share, groups)
        psum = r.ext_in.get(op.output.name + "#psum", 0.0) / P
        if psum:
            for c in chips:
                flows.append(Flow(nearest_mc(node_of[c]), node_of[c], psum, psum / D[op.name], stage_in))
        if not wl.consumers(op.name):
            v = r.ext_out / P
            rule = hw.get("psum_reduction", "dram")
            if rule not in ("dram", "on_package"):
                raise ModelError(f"psum_reduction must be dram or on_package, got {rule!r}")
            if rule == "on_package":
                # §III-A "only the final results are written to DRAM": chiplets that hold
                # partial sums of the same outputs (a package-level split of a reduction
                # loop) reduce them along a chain (Simba's cross-chiplet reduction); the
                # last chiplet of the chain writes the result
                orel = relevant(op.output)
                groups = {}
                for k, c in enumerate(chips):
                    key = tuple(sorted((l, rg) for l, rg in r.regions[k].items() if l in orel))
                    groups.setdefault(key, []).append(c)
                for g in groups.values():
                    for a, b in zip(g, g[1:]):
                        flows.append(Flow(node_of[a], node_of[b], v, v / D[op.name], "out:" + op.name))
                    flows.append(Flow(node_of[g[-1]], nearest_mc(node_of[g[-1]]), v, v / D[op.name],
                                      "out:" + op.name))
                continue
            for c in chips:
                flows.append(Flow(node_of[c], nearest_mc(node_of[c]), v, v / D[op.name], "out:" + op.name))
        else:
            distinct = math.prod(hi - lo for lo, hi in _tensor_range(op.output, r.regions[0])) \
                * hw["word_bytes"]
            spill = (r.ext_out - distinct) / P
            if spill > 0:
                for c in chips:
                    flows.append(Flow(node_of[c], nearest_mc(node_of[c]), spill, spill / D[op.name],
                                      "out:" + op.name))
    ghz = hw["clock_ghz"]
    io_mm2 = hw["io_area_mm2_default"] if d.io_mm2 is None else d.io_mm2
    if d.link_bw is not None and d.link_bw <= 0:
        raise ModelError(f"link bandwidth must be > 0, got {d.link_bw}")
    if io_mm2 <= 0:
        raise ModelError(f"I/O area per chiplet must be > 0 mm^2, got {io_mm2}")
    dbw = cm.packaging(pkg)["bw_density_gbps_per_mm2"] / ghz          # bytes/cycle per mm^2
    nlink = {c: cm.links_through_bumps(pkg, topo.degree(node_of[c])) for c in range(N)}
    if d.link_bw is not None:
        bw = d.link_bw
    elif N > 1 and hw.get("link_bw_rule", "io_area") != "io_area":
        rule = hw["link_bw_rule"]         # sensitivity experiments (perf.hardware_overrides)
        if rule == "hotspot":             # the paper's sizing: the hotspot's requirement (§IV-B)
            bw = max(hotspot(topo, flows), 1e-9)
        elif rule == "unlimited":         # transfers cost only router hops
            bw = 1e9
        else:
            raise ModelError(f"link_bw_rule must be io_area, hotspot or unlimited, got {rule!r}")
    elif N > 1:
        port = [dbw * io_mm2 / max(1, nlink[c]) if c >= 0 else 0.0 for c in place]
        top = max(port)
        bw = [p if p > 0 else top for p in port]       # an empty mesh node only routes
    else:
        bw = 1.0                      # one chiplet: no die-to-die channel
    delays, hops = stage_delays(topo, flows, bw, hw["dram_bw_bytes_per_cycle"], hw["router_delay_cycles"])
    stages = {**{"v:" + k: v for k, v in D.items()}, **delays}
    longest = max(stages.values())
    latency_cycles = latency_of(wl, stages, hw["latency_rule"])
    # energy
    energy = {}
    for r in res.values():
        for k, v in r.energy_pj.items():
            energy[k] = energy.get(k, 0.0) + v
    e_d2d = cm.packaging(pkg)["d2d_energy_pj_per_bit"]
    e_d2d_tot = e_dram = 0.0
    for f, h in zip(flows, hops):
        bits = f.volume * P * 8
        if h:
            e_d2d_tot += bits * (e_d2d + h * hw["interposer_pj_per_bit_hop"] if pkg == "active" else h * e_d2d)
        if isinstance(f.src, str) or isinstance(f.dst, str):
            e_dram += bits * hw["dram_pj_per_bit"]
    energy["d2d"] = e_d2d_tot
    energy["dram"] = e_dram
    # area and cost
    areas, dies = [], []
    for op in wl.ops:
        for c in ids[op.name]:
            b_c = bw if not isinstance(bw, list) else bw[node_of[c]]
            io_c = io_mm2 if hw.get("link_bw_rule") == "unlimited" else cm.io_area_mm2(b_c * ghz, pkg, nlink[c])
            a = res[op.name].area_mm2 + (io_c if N > 1 else 0.0)
            areas.append(a)
            dies.append(cm.Die(a, nm))
    cb = cm.package_cost(dies, pkg)
    return Result(latency_cycles / ghz, ghz / longest if longest else 0.0, sum(energy.values()),
                  cb.total, sum(areas) + cb.interposer_area_mm2, (min(bw) if isinstance(bw, list) else bw) * ghz,
                  energy,
                  {k: v / ghz for k, v in stages.items()}, areas, cb.as_dict(),
                  {o: res[o].util for o in res},
                  sum(res[op.name].area_mm2 * len(ids[op.name]) for op in wl.ops))
