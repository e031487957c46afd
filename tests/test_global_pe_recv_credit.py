"""Global PE: RECV's registered window match and the multicast manager's credit counters,
each simulated alone (amaranth.sim) under random stimulus.

* RECV keeps ``waddr >= a`` and ``waddr < a + count`` of every slot in registers (stop 31,
  timing).  The test checks, every cycle, that they equal the two compares of the current
  ``waddr`` and window (the definition they replace), with windows opening in the middle of
  packets, headers at any address and back-to-back body flits; and that each credit return
  reaches exactly its consumer's group copy.
* The credit counters (spec, ``mcast`` docstring): initialised to the window W; a tile taken
  for a lane decrements every member one cycle after the pick; a CREDIT return adds its
  count, clamped to W, and a return beyond the window sets the sticky ``overflow``.  The
  model below is written from that rule; the RTL's small-counter table must follow it.
"""
import random

from amaranth.hdl import Value
from amaranth.sim import Simulator

from tessera.hdl.global_pe.mcast import MulticastManager
from tessera.hdl.global_pe.packets import (KIND_CREDIT, KIND_OUT, GpeConfig, credit_layout,
                                           out_header_layout, pack_fields)
from tessera.hdl.global_pe.recv import CR_GROUP, RecvUnit, cr_clip
from tessera.tb.global_pe import scenarios as sc

CFG = GpeConfig()


def test_recv_window_flags_equal_the_compares():
    cfg = CFG
    dut = RecvUnit(cfg, 10)
    rng = random.Random(7)
    lay = dut.net_in.payload.shape()
    out_l, cr_l = out_header_layout(), credit_layout()
    S = cfg.recv_slots
    seen = {"hdr": 0, "inc": 0, "start_in_body": 0, "in_win": 0, "credits": 0}

    def flit(head, tail, ci, payload):
        return sc.sim_flit(lay, cfg, head, tail, ci, payload)

    async def bench(ctx):
        d = dut.dbg
        a, cnt = 100, 8
        start_next = False
        pkt = []
        expect_cr = None
        for cycle in range(1500):
            start = start_next
            slot = rng.randrange(S)
            if not start:                 # a / count change, except the cycle before a start
                a, cnt = rng.choice([(rng.randrange(1 << 16), rng.randrange(1 << 16)),
                                     (rng.randrange(60, 140), rng.randrange(0, 40))])
            start_next = rng.random() < 0.08
            ctx.set(dut.start, start)
            ctx.set(dut.start_slot, slot)
            ctx.set(dut.a, a)
            ctx.set(dut.count, cnt)
            ctx.set(dut.mask.chiplets, (1 << cfg.chiplets) - 1)
            ctx.set(dut.mask.nodes, (1 << cfg.nodes) - 1)
            if start and ctx.get(d["in_body"]):
                seen["start_in_body"] += 1
            if not pkt and rng.random() < 0.7:
                src = rng.randrange(cfg.consumers)
                if rng.random() < 0.3:
                    c = rng.randrange(256)
                    pkt = [flit(1, 1, src, pack_fields(cr_l, kind=KIND_CREDIT, count=c))]
                    pkt_cr = (src, min(c, cr_clip(cfg)))
                else:
                    n = rng.randrange(1, 12)
                    hdr_a = rng.choice([rng.randrange(1 << 16), rng.randrange(50, 150),
                                        (1 << 16) - rng.randrange(1, 8)])
                    pkt = [flit(1, 0, src, pack_fields(out_l, kind=KIND_OUT, addr=hdr_a,
                                                       nwords=n))]
                    pkt += [flit(0, int(i == n - 1), src, rng.getrandbits(32)) for i in range(n)]
                    pkt_cr = None
                pos = 0
            valid = bool(pkt) and rng.random() < 0.85
            ctx.set(dut.net_in.valid, valid)
            if pkt:
                ctx.set(dut.net_in.payload, pkt[0])
            ctx.set(dut.wr.grant, ctx.get(dut.wr.valid))    # RECV is the first writer
            # the registered flags equal the compares of the current address and window
            wa = ctx.get(d["waddr"])
            for k in range(S):
                ge = wa >= ctx.get(d["win_a"][k])
                lt = wa < ctx.get(d["win_e"][k])
                assert ctx.get(d["ge"][k]) == ge, (cycle, k, "ge")
                assert ctx.get(d["lt"][k]) == lt, (cycle, k, "lt")
                seen["in_win"] += ge and lt
            # a credit return accepted last cycle shows in its group's copy only
            en = ctx.get(dut.cr_g_en)
            if expect_cr is None:
                assert en == 0, cycle
            else:
                src, c = expect_cr
                g = src // CR_GROUP
                assert en == 1 << g, cycle
                assert ctx.get(dut.cr_g_local[g]) == src % CR_GROUP
                assert ctx.get(dut.cr_g_count[g]) == c
                seen["credits"] += 1
            expect_cr = None
            if valid and ctx.get(dut.net_in.ready):
                if pkt_cr is not None:
                    expect_cr = pkt_cr
                else:
                    seen["inc" if pos else "hdr"] += 1
                pkt, pos = pkt[1:], pos + 1
            await ctx.tick()
        assert seen["start_in_body"] > 25 and seen["in_win"] > 100, seen
        assert seen["hdr"] > 50 and seen["inc"] > 250 and seen["credits"] > 25, seen

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_mcast_credit_counters_follow_the_rule():
    cfg = CFG
    W = cfg.credit_window
    dut = MulticastManager(cfg)
    rng = random.Random(11)
    G = cfg.groups

    async def bench(ctx):
        # random group table, written once
        table = []
        for g in range(G):
            ch = 1 << rng.randrange(cfg.chiplets)          # small groups (1-3 members)
            nd = 0
            for _ in range(rng.randrange(1, 4)):
                nd |= 1 << rng.randrange(cfg.nodes)
            table.append({c * cfg.nodes + n for c in range(cfg.chiplets) if ch >> c & 1
                          for n in range(cfg.nodes) if nd >> n & 1})
            ctx.set(dut.tw_en, 1)
            ctx.set(dut.tw_idx, g)
            ctx.set(dut.tw_mask.chiplets, ch)
            ctx.set(dut.tw_mask.nodes, nd)
            await ctx.tick()
        ctx.set(dut.tw_en, 0)
        for k in range(cfg.ucast_lanes):            # unicast lanes: consumer 0, never picked
            ctx.set(Value.cast(dut.uaddr[k]), 0)
        for _ in range(3):
            await ctx.tick()
        credit = [W] * cfg.consumers
        ovf = [False] * cfg.consumers
        pend_take = None                # lane picked last cycle
        last_pick = -2
        n_ovf = n_ret = n_take = 0
        for cycle in range(600):
            assert [ctx.get(dut.credits[i]) for i in range(cfg.consumers)] == credit, cycle
            assert [ctx.get(f) for f in dut.dbg["overflow"]] == ovf, cycle
            assert ctx.get(dut.overflow) == any(ovf), cycle
            # pick a ready group lane (at most every second cycle, as SEND does)
            ready = ctx.get(dut.lane_ready)
            lanes = [g for g in range(G) if ready >> g & 1]
            pick = None
            if lanes and cycle - last_pick >= 2 and rng.random() < 0.6:
                pick = rng.choice(lanes)
                last_pick = cycle
            ctx.set(dut.cons_en, pick is not None)
            ctx.set(dut.cons_sel, 0 if pick is None else 1 << pick)
            # a credit return (as RECV registers it): to a random consumer; mostly legal
            ret = None
            if rng.random() < 0.5:
                low = [j for j in range(cfg.consumers) if credit[j] < W]
                i = rng.choice(low) if low and rng.random() < 0.8 else rng.randrange(cfg.consumers)
                room = W - credit[i]
                c = rng.randrange(0, room + 1) if rng.random() < 0.95 else room + rng.choice([1, 1, 2, 3, 255])
                ret = (i, min(c, cr_clip(cfg)))
            ctx.set(dut.cr_g_en, 0 if ret is None else 1 << (ret[0] // CR_GROUP))
            if ret is not None:
                g = ret[0] // CR_GROUP
                ctx.set(dut.cr_g_local[g], ret[0] % CR_GROUP)
                ctx.set(dut.cr_g_count[g], ret[1])
            await ctx.tick()
            # the rule: the take of last cycle's pick, then the return, clamped to W
            dec = table[pend_take] if pend_take is not None else set()
            n_take += pend_take is not None
            for i in dec:
                credit[i] -= 1
                assert credit[i] >= 0
            if ret is not None:
                i, c = ret
                n_ret += 1
                if credit[i] + c > W:
                    ovf[i] = True
                    n_ovf += 1
                credit[i] = min(W, credit[i] + c)
            pend_take = pick
        assert n_take > 60 and n_ret > 250 and 5 < n_ovf and sum(ovf) < cfg.consumers // 2, (n_take, n_ret, n_ovf)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
