"""Switch-arbiter fairness (issue 20): one router (amaranth.sim) at (1,1) of a 3x3 mesh, every
input saturated with 1-flit packets for the local output.  Round-robin over the input VCs
must give every input a grant within a bound and equal shares (a stuck or broken pointer
starves some input and fails here)."""
import pytest
from amaranth.sim import Simulator

from tessera.hdl.noc.router import L, PORTS, Router

CYCLES, WARMUP = 400, 40


def _saturate(vcs=2, classes=2, buffer_flits=4, alloc_stages=1):
    r = Router(kx=3, ky=3, max_node=4, payload_width=8, vcs=vcs, classes=classes,
               buffer_flits=buffer_flits, max_packet_flits=buffer_flits,
               alloc_stages=alloc_stages)
    f = r.cfg.flit
    V, D = vcs, buffer_flits
    seen = []                                     # (cycle, source input VC) at the local output

    def flit(src, mclass):
        return f.const({"head": 1, "tail": 1, "mclass": mclass, "mcast": 0,
                        "dest": {"ucast": {"node": {"x": 1, "y": 1}}}, "payload": src})

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        ctx.set(r.local_out.ready, 1)
        cred = [[D] * V for _ in range(4)]
        for cyc in range(CYCLES):
            for p in range(4):
                lk = getattr(r, f"in_{PORTS[p]}")
                v = cyc % V if cred[p][cyc % V] else (cyc + 1) % V
                if cred[p][v]:
                    cred[p][v] -= 1
                    ctx.set(lk.valid, 1)
                    ctx.set(lk.vc, v)
                    ctx.set(lk.flit, flit(p * V + v, v * classes // V))
                else:
                    ctx.set(lk.valid, 0)
            lv = cyc % V
            ctx.set(r.local_in.valid, 1)
            ctx.set(r.local_in.payload, flit(L * V + lv, lv * classes // V))
            if ctx.get(r.local_out.valid):
                seen.append((cyc, ctx.get(r.local_out.payload.payload)))
            await ctx.tick()
            for p in range(4):
                lk = getattr(r, f"in_{PORTS[p]}")
                back = ctx.get(lk.credit)
                for v in range(V):
                    cred[p][v] += (back >> v) & 1

    sim = Simulator(r)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return seen


@pytest.mark.parametrize("alloc_stages", [1, 2])
def test_switch_arbiter_round_robin_fairness(alloc_stages):
    """(alloc_stages=2: the same arbiter; every grant is valid.)"""
    seen = [(c, s) for c, s in _saturate(alloc_stages=alloc_stages) if c >= WARMUP]
    # the local output is saturated: one flit every cycle
    assert len(seen) >= (CYCLES - WARMUP) - 2
    srcs = sorted({s for _, s in seen})
    # every input port gets through (the local input's VC follows its class, both used)
    ports = {s // 2 for s in srcs}
    assert ports == set(range(5)), f"starved input ports: {set(range(5)) - ports}"
    counts = {p: sum(1 for _, s in seen if s // 2 == p) for p in range(5)}
    share = len(seen) / 5
    assert all(abs(n - share) <= 0.1 * share for n in counts.values()), counts
    # bounded wait: no input port goes more than 2 rounds (2 x 10 input VCs) without a grant
    last = {p: WARMUP for p in range(5)}
    worst = 0
    for c, s in seen:
        worst = max(worst, c - last[s // 2])
        last[s // 2] = c
    assert worst <= 20, f"an input waited {worst} cycles for a grant"
