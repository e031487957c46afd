"""Golden model of a layer on the Simba package (Simba §3.1 package/NoP, §3.3 Listing 1
package level): the numpy reference and an executable model of a compiled package pass.

* :func:`reference` is ``golden/chiplet.py``'s (int8 conv, the PE contract's wrap-around
  accumulation and PPU): a layer split over chiplets must give the same bytes.
* :func:`run_package` executes a :class:`hdl.package.compiler.PackagePass` from its encoded
  artefacts only: per chiplet a Global PE golden model (``golden/global_pe.py``, with the
  package's chiplet mesh so that consumers are hierarchical: chiplet * nodes + node); the host
  input packets into each home's input RECV; the CFG register writes of every controller program
  (hierarchical ``psum_dest`` / ``out_dest`` decoded from the register values); every home's
  GROUP / SEND commands (chiplet masks) -> the DATA stream each PE of every chiplet receives;
  the PE tiles (``golden/pe.py``) along the reduction chains the ``psum_dest`` registers name,
  across chiplets; OUT beats into the RECV window of the Global PE ``out_dest`` names; each
  output window's readback SEND to the host.  :func:`check_package` compares what the host
  receives with :func:`reference` through each window's ``out_index``.

Left out: all timing (``sim_models/simba/package_cycles.py``), barriers (their order is the
program's: inputs land, every PE is configured, then DATA flows), credits and back-pressure.
"""
from __future__ import annotations

import numpy as np

from tessera.golden import global_pe as gpe_model
from tessera.golden import pe as gpe_pe
from tessera.golden.chiplet import _decode_loads, _lanes, _pe_weights, covered, layer_tensors, reference  # noqa: F401
from tessera.golden.chiplet import reduction_chain
from tessera.hdl.chiplet import packets as pk
from tessera.hdl.chiplet.compiler import TAG_READBACK, TAG_RECV_IN, TAG_RECV_OUT
from tessera.hdl.global_pe.packets import KIND_OUT, OP_RECV, OP_SEND, out_header_layout, unpack_fields
from tessera.hdl.pe.config import Role


def decode_dest(v: int) -> tuple:
    """Hierarchical register value -> ((chiplet x, y), (node x, y)) (encoding of
    ``packets.dest_value``: bit 31 = chiplet given, cx [19:16], cy [23:20]); ``None`` as
    the chiplet when bit 31 is clear (this chiplet)."""
    node = (v & 0xFF, (v >> 8) & 0xFF)
    if not v >> 31 & 1:
        return None, node
    return ((v >> 16) & 0xF, (v >> 20) & 0xF), node


def _cmd(c) -> gpe_model.Command:
    return gpe_model.Command(op=c.op, tag=c.tag, a=c.a, cnt=tuple(c.cnt), stride=tuple(c.stride),
                             tile=c.tile, groups=c.groups, ucast=c.ucast,
                             uaddr=(tuple(getattr(c, "uchip", (0, 0))), tuple(c.unode)),
                             mask=(getattr(c, "chip_mask", 1), c.mask_nodes), gidx=c.gidx)


def run_package(pp) -> dict:
    """Execute a compiled package pass (with preload).  Returns {"windows": {(chiplet,
    base): [n, K0] int8 read back by the host}, "completions": {chiplet: [...]}}."""
    from tessera.hdl.chiplet.config import node_map
    tg = pp.target
    cfg = tg.chiplet_cfg()
    pe = cfg.pe
    K0, C0 = pe.K0, pe.C0
    nm = node_map(cfg)
    g = {c.chiplet: gpe_model.GlobalPEModel(cfg.gpe) for c in pp.chiplets}
    gcfg = cfg.gpe
    cons_id = lambda chip_xy, node: (chip_xy[1] * tg.ckx + chip_xy[0]) * gcfg.nodes + node[1] * nm.mesh[0] + node[0]
    host = cons_id(*tg.host_addr)
    hl = out_header_layout()
    # phase 1: input RECVs (host -> home Global PEs)
    for ch in pp.chiplets:
        arr = []
        for p in ch.preload_input:
            h = unpack_fields(hl, p[0])
            if h["kind"] != KIND_OUT or h["nwords"] != len(p) - 1:
                raise ValueError("bad input preload packet")
            arr.append((host, h["addr"], list(p[1:])))
        for op in ch.ops:
            if op[0] == "recv" and op[1].tag == TAG_RECV_IN:
                c = _cmd(op[1])
                c.arrivals = arr
                g[ch.chiplet].step(c)
    # phase 2: CFG writes
    regs, started = {}, []
    for ch in pp.chiplets:
        for op in ch.ops:
            if op[0] == "cfg":
                key = (ch.chiplet, tuple(op[1]))
                regs.setdefault(key, {})[op[2]] = op[3]
                if op[2] == pk.REGS["start"]:
                    started.append(key)
    # phase 3: GROUP / SEND of the homes (not the readback)
    out_recv = {}
    for ch in pp.chiplets:
        for op in ch.ops:
            if op[0] == "recv" and op[1].tag == TAG_RECV_OUT:
                out_recv.setdefault(ch.chiplet, []).append(_cmd(op[1]))
            elif op[0] in ("group", "send") and op[1].tag != TAG_READBACK:
                g[ch.chiplet].step(_cmd(op[1]))
    # DATA streams per consumer over all Global PEs
    streams = {}
    for c, m in g.items():
        for consumer, sts in m.packets.items():
            streams.setdefault(consumer, []).extend(sts)
    R = pk.REGS
    jobs = {}
    for key in started:
        chip, node = key
        r = regs[key]
        pcfg = pk.unpack_pe_cfg(r[R["pe_cfg0"]] | r[R["pe_cfg1"]] << 32 | r[R["pe_cfg2"]] << 64)
        chp = pp.chiplets[chip]
        wb, pb = _decode_loads(chp.preload_pe.get(node, []), K0, C0)
        me = cons_id(tg.chiplets()[chip], node)
        st = streams.get(me, [])
        if len(st) != 1:
            raise ValueError(f"PE {node} of chiplet {chip} receives {len(st)} DATA streams (expected 1)")
        words = [w for t in st[0] for w in t.words]
        n = pcfg.C1 * pcfg.H_in * pcfg.W_in
        if len(words) != n * r[R["ntiles"]]:
            raise ValueError(f"chiplet {chip} PE {node}: {len(words)} DATA words for "
                             f"{r[R['ntiles']]} tiles of {n}")
        here = tg.chiplets()[chip]
        pdc, pdn = decode_dest(r[R["psum_dest"]])
        odc, odn = decode_dest(r[R["out_dest"]])
        pdc, odc = pdc or here, odc or here
        jobs[key] = dict(cfg=pcfg, ntiles=r[R["ntiles"]], words=words,
                         W=_pe_weights(pcfg, wb, K0, C0),
                         bias=np.array([pb.get((k // K0, k % K0), (0, 0))[0] for k in range(pcfg.K1 * K0)]),
                         scale=np.array([pb.get((k // K0, k % K0), (0, 0))[1] for k in range(pcfg.K1 * K0)]),
                         psum_dest=(pdc[1] * tg.ckx + pdc[0], pdn), out_chip=odc[1] * tg.ckx + odc[0],
                         out_node=odn, out_base=r[R["out_base"]], out_stride=r[R["out_tile_stride"]])
    # phase 4: chains (possibly across chiplets) -> OUT arrivals per Global PE
    arrivals = {}
    for key, j in jobs.items():
        if Role(int(j["cfg"].role)) not in (Role.FIRST, Role.ONLY):
            continue
        chain = reduction_chain(jobs, key)
        last = jobs[chain[-1]]
        if last["out_node"] != nm.gpe:
            raise ValueError(f"out_dest {last['out_node']} is not a Global PE")
        for t in range(j["ntiles"]):
            psum = None
            for x in chain:
                jj = jobs[x]
                c = jj["cfg"]
                n = c.C1 * c.H_in * c.W_in
                X = np.stack([_lanes(w, C0) for w in jj["words"][t * n:(t + 1) * n]])
                X = X.reshape(c.C1, c.H_in, c.W_in, C0).transpose(0, 3, 1, 2).reshape(c.C1 * C0, c.H_in, c.W_in)
                res = gpe_pe.run_tile(pe, c, jj["W"], X, psum_in=psum, bias=jj["bias"], scale=jj["scale"])
                if res["error"] != 0:
                    raise ValueError(f"PE {x} refuses its config: {res['error'].name}")
                psum = res.get("psum_out")
            src = cons_id(tg.chiplets()[chain[-1][0]], chain[-1][1])
            arrivals.setdefault(last["out_chip"], []).append(
                (src, last["out_base"] + t * last["out_stride"],
                 [int.from_bytes(b.astype(np.uint8).tobytes(), "little") for b in res["out"]]))
    # phase 5: output RECVs, readback SENDs to the host
    windows = {}
    for ch in pp.chiplets:
        m = g[ch.chiplet]
        for c in out_recv.get(ch.chiplet, []):
            lo, hi = c.a, c.a + c.cnt[0]
            c.arrivals = [a for a in arrivals.get(ch.chiplet, []) if lo <= a[1] < hi]
            m.step(c)
        for op in ch.ops:
            if op[0] == "send" and op[1].tag == TAG_READBACK:
                before = len(m.packets.get(host, []))
                m.step(_cmd(op[1]))
                st = m.packets.get(host, [])
                words = [w for t in st[0] for w in t.words][-op[1].cnt[0]:] if st else []
                del before
                windows[(ch.chiplet, op[1].a)] = (np.stack([_lanes(w, K0) for w in words])
                                                  if words else np.zeros((0, K0), np.int8))
        bad = [c for c in m.completions if c[1] != 0]
        if any(m.flags.values()):
            raise ValueError(f"chiplet {ch.chiplet}: Global PE flags {m.flags} (a word from a "
                             "producer outside the RECV mask, or outside its window)")
        if bad:
            raise ValueError(f"chiplet {ch.chiplet}: Global PE commands failed: {bad[:3]}")
    return {"windows": windows, "completions": {c: list(m.completions) for c, m in g.items()}}


def expected_windows(pp, ref: np.ndarray) -> dict:
    """{(chiplet, base): (values [n, K0] int8, valid mask)} from the reference."""
    out = {}
    for ch in pp.chiplets:
        for w in ch.windows:
            valid = w.out_index >= 0
            vals = np.zeros(w.out_index.shape, np.int8)
            vals[valid] = ref.reshape(-1)[w.out_index[valid]]
            out[(ch.chiplet, w.base)] = (vals, valid)
    return out


def compare(pp, got: dict, ref: np.ndarray) -> dict:
    """Compare host-received windows ``got`` {(chiplet, base): [n, K0]} with the reference."""
    exp = expected_windows(pp, ref)
    mism, checked, ok = 0, 0, set(got) == set(exp)
    for k, (vals, valid) in exp.items():
        w = np.asarray(got.get(k, np.zeros((0, vals.shape[1]), np.int8)), np.int8)
        checked += int(valid.sum())
        if w.shape != vals.shape:
            ok, mism = False, mism + int(valid.sum())
            continue
        bad = int((w[valid] != vals[valid]).sum())
        mism += bad
        ok = ok and bad == 0
    return {"bit_exact": bool(ok), "mismatches": mism, "checked": checked}


def coverage(pp) -> np.ndarray:
    """How many times each layer output is produced over all windows (want all 1)."""
    L = pp.layer
    cnt = np.zeros(L.K * L.P * L.Q, np.int64)
    for ch in pp.chiplets:
        for w in ch.windows:
            np.add.at(cnt, w.out_index[w.out_index >= 0], 1)
    return cnt


def check_package(pp, T: dict) -> dict:
    """Run the compiled pass on the executable model and compare with the numpy reference."""
    ref = reference(pp.layer, T, pp.target.chiplet.pe.acc_width)
    r = run_package(pp)
    out = compare(pp, r["windows"], ref)
    cov = coverage(pp)
    out["covered_once"] = bool(cov.min() == 1 == cov.max())
    out["windows"] = r["windows"]
    return out
