"""Global PE cycle-exact regression: a closed-loop random run of the bare Global PE
(amaranth.sim) whose per-cycle output trace must not change.

Stimulus: a tb scenario command stream (groups, RECV loads, SENDs, EWISEs, malformed
commands, read-back), consumers returning one credit per tile after a random delay,
producers sending a RECV's OUT packets 12 cycles after the RECV command is taken (a
command touching an open RECV window is held back, as the controller must), random
``net_out`` / ``cpl`` back-pressure.  The run is closed-loop (the stimulus reacts to the
outputs), so any change of any cycle shows.  Recorded every cycle: ``cmd.ready``, ``cpl``,
``net_out``, ``net_in.ready``, ``status``.

This pins timing, not function (the cocotb suite checks function against the golden
model): the Global PE's cycle counts feed the chiplet cycle model (gpe_cmd_cycles, SEND
and RECV rates), so a change must be deliberate.  If an RTL change alters the trace on
purpose, list the changed numbers (old -> new) and update ``EXPECT``.
"""
import hashlib
import json
import random

import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from tessera.hdl.global_pe.global_pe import GlobalPE
from tessera.hdl.global_pe.packets import (KIND_CREDIT, KIND_OUT, OP_EWISE, OP_RECV, GpeConfig,
                                           credit_layout, out_header_layout, pack_fields)
from tessera.tb.global_pe import scenarios as sc

# default parameters, seed 4: 30 random commands over 48 words (dense hazards; the RECVs
# and EWISEs contend for banks).  ``read_latency=2`` (not the default): stop 28 (SEND read
# ahead, EWISEs only moved) 1303 -> 1309 cycles; stop 29 (SEND reads in its issue stage, every
# SEND flit and completion one cycle later, see test_send_read_latency_2_is_one_cycle_later)
# 1309 -> 1322 cycles: the closed loop returns credits and takes commands later.
SEED, N_CMDS, SPAN = 4, 30, 48
EXPECT = {"cycles": 1303, "completions": 36,
          "sha256": "c305ce5fdce23fa7b34ef1bb2ec4b5090e88a3dc0a29bbf97d1fcc24aa480c2c"}
EXPECT_RL2 = {"cycles": 1322, "completions": 36,
              "sha256": "d9b6a17be364019a27d303d933ef75322f08d508da424fea51ecf6fec3efb68f"}
# ``read_latency=2, ewise_stages=4`` (stop 30, not the default): every EWISE write one cycle
# later (test_ewise_stages_4_is_one_cycle_later); closed loop 1322 -> 1318 cycles
EXPECT_RL2_ES4 = {"cycles": 1318, "completions": 36,
                  "sha256": "a5c0f3bc3973fdc50c656d09e83601a17fe89e760cad5ff1b842feb220cdb6c7"}
# the same stream without its EWISEs (SENDs, RECVs, GROUPs, rejected commands), every
# output but ``status`` (see the test): the stop-26 design's trace; at read latency 2
# (stop 29) 1114 -> 1113 cycles (the closed loop reacts to the later flits)
EXPECT_NO_EWISE_IO = {1: {"cycles": 1114, "completions": 20,
                          "sha256": "bf3f2908015239b64f6886c8b849f1d3116ad49b5109270307e0f0f612567421"},
                      2: {"cycles": 1113, "completions": 20,
                          "sha256": "cf7a280bbcbb62aa8f13d8caa46da0b2d4ff6b0028fb51bbe5bfcd75969eb5fc"}}

from tessera.tb.global_pe.checks import nest as _nest


def closed_loop_trace(params, seed, n_cmds, span, drop=None, io_only=False):
    """``drop``: leave the commands with this opcode out of the random stream;
    ``io_only``: hash every recorded output but ``status``."""
    cfg = GpeConfig(**params)
    rng = random.Random(seed)
    gpe = GlobalPE(**params)
    cmds = [c for c in sc.random_sequence(rng, cfg, n_cmds=n_cmds, span=span) if c.op != drop]
    lay = gpe.net_in.payload.shape()
    cmd_lay = gpe.cmd.payload.shape()
    cr_l, out_l = credit_layout(), out_header_layout()
    outs = [Value.cast(v) for v in (gpe.cmd.ready, gpe.cpl.valid, gpe.cpl.payload,
                                    gpe.net_out.valid, gpe.net_out.payload, gpe.net_in.ready,
                                    gpe.status)]
    rows = []
    ncpl = [0]

    def flit(head, tail, ci, payload):
        return sc.sim_flit(lay, cfg, head, tail, ci, payload)

    async def bench(ctx):
        q = list(cmds)
        pkts, cur, credits, later, open_recv = [], [], [], [], []
        quiet = 0
        ctx.set(Value.cast(gpe.node_id), 0)
        for cycle in range(20000):
            hold = False
            if q:
                regs = sc.regions(q[0])
                hold = any(lo < h and a < hi for _, lo, hi in open_recv for a, h in regs) \
                    or (q[0].op == OP_RECV and len(open_recv) >= cfg.recv_slots)
            ctx.set(gpe.cmd.valid, bool(q) and not hold)
            if q and not hold:
                ctx.set(gpe.cmd.payload, cmd_lay.const(_nest(q[0].fields())))
            taken = bool(q) and not hold and ctx.get(gpe.cmd.ready)
            for c in [c for c in credits if c[0] <= cycle]:
                credits.remove(c)
                pkts.append([flit(1, 1, c[1], pack_fields(cr_l, kind=KIND_CREDIT, count=1))])
            for c in [c for c in later if c[0] <= cycle]:
                later.remove(c)
                pkts.append(c[1])
            if not cur and pkts and rng.random() < 0.9:
                cur = pkts.pop(rng.randrange(len(pkts)) if rng.random() < 0.3 else 0)
            ctx.set(gpe.net_in.valid, bool(cur))
            if cur:
                ctx.set(gpe.net_in.payload, cur[0])
            in_go = bool(cur) and ctx.get(gpe.net_in.ready)
            ctx.set(gpe.net_out.ready, rng.random() < 0.85)
            go = ctx.get(gpe.net_out.valid) and ctx.get(gpe.net_out.ready)
            of = ctx.get(gpe.net_out.payload) if go else None
            cpl = ctx.get(gpe.cpl.payload.tag) if ctx.get(gpe.cpl.valid) else None
            ctx.set(gpe.cpl.ready, rng.random() < 0.8)
            cpl_go = cpl is not None and ctx.get(gpe.cpl.ready)
            await ctx.tick()
            rows.append([ctx.get(v) for v in outs])
            if in_go:
                cur.pop(0)
            if taken:
                c = q.pop(0)
                if c.op == OP_RECV:
                    open_recv.append((c.tag, c.a, c.a + c.cnt[0]))
                    for src, a, ws in c.arrivals:
                        p = [flit(1, 0, src, pack_fields(out_l, kind=KIND_OUT, addr=a,
                                                         nwords=len(ws)))]
                        p += [flit(0, k == len(ws) - 1, src, w) for k, w in enumerate(ws)]
                        later.append((cycle + 12, p))
            if cpl_go:
                ncpl[0] += 1
                open_recv = [r for r in open_recv if r[0] != cpl]
            if of is not None and of.head:
                if of.mcast:
                    ch, nd = int(of.dest.mcast.chiplets), int(of.dest.mcast.nodes)
                    dests = [c * cfg.nodes + n for c in range(cfg.chiplets) if ch >> c & 1
                             for n in range(cfg.nodes) if nd >> n & 1]
                else:
                    u = of.dest.ucast
                    dests = [(int(u.chiplet.y) * cfg.chiplet_mesh_x + int(u.chiplet.x))
                             * cfg.nodes + int(u.node.y) * cfg.node_mesh_x + int(u.node.x)]
                for d in dests:
                    credits.append((cycle + rng.randint(2, 60), d))
            if not q and not credits and not pkts and not cur and not later:
                quiet += 1
                if quiet == 200:
                    break
            else:
                quiet = 0

    sim = Simulator(gpe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    if io_only:
        rows = [r[:-1] for r in rows]
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    return {"cycles": len(rows), "completions": ncpl[0], "sha256": digest}


def test_global_pe_cycle_trace_unchanged():
    got = closed_loop_trace({}, SEED, N_CMDS, SPAN)
    assert got == EXPECT, got


def test_global_pe_cycle_trace_read_latency_2():
    got = closed_loop_trace({"read_latency": 2}, SEED, N_CMDS, SPAN)
    assert got == EXPECT_RL2, got


def test_global_pe_cycle_trace_ewise_stages_4():
    got = closed_loop_trace({"read_latency": 2, "ewise_stages": 4}, SEED, N_CMDS, SPAN)
    assert got == EXPECT_RL2_ES4, got


@pytest.mark.parametrize("rl,stages", [(1, 3), (2, 3), (2, 4)])
def test_send_trace_without_ewise(rl, stages):
    """The closed-loop stream without its EWISEs, every output but ``status`` (the stream
    has a RECV writing a word a SEND reads in the same cycle: stop 26 flags
    ``rw_collision`` at cycle 563).  Read latency 1: the stop-26 design's trace, cycle for
    cycle; read latency 2: pinned (stop 29); ``ewise_stages=4`` changes nothing here."""
    got = closed_loop_trace({"read_latency": rl, "ewise_stages": stages}, SEED, N_CMDS, SPAN,
                            drop=OP_EWISE, io_only=True)
    assert got == EXPECT_NO_EWISE_IO[rl], got

def send_only_departures(params, seed, n_sends=8, span=48):
    """An open-loop SEND run: a RECV fills ``[0, span)`` with random words (producers'
    OUT packets back to back from 12 cycles after the RECV is taken), then the groups and ``n_sends`` random SENDs (multicast and
    unicast, strided) are issued.  ``net_out`` and ``cpl`` are always ready, the credit
    window is 255 tiles (never binds: no credit returns) and there are as many send slots
    as SENDs, so nothing the outputs do feeds back into the inputs.  Returns
    (``net_out`` departures as (cycle, flit), completions as (cycle, tag), cycles in which
    ``cmd`` was taken)."""
    params = {**params, "credit_window": 255, "send_slots": n_sends}
    cfg = GpeConfig(**params)
    rng = random.Random(seed)
    gpe = GlobalPE(**params)
    recv = sc.load_command(rng, cfg, 0xF0, 0, span)
    cmds = [recv] + sc.group_commands(rng, cfg, tag0=0xE0) \
        + [sc.random_send(rng, cfg, k, span) for k in range(n_sends)]
    lay = gpe.net_in.payload.shape()
    cmd_lay = gpe.cmd.payload.shape()
    out_l = out_header_layout()
    flits = []
    for src, a, ws in recv.arrivals:
        c, n = divmod(src, cfg.nodes)
        srcf = {"node": {"x": n % cfg.node_mesh_x, "y": n // cfg.node_mesh_x},
                "chiplet": {"x": c % cfg.chiplet_mesh_x, "y": c // cfg.chiplet_mesh_x}}
        body = [pack_fields(out_l, kind=KIND_OUT, addr=a, nwords=len(ws))] + ws
        for k, w in enumerate(body):
            flits.append(lay.const({"head": k == 0, "tail": k == len(body) - 1, "mclass": 1,
                                    "mcast": 0, "src": srcf, "payload": w}))
    deps, cpls, taken_at = [], [], []

    async def bench(ctx):
        q = list(cmds)
        recv_open, feed_from = False, None
        ctx.set(Value.cast(gpe.node_id), 0)
        ctx.set(gpe.net_out.ready, 1)
        ctx.set(gpe.cpl.ready, 1)
        for cycle in range(3000):
            # after the RECV, the rest waits for its completion (the controller's rule)
            send_ok = bool(q) and not (recv_open and q[0] is not recv)
            ctx.set(gpe.cmd.valid, send_ok)
            if send_ok:
                ctx.set(gpe.cmd.payload, cmd_lay.const(_nest(q[0].fields())))
            feed = feed_from is not None and cycle >= feed_from and bool(flits)
            ctx.set(gpe.net_in.valid, feed)
            if feed:
                ctx.set(gpe.net_in.payload, flits[0])
            taken = send_ok and ctx.get(gpe.cmd.ready)
            in_go = feed and ctx.get(gpe.net_in.ready)
            if ctx.get(gpe.net_out.valid):
                deps.append((cycle, ctx.get(Value.cast(gpe.net_out.payload))))
            cpl = ctx.get(gpe.cpl.payload.tag) if ctx.get(gpe.cpl.valid) else None
            await ctx.tick()
            if in_go:
                flits.pop(0)
            if taken:
                c = q.pop(0)
                taken_at.append(cycle)
                if c is recv:       # the producers start once the window is open
                    recv_open, feed_from = True, cycle + 12
            if cpl is not None:
                cpls.append((cycle, cpl))
                recv_open = recv_open and cpl != recv.tag
            if not q and len(cpls) == len(cmds):
                break

    sim = Simulator(gpe)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return deps, cpls, taken_at


def test_send_read_latency_2_is_one_cycle_later():
    """Read latency 2 (stop 29): the SEND engine reads in its issue stage, as at read
    latency 1, and the flit meets the word one register stage later, so with nothing fed
    back every SEND flit leaves exactly one cycle later (same flits, same order, payloads
    included) and every SEND completes one cycle later; commands are taken in the same
    cycles, and the RECV before them is unchanged."""
    d1, c1, t1 = send_only_departures({}, 7)
    d2, c2, t2 = send_only_departures({"read_latency": 2}, 7)
    assert len(d1) > 150 and len({f for _, f in d1}) > 50, (len(d1), d1[:3])
    assert t2 == t1
    assert d2 == [(c + 1, f) for c, f in d1]
    recv_tag = 0xF0
    assert [x for x in c2 if x[1] == recv_tag] == [x for x in c1 if x[1] == recv_tag]
    sends1 = [(c, t) for c, t in c1 if t < 0xE0]
    assert len(sends1) == 8
    assert [(c, t) for c, t in c2 if t < 0xE0] == [(c + 1, t) for c, t in sends1]
