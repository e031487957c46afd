"""Layer compiler: a conv layer + a Simba mapping + a ChipletConfig -> chiplet passes.

Simba §3.3 (the flow "generates the configuration binaries for each chiplet that implement
the execution created by the mapper and binder") for one chiplet, with the PE-level part of
Listing 1: the mapping's spatial ``kp x cp x pp x qp`` PE split and temporal ``P1 x Q1``
tiles (``sim_models/simba/model.py`` :class:`Mapping`, the object the package model
evaluates; only its PE-level fields are used, a single-chiplet mapping has kc = cc = pc =
qc = 1).  What the mapping does not say and this compiler decides (the adapter):

* channel slices: PE (k, c, p, q) gets output channels ``[k*kpe, (k+1)*kpe)`` and input
  channels ``[c*cpe, (c+1)*cpe)`` with kpe = ceil(K'/kp), cpe = ceil(C/cp) (the model's
  extents), zero-padded to K1*K0 / C1*C0 lanes (padded lanes have zero weights, bias and
  scale, so they read 0);
* spatial slices: rows ``[p*ppe, ...)``, columns ``[q*qpe, ...)`` (ppe = ceil(P'/pp)); a PE
  runs ceil(rows/P1) x ceil(cols/Q1) full P1 x Q1 tiles (one PEConfig for all its tiles);
  pixels of an edge tile beyond its slice are computed from the (zero) Global PE margin and
  ignored (``out_index`` -1);
* placement: logical PE order (c innermost: a reduction chain is consecutive; then k, q, p)
  on the PEs in snake order (row 0 left to right, row 1 right to left, ...), so chain
  neighbours are one NoC hop apart;
* passes: a layer that does not fit one run of the chiplet is split into ``nk`` output-channel
  slices x ``nb`` output-row bands (fewest passes first), each pass re-applying the PE-level
  mapping to its sub-layer; limits that force a split: PE weight buffer, PPU depth, Global PE
  words (input band + output), controller program depth, 16-bit command fields.  A limit no
  split can meet raises :class:`CompileError` naming it;
* 1x1 stride-s layers: the Global PE holds the subsampled image (every s-th row/column of
  the padded input) and the PEs run stride 1 (same result, s^2 fewer words).

Pass = (GPE input band, layout ``[g][h][w]``: word = C0 channels of one pixel of the padded
(materialised) image, g = chain member * C1 + c1; output window of the LAST/ONLY PEs' beats at
``out_base + t*out_tile_stride + b``), per-PE configuration (PEConfig, role, chain
neighbours, ntiles, ...) as the CFG writes of :func:`packets.pe_node_registers`, multicast
sets (PEs with the same input slice), the Global PE command list, the controller program
(:mod:`.asm`), the host preload (WLOAD/PLOAD per PE, the input band as OUT packets) and
``out_index`` (output word, lane -> flat (k, p, q) index of the layer output or -1).

Program of a pass (contract item 5): RECV input window (producer: gateway), ``BAR 1`` (the
host's cue: the window is open, send the input band; the WLOAD/PLOAD preload is queued on
``host_in`` before ``start``, so it precedes the input and the PEs are idle while it lands),
WAIT G; GROUPs
of the first multicast sets; RECV output window; CFG each PE (downstream PEs first), START;
SENDs tile-major (tile t of every set before tile t+1 of any: no cross-chain wait cycle);
WAIT all PE DONEs + G; SEND the output window unicast to the gateway; WAIT G; END.  A set of
one PE is sent unicast; a set of several PEs keeps one group for all its tiles (a GROUP
re-writes the group's table entry only when another set shares it: the GROUP waits for the
group's lane, so a PE's tiles never arrive out of order).
Left out: pooling layers, K/C tiling above the PE within a pass (C must fit the chain's weight
buffers in one pass: a split over C would need psum accumulation across passes), several
chiplets (package issue), overlapping passes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tessera.hdl.global_pe.packets import (KIND_OUT, OP_GROUP, OP_RECV, OP_SEND, FIELD, TILE_BITS,
                                           out_header_layout, pack_fields)
from tessera.hdl.pe.config import CFG_FIELDS, PEConfig, Role

from . import packets as pk
from .asm import Program, assemble_ops
from .config import ChipletConfig, node_map
from tessera.sim_models.simba.layers import Layer


class CompileError(ValueError):
    """A layer / mapping the chiplet cannot run (one line, names the limit)."""


def cdiv(a, b):
    return -(-a // b)


TAG_RECV_IN, TAG_RECV_OUT, TAG_GROUP, TAG_SEND, TAG_READBACK = 1, 2, 3, 4, 5
#: BAR id at which the host sends the input band (the program has opened its RECV window)
BAR_PRELOAD = 1


# The compiler takes the workload file's layer type itself (shape, P, Q, macs, validation).
ConvLayer = Layer


@dataclass(frozen=True)
class PEMapping:
    """PE-level mapping (Listing 1 chiplet/PE levels): spatial kp x cp x pp x qp PEs,
    temporal P1 x Q1 tiles.  :func:`from_model_mapping` adapts the package model's Mapping."""
    kp: int
    cp: int
    pp: int
    qp: int
    p1: int
    q1: int

    def short(self):
        return f"pe K{self.kp}C{self.cp}P{self.pp}Q{self.qp} P1={self.p1} Q1={self.q1}"


def from_model_mapping(mp) -> PEMapping:
    """Adapter: ``sim_models.simba.model.Mapping`` (single chiplet) -> :class:`PEMapping`."""
    if (mp.kc, mp.cc, mp.pc, mp.qc) != (1, 1, 1, 1):
        raise CompileError(f"mapping {mp.short()} spans {mp.n_chiplets} chiplets; the chiplet "
                           "compiler takes one-chiplet mappings (kc = cc = pc = qc = 1)")
    if mp.k_ext or mp.p_ext:
        raise CompileError("non-uniform K/P extents are not supported by the chiplet compiler")
    return PEMapping(mp.kp, mp.cp, mp.pp, mp.qp, mp.p1, mp.q1)


@dataclass
class GpeCmd:
    """One Global PE command (fields of ``command_layout``; mask / uaddr as node coords)."""
    op: int
    tag: int = 0
    a: int = 0
    cnt: tuple = (1, 1, 1)
    stride: tuple = (0, 0, 0)
    tile: int = 1
    groups: int = 0
    ucast: bool = False
    unode: tuple = (0, 0)
    mask_nodes: int = 0
    gidx: int = 0
    set_id: int = -1             # SEND: multicast set; -1 otherwise
    tile_idx: int = -1           # SEND: tile index within the set

    def fields(self, mesh_x: int) -> dict:
        return {"op": self.op, "tag": self.tag, "a": self.a,
                "cnt0": self.cnt[0], "cnt1": self.cnt[1], "cnt2": self.cnt[2],
                "stride0": self.stride[0], "stride1": self.stride[1], "stride2": self.stride[2],
                "tile": self.tile, "groups": self.groups, "ucast": int(self.ucast),
                "uaddr": {"chiplet": {"x": 0, "y": 0}, "node": {"x": self.unode[0], "y": self.unode[1]}},
                "mask": {"chiplets": 1, "nodes": self.mask_nodes}, "gidx": self.gidx}


def pack_nested(layout, values: dict) -> int:
    """Pack a (possibly nested) dict into a StructLayout value."""
    from amaranth.hdl import Shape
    from amaranth.lib import data
    word = 0
    for name, f in layout:
        if name not in values:
            continue
        v = values[name]
        if isinstance(v, dict):
            v = pack_nested(f.shape, v)
        w = Shape.cast(f.shape).width
        if not 0 <= int(v) < (1 << w):
            raise CompileError(f"command field {name} = {v} does not fit {w} bits")
        word |= int(v) << f.offset
    return word


@dataclass
class PEJob:
    """One PE's work in a pass."""
    pe: int                      # PE index (node_map(cfg).pes[pe] = node)
    node: tuple
    k: int
    c: int
    p: int
    q: int
    set_id: int
    cfg: PEConfig
    ntiles: int
    tiles: list                  # [(row0, col0)] output origin of each tile (layer coords)
    k_range: tuple               # output channels [lo, hi)
    c_range: tuple               # input channels [lo, hi)
    psum_dest: tuple | None      # downstream PE node (FIRST/MIDDLE)
    psum_src: tuple | None       # upstream PE node (MIDDLE/LAST)
    out_base: int = 0
    out_tile_stride: int = 0
    registers: list = field(default_factory=list)
    wload: list = field(default_factory=list)
    pload: list = field(default_factory=list)

    @property
    def role(self) -> Role:
        return Role(int(self.cfg.role))


@dataclass
class McastSet:
    set_id: int
    members: list                # PE indices
    nodes: list                  # their nodes
    gblock: int                  # first GPE channel block g of their input slice
    tiles: list                  # input origin (row, col) in the band image, per tile
    group: int = -1              # group used (-1: unicast, one member)


@dataclass
class Pass:
    index: int
    layer: ConvLayer
    mapping: PEMapping
    k_range: tuple
    p_range: tuple
    step: int                    # GPE image = padded input subsampled by step (1x1 stride-s)
    pe_stride: int
    band_row0: int               # first padded-input row (in image rows) of the band
    Hb: int
    Wb: int
    gblocks: int                 # channel blocks in the band (cp * C1)
    in_words: int
    out_base: int
    out_words: int
    jobs: list
    sets: list
    ops: list                    # program steps: ("recv"/"send"/"group", GpeCmd) | ("cfg", node, reg, val) | ("wait", nodes, gpe) | ("tmo", n) | ("bar", id) | ("end",)
    program: Program
    preload_pe: dict             # node -> [packets] (WLOAD then PLOAD), each packet a list of flit payloads
    preload_input: list          # OUT packets (lists of flit payloads) to the Global PE node
    out_index: np.ndarray        # [out_words, K0] flat layer-output index k*P*Q + p*Q + q, or -1
    useful_macs: int
    slice_of: tuple | None = None   # (pass index, its p_range) when this is a P slice of that pass

    @property
    def commands(self) -> list:
        return [op[1] for op in self.ops if op[0] in ("recv", "send", "group")]

    @property
    def program_words(self) -> list:
        return self.program.words

    def summary(self) -> str:
        kl, kh = self.k_range
        pl, ph = self.p_range
        roles = {}
        for j in self.jobs:
            roles[j.role.name] = roles.get(j.role.name, 0) + 1
        sl = f" (slice of P[{self.slice_of[1][0]}:{self.slice_of[1][1]}))" if self.slice_of else ""
        return (f"pass {self.index}: K[{kl}:{kh}) P[{pl}:{ph}){sl} {len(self.jobs)} PEs {roles} "
                f"{len(self.sets)} sets, input {self.in_words} words, output {self.out_words} words "
                f"@{self.out_base}, {len(self.program.words)} instructions")


# ----------------------------------------------------------------------------------------
def snake_order(cfg: ChipletConfig) -> list:
    """PE indices in snake order (consecutive ones are NoC neighbours)."""
    out = []
    for y in range(cfg.ny):
        xs = range(cfg.nx) if y % 2 == 0 else range(cfg.nx - 1, -1, -1)
        out.extend(y * cfg.nx + x for x in xs)
    return out


@dataclass
class _Geo:
    """Per-pass geometry (no data): extents, tile config and sizes."""
    kpe: int
    cpe: int
    ppe: int
    qpe: int
    K1: int
    C1: int
    P1: int
    Q1: int
    H_in: int
    W_in: int


def _geometry(L: ConvLayer, m: PEMapping, Kp: int, Pp: int, cfg: ChipletConfig, step: int,
              pe_stride: int, R: int, S: int) -> _Geo:
    pe = cfg.pe
    kpe, cpe = cdiv(Kp, m.kp), cdiv(L.C, m.cp)
    ppe, qpe = cdiv(Pp, m.pp), cdiv(L.Q, m.qp)
    K1, C1 = cdiv(kpe, pe.K0), cdiv(cpe, pe.C0)
    P1, Q1 = min(m.p1, ppe), min(m.q1, qpe)
    H_in, W_in = (P1 - 1) * pe_stride + R, (Q1 - 1) * pe_stride + S
    return _Geo(kpe, cpe, ppe, qpe, K1, C1, P1, Q1, H_in, W_in)


def _check_pe_limits(L, m, g: _Geo, cfg: ChipletConfig, pe_stride) -> str | None:
    """First per-PE limit the geometry breaks (None: fits).  PPU/weights depend on K1 (passes
    over K fix them); the others do not."""
    pe = cfg.pe
    half = pe.ibuf_words // 2
    if L.R > 15 or L.S > 15:
        return f"filter {L.R}x{L.S} exceeds the PE's 4-bit R/S fields"
    if pe_stride not in (1, 2):
        return f"stride {L.stride} is not supported by the PE (1 or 2)"
    if g.C1 * g.H_in * g.W_in > half:
        return (f"input tile C1*H_in*W_in = {g.C1}*{g.H_in}*{g.W_in} = {g.C1 * g.H_in * g.W_in} words "
                f"exceeds half the PE input buffer ({half} words, double-buffered)")
    for f, v in (("C1", g.C1), ("K1", g.K1), ("P1", g.P1), ("Q1", g.Q1), ("H_in", g.H_in), ("W_in", g.W_in)):
        if v >= 1 << CFG_FIELDS[f]:
            return f"{f} = {v} does not fit the PE's {CFG_FIELDS[f]}-bit field"
    if g.K1 * g.P1 * g.Q1 > pe.abuf_entries:
        return f"K1*P1*Q1 = {g.K1 * g.P1 * g.Q1} exceeds the accumulation buffer ({pe.abuf_entries})"
    if L.R * L.S * g.K1 * g.C1 > pe.wbuf_entries:
        return (f"weights R*S*K1*C1 = {L.R * L.S * g.K1 * g.C1} blocks exceed the PE weight buffer "
                f"({pe.wbuf_entries})")
    if g.K1 > pe.ppu_depth:
        return f"K1 = {g.K1} exceeds the PPU depth ({pe.ppu_depth})"
    return None


def compile_layer(layer, mapping, cfg: ChipletConfig | None = None, tensors=None,
                  max_passes: int = 4096, preload_passes=None) -> list[Pass]:
    """Compile ``layer`` under ``mapping`` (PEMapping or the model's Mapping) for ``cfg``.
    ``tensors``: dict with X [C,H,W], W [K,C,R,S] int8, bias [K], scale [K], shift, relu (e.g.
    ``golden.chiplet.layer_tensors``; shift and relu go into the PE configs); the host preload
    is built for the pass indices in ``preload_passes`` (default: all; :func:`preload` adds it
    later).  Without tensors the passes have no preload data and a PPU of shift 0, no relu."""
    cfg = (cfg or ChipletConfig()).validate()
    L = layer
    m = mapping if isinstance(mapping, PEMapping) else from_model_mapping(mapping)
    for f in ("kp", "cp", "pp", "qp", "p1", "q1"):
        if getattr(m, f) < 1:
            raise CompileError(f"mapping {f} = {getattr(m, f)} must be >= 1")
    if m.kp * m.cp * m.pp * m.qp > cfg.npes:
        raise CompileError(f"mapping uses {m.kp * m.cp * m.pp * m.qp} PEs; the chiplet has {cfg.npes}")
    if m.kp > L.K or m.cp > L.C or m.pp > L.P or m.qp > L.Q:
        raise CompileError(f"mapping {m.short()} splits a dimension into more parts than {L.name} has")
    step = L.stride if (L.R == 1 and L.S == 1) else 1
    pe_stride = L.stride // step
    # search the split: fewest passes, then fewest K slices
    best, why = None, None
    K0 = cfg.pe.K0
    kblocks = cdiv(L.K, K0)
    cands = sorted(((nk * nb, nk, nb) for nk in range(1, kblocks + 1) for nb in range(1, L.P + 1)
                    if nk * nb <= max_passes))
    for _, nk, nb in cands:
        Kp = cdiv(kblocks, nk) * K0
        Pp = cdiv(L.P, nb)
        if (nk > 1 and cdiv(L.K, Kp) != nk) or (nb > 1 and cdiv(L.P, Pp) != nb):
            continue                                           # same as a smaller split
        g = _geometry(L, m, min(Kp, L.K), Pp, cfg, step, pe_stride, L.R, L.S)
        err = _check_pe_limits(L, m, g, cfg, pe_stride)
        if err:
            why = why or err
            if "K1" in err or "weights" in err:
                continue                                       # a K split may help
            raise CompileError(f"{L.name} ({m.short()}): {err}")
        err = _pass_fits(L, m, cfg, g, Kp, Pp, step, pe_stride)
        if err:
            why = err
            continue
        best = (nk, nb, Kp, Pp)
        break
    if best is None:
        raise CompileError(f"{L.name} ({m.short()}): no split into <= {max_passes} passes fits: {why}")
    nk, nb, Kp, Pp = best
    passes = []
    for ki in range(nk):
        k_lo, k_hi = ki * Kp, min(L.K, (ki + 1) * Kp)
        for bi in range(nb):
            p_lo, p_hi = bi * Pp, min(L.P, (bi + 1) * Pp)
            passes.append(_build_pass(len(passes), L, m, cfg, (k_lo, k_hi), (p_lo, p_hi), step,
                                      pe_stride, tensors, dry=True))
    if tensors is not None:
        sel = range(len(passes)) if preload_passes is None else preload_passes
        for i in sel:
            preload(passes[i], cfg, tensors)
    return passes


def slice_pass(ps: Pass, cfg: ChipletConfig, rows: int, tensors=None) -> Pass:
    """The first ``rows`` output rows of pass ``ps`` (same layer, mapping, K range), compiled
    as a pass of their own: a P sub-region of the layer (issue 17's "per-pass slices", for
    RTL runs that cannot afford the whole pass).  ``slice_of`` records the pass it cuts."""
    cfg = (cfg or ChipletConfig()).validate()
    p_lo, p_hi = ps.p_range
    if not 1 <= rows:
        raise CompileError(f"slice rows = {rows} must be >= 1")
    if rows >= p_hi - p_lo:
        return ps
    out = _build_pass(ps.index, ps.layer, ps.mapping, cfg, ps.k_range, (p_lo, p_lo + rows), ps.step,
                      ps.pe_stride, tensors, dry=True)
    out.slice_of = (ps.index, tuple(ps.p_range))
    if tensors is not None:
        preload(out, cfg, tensors)
    return out


def _pass_fits(L, m, cfg, g, Kp, Pp, step, pe_stride) -> str | None:
    """Global PE words, command fields and program length of the largest pass."""
    try:
        ps = _build_pass(-1, L, m, cfg, (0, min(Kp, L.K)), (0, min(Pp, L.P)), step, pe_stride, None,
                         dry=True)
    except CompileError as err:
        return str(err)
    if len(ps.program.words) > cfg.prog_depth:
        return f"program of {len(ps.program.words)} instructions exceeds prog_depth {cfg.prog_depth}"
    return None


def _build_pass(index, L: ConvLayer, m: PEMapping, cfg: ChipletConfig, k_range, p_range, step,
                pe_stride, tensors, dry=False) -> Pass:
    pe = cfg.pe
    K0, C0 = pe.K0, pe.C0
    nm = node_map(cfg)
    k_lo, k_hi = k_range
    p_lo, p_hi = p_range
    g = _geometry(L, m, k_hi - k_lo, p_hi - p_lo, cfg, step, pe_stride, L.R, L.S)
    # padded image (after subsampling by `step`): Hi x Wi
    Hi = cdiv(L.H + 2 * L.pad, step)
    Wi = cdiv(L.W + 2 * L.pad, step)
    order = snake_order(cfg)
    # logical PEs: c innermost, then k, q, p
    jobs, logical = [], 0
    for p in range(m.pp):
        for q in range(m.qp):
            for k in range(m.kp):
                for c in range(m.cp):
                    logical_id = logical
                    logical += 1
                    rows = (p_lo + p * g.ppe, min(p_lo + (p + 1) * g.ppe, p_hi))
                    cols = (q * g.qpe, min((q + 1) * g.qpe, L.Q))
                    kr = (k_lo + k * g.kpe, min(k_lo + (k + 1) * g.kpe, k_hi))
                    cr = (c * g.cpe, min((c + 1) * g.cpe, L.C))
                    if rows[1] <= rows[0] or cols[1] <= cols[0] or kr[1] <= kr[0]:
                        continue                       # nothing to compute (whole chain idle)
                    tiles = [(r0, c0) for r0 in range(rows[0], rows[1], g.P1)
                             for c0 in range(cols[0], cols[1], g.Q1)]
                    if m.cp == 1:
                        role = Role.ONLY
                    else:
                        role = Role.FIRST if c == 0 else Role.LAST if c == m.cp - 1 else Role.MIDDLE
                    pcfg = PEConfig(R=L.R, S=L.S, C1=g.C1, K1=g.K1, P1=g.P1, Q1=g.Q1, H_in=g.H_in,
                                    W_in=g.W_in, stride=pe_stride, pad_top=0, pad_left=0, role=role,
                                    relu=bool(tensors["relu"]) if tensors else False,
                                    shift=int(tensors["shift"]) if tensors else 0)
                    pidx = order[logical_id]
                    jobs.append(PEJob(pidx, nm.pes[pidx], k, c, p, q, -1, pcfg, len(tiles), tiles,
                                      kr, cr, None, None))
    if not jobs:
        raise CompileError(f"{L.name}: pass {index} has no work")
    if len(jobs) > 32:
        raise CompileError(f"{len(jobs)} PEs exceed the controller's 32-node WAIT mask")
    byk = {(j.k, j.c, j.p, j.q): j for j in jobs}
    for j in jobs:
        up, dn = byk.get((j.k, j.c - 1, j.p, j.q)), byk.get((j.k, j.c + 1, j.p, j.q))
        j.psum_src = up.node if up else None
        j.psum_dest = dn.node if dn else None
    # band of the GPE image: rows needed by the pass's tiles
    r_first = p_lo * pe_stride
    r_last = max(t[0] * pe_stride + g.H_in for j in jobs for t in j.tiles)
    Hb = r_last - r_first
    Wb = max(Wi, max(t[1] * pe_stride + g.W_in for j in jobs for t in j.tiles))
    gblocks = m.cp * g.C1
    in_words = gblocks * Hb * Wb
    # multicast sets: same (c, p, q)
    sets, by_key = [], {}
    for j in jobs:
        key = (j.c, j.p, j.q)
        if key not in by_key:
            by_key[key] = McastSet(len(sets), [], [], j.c * g.C1,
                                   [((r0 * pe_stride) - r_first, c0 * pe_stride) for r0, c0 in j.tiles])
            sets.append(by_key[key])
        s = by_key[key]
        s.members.append(j.pe)
        s.nodes.append(j.node)
        j.set_id = s.set_id
    # output window: LAST/ONLY PEs, in job order
    out_base = in_words
    addr = out_base
    for j in jobs:
        if j.role in (Role.LAST, Role.ONLY):
            j.out_base = addr
            j.out_tile_stride = g.K1 * g.P1 * g.Q1
            addr += j.ntiles * j.out_tile_stride
    out_words = addr - out_base
    if addr > cfg.words:
        raise CompileError(f"Global PE buffer: input {in_words} + output {out_words} words exceed "
                           f"{cfg.words} words")
    if addr >= 1 << 16 or Hb * Wb >= 1 << FIELD:
        raise CompileError("Global PE address exceeds the 16-bit command / out_base fields")
    for j in jobs:
        if j.ntiles >= 1 << 16:
            raise CompileError(f"ntiles = {j.ntiles} exceeds the 16-bit ntiles register")
    # ---- program ----------------------------------------------------------------------
    ops = []
    tile_w = min(cfg.max_tile, (1 << TILE_BITS) - 1)
    ops.append(("tmo", (1 << cfg.timeout_bits) - 1))
    ops.append(("recv", GpeCmd(OP_RECV, TAG_RECV_IN, a=0, cnt=(in_words, 1, 1),
                               mask_nodes=nm.mask([nm.gateway]))))
    ops.append(("bar", BAR_PRELOAD))     # host: send the input band now (the window is open)
    ops.append(("wait", [], True))
    # groups: sets with > 1 member, group = rank mod groups
    multi = [s for s in sets if len(s.members) > 1]
    for r, s in enumerate(multi):
        s.group = r % cfg.groups
    table = [None] * cfg.groups

    def group_op(s):
        if table[s.group] != s.set_id:
            table[s.group] = s.set_id
            ops.append(("group", GpeCmd(OP_GROUP, TAG_GROUP, mask_nodes=nm.mask(s.nodes), gidx=s.group)))

    for s in multi[:cfg.groups]:
        group_op(s)
    lasts = [j for j in jobs if j.role in (Role.LAST, Role.ONLY)]
    ops.append(("recv", GpeCmd(OP_RECV, TAG_RECV_OUT, a=out_base, cnt=(out_words, 1, 1),
                               mask_nodes=nm.mask([j.node for j in lasts]))))
    for j in sorted(jobs, key=lambda j: -j.c):          # downstream PEs first
        j.registers = pk.pe_node_registers(j.cfg, j.ntiles, psum_dest=j.psum_dest or (0, 0),
                                           out_dest=nm.gpe, out_base=j.out_base,
                                           out_tile_stride=j.out_tile_stride, done_dest=nm.ctrl)
        for reg, val in j.registers:
            ops.append(("cfg", j.node, reg, val))
    ntmax = max(len(s.tiles) for s in sets)
    for t in range(ntmax):
        for s in sets:
            if t >= len(s.tiles):
                continue
            r0, c0 = s.tiles[t]
            a = (s.gblock * Hb + r0) * Wb + c0
            cmd = GpeCmd(OP_SEND, TAG_SEND, a=a, cnt=(g.W_in, g.H_in, g.C1), stride=(1, Wb, Hb * Wb),
                         tile=min(tile_w, g.W_in), set_id=s.set_id, tile_idx=t)
            if s.group >= 0:
                group_op(s)
                cmd.groups = 1 << s.group
            else:
                cmd.ucast, cmd.unode = True, s.nodes[0]
            ops.append(("send", cmd))
    ops.append(("wait", [j.node for j in jobs], True))
    ops.append(("send", GpeCmd(OP_SEND, TAG_READBACK, a=out_base, cnt=(out_words, 1, 1),
                               stride=(1, 0, 0), tile=tile_w, ucast=True, unode=nm.gateway)))
    ops.append(("wait", [], True))
    ops.append(("end",))
    prog = assemble_ops(ops, cfg)
    # ---- output map: beat b of tile t in stream order (k1, p, q), pool = 0 ---------------
    out_index = np.full((out_words, K0), -1, dtype=np.int64)
    if index >= 0:
        PQ = L.P * L.Q
        k1, pp_, qq, k0 = np.meshgrid(np.arange(g.K1), np.arange(g.P1), np.arange(g.Q1),
                                      np.arange(K0), indexing="ij")
        b_rel = (k1 * g.P1 + pp_) * g.Q1 + qq
        for j in lasts:
            rows_hi = min(p_lo + (j.p + 1) * g.ppe, p_hi)
            cols_hi = min((j.q + 1) * g.qpe, L.Q)
            kk = j.k_range[0] + k1 * K0 + k0
            for t, (r0, c0) in enumerate(j.tiles):
                prow, qcol = r0 + pp_, c0 + qq
                ok = (prow < rows_hi) & (qcol < cols_hi) & (kk < j.k_range[1])
                b = j.out_base - out_base + t * j.out_tile_stride + b_rel
                out_index[b[ok], k0[ok]] = (kk * PQ + prow * L.Q + qcol)[ok]
    useful = int((out_index >= 0).sum()) * L.C * L.R * L.S
    ps = Pass(index, L, m, k_range, p_range, step, pe_stride, r_first, Hb, Wb, gblocks, in_words,
              out_base, out_words, jobs, sets, ops, prog, {}, [], out_index, useful)
    return ps


# ----------------------------------------------------------------------------------------
def gpe_image(L: ConvLayer, X: np.ndarray, step: int) -> np.ndarray:
    """Padded (materialised) input, subsampled by ``step``: [C, Hi, Wi] int8."""
    Xp = np.zeros((L.C, L.H + 2 * L.pad, L.W + 2 * L.pad), dtype=np.int8)
    Xp[:, L.pad:L.pad + L.H, L.pad:L.pad + L.W] = X
    return Xp[:, ::step, ::step]


def band_words(ps: Pass, cfg: ChipletConfig, X: np.ndarray) -> np.ndarray:
    """The pass's input band as Global PE words: [in_words, C0] int8 (layout [g][h][w])."""
    L, C0 = ps.layer, cfg.pe.C0
    img = gpe_image(L, X, ps.step)
    C1 = ps.gblocks // ps.mapping.cp
    cpe = cdiv(L.C, ps.mapping.cp)
    out = np.zeros((ps.gblocks, C0, ps.Hb, ps.Wb), dtype=np.int8)
    rows = img[:, ps.band_row0:ps.band_row0 + ps.Hb, :ps.Wb]
    for ci in range(ps.mapping.cp):
        for c1 in range(C1):
            for c0 in range(C0):
                ch = ci * cpe + c1 * C0 + c0
                if c1 * C0 + c0 < cpe and ch < L.C:
                    out[ci * C1 + c1, c0, :rows.shape[1], :rows.shape[2]] = rows[ch]
    return out.transpose(0, 2, 3, 1).reshape(-1, C0)


def word_int(lanes) -> int:
    return int.from_bytes(np.asarray(lanes, dtype=np.int8).astype(np.uint8).tobytes(), "little")


def pe_weights(ps: Pass, j: PEJob, W: np.ndarray, K0: int, C0: int) -> np.ndarray:
    """PE j's weights [K1*K0, C1*C0, R, S] (zero-padded lanes)."""
    c = j.cfg
    out = np.zeros((c.K1 * K0, c.C1 * C0, c.R, c.S), dtype=np.int8)
    kl, kh = j.k_range
    cl, ch = j.c_range
    out[:kh - kl, :ch - cl] = W[kl:kh, cl:ch]
    return out


def pe_ppu(j: PEJob, bias, scale, K0: int):
    n = j.cfg.K1 * K0
    b, s = np.zeros(n, np.int64), np.zeros(n, np.int64)
    kl, kh = j.k_range
    b[:kh - kl], s[:kh - kl] = bias[kl:kh], scale[kl:kh]
    return b, s


def preload(ps: Pass, cfg: ChipletConfig, T: dict) -> Pass:
    """Fill ``ps.preload_pe`` / ``ps.preload_input`` from the layer tensors."""
    from tessera.golden.pe import ppu_beats, weight_beats
    pe = cfg.pe
    for j in ps.jobs:
        Wj = pe_weights(ps, j, T["W"], pe.K0, pe.C0)
        pkts = pk.wload_packets(weight_beats(pe, j.cfg, Wj), pe.K0, cfg.max_tile)
        if j.role in (Role.LAST, Role.ONLY):
            b, s = pe_ppu(j, T["bias"], T["scale"], pe.K0)
            pkts += pk.pload_packets(ppu_beats(pe, j.cfg, b, s), pe.K0, cfg.max_tile)
        ps.preload_pe[j.node] = pkts
    words = band_words(ps, cfg, T["X"])
    hl = out_header_layout()
    for a in range(0, len(words), cfg.max_tile):
        chunk = words[a:a + cfg.max_tile]
        ps.preload_input.append([pack_fields(hl, kind=KIND_OUT, addr=a, nwords=len(chunk))]
                                + [word_int(w) for w in chunk])
    return ps
