"""Golden model of a Simba PE node (PE + network interface), written from the
contract in the docstring of :mod:`tessera.hdl.chiplet.pe_node` and the packet
formats of :mod:`tessera.hdl.chiplet.packets` (data definitions only; the
arithmetic is :mod:`tessera.golden.pe`).

Simba §3.1 (a PE on its router port).  Given the packets a node receives, in
arrival order, it gives the packets the node must send, per destination and
packet kind in order (the interleaving of different kinds to one destination
depends on timing and is left out), the DONE codes and the PE buffer contents.

Model: the DATA body words of all DATA packets form one word stream (arrival
order); a run (``start``) takes ``ntiles * C1*H_in*W_in`` words of it, tile
after tile, word i of a tile at input-buffer word i; MIDDLE/LAST runs take
``K1*P1*Q1`` beats per tile from the PSUM beat stream.  Weight and PPU
buffers are snapshotted at ``start`` (loads are legal only between runs).  A
start with an illegal tile config sends DONE(code = ErrorCause) and discards
the rest of both streams up to the next start.  Every DATA packet gets one
CREDIT (count 1) and every PSUM packet one PCREDIT (count 1), to its source.

Left out: timing, the error flags of protocol violations (tests check them
directly), destinations on other chiplets.
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from tessera.golden import pe as gpe
from tessera.hdl.chiplet import packets as P
from tessera.hdl.global_pe.packets import (KIND_CREDIT, KIND_DATA, KIND_OUT, credit_layout,
                                           data_header_layout, out_header_layout, pack_fields,
                                           unpack_fields)
from tessera.hdl.pe.config import ErrorCause, PEConfig, Role


def _sx(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class PeNodeModel:
    def __init__(self, cfg: P.PeNodeConfig, node=(0, 0)):
        self.c = cfg
        self.params = cfg.pe
        self.node = tuple(node)
        self.regs = {name: 0 for name in P.REGS}
        self.wbuf = {}                 # (addr, row) -> [C0 ints]
        self.pbuf = {}                 # (addr, row) -> (bias, scale)
        self.words = []                # DATA word stream (ints)
        self.beats = []                # PSUM beat stream (lists of K0 ints)
        self.runs = []                 # (cfg, regs snapshot, wbuf, pbuf, words_before, beats_before) or error
        self.sent = defaultdict(list)  # (dest, kind) -> [payload lists]
        self.done_codes = []

    # ---- input -------------------------------------------------------------------------
    def receive(self, src, flits):
        """One packet: ``src`` node (x, y), ``flits`` payload ints (head first)."""
        src = tuple(src)
        h = flits[0]
        kind = h & 3
        if kind == KIND_DATA:
            self.words += list(flits[1:])
            self._send(src, "CREDIT", [pack_fields(credit_layout(), kind=KIND_CREDIT, count=1)])
            return
        if kind != P.KIND_EXT:
            return
        ext = (h >> 2) & 0xF
        if ext == P.EXT_CFG:
            f = unpack_fields(P.cfg_layout(), h)
            self._cfg(f["reg"], f["value"])
        elif ext in (P.EXT_WLOAD, P.EXT_PLOAD):
            f = unpack_fields(P.load_head_layout(), h)
            a, r = f["addr"], f["row"]
            for w in flits[1:1 + f["count"]]:
                if ext == P.EXT_WLOAD:
                    self.wbuf[(a, r)] = [_sx(w >> (8 * i), 8) for i in range(self.c.C0)]
                else:
                    b = unpack_fields(P.pload_body_layout(), w)
                    self.pbuf[(a, r)] = (_sx(b["bias"], 24), _sx(b["scale"], 16))
                r += 1
                if r == self.c.K0:
                    a, r = a + 1, 0
        elif ext == P.EXT_PSUM:
            nf, aw, K0 = self.c.psum_flits, self.c.acc_width, self.c.K0
            body = flits[1:]
            for i in range(0, len(body) - nf + 1, nf):
                v = sum(int(x) << (self.c.word_bits * j) for j, x in enumerate(body[i:i + nf]))
                self.beats.append([_sx(v >> (aw * k), aw) for k in range(K0)])
            self._send(src, "PCREDIT", [pack_fields(P.pcredit_layout(), kind=P.KIND_EXT,
                                                    ext=P.EXT_PCREDIT, count=1)])

    def _cfg(self, reg, value):
        names = {v: k for k, v in P.REGS.items()}
        name = names.get(reg)
        if name is None or name == "clear":
            return
        if name != "start":
            self.regs[name] = value
            return
        word = self.regs["pe_cfg0"] | self.regs["pe_cfg1"] << 32 | self.regs["pe_cfg2"] << 64
        cfg = P.unpack_pe_cfg(word)
        self.runs.append(dict(cfg=cfg, regs=dict(self.regs), wbuf=dict(self.wbuf),
                              pbuf=dict(self.pbuf)))

    def _send(self, dest, kind, flits):
        self.sent[(tuple(dest), kind)].append(list(flits))

    # ---- runs --------------------------------------------------------------------------
    def finish(self) -> dict:
        """Execute every run on the received streams; returns ``sent``."""
        c, p = self.c, self.params
        K0, C0 = c.K0, c.C0
        wi = bi = 0
        for run in self.runs:
            cfg, regs = run["cfg"], run["regs"]
            dec = lambda v: (v & 0xFF, (v >> 8) & 0xFF)
            done = dec(regs["done_dest"])
            cause = gpe.check_config(p, cfg)
            if cause != ErrorCause.NONE:
                self._done(done, int(cause))
                wi, bi = len(self.words), len(self.beats)      # discard up to the next start
                continue
            role = Role(int(cfg.role))
            tw = cfg.C1 * cfg.H_in * cfg.W_in
            nb = cfg.K1 * cfg.P1 * cfg.Q1
            W = np.zeros((cfg.K1 * K0, cfg.C1 * C0, cfg.R, cfg.S), dtype=np.int64)
            for r in range(cfg.R):
                for s in range(cfg.S):
                    for k1 in range(cfg.K1):
                        for c1 in range(cfg.C1):
                            a = ((r * cfg.S + s) * cfg.K1 + k1) * cfg.C1 + c1
                            for k0 in range(K0):
                                W[k1 * K0 + k0, c1 * C0:(c1 + 1) * C0, r, s] = \
                                    run["wbuf"].get((a, k0), [0] * C0)
            bias = scale = None
            if role in (Role.LAST, Role.ONLY):
                bias = [run["pbuf"].get((k1, k0), (0, 0))[0] for k1 in range(cfg.K1) for k0 in range(K0)]
                scale = [run["pbuf"].get((k1, k0), (0, 0))[1] for k1 in range(cfg.K1) for k0 in range(K0)]
            for t in range(regs["ntiles"]):
                words = self.words[wi:wi + tw]
                if len(words) < tw:
                    raise ValueError(f"run needs {tw} words for tile {t}, stream has {len(words)}")
                wi += tw
                X = np.array([[_sx(w >> (8 * i), 8) for i in range(C0)] for w in words])
                X = X.reshape(cfg.C1, cfg.H_in, cfg.W_in, C0).transpose(0, 3, 1, 2)
                X = X.reshape(cfg.C1 * C0, cfg.H_in, cfg.W_in)
                psum = None
                if role in (Role.MIDDLE, Role.LAST):
                    psum = self.beats[bi:bi + nb]
                    if len(psum) < nb:
                        raise ValueError(f"run needs {nb} psum beats for tile {t}")
                    bi += nb
                res = gpe.run_tile(p, cfg, W, X, psum_in=psum, bias=bias, scale=scale)
                if role in (Role.FIRST, Role.MIDDLE):
                    self._psum_packets(dec(regs["psum_dest"]), res["psum_out"])
                else:
                    base = (regs["out_base"] + t * regs["out_tile_stride"]) & 0xFFFF
                    self._out_packets(dec(regs["out_dest"]), base, res["out"])
            self._done(done, P.DONE_OK)
        return self.sent

    def _psum_packets(self, dest, beats):
        c = self.c
        for i in range(0, len(beats), c.psum_beats):
            self._send(dest, "PSUM", P.psum_packet([list(b) for b in beats[i:i + c.psum_beats]],
                                                   c.K0, c.acc_width, c.word_bits))

    def _out_packets(self, dest, base, beats):
        c = self.c
        for i in range(0, len(beats), c.out_words):
            part = beats[i:i + c.out_words]
            head = pack_fields(out_header_layout(), kind=KIND_OUT, addr=(base + i) & 0xFFFF,
                               nwords=len(part))
            self._send(dest, "OUT", [head] + [_pack8(b) for b in part])

    def _done(self, dest, code):
        self.done_codes.append(code)
        self._send(dest, "DONE", [pack_fields(P.done_layout((self.c.node_mesh_x, self.c.node_mesh_y)),
                                              kind=P.KIND_EXT, ext=P.EXT_DONE,
                                              node=self.node[0] | self.node[1] << _xbits(self.c),
                                              code=code)])


def _xbits(c: P.PeNodeConfig) -> int:
    return max(1, (c.node_mesh_x - 1).bit_length())


def _pack8(vals) -> int:
    return sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(vals))
