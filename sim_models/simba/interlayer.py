"""Activation movement between layers (seed paper Sec. 4.1 / Fig. 9: a layer's outputs are the
next layer's inputs; Sec. 5 cross-layer pipelining).

Each layer's output-activation blocks (k, p, q) sit where the layer wrote them (``oa_homes``) and
the next layer wants its input blocks (c, rows, cols incl. halo) in its ``ia_homes``.  The bytes
each OA block contributes to each IA block (channel, row and column overlaps; a pooling layer in
between scales rows/columns by producer P / consumer H) travel OA home -> IA home along XY
routes; link and Global PE port loads give the transfer time, hop counts its latency:

    t_move  = max(most loaded NoP link / link bw, busiest Global PE port / NoC bw)
    latency = NoC (GPE -> NoP router, both ends) + NoP hops x hop latency of the longest route

Outputs are written as tiles complete, so the move overlaps the producer: the layer sequence is
charged ``latency + max(t_move / producer steps, t_move - producer latency)``.  ``producers``
gives ResNet's data flow (branch1 and branch2a read the block input; fc1000 the last block).
``ProducerHomes`` is the other start state for one layer run alone (a sensitivity for the
per-layer figures): its input blocks are read where the producer wrote its outputs (each IA block
sourced from the producer's OA homes in proportion to the bytes it takes from each), so the
redistribution is part of the layer's own input delivery (pipelined with its compute, model.py)
instead of overlapping the producer.
``arch.interlayer_moves`` (stop 30): 1 = the overlap above (default), 2 = the move starts after the
producer finishes (Sec. 4.1: each layer compiled and run on its own), 0 = no move (Sec. 4.1:
measurements start with the inputs in the Global PEs).
Left out: the residual additions (element-wise, in the Global PEs) and their operand moves,
contention between the move and the producer's own traffic.
"""
from __future__ import annotations

import math

import numpy as np

from .arch import Arch
from .layers import Layer
from .model import LayerResult, build_structure
from .topology import chiplet_noc, mesh


def _offsets(ext):
    o = np.concatenate([[0], np.cumsum(ext)])
    return [(int(o[i]), int(o[i + 1])) for i in range(len(ext))]


def _overlap(a, b):
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _structure(layer: Layer, arch: Arch, r: LayerResult):
    mp = r.mapping
    return build_structure(layer, arch, mp.kc, mp.cc, mp.pc, mp.qc, r.binding, r.placement,
                           mp.k_ext, mp.p_ext)


def move_bytes(prod: Layer, pres: LayerResult, cons: Layer, cres: LayerResult, arch: Arch) -> dict:
    """{(src chiplet, dst chiplet): bytes} to move prod's outputs into cons's input homes."""
    ps, cs = _structure(prod, arch, pres), _structure(cons, arch, cres)
    ke, _, pe_, qe = ps.extras["ext"]
    _, ce, cpe, cqe = cs.extras["ext"]
    kr, pr, qr = _offsets(ke), _offsets(pe_), _offsets(qe)
    cr, cpr, cqr = _offsets(ce), _offsets(cpe), _offsets(cqe)
    sp, sq = prod.P / cons.H, prod.Q / cons.W          # pooling between the layers
    # consumer IA block -> producer output rows/cols it reads (halo incl., padding excluded)
    def rows(rng, stride, R, pad, size, scale):
        lo = max(0, rng[0] * stride - pad)
        hi = min(size, (rng[1] - 1) * stride - pad + R)
        return (int(math.floor(lo * scale)), int(math.ceil(hi * scale)))
    out: dict = {}
    for (ci, pi, qi), homes in cs.ia_homes.items():
        crng = cr[ci]
        rr = rows(cpr[pi], cons.stride, cons.R, cons.pad, cons.H, sp)
        cc_ = rows(cqr[qi], cons.stride, cons.S, cons.pad, cons.W, sq)
        for (ki, ppi, pqi), ohomes in ps.oa_homes.items():
            b = _overlap(kr[ki], crng) * _overlap(pr[ppi], rr) * _overlap(qr[pqi], cc_) * arch.act_bytes
            if b <= 0:
                continue
            for s, fs in ohomes:
                for d, fd in homes:
                    if s != d:
                        out[(s, d)] = out.get((s, d), 0.0) + b * fs * fd
    return out


def link_loads(moves: dict, arch: Arch) -> np.ndarray:
    m = mesh(arch.mesh_rows, arch.mesh_cols)
    load = np.zeros(len(m.links))
    for (s, d), b in moves.items():
        load += b * m.path[s, d]
    return load


def move_time(moves: dict, arch: Arch) -> tuple[float, float]:
    """(bandwidth time, latency) of a set of moves, PE cycles."""
    if not moves:
        return 0.0, 0.0
    m = mesh(arch.mesh_rows, arch.mesh_cols)
    load = link_loads(moves, arch)
    out_p, in_p = {}, {}
    for (s, d), b in moves.items():
        out_p[s] = out_p.get(s, 0.0) + b
        in_p[d] = in_p.get(d, 0.0) + b
    t = max(load.max() / arch.nop_link_bytes_per_cycle,
            max(max(out_p.values()), max(in_p.values())) / arch.noc_bytes_per_pe_cycle)
    noc = chiplet_noc(arch)
    far = max(int(m.hops[s, d]) for s, d in moves)
    lat = 2 * noc.gpe_to_nop * arch.noc_hop_pe_cycles + far * arch.nop_hop_cycles
    return float(t), float(lat)


def steps_of(layer: Layer, r: LayerResult) -> int:
    mp = r.mapping
    ppe = math.ceil(math.ceil(layer.P / mp.pc) / mp.pp)
    qpe = math.ceil(math.ceil(layer.Q / mp.qc) / mp.qp)
    return math.ceil(ppe / min(mp.p1, ppe)) * math.ceil(qpe / min(mp.q1, qpe))


def transfer_cycles(prod: Layer, pres: LayerResult, cons: Layer, cres: LayerResult, arch: Arch) -> float:
    """Cycles the prod -> cons activation move adds to the layer sequence (module doc)."""
    if arch.interlayer_moves == 0:
        return 0.0
    t, lat = move_time(move_bytes(prod, pres, cons, cres, arch), arch)
    if t == 0:
        return 0.0
    if arch.interlayer_moves == 2:
        return lat + t                    # after the producer (layers run one at a time, Sec. 4.1)
    return lat + max(t / steps_of(prod, pres), t - pres.latency_cycles)


def producers(layers: list[Layer]) -> list[int | None]:
    """Index of the layer whose output each layer reads (None: the network input).  branch1 and
    branch2a read the block input (the previous block's branch2c, or conv1 through its pool)."""
    out, block_out, last = [], None, {}
    for i, l in enumerate(layers):
        br = l.name.split("_")[1] if "_" in l.name else ""
        if br in ("branch1", "branch2a") or l.name == "fc1000":
            out.append(block_out)
        elif br == "branch2b":
            out.append(last.get("branch2a"))
        elif br == "branch2c":
            out.append(last.get("branch2b"))
        else:
            out.append(i - 1 if i > 0 else None)
        last[br] = i
        if br == "branch2c" or l.name == "conv1":
            block_out = i
    return out


class ProducerHomes:
    """``placement`` for model.build_structure / mapper.search: the consumer's IA blocks live
    where ``prod`` (run as ``pres``) wrote its outputs (module doc)."""

    def __init__(self, prod: Layer, pres: LayerResult, arch: Arch):
        self.prod, self.pres = prod, pres
        ps = _structure(prod, arch, pres)
        ke, _, pe_, qe = ps.extras["ext"]
        self.kr, self.pr, self.qr = _offsets(ke), _offsets(pe_), _offsets(qe)
        self.oa = ps.oa_homes

    def __repr__(self):
        return f"producer({self.prod.name})"

    def __call__(self, cons: Layer, ext, ia_keys, dests):
        ce, cpe, cqe = ext
        cr, cpr, cqr = _offsets(ce), _offsets(cpe), _offsets(cqe)
        prod = self.prod
        sp, sq = prod.P / cons.H, prod.Q / cons.W

        def rows(rng, stride, R, pad, size, scale):
            lo = max(0, rng[0] * stride - pad)
            hi = min(size, (rng[1] - 1) * stride - pad + R)
            return (int(math.floor(lo * scale)), int(math.ceil(hi * scale)))
        homes = []
        for (ci, pi, qi), d in zip(ia_keys, dests):
            rr = rows(cpr[pi], cons.stride, cons.R, cons.pad, cons.H, sp)
            cc_ = rows(cqr[qi], cons.stride, cons.S, cons.pad, cons.W, sq)
            acc = {}
            for (ki, ppi, pqi), oh in self.oa.items():
                b = _overlap(self.kr[ki], cr[ci]) * _overlap(self.pr[ppi], rr) * _overlap(self.qr[pqi], cc_)
                for h, f in oh:
                    if b * f > 0:
                        acc[h] = acc.get(h, 0.0) + b * f
            tot = sum(acc.values())
            homes.append([(h, v / tot) for h, v in sorted(acc.items())] if tot > 0 else [(d[0], 1.0)])
        return homes
