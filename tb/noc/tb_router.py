"""cocotb tests of one router (hdl/noc/router.py) placed at node (1,1) of a 3x3 mesh.

Every network port has a credit-obeying sender and a downstream-buffer model
(random drain); the local port has a stream source and sink.  Expected output
ports come from the golden model (XY path / XY multicast tree, tessera.golden.noc).
"""
from __future__ import annotations

import itertools
import random
from collections import Counter

import cocotb

from tessera.golden import noc as G
from tessera.tb.common import TBBase, load_manifest, pack
from tessera.tb.noc.harness import FlitCodec, Harness, uval

ME = (1, 1)
IN_SRC = {"in_w": (0, 1), "in_e": (2, 1), "in_n": (1, 0), "in_s": (1, 2), "local_in": (1, 1)}
DIR_OUT = {(1, 0): "out_e", (-1, 0): "out_w", (0, -1): "out_n", (0, 1): "out_s"}
OUTS = ["out_n", "out_e", "out_s", "out_w", "local_out"]
INS = ["in_n", "in_e", "in_s", "in_w"]


def expected_outputs(src, dests) -> Counter:
    """Golden: which router outputs carry the packet (one copy per output)."""
    out = Counter()
    for a, b in G.mcast_tree(src, dests):
        if a == ME:
            out[DIR_OUT[(b[0] - a[0], b[1] - a[1])]] = 1
    if ME in dests:
        out["local_out"] = 1
    return out


class RouterTB(TBBase):
    def __init__(self, dut, ready_prob=1.0, drain_prob=1.0):
        super().__init__(dut)
        p = self.params
        self.kx, self.ky, self.V, self.D = p["kx"], p["ky"], p["vcs"], p["buffer_flits"]
        self.maxlen = p["max_packet_flits"]
        self.sa = p.get("sa_stages", 1)
        self.al = p.get("alloc_stages", 1)
        man = load_manifest()
        fields = next(s for s in man["streams"] if s["name"] == "local_in")["payload_fields"]
        self.codec = FlitCodec(fields)
        myf = next(q for q in man["ports"] if q["name"] == "my")["fields"]
        dut.my.value = pack(myf, {"node.x": ME[0], "node.y": ME[1]})
        self.h = Harness(dut, self.codec, ["local_in"], ["local_out"], rng=self.rng,
                         ready_prob=ready_prob, net_ins=INS, net_outs=OUTS[:4], vcs=self.V,
                         depth=self.D, drain_prob=drain_prob)
        self.pid = 0
        self.pkts = {}

    def new_pkt(self, src, dests, flits=1, mcast=None, mclass=0):
        self.pid += 1
        if mcast is None:
            mcast = len(dests) != 1
        if mcast:
            dest = (1, G.coords_to_mask(dests, self.kx))
        else:
            dest = ((0, 0), dests[0])
        pkt = G.Packet(self.pid, ((0, 0), src), mcast, dest, flits, mclass)
        self.pkts[pkt.pid] = (pkt, list(dests))
        return pkt

    def vc_of(self, pkt):
        V, classes = self.V, self.params["classes"]
        vpc = V // classes if V >= classes else 1
        base = pkt.mclass * vpc if V >= classes else pkt.mclass % V
        if pkt.mcast:
            (cx, cy), (x, y) = pkt.src
        else:
            (cx, cy), (x, y) = pkt.dest
        return base + (x + y + cx + cy) % vpc

    def inject(self, port, pkt):
        if port == "local_in":
            self.h.send_local(port, pkt)
        else:
            self.h.send_net(port, self.vc_of(pkt), pkt)

    def delivered_counter(self):
        got = Counter()
        for out, recs in self.h.delivered.items():
            for pid, n, _ in recs:
                got[(out, pid)] += 1
                pkt = self.pkts[pid][0]
                self.check_equal(n, pkt.flits, f"flits of pid {pid} on {out}")
        return got

    def check_all(self):
        got = self.delivered_counter()
        want = Counter()
        for pid, (pkt, dests) in self.pkts.items():
            for out, k in expected_outputs(pkt.src[1], dests).items():
                want[(out, pid)] += k
        missing = want - got
        extra = got - want
        self.check(not missing and not extra,
                   f"missing {sorted(missing)[:8]} extra {sorted(extra)[:8]}")
        self.check(not self.h.errors, "; ".join(self.h.errors[:5]))

    async def start(self):
        await self.reset()
        self.h.reset_state()


def legal_dests(src):
    """All destinations whose XY path from src passes through ME."""
    return [(x, y) for x in range(3) for y in range(3) if ME in G.xy_path(src, (x, y))]


@cocotb.test()
async def directed_turns(dut):
    """Every input -> every XY-legal output, 1-flit and max-length packets; zero-load latency."""
    tb = RouterTB(dut)
    await tb.start()
    for port, src in IN_SRC.items():
        for d in legal_dests(src):
            for flits in (1, tb.maxlen):
                pkt = tb.new_pkt(src, [d], flits)
                tb.inject(port, pkt)
                tb.cycles += await tb.h.run_until_idle(
                    expect=lambda p=pkt.pid: any(r[0] == p for v in tb.h.delivered.values()
                                                 for r in v))
                out = next(iter(expected_outputs(src, [d])))
                # zero load: ROUTER_CYCLES through the router, +1 for the local output queue
                want = G.zero_load_latency(0, sa_stages=tb.sa, alloc_stages=tb.al) - 1 + (out == "local_out")
                lat = tb.h.first_seen[(out, pkt.pid)] - tb.h.accepted_at[pkt.pid]
                tb.check_equal(lat, want, f"latency {port}->{out}")
    tb.check_all()
    tb.check_equal(uval(dut.errors), 0, "error counter")
    tb.report("router.directed_turns", what=f"router: {tb.pid} packets, every XY-legal turn, "
                                            "output port + zero-load latency vs golden")


@cocotb.test()
async def multicast_subsets(dut):
    """Multicast from the local port to every non-empty subset of the 5 outputs and from the
    west port to every subset of its 4 legal outputs; 1-flit and max-length; cut-through."""
    tb = RouterTB(dut)
    await tb.start()
    target = {"out_e": (2, 1), "out_w": (0, 1), "out_n": (1, 0), "out_s": (1, 2),
              "local_out": (1, 1)}
    for port, outs in (("local_in", OUTS), ("in_w", ["out_e", "out_n", "out_s", "local_out"])):
        for r in range(1, len(outs) + 1):
            for sub in itertools.combinations(outs, r):
                for flits in (1, tb.maxlen):
                    pkt = tb.new_pkt(IN_SRC[port], [target[o] for o in sub], flits, mcast=True)
                    tb.inject(port, pkt)
                    tb.cycles += await tb.h.run_until_idle(
                        expect=lambda p=pkt.pid, n=len(sub): sum(
                            r[0] == p for v in tb.h.delivered.values() for r in v) == n)
                    # cut-through: the head leaves only after the tail is in the buffer
                    for o in sub:
                        lat = tb.h.first_seen[(o, pkt.pid)] - tb.h.accepted_at[pkt.pid]
                        want = G.router_cost(flits, True, G.router_cycles_of(tb.sa, tb.al),
                                             G.mcast_tail_cycles_of(tb.sa, tb.al)) + (o == "local_out")
                        tb.check_equal(lat, want, f"mcast latency {port}->{o} ({flits} flits)")
    tb.check_all()
    tb.check_equal(uval(dut.errors), 0, "error counter")
    tb.report("router.multicast_subsets")


@cocotb.test()
async def blocked_outputs(dut):
    """East blocked downstream: traffic for east stops after exactly the buffer credits, other
    outputs keep flowing; after release everything arrives."""
    tb = RouterTB(dut)
    await tb.start()
    tb.h.nout["out_e"]["block"] = True
    east = [tb.new_pkt((0, 1), [(2, 1)], tb.maxlen, mclass=0) for _ in range(3)]
    for p in east:
        tb.inject("in_w", p)
    south = [tb.new_pkt((1, 0), [(1, 2)], 2) for _ in range(4)]
    for p in south:
        tb.inject("in_n", p)
    local_s = [tb.new_pkt((1, 1), [(1, 2)], 3) for _ in range(3)]
    for p in local_s:
        tb.inject("local_in", p)
    for _ in range(200):
        await tb.h.step()
    tb.cycles += 200
    got_s = [pid for pid, _, _ in tb.h.delivered["out_s"]]
    tb.check_equal(sorted(got_s), sorted(p.pid for p in south + local_s), "south while east blocked")
    vc = tb.vc_of(east[0])
    tb.check_equal(len(tb.h.nout["out_e"]["buf"][vc]), tb.D, "flits sent into a blocked VC")
    tb.check_equal(len(tb.h.delivered["out_e"]), 0, "nothing drained from blocked east")
    tb.h.nout["out_e"]["block"] = False
    tb.cycles += await tb.h.run_until_idle()
    tb.check_equal([pid for pid, _, _ in tb.h.delivered["out_e"]], [p.pid for p in east],
                   "east order after release")
    tb.check_all()
    tb.report("router.blocked_outputs")


@cocotb.test()
async def random_traffic(dut):
    """Random unicast/multicast packets from all 5 inputs, random lengths and classes, random
    downstream drain and local back-pressure; scoreboard against the golden XY tree."""
    tb = RouterTB(dut, ready_prob=0.6, drain_prob=0.5)
    await tb.start()
    rng = random.Random(tb.seed)
    for _ in range(int(tb.params.get("n_random", 300))):
        port = rng.choice(list(IN_SRC))
        src = IN_SRC[port]
        legal = legal_dests(src)
        mcast = rng.random() < 0.3
        dests = rng.sample(legal, rng.randint(1, len(legal))) if mcast else [rng.choice(legal)]
        pkt = tb.new_pkt(src, dests, rng.randint(1, tb.maxlen), mcast=mcast,
                         mclass=rng.randrange(tb.params["classes"]))
        tb.inject(port, pkt)
    tb.cycles += await tb.h.run_until_idle(max_cycles=50000)
    for _ in range(20):
        await tb.h.step()
    tb.check_all()
    tb.check_equal(uval(dut.errors), 0, "error counter")
    tb.report("router.random_traffic")


@cocotb.test()
async def bad_input(dut):
    """Destination outside the mesh, body/tail without head, over-long packets (network and
    local ports): dropped/truncated, counted exactly, router keeps working."""
    tb = RouterTB(dut)
    await tb.start()
    c = tb.codec
    good_after = []
    expected_errors = 0
    for port in ("in_w", "local_in"):
        src = IN_SRC[port]
        # 1. destination outside the 3x3 mesh (unicast x=3) and an out-of-range multicast mask
        bad = tb.new_pkt(src, [(2, 1)], 2)
        tb.pkts.pop(bad.pid)
        for i in range(2):
            d = c.make(bad, i, 3)
            d["dest.ucast.node.x"] = 3
            (tb.h.send_raw_local(port, d) if port == "local_in" else tb.h.send_raw_net(port, 0, d))
        bad2 = tb.new_pkt(src, [(2, 1), (2, 2)], 1, mcast=True)
        tb.pkts.pop(bad2.pid)
        d = c.make(bad2, 0, 3)
        d["dest.mcast.nodes"] |= 1 << 9            # bit of a node outside 3x3
        (tb.h.send_raw_local(port, d) if port == "local_in" else tb.h.send_raw_net(port, 0, d))
        expected_errors += 2
        # 2. body and tail flits without a head
        orphan = tb.new_pkt(src, [(2, 1)], 3)
        tb.pkts.pop(orphan.pid)
        for i in (1, 2):
            d = c.make(orphan, i, 3)
            (tb.h.send_raw_local(port, d) if port == "local_in" else tb.h.send_raw_net(port, 0, d))
        expected_errors += 2
        # 3. over-long packet: max+2 flits -> truncated to max flits, one error
        longp = tb.new_pkt(src, [(2, 1)], tb.maxlen)
        vc = tb.vc_of(longp)
        for i in range(tb.maxlen + 2):
            d = c.make(longp, i, 3)
            d["tail"] = int(i == tb.maxlen + 1)
            (tb.h.send_raw_local(port, d) if port == "local_in" else tb.h.send_raw_net(port, vc, d))
        expected_errors += 1
        good = tb.new_pkt(src, [(2, 1)], 2)
        tb.inject(port, good)
        good_after.append(good.pid)
        tb.cycles += await tb.h.run_until_idle()
    for _ in range(10):
        await tb.h.step()
    tb.check_equal(uval(dut.errors), expected_errors, "error counter")
    tb.check_all()     # truncated packets arrive with max_packet_flits flits, good ones intact
    tb.report("router.bad_input")
