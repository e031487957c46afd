"""Shared scenarios and a cycle-level environment for the pe_node tests
(amaranth.sim in ``tests/test_pe_node.py`` and cocotb in ``tb/chiplet/test_pe_node.py``).

A scenario is a list of *runs*; each run has control packets (WLOAD, PLOAD,
CFG writes ending with ``start``), DATA packets (from the Global PE node,
random sizes <= max_tile, cut anywhere in the word stream) and, for
MIDDLE/LAST, PSUM packets from the upstream node.  :class:`Env` plays the
node's surroundings one cycle at a time: it presents flits on ``net_in``
(with random gaps; every packet contiguous), sends DATA only with a Global PE
credit (``credit_window``) and PSUM only with a psum credit (``psum_window``),
releases a run's control packets only after the previous run's DONE,
answers the node's PSUM packets with PCREDITs after a random delay, and
drives ``net_out.ready`` randomly.  Every packet fed is also given to the
golden model (:class:`tessera.golden.pe_node.PeNodeModel`) in the same order.
"""
from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
from amaranth.lib import data

from tessera.golden import pe as gpe
from tessera.golden.pe_node import PeNodeModel
from tessera.hdl.chiplet import packets as P
from tessera.hdl.global_pe.packets import (KIND_CREDIT, KIND_DATA, KIND_OUT, GpeConfig,
                                           credit_layout, data_header_layout, net_flit_layout,
                                           pack_fields, unpack_fields)
from tessera.hdl.pe.config import PEConfig, Role

SMALL = dict(K0=8, C0=8, acc_width=24, wbuf_bytes=4096, ibuf_bytes=1024, abuf_entries=64,
             ppu_depth=4, mac_dsps=64, mac_stages=2, ppu_mul_stages=2, word_bits=64,
             node_mesh_x=4, node_mesh_y=5, chiplet_mesh_x=1, chiplet_mesh_y=1, classes=2,
             credit_window=2, max_tile=8, psum_window=2, psum_beats=2, out_words=4)

ME = (1, 1)          # the node under test
GPE = (0, 4)         # DATA source, OUT destination
UP = (2, 1)          # upstream PE (PSUM source)
DOWN = (1, 2)        # downstream PE (psum_dest)
CTRL = (1, 4)        # controller (done_dest)
HOST = (2, 4)        # loads come from the gateway


def flit_layout(c: P.PeNodeConfig):
    return net_flit_layout(GpeConfig(word_bits=c.word_bits, node_mesh_x=c.node_mesh_x,
                                     node_mesh_y=c.node_mesh_y, chiplet_mesh_x=c.chiplet_mesh_x,
                                     chiplet_mesh_y=c.chiplet_mesh_y, classes=c.classes))


def make_flit(lay, head, tail, mclass, dest, src, payload) -> int:
    return lay.const({"head": head, "tail": tail, "mclass": mclass, "mcast": 0,
                      "dest": {"ucast": {"node": {"x": dest[0], "y": dest[1]}}},
                      "src": {"node": {"x": src[0], "y": src[1]}},
                      "payload": payload}).as_bits()


def packet_flits(lay, c, name, dest, src, payloads) -> list[int]:
    cl = P.node_class(name, c.classes)
    n = len(payloads)
    return [make_flit(lay, i == 0, i == n - 1, cl, dest, src, pl) for i, pl in enumerate(payloads)]


def random_tile_cfg(c: P.PeNodeConfig, rng, role, R, stride, **kw) -> tuple:
    ov = dict(role=int(role), R=R, S=R, stride=stride, pad_top=0, pad_left=0)
    ov.update(kw)
    for _ in range(200):
        cfg, W, X, bias, scale = gpe.random_case(c.pe, rng, **ov)
        if cfg.C1 <= 2 and cfg.K1 <= 2 and cfg.P1 <= 4 and cfg.Q1 <= 4:
            return cfg, W, bias, scale
    raise ValueError("no small tile found")


def build_run(c: P.PeNodeConfig, rng, role=Role.ONLY, R=3, stride=1, ntiles=2, cfg=None,
              out_base=None, **kw):
    """One run: dict with ctrl/data/psum packet lists (payload lists) and its PEConfig."""
    lay_kw = {}
    if cfg is None:
        cfg, W, bias, scale = random_tile_cfg(c, rng, role, R, stride, **kw)
    else:
        W = rng.integers(-128, 128, size=(cfg.K1 * c.K0, cfg.C1 * c.C0, cfg.R, cfg.S))
        bias = rng.integers(-(1 << 15), 1 << 15, size=cfg.K1 * c.K0)
        scale = rng.integers(-(1 << 15), 1 << 15, size=cfg.K1 * c.K0)
    ctrl = []
    maxb = 6
    for pk in P.wload_packets(gpe.weight_beats(c.pe, cfg, W), c.K0, maxb):
        ctrl.append(("WLOAD", HOST, pk))
    if int(cfg.role) in (Role.LAST, Role.ONLY):
        for pk in P.pload_packets(gpe.ppu_beats(c.pe, cfg, bias, scale), c.K0, maxb):
            ctrl.append(("PLOAD", HOST, pk))
    base = int(rng.integers(0, 1000)) if out_base is None else out_base
    regs = P.pe_node_registers(cfg, ntiles, psum_dest=DOWN, out_dest=GPE, out_base=base,
                               out_tile_stride=int(rng.integers(40, 80)), done_dest=CTRL)
    for reg, val in regs:
        ctrl.append(("CFG", CTRL, [P.cfg_payload(reg, val)]))
    # input words of every tile, one stream, cut into packets of random sizes
    words = []
    for _ in range(ntiles):
        X = rng.integers(-128, 128, size=(cfg.C1 * c.C0, cfg.H_in, cfg.W_in))
        words += [sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(b["data"]))
                  for b in gpe.input_beats(c.pe, cfg, X)]
    dpk = []
    i, seq = 0, 0
    while i < len(words):
        n = int(rng.integers(1, c.max_tile + 1))
        part = words[i:i + n]
        head = pack_fields(data_header_layout(), kind=KIND_DATA, tag=1, seq=seq, nwords=len(part))
        dpk.append(("DATA", GPE, [head] + part))
        i += n
        seq += 1
    ppk = []
    if int(cfg.role) in (Role.MIDDLE, Role.LAST):
        beats = []
        for _ in range(ntiles):
            beats += [list(b) for b in gpe.random_psum(c.pe, cfg, rng)]
        i = 0
        while i < len(beats):
            n = int(rng.integers(1, c.psum_beats + 1))
            ppk.append(("PSUM", UP, P.psum_packet(beats[i:i + n], c.K0, c.acc_width, c.word_bits)))
            i += n
    return {"cfg": cfg, "ctrl": ctrl, "data": dpk, "psum": ppk, "ntiles": ntiles}


class Env:
    """Cycle-level surroundings of one node.  Per cycle: ``drive(cycle)`` ->
    (in_valid, in_flit, out_ready); after the clock edge ``sample(in_taken,
    out_fire, out_flit)``."""

    def __init__(self, c: P.PeNodeConfig, runs, seed=0, in_gap=0.3, out_stall=0.3,
                 pcredit_delay=(1, 20), early_data=True, pcredit_hold=0):
        self.c, self.runs = c, runs
        self.lay = flit_layout(c)
        self.rng = random.Random(seed)
        self.in_gap, self.out_stall = in_gap, out_stall
        self.pcd = pcredit_delay
        self.pcredit_hold = pcredit_hold     # no PCREDIT before this cycle
        self.golden = PeNodeModel(c, ME)
        self.ctrl = [[(n, s, pl) for n, s, pl in r["ctrl"]] for r in runs]
        self.data = [pk for r in runs for pk in r["data"]]
        self.psum = [pk for r in runs for pk in r["psum"]]
        self.run_i = 0                   # run whose ctrl packets may go
        self.dones = 0
        self.started = 0                 # runs whose ctrl (incl. start) has been sent
        self.early = early_data
        self.gcred = c.credit_window
        self.pcred = c.psum_window
        self.pcredit_q = []              # cycles at which a PCREDIT may be sent
        self.cur = None                  # (flits, idx, packet) being sent
        self.got = defaultdict(list)     # (dest, kind) -> [payload lists]
        self.out_pkt = None
        self.errors = []
        self.cycle = 0
        self.flits_in = 0
        self.flits_out = 0

    # ---- choosing the next packet -------------------------------------------------------
    def _pick(self):
        choices = []
        if self.pcredit_q and self.pcredit_q[0] <= self.cycle:
            choices.append("pcredit")
        if self.run_i < len(self.ctrl) and self.ctrl[self.run_i] and self.dones >= self.run_i:
            choices.append("ctrl")
        data_ok = self.early or self.started > 0
        if self.data and self.gcred > 0 and data_ok:
            choices.append("data")
        if self.psum and self.pcred > 0 and data_ok:
            choices.append("psum")
        if not choices:
            return None
        what = self.rng.choice(choices)
        if what == "pcredit":
            self.pcredit_q.pop(0)
            pl = [pack_fields(P.pcredit_layout(), kind=P.KIND_EXT, ext=P.EXT_PCREDIT, count=1)]
            return ("PCREDIT", DOWN, pl, False)
        if what == "ctrl":
            name, src, pl = self.ctrl[self.run_i].pop(0)
            if not self.ctrl[self.run_i]:
                self.run_i += 1
                self.started += 1
            return (name, src, pl, True)
        if what == "data":
            self.gcred -= 1
            name, src, pl = self.data.pop(0)
            return (name, src, pl, True)
        self.pcred -= 1
        name, src, pl = self.psum.pop(0)
        return (name, src, pl, True)

    def finished(self) -> bool:
        return (self.dones >= len(self.runs) and self.cur is None and not self.data
                and not self.psum and not self.pcredit_q and self.out_pkt is None
                and self.gcred == self.c.credit_window and self.pcred == self.c.psum_window)

    def drive(self):
        if self.cur is None and self.rng.random() >= self.in_gap:
            pk = self._pick()
            if pk is not None:
                name, src, pl, to_golden = pk
                if to_golden:
                    self.golden.receive(src, pl)
                self.cur = [packet_flits(self.lay, self.c, name, ME, src, pl), 0]
        valid, flit = 0, 0
        if self.cur is not None and (self.cur[1] == 0 or self.rng.random() >= self.in_gap):
            valid, flit = 1, self.cur[0][self.cur[1]]
        ready = int(self.rng.random() >= self.out_stall)
        return valid, flit, ready

    def sample(self, in_taken, out_fire, out_flit):
        if in_taken:
            self.flits_in += 1
            self.cur[1] += 1
            if self.cur[1] == len(self.cur[0]):
                self.cur = None
        if out_fire:
            self.flits_out += 1
            self._out(out_flit)
        self.cycle += 1

    def _out(self, v):
        f = data.Const(self.lay, v)
        dest = (int(f.dest.ucast.node.x), int(f.dest.ucast.node.y))
        src = (int(f.src.node.x), int(f.src.node.y))
        if src != ME or f.mcast:
            self.errors.append(f"bad src/mcast {src} {int(f.mcast)}")
        if f.head:
            if self.out_pkt is not None:
                self.errors.append("head inside a packet")
            self.out_pkt = [dest, int(f.mclass), []]
        elif self.out_pkt is None:
            self.errors.append("body flit outside a packet")
            return
        elif self.out_pkt[0] != dest:
            self.errors.append("destination changed inside a packet")
        self.out_pkt[2].append(int(f.payload))
        if f.tail:
            dest, mclass, pl = self.out_pkt
            self.out_pkt = None
            kind = self._kind(pl[0])
            if P.node_class(kind, self.c.classes) != mclass:
                self.errors.append(f"{kind} in class {mclass}")
            self.got[(dest, kind)].append(pl)
            if kind == "CREDIT":
                n = unpack_fields(credit_layout(), pl[0])["count"]
                if not 1 <= n <= self.c.credit_batch:
                    self.errors.append(f"CREDIT count {n} outside 1..credit_batch")
                self.gcred += n
                if self.gcred > self.c.credit_window:
                    self.errors.append("more CREDITs than DATA packets")
            elif kind == "PCREDIT":
                self.pcred += 1
            elif kind == "PSUM":
                self.pcredit_q.append(max(self.pcredit_hold, self.cycle + self.rng.randint(*self.pcd)))
                self.pcredit_q.sort()
            elif kind == "DONE":
                self.dones += 1

    @staticmethod
    def _kind(h):
        k = h & 3
        if k == KIND_CREDIT:
            return "CREDIT"
        if k == KIND_OUT:
            return "OUT"
        if k == KIND_DATA:
            return "DATA"
        return {P.EXT_PSUM: "PSUM", P.EXT_PCREDIT: "PCREDIT", P.EXT_DONE: "DONE",
                P.EXT_CFG: "CFG"}.get((h >> 2) & 0xF, f"EXT{(h >> 2) & 0xF}")

    def check(self):
        """Compare with the golden model; returns a list of mismatch strings."""
        exp = self.golden.finish()
        errs = list(self.errors)
        if self.c.credit_batch > 1:
            # coalesced credits: the golden model's one CREDIT per packet, summed per source
            cnt = lambda pls: sum(unpack_fields(credit_layout(), p[0])["count"] for p in pls)
            for d in {k for k in set(exp) | set(self.got) if k[1] == "CREDIT"}:
                e, g = cnt(exp.pop(d, [])), cnt(self.got.get(d, []))
                if e != g:
                    errs.append(f"{d}: {g} credits returned, {e} DATA packets")
            got = {k: v for k, v in self.got.items() if k[1] != "CREDIT"}
        else:
            got = self.got
        for key in sorted(set(exp) | set(got)):
            e, g = exp.get(key, []), got.get(key, [])
            if e != g:
                n = next((i for i, (a, b) in enumerate(zip(e, g)) if a != b), min(len(e), len(g)))
                errs.append(f"{key}: expected {len(e)} packets, got {len(g)}; first difference "
                            f"at packet {n}: {e[n] if n < len(e) else None} vs "
                            f"{g[n] if n < len(g) else None}")
        return errs


def scenario(c: P.PeNodeConfig, seed: int, kinds=None):
    """Seeded random scenario: 1-2 runs of random roles, R in {1,3}, stride 1/2."""
    rng = np.random.default_rng(seed)
    runs = []
    nruns = 1 + int(rng.integers(0, 2))
    for r in range(nruns):
        role = Role(int(rng.integers(0, 4))) if kinds is None else kinds[r % len(kinds)]
        R = int(rng.choice([1, 3]))
        stride = int(rng.integers(1, 3))
        runs.append(build_run(c, rng, role=role, R=R, stride=stride,
                              ntiles=int(rng.integers(1, 4))))
    return runs
