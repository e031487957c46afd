"""Simba performance and energy model for one layer and a batch of mappings (seed paper Sec. 3.3, Sec. 4).

Mapping = Listing 1 loop nest:
  package  : spatial kc x cc x pc x qc chiplets (K3, C3 and optionally P, Q split across chiplets)
  chiplet  : spatial kp x cp x pp x qp PEs; temporal P2 x Q2 steps (chiplet-level p2, q2 loops)
  PE       : temporal R, S, K1, C1, P1(=p1), Q1(=q1), weight-stationary
  vector MAC: spatial K0 x C0 (8 x 8)
Per-chiplet extents of K and P may be non-uniform (Sec. 5.1).

Timing, in PE cycles, for each chiplet d (its slowest PE):
  comp_d   = sum over its P2 x Q2 tiles of the RTL-derived tile cycles (pe_cycles.py):
             R S K1 C1 P1 Q1 + weight switches + fill/drain (PPU on the chain's last chiplet,
             psum hand-off elsewhere); NoC/NoP latencies are converted from their own clock
             domains (arch.py)
  t_in_d   = input delivery time under link sharing: max over its IA flows of the most loaded
             NoP link on its XY route (load / link bandwidth), the source Global PE port, the
             chiplet's NoP->NoC port and the PE port (bytes / NoC port bandwidth)
  t_ps_d, t_oa_d = the same for its cross-chiplet partial-sum and output-activation flows
  period_d = max(comp_d, t_in_d, t_ps_d, t_oa_d, t_pechain_d) / steps_d, and at least
             (2 lat_in_d + t_in_d/steps_d) / input_buffer_slots  (credit round trip)
  own_d    = lat_in_d + (t_in_d + comp_d)/steps_d + (steps_d - 1) * period_d   (tile pipeline)
A reduction chain (same k, p, q; c = 0..cc-1) finishes at max(own) + chain hops
(latency + one step of psums each) + intra-chiplet PE chain drain + output latency; layer
latency = slowest chain + per-layer sync (fixed + per active chiplet + a round trip to the
farthest chiplet) + the controller's configuration of the layer.  Weights are preloaded (as in
the measurements).
Controller terms (issue 14 lead 1, counted in the project's RTL chiplet program, NoC clock,
``ctrl_instr_cycles`` per word; chiplet_cycles.py models the same program cycle by cycle):
  setup     = (pe_config_regs x PEs used + gpe_cmd_words x (sets + 1) + ctrl_fixed_instr) words
              (CFG writes per PE, a GROUP per multicast set and the output RECV, TMO/BAR/WAIT/END)
  ctrl_step = gpe_cmd_words x sets words per tile step (one SEND per multicast set per tile),
              a lower bound on period; sets = cp pp qp (distinct PE input tiles)

RTL package/chiplet terms (issue 14 stop 21; each from the RTL-calibrated chiplet_cycles.py /
package_cycles.py, each switchable in simba_arch.json for the take-apart, bench/simba_overheads.py
compares the phases with the package RTL's events):
  comp_d   += (pe_tile_start_cycles + a chain member's psum drain beyond one beat per cycle:
             K1 P1 Q1 beats x ceil(K0 psum_bytes / NoC flit) flits + a head per
             psum_packet_beats) per tile  (psum_drain_in_tile)
  t_in_d   counts a head flit per DATA packet (one input row of a C0 block, <= max_tile_words
             words; packet_heads)
  period_d >= DATA credit loop: packets per tile x (2 lat_in + packet + words + credit_fixed)
             / credit_window_packets;  PSUM credit loop of a chain link across chiplets:
             ceil(packets / psum_window_packets) x its round trip;  the IA home Global PE's
             ejection port: consumer chiplets x kp x sets x packets / credit_batch CREDIT flits
             + the output activations written there
  first tile: + one packet time per router on a multicast's route (cut-through,
             mcast_cut_through)
  sync     += barrier_cycles at the master + the ARRIVE / RELEASE NoC legs (2 chiplets or more)
Scaling terms (issue 14 stop 22, bench/simba_scaling.py takes the layer time apart per chiplet
count; each a switch in simba_arch.json, all OFF -- none moves a figure beyond search noise):
  nop_port_shared       period_d >= max(NoP bytes into d, NoP bytes out of d) / NoC port (the
                        chiplet's one NoP router on its NoC, Sec. 3.1)
  barrier_arrive_serial sync += (N - 1) NoC cycles (the master takes one ARRIVE flit per cycle)
  psum_chain_serial     experiment, not in the paper: period >= a chain's psum hops + tile compute
  weight_copy_nop       experiment (stop 29), off: + the NoP multicast of the weight copies a
                        chiplet P/Q split needs, from one home per (k, c) block, before the layer
                        (Sec. 4.6 persistent weights; Sec. 4.1 preloads them, hence off)
Runtime control (issue 14 stop 30, rtcontrol.py; switches in simba_arch.json, all OFF except
ctrl_irq_barrier, ON since stop 30 with pipeline_handoff 1 -- the headline rests on both):
  ctrl_mmio_config      setup = one MMIO round trip (Rocket, one access in flight) per configuration word
  ctrl_gpe_autonomous   ctrl_step = 0 (the Global PE walks its tiles once configured, Sec. 3.1)
  ctrl_irq_done         setup += (PEs used + 1) interrupt handlers
  ctrl_irq_barrier      sync = the interrupt barrier at the medoid (or first) chiplet with serial MMIO
                        releases over the NoP, replacing the RTL barrier and the NoP round trip
  host_layer_ns         sync += a host step per layer (0: outside the Sec. 4.1 measurement)
The RTL's NoP multicast router rule (a packet waits for room for a max packet behind the previous
one) is left out: at the Simba operating point the RTL's minimum NoP buffer (2 x link latency + 2
flits) holds two max packets, so it does not bind (bench/simba_overheads.py operating_point).

Energy (pJ): useful MACs (padded lanes are clock-gated); input/weight/accumulation buffer
accesses of the issued cycles; Global PE reads/writes; NoC bit-hops (average hops); NoP
bit-links (multicast counted once per tree link).  Core terms scale with (V / Vref)^2.

Data homes (``placement``): ``local`` (the runtime baseline: each IA block lives in the Global
PE of one of the chiplets that consume it -- the one with the smallest multicast hop sum --
and each OA block stays on the chiplet that produces it; moving OA to the next layer's IA
homes is charged between layers, see interlayer.py), ``sequential`` (Fig. 11b start state:
Global PEs filled from chiplet 0), ``row`` (Fig. 11b read literally: IA spread over the top
row's Global PEs, OA over the next row; a sensitivity), ``greedy`` (Sec. 5.2) and
``distributed`` (a sensitivity) and ``local-row-oa`` (a Fig 6 sensitivity: inputs as ``local``,
outputs to the Fig. 11b output row; ``local-row-oa@r`` puts that row at package row r); ``local-periphery-oa``
(experiment: inputs as ``local``, outputs spread evenly over the periphery's Global PEs, Fig. 11d);
stop 32 experiments (bench/simba_rowoa_takeapart.py): ``local-order-oa`` (the output "row" taken in the
binding's chiplet order, so re-binding moves it) and ``local-even-oa`` (outputs spread evenly, in order, over
the used chiplets' Global PEs).
Left out: flit-level arbitration, wormhole blocking, DRAM (Simba has none), pooling and
element-wise layers, ragged per-PE work inside a chiplet (every PE is charged the largest tile).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .arch import Arch
from .layers import Layer, rows_per_tile
from . import rtcontrol
from .topology import bind, chiplet_noc, mesh


class MappingError(ValueError):
    """Invalid mapping."""


@dataclass(frozen=True)
class Mapping:
    kc: int
    cc: int
    pc: int
    qc: int
    kp: int
    cp: int
    pp: int
    qp: int
    p1: int
    q1: int
    k_ext: tuple | None = None   # per k-index K extents (non-uniform partitioning)
    p_ext: tuple | None = None   # per p-index P extents

    @property
    def n_chiplets(self) -> int:
        return self.kc * self.cc * self.pc * self.qc

    def short(self) -> str:
        s = (f"chip K{self.kc}C{self.cc}P{self.pc}Q{self.qc} pe K{self.kp}C{self.cp}P{self.pp}Q{self.qp}"
             f" P1={self.p1} Q1={self.q1}")
        if self.k_ext or self.p_ext:
            s += " nonuniform"
        return s


def split(total: int, parts: int) -> list[int]:
    q, r = divmod(total, parts)
    return [q + 1] * r + [q] * (parts - r)


def cdiv(a, b):
    return -(-a // b)


@dataclass
class Structure:
    """Chiplet-level part of a mapping: extents, binding, data homes and flows."""
    layer: Layer
    kc: int
    cc: int
    pc: int
    qc: int
    k: np.ndarray       # [N] extents per logical chiplet
    c: np.ndarray
    p: np.ndarray
    q: np.ndarray
    phys: tuple         # logical -> physical chiplet
    ia_homes: list      # per IA block (c,p,q): [(phys home, fraction)]
    oa_homes: list      # per OA block (k,p,q): [(phys home, fraction)]
    idx: np.ndarray     # [N, 4] (k, c, p, q) indices per logical chiplet
    extras: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.phys)


def logical_index(kc, cc, pc, qc):
    """Logical chiplet order: c innermost (reduction chain neighbours), then k, q, p."""
    out = []
    for p in range(pc):
        for q in range(qc):
            for k in range(kc):
                for c in range(cc):
                    out.append((k, c, p, q))
    return np.array(out, int)


def ia_block_bytes(layer: Layer, c: int, p: int, q: int) -> int:
    return c * min(layer.H, rows_per_tile(p, layer.stride, layer.R)) * \
        min(layer.W, rows_per_tile(q, layer.stride, layer.S))


def place_sequential(sizes, cap, order, used=None):
    """Fig. 11b default: fill Global PEs in ``order`` (from the first chiplet) up to ``cap``
    bytes each; a block may straddle homes.  A ~400 KB activation fills the six Global PEs of
    the top row, as in the Fig. 11b description ("IA to the chiplets on the top row and OA in
    the next six chiplets")."""
    used = {} if used is None else used
    homes, it = [], iter(order)
    cur = next(it)
    for size in sizes:
        parts, left = [], float(size)
        while left > 0:
            room = cap - used.get(cur, 0)
            if room <= 0:
                try:
                    cur = next(it)
                except StopIteration:
                    raise MappingError("activations do not fit in the Global PE buffers") from None
                continue
            take = min(room, left)
            used[cur] = used.get(cur, 0) + take
            parts.append((cur, take / size))
            left -= take
        homes.append(parts if parts else [(cur, 1.0)])
    return homes, used


def place_distributed(sizes, cap, order, used=None, start=0, spill=None):
    """Alternative start state (placement="distributed"; not the paper's default): block b goes
    to the Global PE of the next chiplet in ``order`` (the used chiplets), one block per Global
    PE, wrapping round; a block larger than the room left straddles into the following Global
    PEs.  With the logical order of blocks and chiplets, each IA block then usually starts on
    a chiplet that consumes it (as in the Fig. 9 example).  ``start``: position in ``order`` of the first block.  When every
    Global PE in ``order`` is full, block b spills to ``spill(b)`` (chiplets in preference
    order), else MappingError.  Returns (homes, used, next position)."""
    used = {} if used is None else used
    n = len(order)
    pos = start % n
    homes = []
    for b, size in enumerate(sizes):
        parts, left, tried = [], float(size), 0
        while left > 0:
            if tried >= n:                                   # all of `order` full: spill
                cand = [x for x in (spill(b) if spill else []) if cap - used.get(x, 0) > 0]
                if not cand:
                    raise MappingError("activations do not fit in the Global PE buffers")
                cur = cand[0]
            else:
                cur = order[pos]
            room = cap - used.get(cur, 0)
            if room <= 0:
                pos, tried = (pos + 1) % n, tried + 1
                continue
            take = min(room, left)
            used[cur] = used.get(cur, 0) + take
            parts.append((cur, take / size))
            left -= take
        homes.append(parts if parts else [(order[pos], 1.0)])
        pos = (pos + 1) % n
    return homes, used, pos


def place_local(sizes, dests, cap, hops, used=None):
    """Runtime baseline: block b's home is the consumer in ``dests[b]`` with the smallest
    (sum, max) hop count to the others (its own chiplet for a single consumer); overflow goes
    to the chiplets nearest that home with room."""
    used = {} if used is None else used
    homes = []
    for b, size in enumerate(sizes):
        d = np.asarray(dests[b], int)
        if d.size == 1:
            home = int(d[0])
        else:
            sub = hops[np.ix_(d, d)]
            score = sub.sum(axis=1) * 1000 + sub.max(axis=1)
            home = int(d[np.lexsort((d, score))[0]])
        room0 = cap - used.get(home, 0)
        if room0 >= size:                                    # common case: fits at home
            used[home] = used.get(home, 0) + size
            homes.append([(home, 1.0)])
            continue
        order = np.argsort(hops[home], kind="stable")
        parts, left = [], float(size)
        for h in map(int, order):
            if left <= 0:
                break
            room = cap - used.get(h, 0)
            if room <= 0:
                continue
            take = min(room, left)
            used[h] = used.get(h, 0) + take
            parts.append((h, take / size if size else 1.0))
            left -= take
        if left > 0:
            raise MappingError("activations do not fit in the Global PE buffers")
        homes.append(parts if parts else [(home, 1.0)])
    return homes, used


def place_greedy(sizes, dests, cap, hops, used=None, max_homes=None):
    """Communication-aware placement (Sec. 5.2): largest block first, home = the chiplet with
    room that minimises the aggregate hop count to the block's destinations (tie: max hop).
    As in the paper (Fig. 11c: "the four in the middle"), at most ``max_homes`` Global PEs
    are opened -- the number the sequential baseline needs -- so the optimisation moves data
    rather than spreading it over more buffers; it spills to more only if blocks do not pack."""
    used = {} if used is None else used
    n = hops.shape[0]
    opened = []
    homes = [None] * len(sizes)
    for b in sorted(range(len(sizes)), key=lambda b: -sizes[b]):
        d = np.asarray(dests[b], int)
        cost = hops[:, d].sum(axis=1) * 1000 + hops[:, d].max(axis=1)
        parts, left = [], float(sizes[b])
        while left > 0:
            room = lambda h: cap - used.get(int(h), 0)
            cand = [h for h in opened if room(h) > 0]
            if max_homes is None or len(opened) < max_homes or not cand:
                cand = cand + [h for h in range(n) if h not in opened and room(h) > 0]
            if not cand:
                raise MappingError("activations do not fit in the Global PE buffers")
            h = int(min(cand, key=lambda h: (cost[h], h)))
            if h not in opened:
                opened.append(h)
            take = min(room(h), left)
            used[h] = used.get(h, 0) + take
            parts.append((h, take / sizes[b] if sizes[b] else 1.0))
            left -= take
        homes[b] = parts if parts else [(int(np.argmin(cost)), 1.0)]
    return homes, used


def build_structure(layer: Layer, arch: Arch, kc, cc, pc, qc, binding="row-major",
                    placement="local", k_ext=None, p_ext=None) -> Structure:
    for name, f, dim in (("kc", kc, layer.K), ("cc", cc, layer.C), ("pc", pc, layer.P), ("qc", qc, layer.Q)):
        if not 1 <= f <= dim:
            raise MappingError(f"{layer.name}: {name}={f} outside [1, {dim}]")
    n = kc * cc * pc * qc
    m = mesh(arch.mesh_rows, arch.mesh_cols)
    phys = bind(n, binding, arch.mesh_rows, arch.mesh_cols)
    ke = list(k_ext) if k_ext is not None else split(layer.K, kc)
    pe_ = list(p_ext) if p_ext is not None else split(layer.P, pc)
    if len(ke) != kc or sum(ke) != layer.K or min(ke) < 1:
        raise MappingError(f"{layer.name}: K extents {ke} must be {kc} positive parts summing to {layer.K}")
    if len(pe_) != pc or sum(pe_) != layer.P or min(pe_) < 1:
        raise MappingError(f"{layer.name}: P extents {pe_} must be {pc} positive parts summing to {layer.P}")
    ce, qe = split(layer.C, cc), split(layer.Q, qc)
    idx = logical_index(kc, cc, pc, qc)
    k = np.array([ke[i] for i in idx[:, 0]])
    c = np.array([ce[i] for i in idx[:, 1]])
    p = np.array([pe_[i] for i in idx[:, 2]])
    q = np.array([qe[i] for i in idx[:, 3]])
    # IA blocks (c, p, q) -> destinations (all k); OA blocks (k, p, q) <- last chiplet of the chain
    ia_keys = [(ci, pi, qi) for pi in range(pc) for qi in range(qc) for ci in range(cc)]
    ia_sizes = [ia_block_bytes(layer, ce[ci], pe_[pi], qe[qi]) for ci, pi, qi in ia_keys]
    ia_dest = [[phys[i] for i in range(n) if (idx[i, 1], idx[i, 2], idx[i, 3]) == key] for key in ia_keys]
    oa_keys = [(ki, pi, qi) for pi in range(pc) for qi in range(qc) for ki in range(kc)]
    oa_sizes = [ke[ki] * pe_[pi] * qe[qi] for ki, pi, qi in oa_keys]
    last = {(idx[i, 0], idx[i, 2], idx[i, 3]): phys[i] for i in range(n) if idx[i, 1] == cc - 1}
    oa_src = [[last[key]] for key in oa_keys]
    cap = arch.gpe_buffer_bytes
    order = list(phys) + [x for x in range(m.n) if x not in phys]
    if placement == "local":
        ia_homes, used = place_local(ia_sizes, ia_dest, cap, m.hops)
        oa_homes, _ = place_local(oa_sizes, oa_src, cap, m.hops, used)

    elif placement == "distributed":
        spare = [x for x in range(m.n) if x not in phys]
        # over the used chiplets' Global PEs; when those are full, a block spills to the unused
        # chiplet nearest its first consumer (IA) or its producer (OA)
        near = lambda src: (lambda b: sorted(spare, key=lambda x: (int(m.hops[src[b], x]), x)))
        ia_homes, used, nxt = place_distributed(ia_sizes, cap, list(phys),
                                                spill=near([d[0] for d in ia_dest]))
        oa_homes, _, _ = place_distributed(oa_sizes, cap, list(phys), used, start=nxt,
                                           spill=near([s_[0] for s_ in oa_src]))
    elif placement == "sequential":
        ia_homes, used = place_sequential(ia_sizes, cap, order)
        start = max(order.index(h) for hs in ia_homes for h, _ in hs) + 1
        order2 = order[start:] + order[:start]
        oa_homes, _ = place_sequential(oa_sizes, cap, order2, used)
    elif callable(placement):
        # IA homes from outside (interlayer.ProducerHomes: where the producer wrote them); they
        # already hold the data, so they take no room here; OA stays on its producer as in "local"
        ia_homes = placement(layer, (ce, pe_, qe), ia_keys, ia_dest)
        oa_homes, _ = place_local(oa_sizes, oa_src, cap, m.hops)
    elif placement == "row":
        # Fig. 11b read literally ("a sequential allocation of input activations to the chiplets
        # on the top row and output activations in the next six chiplets"): IA spread evenly over
        # the Global PEs of the top row (further rows when it does not fit), OA over the next row
        cols = arch.mesh_cols
        rm = list(range(m.n))
        cia = min(cap, max(1, cdiv(int(sum(ia_sizes)), cols)))
        ia_homes, used = place_sequential(ia_sizes, cia, rm)
        start = cdiv(max(h for hs in ia_homes for h, _ in hs) + 1, cols) * cols
        coa = min(cap, max(1, cdiv(int(sum(oa_sizes)), cols)))
        oa_homes, _ = place_sequential(oa_sizes, coa, rm[start:] + rm[:start], used)
    elif isinstance(placement, str) and placement.split("@")[0] == "local-row-oa":
        # sensitivity (Fig 6): inputs preloaded on their consumers (as "local"), outputs written
        # to the Fig. 11b output homes (spread over the row below the first row of used chiplets);
        # "local-row-oa@r" (experiment, stop 32 take-apart): the output row is package row r
        ia_homes, used = place_local(ia_sizes, ia_dest, cap, m.hops)
        cols = arch.mesh_cols
        rm = list(range(m.n))
        r0 = 1
        if "@" in placement:
            r0 = int(placement.split("@")[1])
            if not 0 <= r0 < arch.mesh_rows:
                raise MappingError(f"output row {r0} outside [0, {arch.mesh_rows - 1}]")
        coa = min(cap, max(1, cdiv(int(sum(oa_sizes)), cols)))
        # a Global PE takes up to coa bytes of OA, less if its own inputs leave less room
        oa_homes, _ = place_sequential(oa_sizes, coa, rm[r0 * cols:] + rm[:r0 * cols],
                                       {h: max(0, coa - (cap - u)) for h, u in used.items()})
    elif placement == "local-order-oa":
        # experiment (stop 32 take-apart): "local-row-oa" with the output "row" taken in the binding's
        # chiplet order (Fig. 11b: the OA in the six chiplets after the first six of the sequential
        # order), so re-binding moves the output homes with the chiplets; equals "local-row-oa" under
        # the row-major binding of a partition that fills the first two rows
        ia_homes, used = place_local(ia_sizes, ia_dest, cap, m.hops)
        cols = arch.mesh_cols
        coa = min(cap, max(1, cdiv(int(sum(oa_sizes)), cols)))
        oa_homes, _ = place_sequential(oa_sizes, coa, order[cols:] + order[:cols],
                                       {h: max(0, coa - (cap - u)) for h, u in used.items()})
    elif placement == "local-even-oa":
        # experiment (stop 32 take-apart): inputs as "local", outputs spread evenly over the used
        # chiplets' Global PEs in sequence (a runtime that lays a tensor out over the partition,
        # not on its producers and not concentrated in one row)
        ia_homes, used = place_local(ia_sizes, ia_dest, cap, m.hops)
        coa = min(cap, max(1, cdiv(int(sum(oa_sizes)), n)))
        oa_homes, _ = place_sequential(oa_sizes, coa, order,
                                       {h: max(0, coa - (cap - u)) for h, u in used.items()})
    elif placement == "local-periphery-oa":
        # experiment (stop 31, lead 1): inputs as "local", outputs spread evenly over the Global PEs
        # of the package's periphery (Fig. 11d: "OA placement with even distribution along the
        # periphery of the package"), as the Sec. 5.2 optimisation of the "local-row-oa" start
        ia_homes, used = place_local(ia_sizes, ia_dest, cap, m.hops)
        R_, C_ = arch.mesh_rows, arch.mesh_cols
        rim = [x for x in range(m.n) if x // C_ in (0, R_ - 1) or x % C_ in (0, C_ - 1)]
        coa = min(cap, max(1, cdiv(int(sum(oa_sizes)), len(rim))))
        oa_homes, _ = place_sequential(oa_sizes, coa, rim + [x for x in range(m.n) if x not in rim],
                                       {h: max(0, coa - (cap - u)) for h, u in used.items()})
    elif placement == "greedy":
        # as many IA homes as the sequential baseline opens (Fig. 11c moves, not spreads, data)
        n_ia = -(-int(sum(ia_sizes)) // cap)
        ia_homes, used = place_greedy(ia_sizes, ia_dest, cap, m.hops, max_homes=n_ia)
        oa_homes, _ = place_greedy(oa_sizes, oa_src, cap, m.hops, used)   # spread (Fig. 11d)
    else:
        raise MappingError(f"unknown placement {placement!r}")
    st = Structure(layer, kc, cc, pc, qc, k, c, p, q, phys,
                   dict(zip(ia_keys, ia_homes)), dict(zip(oa_keys, oa_homes)), idx)
    st.extras["placement"] = placement if isinstance(placement, str) else repr(placement)
    st.extras["ext"] = (ke, ce, pe_, qe)
    st.extras["binding"] = binding if isinstance(binding, str) else "explicit"
    return st


def controller_setup_words(arch: Arch, kp, cp, pp, qp):
    """Controller instruction words that configure one layer on a chiplet (module doc): CFG
    writes to every PE used, a GROUP per multicast set (cp pp qp distinct input tiles), the
    output RECV, and the fixed TMO/BAR/WAIT/END words."""
    return (arch.pe_config_regs * kp * cp * pp * qp + arch.gpe_cmd_words * (cp * pp * qp + 1)
            + arch.ctrl_fixed_instr)


@dataclass
class BatchResult:
    valid: np.ndarray        # [S] bool: buffer capacities respected
    latency: np.ndarray      # [S] cycles
    own: np.ndarray          # [S, N] per-chiplet completion (before chain drain)
    energy: dict             # name -> [S] pJ
    comp: np.ndarray         # [S, N] compute cycles
    link_bytes: np.ndarray = None   # [S, links] NoP bytes per directed package link
    terms: dict = None              # name -> [S, N] / [S] / [S, groups] intermediate terms (take-apart)

    @property
    def energy_total(self) -> np.ndarray:
        return sum(self.energy.values())


def _prepare(st: Structure, arch: Arch) -> dict:
    """Flow topology of a structure (constant over PE-level choices), cached on it."""
    hit = st.extras.get("prep")
    if hit is not None and (hit[0] is arch or hit[0] == arch):
        return hit[1]
    m = mesh(arch.mesh_rows, arch.mesh_cols)
    noc = chiplet_noc(arch)
    h_noc, h_nop = arch.noc_hop_pe_cycles, arch.nop_hop_cycles
    N, phys = st.n, np.asarray(st.phys)
    pos = {int(ph): i for i, ph in enumerate(phys)}

    def lat(src, dst, src_hops, dst_hops):
        if src == dst:
            return h_noc * src_hops[0]
        return h_noc * (src_hops[1] + dst_hops) + h_nop * m.hops[src, dst]

    flows = []                       # (src, dests, kind, owner, ia_member, const_bytes)
    rep = {}
    for i in range(N):
        rep.setdefault((st.idx[i, 1], st.idx[i, 2], st.idx[i, 3]), []).append(i)
    for key_, members in rep.items():
        dests = [int(phys[i]) for i in members]
        for h, frac in st.ia_homes[key_]:
            flows.append((h, dests, "ia", -1, (members[0], frac), 0.0))
    chain_next = {}
    for i in range(N):
        kk, cc_, pp_, qq = st.idx[i]
        if cc_ < st.cc - 1:
            chain_next[i] = i + 1                               # c innermost in logical order
            flows.append((int(phys[i]), [int(phys[i + 1])], "ps", i, None,
                          float(arch.psum_bytes * st.k[i] * st.p[i] * st.q[i])))
        else:
            for h, frac in st.oa_homes[(kk, pp_, qq)]:
                flows.append((int(phys[i]), [h], "oa", i, None,
                              frac * arch.act_bytes * st.k[i] * st.p[i] * st.q[i]))
    F, nl = len(flows), len(m.links)
    W_ia = np.zeros((N, F)); b0 = np.zeros(F)
    trees = np.zeros((F, nl)); m_out = np.zeros((F, m.n)); m_in = np.zeros((F, m.n)); m_rem = np.zeros((F, m.n))
    m_src = np.zeros((F, m.n))      # flow leaves its source chiplet over the NoP (one copy: the tree replicates)
    pairs = []                      # (flow, logical chiplet, kind, route)
    lat_in = np.zeros(N); lat_ps = np.zeros(N); lat_oa = np.zeros(N)
    ct_routers = np.zeros(N); ct_mc = np.zeros(N, bool); ia_ndest = np.ones(N)
    ia_home = np.full(N, -1, int)
    noc_hops = np.zeros(F)
    for f, (src, dests, kind, owner, iam, c0_) in enumerate(flows):
        if iam is not None:
            W_ia[iam[0], f] = iam[1]
        b0[f] = c0_
        remote = [d for d in dests if d != src]
        trees[f] = m.tree(src, remote)
        for d in remote:
            m_rem[f, d] = 1
        if remote:
            m_src[f, src] = 1
        if kind == "ia":
            m_out[f, src] = 1
        if kind == "oa":
            m_in[f, dests[0]] = 1
        first = noc.gpe_to_nop if kind != "ps" else noc.nop_to_pe_avg
        last = noc.nop_to_pe_avg if kind != "oa" else noc.gpe_to_nop
        noc_hops[f] = (first if remote else 0) + last * max(len(dests), 1)
        for d in dests:
            i = pos[d] if kind == "ia" else owner
            pairs.append((f, i, kind, m.path[src, d]))
            if kind == "ia":
                lat_in[i] = max(lat_in[i], lat(src, d, (noc.gpe_to_pe_max, noc.gpe_to_nop), noc.nop_to_pe_max))
                # cut-through multicast: routers that hold a whole packet before it moves on
                # (the consumer chiplet's NoC routers; across the NoP also the NoP routers)
                ct_routers[i] = max(ct_routers[i], noc.gpe_to_pe_max if src == d
                                    else m.hops[src, d] + noc.nop_to_pe_max + 1)
                ct_mc[i] |= len(dests) > 1
                ia_ndest[i] = max(ia_ndest[i], len(dests))
                if ia_home[i] < 0:
                    ia_home[i] = src
            elif kind == "ps":
                lat_ps[i] = lat(src, d, (1, noc.nop_to_pe_max), noc.nop_to_pe_max)
            else:
                lat_oa[i] = max(lat_oa[i], lat(src, d, (noc.gpe_to_pe_max, noc.nop_to_pe_max), noc.gpe_to_nop))
    # pairs grouped by kind and sorted by chiplet, for segment-max reductions
    seg = {}
    maxlen = max(1, max(int(p[3].sum()) for p in pairs))
    for kind in ("ia", "ps", "oa"):
        sel = sorted((p[1], j) for j, p in enumerate(pairs) if p[2] == kind)
        js = [j for _, j in sel]
        chip = np.array([i for i, _ in sel], int)
        route_idx = np.full((len(js), maxlen), nl, int)          # index nl = a zero column
        for r, j in enumerate(js):
            li = np.flatnonzero(pairs[j][3])
            route_idx[r, :li.size] = li
        starts = np.flatnonzero(np.r_[True, chip[1:] != chip[:-1]]) if len(js) else np.zeros(0, int)
        seg[kind] = dict(route_idx=route_idx, chip=chip[starts] if len(js) else chip, starts=starts,
                         src=np.array([flows[pairs[j][0]][0] for j in js], int),
                         dst=np.array([flows[pairs[j][0]][1][0] for j in js], int))
    # reduction chains: chiplet -> chain head; drain terms
    heads = [i for i in range(N) if st.idx[i, 1] == 0]
    G = np.zeros((len(heads), N), bool); Gps = np.zeros((len(heads), N)); last = []
    for g, i in enumerate(heads):
        members = [i]
        while members[-1] in chain_next:
            members.append(chain_next[members[-1]])
        G[g, members] = True
        Gps[g, members[:-1]] = 1
        last.append(members[-1])
    # package barrier (RTL package: ARRIVE to the master over controller -> gateway -> NoP
    # hops, barrier_cycles there, RELEASE back; NoC legs (2 g + 2) hops each, g = controller
    # to the NoP router, taken as the Global PE's distance); barrier_cycles = 0 is the ablation
    # (NoP round trip only, the model before stop 21)
    bar = 0.0
    if N > 1 and arch.barrier_cycles > 0:
        bar = (arch.barrier_cycles * arch.pe_clock_ghz / arch.noc_clock_ghz
               + 2 * (2 * noc.gpe_to_nop + 2) * h_noc)
    if N > 1 and arch.barrier_arrive_serial:
        # the master's barrier agent takes one single-flit ARRIVE per NoC cycle (hdl/package/
        # barrier.py): N simultaneous ARRIVEs -> the last is counted N - 1 cycles after the first
        bar += (N - 1) * arch.pe_clock_ghz / arch.noc_clock_ghz
    sync = (arch.layer_sync_cycles + arch.chiplet_sync_ns * arch.pe_clock_ghz * N
            + 2 * h_nop * m.hops[phys[0], phys].max() + bar)
    if arch.ctrl_irq_barrier:
        # the runtime's barrier (rtcontrol.py): memory-mapped interrupts to the master controller
        # and its MMIO releases over the NoP, in place of the RTL barrier and the NoP round trip
        master = barrier_master(arch, m.hops, phys)
        bar = rtcontrol.barrier(arch, noc, m.hops[master, phys])
        sync = arch.layer_sync_cycles + arch.chiplet_sync_ns * arch.pe_clock_ghz * N + bar
    sync += arch.host_layer_ns * arch.pe_clock_ghz
    # weight copies over the NoP (experiment, off by default; issue 14 stop 29): a chiplet-level
    # P/Q split replicates each (k, c) weight block on pc qc chiplets.  With one stored copy per
    # block (Sec. 4.6 "distributed and persistent weight storage") the copies are multicast from
    # the block's home (its p = q = 0 chiplet) before the layer starts: the busiest NoP link's
    # weight bytes at the link rate + the farthest copy's NoP hop latency.  Sec. 4.1 preloads every
    # PE's weights before a measurement, so the default charges nothing.
    wcopy = 0.0
    if arch.weight_copy_nop and st.pc * st.qc > 1:
        wload = np.zeros(len(m.links))
        whops = 0
        groups_kc = {}
        for i in range(N):
            groups_kc.setdefault((int(st.idx[i, 0]), int(st.idx[i, 1])), []).append(i)
        for members in groups_kc.values():
            home, rest = int(phys[members[0]]), [int(phys[i]) for i in members[1:]]
            wload += m.tree(home, rest) * float(st.layer.R * st.layer.S * st.k[members[0]] * st.c[members[0]])
            whops = max(whops, int(m.hops[home, rest].max()))
        wcopy = wload.max() / arch.nop_link_bytes_per_cycle + h_nop * whops
    prep = dict(W_ia=W_ia, b0=b0, trees=trees, m_out=m_out, m_in=m_in, m_rem=m_rem, m_src=m_src, seg=seg, lat_in=lat_in, lat_ps=lat_ps, lat_oa=lat_oa, G=G, Gps=Gps,
                last=np.array(last, int), sync=sync, wcopy=wcopy, noc_hops=noc_hops, F=F, ct_routers=ct_routers,
                ct_mc=ct_mc, barrier=bar, ia_ndest=ia_ndest,
                ia_home=ia_home,
                is_ia=np.array([f[2] == "ia" for f in flows]), is_oa=np.array([f[2] == "oa" for f in flows]),
                ntree=trees.sum(axis=1))
    st.extras["prep"] = (arch, prep)
    return prep


def evaluate_batch(st: Structure, arch: Arch, kp, cp, pp, qp, p1, q1) -> BatchResult:
    """Score S PE-level choices (arrays) on one chiplet-level structure; see module doc."""
    L = st.layer
    pr = _prepare(st, arch)
    col = lambda a: np.asarray(a, np.int64).reshape(-1, 1)
    kp, cp, pp, qp, p1, q1 = map(col, (kp, cp, pp, qp, p1, q1))
    kpe, cpe = cdiv(st.k[None, :], kp), cdiv(st.c[None, :], cp)
    ppe, qpe = cdiv(st.p[None, :], pp), cdiv(st.q[None, :], qp)
    K1, C1 = cdiv(kpe, arch.k0), cdiv(cpe, arch.c0)
    p1e, q1e = np.minimum(p1, ppe), np.minimum(q1, qpe)
    P2, Q2 = cdiv(ppe, p1e), cdiv(qpe, q1e)
    steps = P2 * Q2
    rpt = lambda n_, s_, r_: np.where(s_ >= r_, n_ * r_, (n_ - 1) * s_ + r_)
    rows1, cols1 = rpt(p1e, L.stride, L.R), rpt(q1e, L.stride, L.S)
    valid = ((L.R * L.S * K1 * C1 <= arch.weight_buffer_bytes // (arch.k0 * arch.c0))
             & (arch.c0 * C1 * rows1 * cols1 * arch.act_bytes <= arch.input_buffer_bytes // arch.input_buffer_slots)
             & (K1 * p1e * q1e <= arch.accum_entries)
             & (kp * cp * pp * qp <= arch.pes_per_chiplet)).all(axis=1)
    cyc = L.R * L.S * K1 * C1 * ppe * qpe
    # RTL tile cycles (pe_cycles.py): every tile pays fill/drain and its weight-block switches
    last_in_chain = (st.idx[:, 1] == st.cc - 1)[None, :]
    tile_ovh = np.where(last_in_chain, arch.pe_overhead_ppu, arch.pe_overhead_psum)
    comp = cyc + (tile_ovh + arch.pe_weight_switch_cycles * L.R * L.S * K1 * C1) * P2 * Q2
    # RTL PE-node terms per tile (chiplet_cycles.pass_cycles pe_tile): the tile start, and for
    # a reduction-chain member (not the chain's last PE) the partial-sum drain at the NoC link
    # rate: K1 P1 Q1 beats of K0 x psum_bytes, ceil(.. / flit) flits each + a head per packet
    tile_pe = np.full(comp.shape, float(arch.pe_tile_start_cycles))
    if arch.psum_drain_in_tile:
        beats = K1 * p1e * q1e
        fpb = cdiv(arch.k0 * arch.psum_bytes, int(arch.noc_link_bytes_per_cycle))
        drain = (beats * fpb + cdiv(beats, arch.psum_packet_beats)) * arch.pe_clock_ghz / arch.noc_clock_ghz
        member = (cp > 1) | ~last_in_chain
        tile_pe = tile_pe + np.where(member, np.maximum(0.0, drain - beats), 0.0)
    comp = comp + tile_pe * P2 * Q2
    # input bytes per PE over all steps (halo re-fetch between temporal tiles counted)
    lastp, lastq = ppe - (P2 - 1) * p1e, qpe - (Q2 - 1) * q1e
    rows_tot = (P2 - 1) * rows1 + rpt(lastp, L.stride, L.R)
    cols_tot = (Q2 - 1) * cols1 + rpt(lastq, L.stride, L.S)
    ia_pe = cpe * rows_tot * cols_tot * arch.act_bytes                      # [S, N]
    # RTL packets (hdl/chiplet compiler / Global PE SEND): one DATA packet per input row of a
    # C0 block, up to max_tile_words words, each with a head flit
    pk_tile = C1 * rows1 * cdiv(cols1, arch.max_tile_words)                  # packets per PE tile
    ia_wire = ia_pe + (pk_tile * steps * arch.noc_link_bytes_per_cycle if arch.packet_heads else 0)
    ia_chip = ia_wire * (cp * pp * qp)                                     # distinct PE tiles, multicast over kp
    S = ia_pe.shape[0]
    noc_bw, nop_bw = arch.noc_bytes_per_pe_cycle, arch.nop_link_bytes_per_cycle
    B = ia_chip @ pr["W_ia"] + pr["b0"][None, :]                          # [S, F] bytes per flow
    load = B @ pr["trees"]                                                 # [S, links]
    gpe_out, gpe_in, nop_in = B @ pr["m_out"], B @ pr["m_in"], B @ pr["m_rem"]
    load0 = np.concatenate([load, np.zeros((S, 1))], axis=1) / nop_bw

    def per_chiplet(kind, port=None, port_idx=None):
        sg = pr["seg"][kind]
        out = np.zeros((S, st.n))
        if sg["starts"].size == 0:
            return out
        t = load0[:, sg["route_idx"]].max(axis=2)                            # bottleneck link
        if port is not None:
            t = np.maximum(t, port[:, sg[port_idx]] / noc_bw)
        out[:, sg["chip"]] = np.maximum.reduceat(t, sg["starts"], axis=1)
        return out

    t_in = per_chiplet("ia", gpe_out, "src")
    t_ps = per_chiplet("ps")
    t_oa = per_chiplet("oa", gpe_in, "dst")
    phys = np.asarray(st.phys)
    t_in = np.maximum.reduce([t_in, nop_in[:, phys] / noc_bw, ia_wire / noc_bw])
    ps_pe_step = arch.psum_bytes * kpe * p1e * q1e                          # one step, one PE
    t_pechain = np.where(cp > 1, ps_pe_step * steps / noc_bw, 0.0)
    # controller (RTL chiplet program): one Global PE SEND command per tile per multicast set
    # (cp pp qp distinct input tiles, each multicast to kp PEs) -> a per-step issue bound; the
    # layer's configuration (CFG writes to every PE used, a GROUP per set, the output RECV, the
    # fixed TMO/BAR/WAIT/END words) precedes the start (a PE ignores writes while it runs)
    ctrl_step = arch.ctrl_pe_cycles * arch.gpe_cmd_words * cp * pp * qp       # [S, 1]
    setup = arch.ctrl_pe_cycles * controller_setup_words(arch, kp, cp, pp, qp)
    # the runtime's RISC-V (rtcontrol.py): serial MMIO configuration writes, an autonomous Global
    # PE (no per-tile issue bound), done interrupts handled one at a time after the last tile
    if arch.ctrl_gpe_autonomous:
        ctrl_step = np.zeros_like(ctrl_step, dtype=float)
    if arch.ctrl_mmio_config:
        setup = rtcontrol.config_cycles(arch, chiplet_noc(arch), kp, cp, pp, qp).astype(float)
    if arch.ctrl_irq_done:
        setup = setup + rtcontrol.done_cycles(arch, kp, cp, pp, qp)
    t_ctrl = np.broadcast_to(ctrl_step * steps, comp.shape)
    busy = np.maximum.reduce([comp, t_in, t_ps, t_oa, t_pechain, t_ctrl])
    t_port = np.zeros_like(comp)
    if arch.nop_port_shared:
        # the chiplet's one NoP router is one node of its NoC: every byte that enters the chiplet
        # over the NoP (inputs, partial sums, outputs) leaves the NoP router on its NoC port, and
        # every byte that leaves (one copy per multicast) enters it there -- each way one NoC link
        nop_out = B @ pr["m_src"]
        t_port = np.maximum(nop_in[:, phys], nop_out[:, phys]) / noc_bw
        busy = np.maximum(busy, t_port)
    lat_in = pr["lat_in"]
    period = np.maximum(busy / steps, (2 * lat_in + t_in / steps) / arch.input_buffer_slots)
    # RTL credit loops (chiplet_cycles.pass_cycles lane rate, package_cycles psum_round):
    # DATA: a set's lane keeps credit_window_packets packets in flight per consumer, each
    # credit back one round trip after its packet left (route both ways + the packet in + its
    # words into the PE + credit_fixed_cycles); PSUM across chiplets: psum_window packets per
    # chain link, ceil(packets / window) round trips per tile
    noc_pe = arch.pe_clock_ghz / arch.noc_clock_ghz
    if arch.credit_window_packets > 0:
        words = np.minimum(arch.max_tile_words, cols1)
        pkt_t = (words * arch.c0 * arch.act_bytes + arch.noc_link_bytes_per_cycle) / noc_bw
        rtt = 2 * lat_in[None, :] + pkt_t + words + arch.credit_fixed_cycles * noc_pe
        period = np.maximum(period, pk_tile * rtt / arch.credit_window_packets)
    if arch.credit_batch > 0:
        # the IA home Global PE's ejection port (one flit per NoC cycle) takes a CREDIT flit per
        # credit_batch DATA packets per member PE (kp PEs on each of the block's consumer
        # chiplets, every set) besides the output activations written to that Global PE
        # (chiplet_cycles.pass_cycles gpe_eject)
        cred = pr["ia_ndest"][None, :] * kp * (cp * pp * qp) * pk_tile / arch.credit_batch
        oa_home = gpe_in[:, pr["ia_home"]] / noc_bw
        period = np.maximum(period, cred * noc_pe + oa_home / steps)
    if arch.psum_window_packets > 0 and st.cc > 1:
        beats = K1 * p1e * q1e
        npk = cdiv(beats, arch.psum_packet_beats)
        fpb = cdiv(arch.k0 * arch.psum_bytes, int(arch.noc_link_bytes_per_cycle))
        ps_pkt = arch.psum_packet_beats * (fpb * noc_pe) + noc_pe + arch.psum_packet_beats
        rtt_ps = 2 * pr["lat_ps"][None, :] + ps_pkt + arch.credit_fixed_cycles * noc_pe
        sender = (st.idx[:, 1] < st.cc - 1)[None, :]
        period = np.maximum(period, np.where(sender, cdiv(npk, arch.psum_window_packets) * rtt_ps, 0.0))
    # pipeline of (deliver input tile, compute, send results) over `steps` tiles: fill with the
    # first tile's delivery and compute, then one period per further tile; the last tile's
    # results are sent in the chain drain below
    lat_first = lat_in
    if arch.mcast_cut_through:
        # a multicast packet (several consumer chiplets, or kp > 1 PEs) is whole in every
        # router before it moves on: + one packet (min(max_tile, tile columns) words) per router
        mc = pr["ct_mc"][None, :] | (kp > 1)
        pkt = np.minimum(arch.max_tile_words, cols1) * arch.c0 * arch.act_bytes / noc_bw
        lat_first = lat_in + np.where(mc, pr["ct_routers"][None, :] * pkt, 0.0)
    if arch.psum_chain_serial and st.cc > 1:
        # experiment (not stated by the paper): a reduction chain runs in lock-step per tile --
        # the chain's head starts tile t + 1 only after tile t's partial sums have passed every
        # chiplet hop of the chain (single-buffered accumulators along the whole chain)
        hop_step = pr["lat_ps"][None, :] + t_ps / steps                        # [S, N]
        chain_step = hop_step @ pr["Gps"].T                                    # [S, groups]
        period = np.maximum(period, (pr["G"][None] * chain_step[:, :, None]).max(axis=1) + comp / steps)
    own = lat_first + t_in / steps + comp / steps + (steps - 1) * period
    # reduction chains: slowest member + psum hops + PE-chain drain + output delivery
    h_noc = arch.noc_hop_pe_cycles
    pe_drain = np.where(cp > 1, (cp - 1) * (h_noc + ps_pe_step / noc_bw), 0.0)
    G = pr["G"]
    chain_max = np.where(G[None], own[:, None, :], -np.inf).max(axis=2)             # [S, groups]
    hop = pr["lat_ps"][None, :] + t_ps / steps
    chain_ps = hop @ pr["Gps"].T
    z = pr["last"]
    tail = pe_drain[:, z] + pr["lat_oa"][z][None, :] + t_oa[:, z] / steps[:, z]
    latency = (chain_max + chain_ps + tail).max(axis=1) + pr["sync"] + setup[:, 0] + pr["wcopy"]
    # ---- energy (pJ) ----
    es = arch.energy_scale
    npe = (kp * cp * pp * qp).astype(float)                                 # PEs per chiplet
    ib = ((cyc * arch.c0 + ia_pe) * npe).sum(axis=1) * arch.act_bytes
    wb = (L.R * L.S * K1 * C1 * arch.k0 * arch.c0 * steps * npe).sum(axis=1) * arch.act_bytes
    acc = (2 * arch.k0 * cyc * npe).sum(axis=1)
    gpe_bytes = B[:, pr["is_ia"]].sum(axis=1) + B[:, pr["is_oa"]].sum(axis=1)
    noc_bytehops = B @ pr["noc_hops"] + (ps_pe_step * steps * (cp - 1) * (kp * pp * qp)).sum(axis=1)
    nop_bytelinks = B @ pr["ntree"]
    energy = {
        "mac": np.full(S, float(L.macs)) * arch.e_mac_pj * es,   # idle (padded) lanes gated
        "input_buffer": ib * arch.e_input_buffer_pj_per_byte * es,
        "weight_buffer": wb * arch.e_weight_buffer_pj_per_byte * es,
        "accum_buffer": acc * arch.e_accum_pj_per_access * es,
        "global_pe": gpe_bytes * arch.e_gpe_pj_per_byte * es,
        "noc": noc_bytehops * 8 * arch.e_noc_pj_per_bit_hop * es,
        "nop": nop_bytelinks * 8 * arch.nop_pj_per_bit,
    }
    terms = dict(steps=steps, comp=comp, t_in=t_in, t_ps=t_ps, t_oa=t_oa, t_pechain=t_pechain, t_port=t_port,
                 ctrl=t_ctrl, period=period, lat_first=lat_first,
                 own=own, chain_max=chain_max, chain_ps=chain_ps, tail=tail, sync=pr["sync"],
                 setup=setup[:, 0], groups=G, wcopy=pr["wcopy"])
    return BatchResult(valid, latency, own, energy, comp, load, terms=terms)


@dataclass
class LayerResult:
    layer: str
    mapping: Mapping
    n_chiplets: int
    latency_cycles: float
    energy_pj: float
    energy: dict
    own: list
    binding: object = "row-major"
    placement: str = "local"
    samples: int = 0
    link_bytes: list = None      # NoP bytes per package link (pipelining: shared bandwidth)
    sync_cycles: float = 0.0     # the per-layer sync term inside latency_cycles (pipelining: not divisible)

    def latency_us(self, arch: Arch) -> float:
        return self.latency_cycles / (arch.pe_clock_ghz * 1e3)


def barrier_master(arch: Arch, hops, phys) -> int:
    """The chiplet whose controller collects a partition's interrupts: the first of ``phys``, or
    (``barrier_master`` 1) the one with the smallest hop sum to the others (ties: the first)."""
    phys = list(phys)
    if arch.barrier_master == 1:
        return int(phys[int(np.argmin(np.asarray(hops)[np.ix_(phys, phys)].sum(axis=1)))])
    return int(phys[0])


def evaluate(layer: Layer, arch: Arch, mp: Mapping, binding="row-major", placement="local") -> LayerResult:
    """Evaluate one mapping; raises MappingError if it violates a buffer capacity."""
    st = build_structure(layer, arch, mp.kc, mp.cc, mp.pc, mp.qc, binding, placement, mp.k_ext, mp.p_ext)
    r = evaluate_batch(st, arch, [mp.kp], [mp.cp], [mp.pp], [mp.qp], [mp.p1], [mp.q1])
    if not r.valid[0]:
        raise MappingError(f"{layer.name}: mapping {mp.short()} exceeds a PE buffer capacity")
    return LayerResult(layer.name, mp, mp.n_chiplets, float(r.latency[0]), float(r.energy_total[0]),
                       {k: float(v[0]) for k, v in r.energy.items()}, r.own[0].tolist(), binding, placement,
                       link_bytes=r.link_bytes[0].tolist(), sync_cycles=float(np.asarray(r.terms["sync"]).ravel()[0]))
