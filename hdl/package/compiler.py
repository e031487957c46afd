"""Package layer compiler: a conv layer + a Simba package mapping -> one program per chiplet.

Simba §3.3 (mapper -> binder -> "configuration binaries for each chiplet"), Listing 1's
package level: the mapping's chiplet-level spatial split ``kc x cc x pc x qc`` (K, C, P, Q),
per-chiplet extents from ``sim_models/simba/model.py`` :func:`build_structure` (uniform, or
the non-uniform K / P extents of §5.1 when the mapping carries them), the binder's logical ->
physical chiplet order and the data homes of the IA / OA blocks (placement ``local``: an IA
block lives in the Global PE of one of its consumers, an OA block on its producer).  Package
issue 18, contract ``package_contract.md`` item 5.

Per logical chiplet i = (k, c, p, q) the compiler cuts a **sub-layer**: output channels
``[k_lo, k_hi)``, input channels ``[c_lo, c_hi)``, output rows ``[p_lo, p_hi)`` and columns
``[q_lo, q_hi)``, its input = the rows/columns of the *padded* input it reads (so the sub-layer
has pad 0 and exactly the layer's arithmetic on that slice), and compiles it with the chiplet
compiler (``hdl/chiplet/compiler.py`` :func:`compile_layer` + :func:`preload`, called, not
copied) under the mapping's PE-level part (kp, cp, pp, qp, P1, Q1).  Then, across chiplets:

* multicast: chiplets with the same (c, p, q) read the same input tiles and run the same PE
  sets (same nodes, same tiles: checked); the IA block's home Global PE sends every set's
  tiles once, to the set's node mask on every consumer chiplet (chiplet mask); the other
  consumers hold no input;
* reduction chains across chiplets (cc > 1): the PE chains of chiplets c = 0..cc-1 with the
  same (k, p, q) form one chain of cc*cp PEs (roles FIRST .. MIDDLE .. LAST re-assigned); the
  last PE of chiplet c sends its partial sums to the first PE of chiplet c+1 (hierarchical
  ``psum_dest``); only chiplet cc-1's LAST PEs have PPU data and outputs;
* outputs: the LAST PEs' OUT packets go to the OA block's home Global PE (``out_dest``,
  hierarchical); each home holds its windows after its input band.

Program of chiplet d (contract item 5; ``BAR`` = the package barrier over the NoP):
TMO; [IA home: RECV input window from the host]; ``BAR 1`` (host cue: every input window is
open, send the input blocks); [home: WAIT G]; [OA home: RECV each output window, producers =
the LAST nodes on the producing chiplet]; CFG its PEs (downstream first), START; ``BAR 2``
(every PE of the package is configured before any DATA crosses the NoP); [IA home: GROUP +
SEND tile-major, multicast over chiplets]; WAIT its PEs' DONEs (+ G when it has commands in
flight); [OA home: SEND each output window unicast to the host; WAIT G]; [``BAR 3`` when
``final_barrier``]; END.  Without the final barrier (default) each chiplet's ``done`` is its
own completion time (the tail Simba §5.1 evens out); the host's layer end is the last done.
Decision (issue 18 review): the barrier stays off for a single layer.  It is Simba's layer
sync, needed only before a *next* layer; it hides the per-chiplet completion times the issue
reports, and on the RTL it costs 90-129 cycles at the end of a layer (bench/package_layer.py
``final_barrier``: BAR 3's ARRIVEs queue behind the read-back data draining to the host on
chiplet 0).  ``final_barrier=True`` compiles it (the package model predicts it too).

Left out: several passes per chiplet (a slice that does not fit one chiplet pass raises
:class:`CompileError` naming the limit), IA blocks straddling Global PEs, pooling, C-split
non-uniform extents.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tessera.hdl.chiplet import packets as pk
from tessera.hdl.chiplet.asm import Program, assemble_ops
from tessera.hdl.chiplet.compiler import (TAG_GROUP, TAG_READBACK, TAG_RECV_IN, TAG_RECV_OUT,
                                          TAG_SEND, CompileError, GpeCmd, PEMapping, compile_layer,
                                          preload)
from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.hdl.global_pe.packets import OP_GROUP, OP_RECV, OP_SEND, TILE_BITS
from tessera.hdl.package.config import PackageConfig
from tessera.hdl.pe.config import Role
from tessera.params import ParamError
from tessera.sim_models.simba.layers import Layer

__all__ = ["CompileError", "target_of", "PkgCmd", "ChipletProgram", "PackagePass",
           "compile_package", "sub_tensors", "hier_dest", "small_package", "BAR_INPUT", "BAR_CONFIG", "BAR_DONE"]

#: package barrier ids: inputs may be sent / every PE configured / (optional) layer end
BAR_INPUT, BAR_CONFIG, BAR_DONE = 1, 2, 3


def hier_dest(chiplet_xy, node_xy) -> int:
    """Register value of a hierarchical node address (psum_dest / out_dest / done_dest):
    ``packets.dest_value`` with a chiplet (the RTL's encoding, hdl/package/config.py)."""
    try:
        return pk.dest_value(tuple(node_xy), tuple(chiplet_xy))
    except ValueError as e:
        raise CompileError(str(e)) from None


def target_of(pcfg: PackageConfig) -> PackageConfig:
    """Validated package configuration (one-line CompileError on a bad one)."""
    try:
        return pcfg.validate()
    except ParamError as e:
        raise CompileError(str(e).splitlines()[0]) from None


def _xy(pcfg, c):
    return pcfg.chiplets()[c]


@dataclass
class PkgCmd(GpeCmd):
    """A Global PE command with a chiplet mask (multicast) / chiplet of the unicast node."""
    chip_mask: int = 1
    uchip: tuple = (0, 0)

    def fields(self, mesh_x: int) -> dict:
        d = super().fields(mesh_x)
        d["uaddr"]["chiplet"] = {"x": self.uchip[0], "y": self.uchip[1]}
        d["mask"]["chiplets"] = self.chip_mask
        return d


@dataclass
class OutWindow:
    """An output window in a Global PE: words [base, base+n) written by ``producer``'s LAST
    PEs; ``out_index`` [n, K0] -> flat layer output index k*P*Q + p*Q + q, or -1."""
    producer: int
    base: int
    n: int
    nodes: list
    out_index: np.ndarray


@dataclass
class ChipletProgram:
    chiplet: int                 # physical index c = cy*ckx + cx
    xy: tuple
    logical: int | None          # logical chiplet whose slice it computes (None: idle)
    kcpq: tuple | None
    ranges: dict                 # k/c/p/q -> (lo, hi) in layer coordinates
    sub: Layer | None
    ps: object | None            # the chiplet compiler's Pass of the sub-layer (roles patched)
    home_of: tuple | None = None         # IA block (c, p, q) whose input this Global PE holds
    consumers: list = field(default_factory=list)   # chiplets fed by that block
    windows: list = field(default_factory=list)     # OutWindows held here
    ops: list = field(default_factory=list)
    program: Program | None = None
    preload_pe: dict = field(default_factory=dict)  # node -> [packets]
    preload_input: list = field(default_factory=list)
    chain: tuple = (0, 1)        # (position of this chiplet in its reduction chain, length)

    @property
    def idle(self) -> bool:
        return self.logical is None and self.home_of is None and not self.windows


@dataclass
class PackagePass:
    layer: Layer
    mapping: object              # sim_models.simba.model.Mapping
    target: PackageConfig
    phys: tuple                  # logical -> physical chiplet
    chiplets: list               # ChipletProgram per physical chiplet (index = c)
    useful_macs: int
    final_barrier: bool = False

    def summary(self) -> str:
        act = [c for c in self.chiplets if c.logical is not None]
        return (f"{self.layer.name}: {self.mapping.short()} on {len(act)} of "
                f"{self.target.nchiplets} chiplets ({self.target.ckx}x{self.target.cky}), binding "
                f"{list(self.phys)}, IA homes "
                f"{[c.chiplet for c in self.chiplets if c.home_of is not None]}, "
                f"{sum(len(c.program.words) for c in self.chiplets)} instructions")


# ----------------------------------------------------------------------------------------
def _cum(ext):
    out, a = [], 0
    for e in ext:
        out.append((a, a + int(e)))
        a += int(e)
    return out


def sub_layer(L: Layer, ranges: dict, name: str) -> Layer:
    """The pad-0 sub-layer of a (K, C, P, Q) slice: its input is the slice's window of the
    padded input."""
    (kl, kh), (cl, ch), (pl, ph), (ql, qh) = (ranges[d] for d in "kcpq")
    return Layer(name, C=ch - cl, K=kh - kl, R=L.R, S=L.S, H=(ph - pl - 1) * L.stride + L.R,
                 W=(qh - ql - 1) * L.stride + L.S, stride=L.stride, pad=0)


def sub_tensors(L: Layer, T: dict, ranges: dict) -> dict:
    """Tensors of the sub-layer of ``ranges`` (padded-input window, weight/PPU slices)."""
    (kl, kh), (cl, ch), (pl, ph), (ql, qh) = (ranges[d] for d in "kcpq")
    Xp = np.zeros((L.C, L.H + 2 * L.pad, L.W + 2 * L.pad), np.int8)
    Xp[:, L.pad:L.pad + L.H, L.pad:L.pad + L.W] = T["X"]
    r0, c0 = pl * L.stride, ql * L.stride
    H, W = (ph - pl - 1) * L.stride + L.R, (qh - ql - 1) * L.stride + L.S
    return {"X": Xp[cl:ch, r0:r0 + H, c0:c0 + W].copy(), "W": T["W"][kl:kh, cl:ch],
            "bias": T["bias"][kl:kh], "scale": T["scale"][kl:kh], "shift": T["shift"],
            "relu": T["relu"]}


def _set_sig(ps):
    return ([(tuple(s.nodes), tuple(s.tiles), s.gblock) for s in ps.sets], ps.Hb, ps.Wb,
            ps.in_words, [(j.node, j.cfg.C1, j.cfg.H_in, j.cfg.W_in, j.ntiles) for j in ps.jobs])


def small_package(ckx: int = 2, cky: int = 2, **chiplet) -> PackageConfig:
    """A package of small chiplets (2x2 PEs, small buffers) for fast simulation."""
    from tessera.hdl.pe.config import PEParams
    base = dict(nx=2, ny=2, words=512, banks=2, max_tile=8, out_words=8, psum_beats=2,
                prog_depth=512, timeout_bits=16)
    pe = chiplet.pop("pe", PEParams(wbuf_bytes=1024, ibuf_bytes=512, abuf_entries=32, ppu_depth=4))
    base.update(chiplet)
    return PackageConfig(chiplet=ChipletConfig(pe=pe, **base), ckx=ckx, cky=cky)


def compile_package(layer: Layer, mapping, target: PackageConfig | None = None, tensors=None,
                    binding="row-major", placement="local", arch=None,
                    final_barrier: bool = False) -> PackagePass:
    """Compile ``layer`` under the package ``mapping`` (``sim_models.simba.model.Mapping``,
    possibly non-uniform) for ``target``; ``binding``: the binder's order name or an explicit
    tuple of physical chiplets (logical order); ``tensors`` (``golden.chiplet.layer_tensors``)
    fill the preload."""
    from tessera.sim_models.simba.model import MappingError, build_structure
    from tessera.sim_models.simba.package_cycles import package_arch
    tg = target_of(target or small_package())
    cfg = tg.chiplet_cfg()
    L = layer
    mp = mapping
    arch = arch or package_arch(tg)
    if mp.n_chiplets > tg.nchiplets:
        raise CompileError(f"mapping {mp.short()} uses {mp.n_chiplets} chiplets; the package has {tg.nchiplets}")
    try:
        st = build_structure(L, arch, mp.kc, mp.cc, mp.pc, mp.qc, binding, placement, mp.k_ext, mp.p_ext)
    except (MappingError, ValueError) as e:
        raise CompileError(f"{L.name}: {e}") from None
    ke, ce, pe_, qe = st.extras["ext"]
    rk, rc, rp, rq = _cum(ke), _cum(ce), _cum(pe_), _cum(qe)
    pem = PEMapping(mp.kp, mp.cp, mp.pp, mp.qp, mp.p1, mp.q1)
    phys = tuple(int(x) for x in st.phys)
    chips = [ChipletProgram(c, _xy(tg, c), None, None, {}, None, None) for c in range(tg.nchiplets)]
    by_idx = {}
    for i, (ki, ci, pi, qi) in enumerate(st.idx.tolist()):
        d = phys[i]
        rg = {"k": rk[ki], "c": rc[ci], "p": rp[pi], "q": rq[qi]}
        sub = sub_layer(L, rg, f"{L.name}.chiplet{d}")
        try:
            Ts = sub_tensors(L, tensors, rg) if tensors is not None else None
            # a PE split larger than a (non-uniform / remainder) slice: the extra PEs idle
            pm_i = PEMapping(min(pem.kp, sub.K), min(pem.cp, sub.C), min(pem.pp, sub.P),
                             min(pem.qp, sub.Q), pem.p1, pem.q1)
            passes = compile_layer(sub, pm_i, cfg, Ts, preload_passes=[])   # shift/relu in the PE configs
        except CompileError as e:
            raise CompileError(f"{L.name} chiplet {d} slice K{rg['k']} C{rg['c']} P{rg['p']} "
                               f"Q{rg['q']}: {e}") from None
        if len(passes) != 1:
            raise CompileError(
                f"{L.name} chiplet {d} slice (C={sub.C} K={sub.K} P={sub.P} Q={sub.Q}) needs "
                f"{len(passes)} chiplet passes; the package compiler runs one pass per chiplet "
                f"(limits: PE weight/input buffers, {cfg.words}-word Global PE, prog_depth "
                f"{cfg.prog_depth})")
        ch = chips[d]
        ch.logical, ch.kcpq, ch.ranges, ch.sub, ch.ps = i, (ki, ci, pi, qi), rg, sub, passes[0]
        ch.chain = (ci, mp.cc)
        by_idx[(ki, ci, pi, qi)] = ch
    nm = node_map(cfg)
    # ---- reduction chains across chiplets: roles and hierarchical psum destinations ----
    for ch in chips:
        if ch.ps is None:
            continue
        ki, ci, pi, qi = ch.kcpq
        cps = [by_idx[(ki, x, pi, qi)].ps.mapping.cp for x in range(mp.cc)]
        cp, n_chain = cps[ci], sum(cps)
        for j in ch.ps.jobs:
            pos = sum(cps[:ci]) + j.c
            role = (Role.ONLY if n_chain == 1 else Role.FIRST if pos == 0 else
                    Role.LAST if pos == n_chain - 1 else Role.MIDDLE)
            j.cfg = replace(j.cfg, role=role)
            j.psum_chip = ch.xy if j.psum_dest is not None else None
            if j.c == cp - 1 and ci < mp.cc - 1:
                nxt = by_idx[(ki, ci + 1, pi, qi)]
                first = [x for x in nxt.ps.jobs if (x.k, x.c, x.p, x.q) == (j.k, 0, j.p, j.q)]
                if len(first) != 1:
                    raise CompileError(f"{L.name}: chain of chiplet {ch.chiplet} PE {j.pe} has no "
                                       f"successor on chiplet {nxt.chiplet}")
                j.psum_dest, j.psum_chip = first[0].node, nxt.xy
    # ---- IA homes: one Global PE per block, same PE sets on every consumer ----------
    for key, homes in st.ia_homes.items():
        if len(homes) != 1:
            raise CompileError(f"{L.name}: IA block {key} straddles Global PEs {homes}; one home "
                               "per block only")
        h = int(homes[0][0])
        cons = [by_idx[(k, *key)] for k in range(mp.kc)]
        sig = _set_sig(cons[0].ps)
        for c in cons[1:]:
            if _set_sig(c.ps) != sig:
                raise CompileError(f"{L.name}: chiplets {cons[0].chiplet} and {c.chiplet} share IA "
                                   f"block {key} but not its PE tiles (non-uniform mapping)")
        chips[h].home_of = key
        chips[h].consumers = [c.chiplet for c in cons]
    # ---- OA homes: windows after the home's input band ------------------------------
    used = [0] * tg.nchiplets
    for c in range(tg.nchiplets):
        if chips[c].home_of is not None:
            src = by_idx[(0, *chips[c].home_of)]
            used[c] = src.ps.in_words
    K0 = cfg.pe.K0
    PQ = L.P * L.Q
    for ch in sorted((c for c in chips if c.ps is not None and c.kcpq[1] == mp.cc - 1),
                     key=lambda c: c.logical):
        ki, ci, pi, qi = ch.kcpq
        homes = st.oa_homes[(ki, pi, qi)]
        if len(homes) != 1:
            raise CompileError(f"{L.name}: OA block {(ki, pi, qi)} straddles Global PEs")
        h = int(homes[0][0])
        ps = ch.ps
        base = used[h]
        used[h] += ps.out_words
        if used[h] > cfg.words or used[h] >= 1 << 16:
            raise CompileError(f"{L.name}: Global PE of chiplet {h}: input + output windows need "
                               f"{used[h]} words > {cfg.words}")
        lasts = [j for j in ps.jobs if j.role in (Role.LAST, Role.ONLY)]
        for j in lasts:
            j.out_base = j.out_base - ps.out_base + base
            j.out_chip = _xy(tg, h)
        # sub-layer flat index -> layer flat index
        sub = ch.sub
        oi = ps.out_index
        g = np.full(oi.shape, -1, np.int64)
        ok = oi >= 0
        kk, rem = np.divmod(oi[ok], sub.P * sub.Q)
        pp_, qq = np.divmod(rem, sub.Q)
        g[ok] = (kk + ch.ranges["k"][0]) * PQ + (pp_ + ch.ranges["p"][0]) * L.Q + qq + ch.ranges["q"][0]
        chips[h].windows.append(OutWindow(ch.chiplet, base, ps.out_words, [j.node for j in lasts], g))
    for ch in chips:
        if ch.ps is not None and ch.kcpq[1] != mp.cc - 1:
            ch.ps.out_index = np.full((0, K0), -1, np.int64)
    # ---- preload (after the role patch: PPU data only for LAST/ONLY PEs) ------------
    if tensors is not None:
        for ch in chips:
            if ch.ps is None:
                continue
            preload(ch.ps, cfg, sub_tensors(L, tensors, ch.ranges))
            ch.preload_pe = ch.ps.preload_pe
        for ch in chips:
            if ch.home_of is not None:
                ch.preload_input = by_idx[(0, *ch.home_of)].ps.preload_input
    # ---- programs -------------------------------------------------------------------
    for ch in chips:
        _program(ch, chips, by_idx, tg, cfg, nm, final_barrier)
    useful = sum(int((w.out_index >= 0).sum()) for c in chips for w in c.windows) * L.C * L.R * L.S
    return PackagePass(L, mp, tg, phys, chips, useful, final_barrier)


def _program(ch: ChipletProgram, chips, by_idx, tg: PackageConfig, cfg, nm, final_barrier):
    ops = [("tmo", (1 << cfg.timeout_bits) - 1)]
    (hcx, hcy), hnode = tg.host_addr
    host_chip = 1 << (hcy * tg.ckx + hcx)
    tile_w = min(cfg.max_tile, (1 << TILE_BITS) - 1)
    src = by_idx[(0, *ch.home_of)].ps if ch.home_of is not None else None
    if src is not None:
        ops.append(("recv", PkgCmd(OP_RECV, TAG_RECV_IN, a=0, cnt=(src.in_words, 1, 1),
                                   mask_nodes=nm.mask([hnode]), chip_mask=host_chip)))
    ops.append(("bar", BAR_INPUT))
    if src is not None:
        ops.append(("wait", [], True))
    for w in ch.windows:
        ops.append(("recv", PkgCmd(OP_RECV, TAG_RECV_OUT, a=w.base, cnt=(w.n, 1, 1),
                                   mask_nodes=nm.mask(w.nodes), chip_mask=1 << w.producer)))
    ps = ch.ps
    if ps is not None:
        for j in sorted(ps.jobs, key=lambda j: -j.c):          # downstream PEs first
            regs = pk.pe_node_registers(j.cfg, j.ntiles, psum_dest=j.psum_dest or (0, 0),
                                        out_dest=nm.gpe, out_base=j.out_base,
                                        out_tile_stride=j.out_tile_stride, done_dest=nm.ctrl)
            # a destination on another chiplet: hierarchical value (bit 31); on this chiplet
            # the single-chiplet value (bit 31 clear = this chiplet)
            pchip = getattr(j, "psum_chip", None) or ch.xy
            ochip = getattr(j, "out_chip", None) or ch.xy
            hier = {pk.REGS["psum_dest"]: (hier_dest(pchip, j.psum_dest or (0, 0)) if pchip != ch.xy
                                           else pk.dest_value(j.psum_dest or (0, 0))),
                    pk.REGS["out_dest"]: (hier_dest(ochip, nm.gpe) if ochip != ch.xy
                                          else pk.dest_value(nm.gpe)),
                    pk.REGS["done_dest"]: pk.dest_value(nm.ctrl)}
            j.registers = [(r, hier.get(r, v)) for r, v in regs]
            for reg, val in j.registers:
                ops.append(("cfg", j.node, reg, val))
    ops.append(("bar", BAR_CONFIG))
    if src is not None:
        cons = [chips[c] for c in ch.consumers]
        chip_mask = 0
        for c in cons:
            chip_mask |= 1 << c.chiplet
        g0 = src.jobs[0].cfg
        multi = [s for s in src.sets if len(s.members) > 1 or len(cons) > 1]
        for r, s in enumerate(multi):
            s.group = r % cfg.groups
        for s in src.sets:
            if s not in multi:
                s.group = -1
        table = [None] * cfg.groups

        def group_op(s):
            if table[s.group] != s.set_id:
                table[s.group] = s.set_id
                ops.append(("group", PkgCmd(OP_GROUP, TAG_GROUP, mask_nodes=nm.mask(s.nodes),
                                            gidx=s.group, chip_mask=chip_mask)))
        for s in multi[:cfg.groups]:
            group_op(s)
        ntmax = max(len(s.tiles) for s in src.sets)
        for t in range(ntmax):
            for s in src.sets:
                if t >= len(s.tiles):
                    continue
                r0, c0 = s.tiles[t]
                a = (s.gblock * src.Hb + r0) * src.Wb + c0
                cmd = PkgCmd(OP_SEND, TAG_SEND, a=a, cnt=(g0.W_in, g0.H_in, g0.C1),
                             stride=(1, src.Wb, src.Hb * src.Wb), tile=min(tile_w, g0.W_in),
                             set_id=s.set_id, tile_idx=t, chip_mask=chip_mask)
                if s.group >= 0:
                    group_op(s)
                    cmd.groups = 1 << s.group
                else:
                    cmd.ucast, cmd.unode, cmd.uchip = True, s.nodes[0], cons[0].xy
                ops.append(("send", cmd))
    busy = src is not None or bool(ch.windows)
    nodes = [j.node for j in ps.jobs] if ps is not None else []
    if nodes or busy:
        ops.append(("wait", nodes, busy))
    for w in ch.windows:
        ops.append(("send", PkgCmd(OP_SEND, TAG_READBACK, a=w.base, cnt=(w.n, 1, 1), stride=(1, 0, 0),
                                   tile=tile_w, ucast=True, unode=hnode, uchip=(hcx, hcy))))
        ops.append(("wait", [], True))
    if final_barrier:
        ops.append(("bar", BAR_DONE))
    ops.append(("end",))
    prog = assemble_ops(ops, cfg)
    if len(prog.words) > cfg.prog_depth:
        raise CompileError(f"chiplet {ch.chiplet}: program of {len(prog.words)} instructions exceeds "
                           f"prog_depth {cfg.prog_depth}")
    ch.ops, ch.program = ops, prog
