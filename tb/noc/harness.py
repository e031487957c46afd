"""Cycle-loop cocotb harness for the NoC router / mesh / two-level system.

One coroutine per DUT: every rising edge it samples all outputs (the cycle that
just ended), updates the drivers, monitors and downstream-buffer models, then
drives the next cycle's inputs.  Drivers: local stream sources (one packet
queue per port) and, for a lone router, credit-obeying link senders per VC.
Monitors: local stream sinks with random back-pressure, and link receivers
that model the downstream input buffer (capacity ``buffer_flits`` per VC,
random drain, credits returned) and fail on a credit violation.  Every
receiver reassembles packets and checks framing (head first, tail last, flit
indices contiguous, one packet id).  Payload = ``pid << 8 | flit index``.
"""
from __future__ import annotations

import random
from collections import defaultdict, deque

from cocotb.triggers import RisingEdge

from tessera.tb.common import pack, unpack


def uval(handle) -> int:
    """Unsigned value of a 1-bit (Logic) or multi-bit (LogicArray) signal."""
    v = handle.value
    return v.to_unsigned() if hasattr(v, "to_unsigned") else int(v)


class FlitCodec:
    def __init__(self, fields):
        self.fields = fields
        self.names = {f["name"] for f in fields}

    def make(self, pkt, i: int, sys_kx: int, hier: bool = False) -> dict:
        d = {"head": int(i == 0), "tail": int(i == pkt.flits - 1), "mclass": pkt.mclass,
             "mcast": int(pkt.mcast), "payload": (pkt.pid << 8) | (i & 0xFF)}
        (scx, scy), (sx, sy) = pkt.src
        d.update({"src.chiplet.x": scx, "src.chiplet.y": scy, "src.node.x": sx,
                  "src.node.y": sy})
        if pkt.mcast:
            cm, nm = pkt.dest
            d["dest.mcast.chiplets"] = cm
            d["dest.mcast.nodes"] = nm
        else:
            (cx, cy), (x, y) = pkt.dest
            d.update({"dest.ucast.chiplet.x": cx, "dest.ucast.chiplet.y": cy,
                      "dest.ucast.node.x": x, "dest.ucast.node.y": y})
        return d

    def pack(self, d):
        return pack(self.fields, d)

    def unpack(self, w):
        return unpack(self.fields, w)


class Reassembler:
    """Checks packet framing on one output channel; calls done(pid, nflits) per packet."""

    def __init__(self, where, done, errors):
        self.where, self.done, self.errors = where, done, errors
        self.cur = None
        self.n = 0

    def flit(self, f):
        pid, idx = f["payload"] >> 8, f["payload"] & 0xFF
        if self.cur is None:
            if not f["head"]:
                self.errors.append(f"{self.where}: flit without head (pid {pid} idx {idx})")
                return
            self.cur, self.n = pid, 0
        elif f["head"]:
            self.errors.append(f"{self.where}: head inside packet {self.cur} (pid {pid})")
        if pid != self.cur or idx != self.n:
            self.errors.append(f"{self.where}: got pid {pid} idx {idx}, expected pid {self.cur} "
                               f"idx {self.n}")
        self.n += 1
        if f["tail"]:
            self.done(self.cur, self.n)
            self.cur = None


class Harness:
    """Drives local ports ``local_in[...]``/``local_out[...]`` (names given) and optional
    network link ports of a lone router."""

    def __init__(self, dut, codec: FlitCodec, local_ins, local_outs, *, rng, ready_prob=1.0,
                 idle_prob=0.0, net_ins=(), net_outs=(), vcs=1, depth=4, drain_prob=1.0):
        self.dut, self.codec, self.rng = dut, codec, rng
        self.clk = dut.clk
        self.cycle = 0
        self.ready_prob, self.idle_prob, self.drain_prob = ready_prob, idle_prob, drain_prob
        self.vcs, self.depth = vcs, depth
        self.errors: list = []
        self.delivered = defaultdict(list)     # out name -> [(pid, nflits, cycle)]
        self.accepted_at = {}                   # pid -> cycle of head handshake
        self.first_seen = {}                    # (out, pid) -> cycle head seen valid
        self.progress = 0
        # local sources
        self.lin = {}
        for name in local_ins:
            h = {"valid": getattr(dut, f"{name}__valid"), "ready": getattr(dut, f"{name}__ready"),
                 "payload": getattr(dut, f"{name}__payload"), "q": deque(), "cur": None}
            h["valid"].value = 0
            self.lin[name] = h
        self.lout = {}
        for name in local_outs:
            h = {"valid": getattr(dut, f"{name}__valid"), "ready": getattr(dut, f"{name}__ready"),
                 "payload": getattr(dut, f"{name}__payload"), "rdy": 0,
                 "ra": Reassembler(name, self._done_fn(name), self.errors), "block": False}
            h["ready"].value = 0
            self.lout[name] = h
        self.nin = {}
        for name in net_ins:
            h = {"valid": getattr(dut, f"{name}__valid"), "vc": getattr(dut, f"{name}__vc"),
                 "flit": getattr(dut, f"{name}__flit"), "credit": getattr(dut, f"{name}__credit"),
                 "q": [deque() for _ in range(vcs)], "cred": [depth] * vcs, "rr": 0}
            h["valid"].value = 0
            self.nin[name] = h
        self.nout = {}
        for name in net_outs:
            h = {"valid": getattr(dut, f"{name}__valid"), "vc": getattr(dut, f"{name}__vc"),
                 "flit": getattr(dut, f"{name}__flit"), "credit": getattr(dut, f"{name}__credit"),
                 "buf": [deque() for _ in range(vcs)], "block": False,
                 "ra": [Reassembler(f"{name}.vc{v}", self._done_fn(name), self.errors)
                        for v in range(vcs)]}
            h["credit"].value = 0
            self.nout[name] = h

    def _done_fn(self, name):
        def done(pid, n):
            self.delivered[name].append((pid, n, self.cycle))
        return done

    # --- traffic --------------------------------------------------------------------------
    def send_local(self, port, pkt, sys_kx=0):
        for i in range(pkt.flits):
            self.lin[port]["q"].append((pkt.pid, self.codec.pack(self.codec.make(pkt, i, sys_kx))))

    def send_raw_local(self, port, flit_dict, pid=None):
        self.lin[port]["q"].append((pid, self.codec.pack(flit_dict)))

    def send_net(self, port, vc, pkt):
        for i in range(pkt.flits):
            self.nin[port]["q"][vc].append((pkt.pid, self.codec.pack(self.codec.make(pkt, i, 0))))

    def send_raw_net(self, port, vc, flit_dict):
        self.nin[port]["q"][vc].append((None, self.codec.pack(flit_dict)))

    def pending_inputs(self) -> int:
        n = sum(len(h["q"]) + (h["cur"] is not None) for h in self.lin.values())
        n += sum(len(q) for h in self.nin.values() for q in h["q"])
        return n

    def reset_state(self):
        for h in self.lin.values():
            h["q"].clear()
            h["cur"] = None
            h["valid"].value = 0
        for h in self.lout.values():
            h["ra"] = Reassembler(h["ra"].where, self._done_fn(h["ra"].where), self.errors)
        for h in self.nin.values():
            for q in h["q"]:
                q.clear()
            h["cred"] = [self.depth] * self.vcs
            h["valid"].value = 0
        for name, h in self.nout.items():
            for b in h["buf"]:
                b.clear()
            h["ra"] = [Reassembler(f"{name}.vc{v}", self._done_fn(name), self.errors)
                       for v in range(self.vcs)]
        self.delivered.clear()

    # --- the cycle loop ---------------------------------------------------------------------
    async def step(self):
        await RisingEdge(self.clk)
        self.cycle += 1
        rng = self.rng
        # sample: local inputs accepted
        for h in self.lin.values():
            if h["cur"] is not None and int(h["ready"].value):
                pid = h["cur"][0]
                if pid is not None and pid not in self.accepted_at:
                    self.accepted_at[pid] = self.cycle - 1
                h["cur"] = None
                self.progress = self.cycle
        # local outputs
        for name, h in self.lout.items():
            if int(h["valid"].value):
                f = self.codec.unpack(uval(h["payload"]))
                if f["head"]:
                    self.first_seen.setdefault((name, f["payload"] >> 8), self.cycle - 1)
                if h["rdy"]:
                    h["ra"].flit(f)
                    self.progress = self.cycle
        # network inputs: credits back from the router
        for h in self.nin.values():
            c = uval(h["credit"])
            for v in range(self.vcs):
                if c >> v & 1:
                    h["cred"][v] += 1
                    if h["cred"][v] > self.depth:
                        self.errors.append("router returned more credits than buffer slots")
        # network outputs: into the modelled downstream buffer
        for name, h in self.nout.items():
            if int(h["valid"].value):
                v = uval(h["vc"]) if self.vcs > 1 else 0
                f = self.codec.unpack(uval(h["flit"]))
                if f["head"]:
                    self.first_seen.setdefault((name, f["payload"] >> 8), self.cycle - 1)
                h["buf"][v].append(f)
                self.progress = self.cycle
                if len(h["buf"][v]) > self.depth:
                    self.errors.append(f"{name}: credit violation on VC {v}")
        # drive: local sources
        for h in self.lin.values():
            if h["cur"] is None and h["q"] and rng.random() >= self.idle_prob:
                h["cur"] = h["q"].popleft()
                h["payload"].value = h["cur"][1]
            h["valid"].value = int(h["cur"] is not None)
        for h in self.lout.values():
            h["rdy"] = int(not h["block"] and rng.random() < self.ready_prob)
            h["ready"].value = h["rdy"]
        # network senders: one flit per cycle, VCs round-robin, obeying credits
        for h in self.nin.values():
            sent = False
            for k in range(self.vcs):
                v = (h["rr"] + k) % self.vcs
                if h["q"][v] and h["cred"][v] > 0:
                    pid, word = h["q"][v].popleft()
                    h["cred"][v] -= 1
                    h["flit"].value = word
                    h["vc"].value = v
                    h["rr"] = v + 1
                    sent = True
                    if pid is not None and pid not in self.accepted_at:
                        self.accepted_at[pid] = self.cycle
                    break
            h["valid"].value = int(sent)
        # downstream buffers drain and return credits
        for name, h in self.nout.items():
            word = 0
            for v in range(self.vcs):
                if h["buf"][v] and not h["block"] and rng.random() < self.drain_prob:
                    h["ra"][v].flit(h["buf"][v].popleft())
                    word |= 1 << v
            h["credit"].value = word

    async def run_until_idle(self, max_cycles=20000, watchdog=2000, expect=None):
        """Step until all queues are empty and ``expect()`` (if given) is true; fail on a
        watchdog timeout (no flit moved for ``watchdog`` cycles) or on max_cycles."""
        start = self.cycle
        self.progress = self.cycle
        while True:
            await self.step()
            idle = self.pending_inputs() == 0 and all(
                not any(b) for h in self.nout.values() for b in h["buf"])
            if idle and (expect is None or expect()):
                return self.cycle - start
            if self.cycle - self.progress > watchdog:
                raise AssertionError(f"deadlock watchdog: no flit moved for {watchdog} cycles "
                                     f"(pending inputs {self.pending_inputs()})")
            if self.cycle - start > max_cycles:
                raise AssertionError(f"not drained after {max_cycles} cycles")
