"""Cycle-exact regression of the router's allocation loop over two cycles (``alloc_stages=2``,
issue 20): a 2x2 mesh (2 VCs x 4 flits) under mixed random traffic (lengths 1..4, ~10 %
multicast, random sink back-pressure, closed loop through the sources' ready), whose
per-cycle trace must not change.  Recorded every cycle: every node's ``local_out`` valid and
flit, ``local_in`` ready, and the traffic checkers' counters.

This pins timing, not function (``test_noc_alloc2_sim`` checks delivery): the timing cuts of
the ``alloc_stages=2`` loop (registered one-hot grant VC, registered credit compares) must be
cycle-identical, so ``EXPECT`` is the hash of the RTL before them (stop 30's, commit
3313ab1).  If an RTL change alters the trace on purpose, say which cycles moved and why, and
update ``EXPECT``."""
import hashlib

from amaranth.hdl import Value
from amaranth.sim import Simulator

from tessera.tb.noc.traffic import TrafficTop

# (k, vcs, buffer_flits, injection cycles, seed, multicast, packet length (0 = random),
#  rate) -> trace hash of stop 30's alloc_stages=2 RTL
CASE = (2, 2, 4, 150, 2, 26, 0, 30000)
EXPECT = "93edef28f08d2069"


def trace_hash(case=CASE):
    k, vcs, buf, cycles, seed, mc, plen, rate = case
    top = TrafficTop(kx=k, ky=k, vcs=vcs, buffer_flits=buf, packet_flits=0, check=True,
                     sim=True, alloc_stages=2, seed=seed)
    h = hashlib.sha256()
    last = []

    async def tb(ctx):
        ctx.set(top.rate, rate)
        ctx.set(top.mcast, mc)
        ctx.set(top.sink_ready, 200)
        ctx.set(top.plen, plen)
        ctx.set(top.enable, 1)
        for t in range(cycles + 120):
            if t == cycles:
                ctx.set(top.enable, 0)
            await ctx.tick()
            row = []
            for i in range(k * k):
                lo, li = top.mesh.local_out[i], top.mesh.local_in[i]
                row += [ctx.get(lo.valid), ctx.get(Value.cast(lo.payload)), ctx.get(li.ready)]
            row += [ctx.get(getattr(top, x)) for x in ("rcv_flits", "inj_pkts", "mcast_rcv",
                                                        "mc_inj", "seq_err", "mseq_err",
                                                        "errors")]
            h.update(repr(row).encode())
            last[:] = row[-7:]

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return h.hexdigest()[:16], last


def test_alloc2_mesh_trace_is_cycle_exact():
    got, last = trace_hash()
    rcv, inj, mrcv, minj, seq, mseq, err = last
    assert (seq, mseq, err) == (0, 0, 0), last
    assert rcv > 200 and minj > 3, last            # the run exercises unicast and multicast
    assert got == EXPECT, (got, last)
