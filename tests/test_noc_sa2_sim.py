"""Two-cycle switch allocation (router ``sa_stages=2``) in a mesh, in amaranth.sim: mixed
random traffic (lengths 1..4, ~10 % multicast, random sink back-pressure) through a 2x2 (and,
in make soak, 3x3) mesh of pipelined routers with the hardware checkers of tessera.tb.noc.traffic; after the
generators stop the mesh must drain with nothing lost, duplicated or reordered and no router
error.  Run at full-rate buffers (5 flits, 2 VCs) and below them (4 flits, 1 VC: the credit
that arrives in the cycle it is needed must count at once)."""
import pytest
from amaranth.sim import Simulator

from tessera.tb.noc.traffic import TrafficTop


# (make test budget: the 2x2 runs; the 3x3 runs take minutes in amaranth.sim -> make soak).
# sa_stages=1 (the default router, 2 VCs x 4 flits): make test's mixed-traffic mesh check since
# the Verilated 4x4 soak (tests/test_noc_soak.py) moved to make soak (stop 30, budget).
@pytest.mark.parametrize("k,vcs,buf,cycles,sa", [
    (2, 1, 4, 600, 2),
    (2, 2, 4, 600, 1),
    pytest.param(3, 1, 4, 1200, 2, marks=pytest.mark.slow),
    pytest.param(3, 2, 5, 1200, 2, marks=pytest.mark.slow)])
def test_sa2_mesh_random_traffic_drains(k, vcs, buf, cycles, sa):
    top = TrafficTop(kx=k, ky=k, vcs=vcs, buffer_flits=buf, packet_flits=0, check=True,
                     sim=True, sa_stages=sa, full_rate_check=False, seed=vcs)
    res = {}

    async def tb(ctx):
        ctx.set(top.rate, 9000)
        ctx.set(top.mcast, 26)
        ctx.set(top.sink_ready, 200)
        ctx.set(top.plen, 0)
        ctx.set(top.enable, 1)
        await ctx.tick().repeat(cycles)
        ctx.set(top.enable, 0)
        await ctx.tick().repeat(cycles + 300)
        for k in ("gen_pkts", "inj_pkts", "rcv_pkts", "rcv_flits", "mcast_due", "mcast_rcv",
                  "mc_inj", "seq_err", "mseq_err", "errors"):
            res[k] = ctx.get(getattr(top, k))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    uni = res["inj_pkts"] - res["mc_inj"]
    assert res["rcv_flits"] > cycles * k * k // 4, res
    assert res["mc_inj"] > 5, res
    assert res["gen_pkts"] == res["inj_pkts"], res
    assert (res["rcv_pkts"], res["mcast_rcv"]) == (uni, res["mcast_due"]), res
    assert (res["seq_err"], res["mseq_err"], res["errors"]) == (0, 0, 0), res
