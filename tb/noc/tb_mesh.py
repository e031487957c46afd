"""cocotb tests of the kx x ky mesh (block ``mesh``) and the two-level system (``nocsys``).

A stream source and a back-pressuring sink on every local port; the scoreboard
is the golden model (tessera.golden.noc): every destination receives each packet
exactly once, unicast order per source/destination, nothing misrouted.  A
deadlock watchdog fails a run in which no flit moves for 3000 cycles.
Traffic: uniform (incl. self-addressed), bit-complement, transpose, hotspot,
mixed with multicast; reset in the middle of traffic; bad input; zero-load
latency against the golden formula.
"""
from __future__ import annotations

import os
import random

import cocotb

from tessera.golden import noc as G
from tessera.tb.common import TBBase, load_manifest
from tessera.tb.noc.harness import FlitCodec, Harness, uval


class MeshTB(TBBase):
    def __init__(self, dut, ready_prob=1.0, idle_prob=0.0):
        super().__init__(dut)
        p = self.params
        man = load_manifest()
        self.block = man["block"]
        self.maxlen = p["max_packet_flits"]
        self.classes = p["classes"]
        if self.block == "nocsys":
            self.sys = G.System(p["kx"], p["ky"], p["ckx"], p["cky"], (p["gw_x"], p["gw_y"]),
                                p["link_latency"], p["nop_link_latency"])
            self.addrs = [(tuple(e["chiplet"]), tuple(e["node"])) for e in man["local_ports"]]
        else:
            self.sys = G.System(p["kx"], p["ky"], noc_link=p["link_latency"],
                                sa_stages=p.get("sa_stages", 1))
            self.addrs = [((0, 0), (i % p["kx"], i // p["kx"])) for i in range(p["kx"] * p["ky"])]
        self.port_of = {a: i for i, a in enumerate(self.addrs)}
        n = len(self.addrs)
        fields = next(s for s in man["streams"] if s["name"] == "local_in__0")["payload_fields"]
        self.codec = FlitCodec(fields)
        self.nerr = len([q for q in man["ports"] if q["name"].startswith("errors__")])
        self.h = Harness(dut, self.codec, [f"local_in__{i}" for i in range(n)],
                         [f"local_out__{i}" for i in range(n)], rng=self.rng,
                         ready_prob=ready_prob, idle_prob=idle_prob)
        self.pid = 0
        self.pkts = []

    # --- traffic ---------------------------------------------------------------------------
    def node_mask_choices(self):
        gw = self.sys.gw if self.block == "nocsys" else None
        return [(x, y) for y in range(self.sys.ky) for x in range(self.sys.kx) if (x, y) != gw]

    def make_pkt(self, src, dest_addr=None, mcast=False, flits=1, rng=None, mclass=0):
        rng = rng or self.rng
        self.pid += 1
        if mcast:
            nodes = rng.sample(self.node_mask_choices(), rng.randint(1, len(self.node_mask_choices())))
            nm = G.coords_to_mask(nodes, self.sys.kx)
            chips = [(x, y) for y in range(self.sys.cky) for x in range(self.sys.ckx)]
            cs = rng.sample(chips, rng.randint(1, len(chips)))
            cm = G.coords_to_mask(cs, self.sys.ckx) if self.block == "nocsys" else 1
            pkt = G.Packet(self.pid, src, True, (cm, nm), flits, mclass)
        else:
            pkt = G.Packet(self.pid, src, False, dest_addr, flits, mclass)
        self.pkts.append(pkt)
        return pkt

    def pattern_dest(self, pattern, i, rng):
        n = len(self.addrs)
        (c, (x, y)) = self.addrs[i]
        kx, ky = self.sys.kx, self.sys.ky
        if pattern == "uniform":
            return self.addrs[rng.randrange(n)]
        if pattern == "bitcomp":
            return self.addrs[n - 1 - i]
        if pattern == "transpose":
            return self.addrs[self.port_of.get((c, (y, x)), i)] if (c, (y, x)) in self.port_of \
                else self.addrs[i]
        if pattern == "hotspot":
            return self.addrs[0] if rng.random() < 0.3 else self.addrs[rng.randrange(n)]
        raise ValueError(pattern)

    def gen(self, pattern, per_src, mcast_frac=0.2, rng=None):
        rng = rng or random.Random(self.seed)
        for _ in range(per_src):
            for i, a in enumerate(self.addrs):
                mc = rng.random() < mcast_frac
                pkt = self.make_pkt(a, self.pattern_dest(pattern, i, rng), mc,
                                    rng.randint(1, self.maxlen), rng,
                                    rng.randrange(self.classes))
                self.h.send_local(f"local_in__{i}", pkt)

    # --- checking -----------------------------------------------------------------------------
    def expected_count(self):
        return sum(len(self.sys.destinations(p)) for p in self.pkts)

    def delivered_count(self):
        return sum(len(v) for v in self.h.delivered.values())

    def received(self):
        out = {}
        for name, recs in self.h.delivered.items():
            out[self.addrs[int(name.rsplit("__", 1)[1])]] = [pid for pid, _, _ in recs]
        return out

    async def drain(self, max_cycles=200000):
        n = await self.h.run_until_idle(max_cycles=max_cycles, watchdog=3000,
                                        expect=lambda: self.delivered_count()
                                        >= self.expected_count())
        for _ in range(30):          # nothing extra may arrive afterwards
            await self.h.step()
        self.cycles += n + 30
        return n

    def check_scoreboard(self, what):
        res = G.check_deliveries(self.sys, self.pkts, self.received())
        self.check_equal(res, {"lost": 0, "duplicated": 0, "misrouted": 0, "reordered": 0}, what)
        by = {p.pid: p for p in self.pkts}
        for recs in self.h.delivered.values():
            for pid, n, _ in recs:
                if pid in by:
                    self.check_equal(n, by[pid].flits, f"length of {pid}")
        self.check(not self.h.errors, "; ".join(self.h.errors[:5]))
        return res

    def errors(self):
        return [uval(getattr(self.dut, f"errors__{i}")) for i in range(self.nerr)]

    async def start(self):
        await self.reset()
        self.h.reset_state()


async def _traffic(dut, pattern, mcast_frac=0.2):
    tb = MeshTB(dut, ready_prob=0.7, idle_prob=0.2)
    await tb.start()
    per_src = int(os.environ.get("NOC_PER_SRC", tb.params.get("per_src", 12)))
    tb.gen(pattern, per_src, mcast_frac)
    await tb.drain()
    res = tb.check_scoreboard(pattern)
    tb.check_equal(sum(tb.errors()), 0, "error counters")
    s, flits = tb.sys, sum(p.flits for p in tb.pkts)
    size = f"{s.kx}x{s.ky} mesh" if tb.block == "mesh" else f"{s.ckx}x{s.cky} chiplets of {s.kx}x{s.ky}"
    tb.report(f"{tb.block}.{pattern}", flits=flits, what=f"{size}: {len(tb.pkts)} packets ({flits} flits, "
              f"{sum(p.mcast for p in tb.pkts)} multicast), every flit vs golden XY path, {res['lost']} lost")


@cocotb.test()
async def random_uniform(dut):
    """Uniform random destinations (self included), mixed unicast/multicast, back-pressure."""
    await _traffic(dut, "uniform")


@cocotb.test()
async def random_bitcomp(dut):
    await _traffic(dut, "bitcomp")


@cocotb.test()
async def random_transpose(dut):
    await _traffic(dut, "transpose")


@cocotb.test()
async def random_hotspot(dut):
    await _traffic(dut, "hotspot")


@cocotb.test()
async def zero_load_latency(dut):
    """Head latency of lone packets equals the golden zero-load formula (unicast and
    cut-through multicast, 1 and max flits)."""
    tb = MeshTB(dut)
    await tb.start()
    rng = random.Random(tb.seed + 7)
    pairs = [(tb.addrs[0], tb.addrs[-1]), (tb.addrs[-1], tb.addrs[0])]
    pairs += [(rng.choice(tb.addrs), rng.choice(tb.addrs)) for _ in range(6)]
    for src, dst in pairs:
        for flits in (1, tb.maxlen):
            for mc in (False, True):
                if mc:
                    tb.pid += 1
                    cm = G.coords_to_mask([dst[0]], tb.sys.ckx) if tb.block == "nocsys" else 1
                    pkt = G.Packet(tb.pid, src, True, (cm, G.coords_to_mask([dst[1]], tb.sys.kx)),
                                   flits)
                    tb.pkts.append(pkt)
                else:
                    pkt = tb.make_pkt(src, dst, False, flits)
                tb.h.send_local(f"local_in__{tb.port_of[src]}", pkt)
                await tb.drain()
                out = f"local_out__{tb.port_of[dst]}"
                lat = tb.h.first_seen[(out, pkt.pid)] - tb.h.accepted_at[pkt.pid]
                tb.check_equal(lat, tb.sys.latency(src, dst, flits, mc),
                               f"zero-load latency {src}->{dst} {flits} flits mcast={mc}")
    tb.check_scoreboard("zero-load")
    tb.report(f"{tb.block}.zero_load_latency")


@cocotb.test()
async def reset_mid_traffic(dut):
    """Reset while the network is full; afterwards no stale flit appears and fresh traffic is
    delivered exactly."""
    tb = MeshTB(dut, ready_prob=0.3)
    await tb.start()
    tb.gen("uniform", 10, 0.2, random.Random(tb.seed + 1))
    for _ in range(150):
        await tb.h.step()
    dut.rst.value = 1
    for _ in range(3):
        await tb.h.step()
    tb.h.reset_state()
    dut.rst.value = 0
    tb.pkts.clear()
    tb.h.ready_prob = 0.7
    tb.gen("uniform", 6, 0.2, random.Random(tb.seed + 2))
    await tb.drain()
    tb.check_scoreboard("after reset")
    tb.check_equal(sum(tb.errors()), 0, "error counters after reset")
    tb.report(f"{tb.block}.reset_mid_traffic")


@cocotb.test()
async def bad_input(dut):
    """Destination outside the mesh, body without head, over-long packet at a local port:
    counted exactly by that node's router; good traffic alongside is delivered exactly."""
    tb = MeshTB(dut, ready_prob=0.8)
    await tb.start()
    c = tb.codec
    src = tb.addrs[-1]
    port = f"local_in__{tb.port_of[src]}"
    dst = tb.addrs[0]
    xw = next(f["width"] for f in c.fields if f["name"] == "dest.ucast.node.x")
    nbad = 2
    if tb.sys.kx < (1 << xw):          # an x outside the mesh is encodable
        bad = G.Packet(10**5, src, False, dst, 2)
        for i in range(2):
            d = c.make(bad, i, 0)
            d["dest.ucast.node.x"] = tb.sys.kx           # outside the mesh
            tb.h.send_raw_local(port, d)
        nbad = 3
    d = c.make(G.Packet(10**5 + 1, src, False, dst, 3), 1, 0)   # body without head
    tb.h.send_raw_local(port, d)
    longp = tb.make_pkt(src, dst, False, tb.maxlen)
    for i in range(tb.maxlen + 3):
        d = c.make(longp, i, 0)
        d["tail"] = int(i == tb.maxlen + 2)
        tb.h.send_raw_local(port, d)
    tb.gen("uniform", 3, 0.2)
    await tb.drain()
    tb.check_scoreboard("bad input")
    errs = tb.errors()
    # errors[] index of the source's router: mesh = node index; nocsys = see manifest order
    tb.check_equal(sum(errs), nbad, f"error counters {errs}")
    tb.report(f"{tb.block}.bad_input")
