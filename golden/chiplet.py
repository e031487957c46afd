"""Golden model of a layer on the Simba chiplet (Simba §3.1 PE/Global PE/controller roles,
§3.3 Listing 1): the direct numpy reference and an executable model of a compiled pass.

* :func:`reference`: int8 convolution (stride, zero padding) with the PE contract's
  arithmetic (``hdl/pe/config.py`` docstring, written from that text, not from the RTL):
  accumulation wraps modulo 2**acc_width (two's complement; wrapping once at the end equals
  wrapping every add), then the PPU per output channel: t = v + bias (exact), y = t*scale,
  y = (y + 2**(shift-1)) >> shift if shift > 0 (arithmetic: round half up), ReLU, saturate
  to int8.
* :func:`layer_tensors`: seeded random X, W, bias, scale, shift, relu of a layer.
* :func:`run_pass`: executes a compiled pass (``hdl/chiplet/compiler.py``) from its encoded
  artefacts: decodes the host preload (input OUT packets into the Global PE buffer, WLOAD /
  PLOAD packets into each PE's weight / PPU buffers by the contract's addresses), interprets
  the controller program's steps (CFG register writes decoded with ``packets.unpack_pe_cfg``,
  START, Global PE commands run by the Global PE golden model ``golden/global_pe.py``), feeds
  each PE the DATA stream the Global PE model produces for it (cut into C1*H_in*W_in-word
  tiles), runs every tile through ``golden/pe.py`` along the reduction chains named by the
  ``psum_dest`` registers, writes OUT beats at ``out_base + t*out_tile_stride + b`` through
  the output RECV, and returns what the final readback SEND delivers to the gateway.
  :func:`check_pass` compares that with :func:`reference` through the pass's ``out_index``.

Left out: all timing (``sim_models/simba/chiplet_cycles.py`` predicts cycles), credits and
back-pressure (the order of words per destination stream is what the model keeps), pooling.
"""
from __future__ import annotations

import numpy as np

from tessera.golden import global_pe as gpe_model
from tessera.golden import pe as gpe_pe
from tessera.hdl.chiplet import packets as pk
from tessera.hdl.global_pe.packets import (KIND_OUT, OP_RECV, OP_SEND, out_header_layout,
                                           unpack_fields)
from tessera.hdl.chiplet.compiler import TAG_READBACK, TAG_RECV_IN
from tessera.hdl.pe.config import Role


def wrap(a, bits: int):
    half = 1 << (bits - 1)
    return ((np.asarray(a, dtype=np.int64) + half) & ((1 << bits) - 1)) - half


# ------------------------------------------------------------------------- reference
def ppu_ref(v, bias, scale, shift: int, relu: bool) -> np.ndarray:
    """PPU of the PE contract on v [K, ...] (channel axis 0) -> int8."""
    sh = (-1,) + (1,) * (np.ndim(v) - 1)
    y = (np.asarray(v, np.int64) + np.asarray(bias, np.int64).reshape(sh)) * \
        np.asarray(scale, np.int64).reshape(sh)
    if shift > 0:
        y = (y + (1 << (shift - 1))) >> shift
    if relu:
        y = np.maximum(y, 0)
    return np.clip(y, -128, 127).astype(np.int8)


def conv_acc(layer, X, W, acc_width: int = 24) -> np.ndarray:
    """acc[k, p, q] = sum_{c,r,s} W[k,c,r,s] X[c, p*st+r-pad, q*st+s-pad] (0 outside), wrapped."""
    L = layer
    Xp = np.zeros((L.C, L.H + 2 * L.pad, L.W + 2 * L.pad), np.int64)
    Xp[:, L.pad:L.pad + L.H, L.pad:L.pad + L.W] = X
    P = (L.H + 2 * L.pad - L.R) // L.stride + 1
    Q = (L.W + 2 * L.pad - L.S) // L.stride + 1
    acc = np.zeros((L.K, P, Q), np.int64)
    W = np.asarray(W, np.int64)
    for r in range(L.R):
        for s in range(L.S):
            patch = Xp[:, r:r + (P - 1) * L.stride + 1:L.stride, s:s + (Q - 1) * L.stride + 1:L.stride]
            acc += np.tensordot(W[:, :, r, s], patch, axes=(1, 0))
    return wrap(acc, acc_width)


def reference(layer, T: dict, acc_width: int = 24) -> np.ndarray:
    """Layer output [K, P, Q] int8."""
    return ppu_ref(conv_acc(layer, T["X"], T["W"], acc_width), T["bias"], T["scale"],
                   T["shift"], T["relu"])


def layer_tensors(layer, seed: int = 0) -> dict:
    """Seeded random int8 X [C,H,W], W [K,C,R,S]; bias (int24 range, mostly small), scale
    (int16), shift so that typical outputs land near +-64 (some saturate), relu."""
    rng = np.random.default_rng([seed, layer.C, layer.K, layer.R, layer.H, layer.stride])
    L = layer
    X = rng.integers(-128, 128, (L.C, L.H, L.W), dtype=np.int64).astype(np.int8)
    W = rng.integers(-128, 128, (L.K, L.C, L.R, L.S), dtype=np.int64).astype(np.int8)
    bmax = 1 << 23 if rng.random() < 0.2 else 1 << 15
    bias = rng.integers(-bmax, bmax, L.K, dtype=np.int64)
    scale = rng.integers(-(1 << 15), 1 << 15, L.K, dtype=np.int64)
    n = L.C * L.R * L.S
    typ = 5461.0 * np.sqrt(n) * 18918.0 / 64.0
    shift = int(np.clip(round(np.log2(typ)) + int(rng.integers(-1, 2)), 0, 31))
    return {"X": X, "W": W, "bias": bias, "scale": scale, "shift": shift,
            "relu": bool(rng.integers(0, 2))}


# ------------------------------------------------------------------------ decoding
def _lanes(word: int, n: int) -> np.ndarray:
    return np.frombuffer(int(word).to_bytes(n, "little"), dtype=np.uint8).astype(np.int8)


def _decode_loads(pkts, K0: int, C0: int):
    """WLOAD/PLOAD packets -> ({(addr,row): lanes}, {(addr,row): (bias, scale)})."""
    wb, pb = {}, {}
    lh, plb = pk.load_head_layout(), pk.pload_body_layout()
    for p in pkts:
        h = unpack_fields(lh, p[0])
        if h["kind"] != pk.KIND_EXT or h["ext"] not in (pk.EXT_WLOAD, pk.EXT_PLOAD):
            raise ValueError(f"preload packet with kind {h['kind']} ext {h['ext']}")
        if h["count"] != len(p) - 1:
            raise ValueError("preload packet count does not match its body")
        addr, row = h["addr"], h["row"]
        for body in p[1:]:
            if h["ext"] == pk.EXT_WLOAD:
                wb[(addr, row)] = _lanes(body, C0)
            else:
                f = unpack_fields(plb, body)
                pb[(addr, row)] = (int(gpe_pe.wrap(f["bias"], 24)), int(gpe_pe.wrap(f["scale"], 16)))
            row += 1
            if row == K0:
                addr, row = addr + 1, 0
    return wb, pb


def _pe_weights(cfg, wb, K0, C0):
    c = cfg
    W = np.zeros((c.K1 * K0, c.C1 * C0, c.R, c.S), np.int8)
    for r in range(c.R):
        for s in range(c.S):
            for k1 in range(c.K1):
                for c1 in range(c.C1):
                    addr = gpe_pe.weight_addr(c, r, s, k1, c1)
                    for k0 in range(K0):
                        W[k1 * K0 + k0, c1 * C0:(c1 + 1) * C0, r, s] = wb.get((addr, k0), 0)
    return W


def _to_cmd(c) -> gpe_model.Command:
    return gpe_model.Command(op=c.op, tag=c.tag, a=c.a, cnt=tuple(c.cnt), stride=tuple(c.stride),
                             tile=c.tile, groups=c.groups, ucast=c.ucast, uaddr=((0, 0), tuple(c.unode)),
                             mask=(1, c.mask_nodes), gidx=c.gidx)


# ------------------------------------------------------------------------ execution
def reduction_chain(jobs: dict, head) -> list:
    """The reduction chain that starts at PE job ``head`` (FIRST or ONLY): follow ``psum_dest``
    through MIDDLE PEs to the LAST one.  ``jobs`` maps a node key to its decoded job (``cfg``,
    ``psum_dest``, ``ntiles``); a chain that leaves the jobs, loops, or mixes tile counts is an
    error."""
    chain = [head]
    while Role(int(jobs[chain[-1]]["cfg"].role)) in (Role.FIRST, Role.MIDDLE):
        nxt = jobs[chain[-1]]["psum_dest"]
        if nxt not in jobs or len(chain) > len(jobs):
            raise ValueError(f"chain from {head} breaks at {chain[-1]} -> {nxt}")
        chain.append(nxt)
    if len({jobs[x]["ntiles"] for x in chain}) != 1:
        raise ValueError("chain members run different numbers of tiles")
    return chain


def run_pass(ps, cfg) -> dict:
    """Execute a compiled pass (with preload); returns {"words": [out_words, K0] int8 as
    delivered to the gateway, "completions": [...], "pes": {node: regs}}."""
    from tessera.hdl.chiplet.config import node_map
    pe = cfg.pe
    K0, C0 = pe.K0, pe.C0
    nm = node_map(cfg)
    g = gpe_model.GlobalPEModel(cfg.gpe)
    mx = nm.mesh[0]
    consumer = lambda xy: xy[1] * mx + xy[0]
    # host input preload (OUT packets from the gateway)
    arrivals = []
    hl = out_header_layout()
    for p in ps.preload_input:
        h = unpack_fields(hl, p[0])
        if h["kind"] != KIND_OUT or h["nwords"] != len(p) - 1:
            raise ValueError("bad input preload packet")
        arrivals.append((consumer(nm.gateway), h["addr"], list(p[1:])))
    regs = {}            # node -> {reg: value}
    started = []
    out_recv = None
    for op in ps.ops:
        kind = op[0]
        if kind == "cfg":
            node, reg, val = op[1], op[2], op[3]
            regs.setdefault(node, {})[reg] = val
            if reg == pk.REGS["start"]:
                started.append(node)
        elif kind in ("recv", "send", "group"):
            cmd = _to_cmd(op[1])
            if op[1].op == OP_RECV:
                if op[1].tag == TAG_RECV_IN:
                    cmd.arrivals = arrivals
                    g.step(cmd)
                else:
                    out_recv = cmd            # its arrivals are the PEs' OUT packets (below)
                continue
            if op[1].op == OP_SEND and op[1].tag == TAG_READBACK:
                break                         # readback: after the PEs ran
            g.step(cmd)
    # PEs: configuration from their registers
    jobs = {}
    R = pk.REGS
    for node in started:
        r = regs[node]
        cfgw = r[R["pe_cfg0"]] | r[R["pe_cfg1"]] << 32 | r[R["pe_cfg2"]] << 64
        pcfg = pk.unpack_pe_cfg(cfgw)
        wb, pb = _decode_loads(ps.preload_pe.get(node, []), K0, C0)
        streams = g.packets.get(consumer(node), [])
        if len(streams) != 1:
            raise ValueError(f"PE {node} receives {len(streams)} DATA streams (expected 1)")
        words = [w for t in streams[0] for w in t.words]
        n = pcfg.C1 * pcfg.H_in * pcfg.W_in
        ntiles = r[R["ntiles"]]
        if len(words) != n * ntiles:
            raise ValueError(f"PE {node}: {len(words)} DATA words for {ntiles} tiles of {n}")
        dest = r[R["psum_dest"]]
        jobs[node] = dict(cfg=pcfg, ntiles=ntiles, words=words, W=_pe_weights(pcfg, wb, K0, C0),
                          bias=np.array([pb.get((k // K0, k % K0), (0, 0))[0] for k in range(pcfg.K1 * K0)]),
                          scale=np.array([pb.get((k // K0, k % K0), (0, 0))[1] for k in range(pcfg.K1 * K0)]),
                          psum_dest=(dest & 0xFF, dest >> 8), out_base=r[R["out_base"]],
                          out_stride=r[R["out_tile_stride"]], out_dest=r[R["out_dest"]])
    # chains: FIRST -> MIDDLE* -> LAST (via psum_dest), ONLY alone
    out_arrivals = []
    for node, j in jobs.items():
        role = Role(int(j["cfg"].role))
        if role not in (Role.FIRST, Role.ONLY):
            continue
        chain = reduction_chain(jobs, node)
        for t in range(j["ntiles"]):
            psum = None
            for x in chain:
                jj = jobs[x]
                c = jj["cfg"]
                n = c.C1 * c.H_in * c.W_in
                tw = jj["words"][t * n:(t + 1) * n]
                X = np.stack([_lanes(w, C0) for w in tw]).reshape(c.C1, c.H_in, c.W_in, C0)
                X = X.transpose(0, 3, 1, 2).reshape(c.C1 * C0, c.H_in, c.W_in)
                res = gpe_pe.run_tile(pe, c, jj["W"], X, psum_in=psum,
                                      bias=jj["bias"], scale=jj["scale"])
                if res["error"] != 0:
                    raise ValueError(f"PE {x} refuses its config: {res['error'].name}")
                psum = res.get("psum_out")
            beats = res["out"]
            last = jobs[chain[-1]]
            addr = last["out_base"] + t * last["out_stride"]
            out_arrivals.append((consumer(chain[-1]), addr,
                                 [int.from_bytes(b.astype(np.uint8).tobytes(), "little") for b in beats]))
    if out_recv is None:
        raise ValueError("program has no output RECV")
    out_recv.arrivals = out_arrivals
    g.step(out_recv)
    # readback SEND to the gateway (the last command)
    rb = [op[1] for op in ps.ops if op[0] == "send" and op[1].tag == TAG_READBACK]
    if len(rb) != 1:
        raise ValueError("program must end with one readback SEND to the gateway")
    g.step(_to_cmd(rb[0]))
    bad = [c for c in g.completions if c[1] != 0]
    if bad:
        raise ValueError(f"Global PE commands failed: {bad[:3]}")
    gw = g.packets.get(consumer(nm.gateway), [])
    words = [w for t in gw[0] for w in t.words] if gw else []
    arr = np.stack([_lanes(w, K0) for w in words]) if words else np.zeros((0, K0), np.int8)
    return {"words": arr, "completions": list(g.completions), "flags": dict(g.flags)}


def expected_words(ps, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values [out_words, K0] int8 from the reference where out_index >= 0, valid mask)."""
    valid = ps.out_index >= 0
    vals = np.zeros(ps.out_index.shape, np.int8)
    vals[valid] = ref.reshape(-1)[ps.out_index[valid]]
    return vals, valid


def check_pass(ps, cfg, ref: np.ndarray) -> dict:
    """Run the pass on the executable model and compare with the direct reference."""
    r = run_pass(ps, cfg)
    vals, valid = expected_words(ps, ref)
    got = r["words"]
    ok = got.shape == vals.shape and bool(np.array_equal(got[valid], vals[valid]))
    mism = int((got[valid] != vals[valid]).sum()) if got.shape == vals.shape else -1
    return {"bit_exact": ok, "mismatches": mism, "checked": int(valid.sum()), "words": got}


def covered(passes, layer) -> np.ndarray:
    """How many times each layer output (k, p, q) is produced by the passes (want all 1)."""
    L = layer
    P = (L.H + 2 * L.pad - L.R) // L.stride + 1
    Q = (L.W + 2 * L.pad - L.S) // L.stride + 1
    cnt = np.zeros(L.K * P * Q, np.int64)
    for ps in passes:
        idx = ps.out_index[ps.out_index >= 0]
        np.add.at(cnt, idx, 1)
    return cnt
