"""Fast router checks in amaranth.sim (the cocotb suite is the full one): one router at (1,1)
of a 3x3 mesh; every input port -> every destination XY routing sends through it, and a
multicast from the local port to all nine nodes; each packet must leave on exactly the
golden model's outputs (tessera.golden.noc), with the zero-load router latency."""
import pytest
from amaranth.sim import Simulator

from tessera.golden import noc as G
from tessera.hdl.noc.router import L, PORTS, Router

ME = (1, 1)
SRC = {0: (1, 0), 1: (2, 1), 2: (1, 2), 3: (0, 1), L: ME}     # input port -> upstream node
OUT_OF = {(0, -1): 0, (1, 0): 1, (0, 1): 2, (-1, 0): 3}


def golden_outputs(src, dests):
    outs = set()
    for a, b in G.mcast_tree(src, dests):
        if a == ME:
            outs.add(OUT_OF[(b[0] - a[0], b[1] - a[1])])
    if ME in dests:
        outs.add(L)
    return outs


def _mode(sa):
    """Test id -> (sa_stages, alloc_stages): 1 (the chiplet's), 2 (two-cycle switch
    allocation), "a2" (allocation loop over two cycles)."""
    return (1, 2) if sa == "a2" else (sa, 1)


def _router(sa, **kw):
    s, a = _mode(sa)
    return Router(kx=3, ky=3, max_node=4, payload_width=8, **{"vcs": 1, "classes": 1, **kw},
                  sa_stages=s, alloc_stages=a)


SA = pytest.mark.parametrize("sa", [1, 2, "a2"])    # the router pipelines


@SA
def test_router_routes_and_latency(sa):
    r = _router(sa)
    f = r.cfg.flit
    cases = []
    for p, src in SRC.items():
        for d in [(x, y) for y in range(3) for x in range(3)]:
            if ME in G.xy_path(src, d):
                cases.append((p, src, [d], False))
    cases.append((L, ME, [(x, y) for y in range(3) for x in range(3)], True))
    got = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        ctx.set(r.local_out.ready, 1)
        for k, (p, src, dests, mc) in enumerate(cases):
            dest = ({"mcast": {"nodes": G.coords_to_mask(dests, 3), "chiplets": 1}} if mc else
                    {"ucast": {"node": {"x": dests[0][0], "y": dests[0][1]}}})
            fl = f.const({"head": 1, "tail": 1, "mclass": 0, "mcast": int(mc), "dest": dest,
                          "src": {"node": {"x": src[0], "y": src[1]}}, "payload": k})
            if p == L:
                ctx.set(r.local_in.payload, fl)
                ctx.set(r.local_in.valid, 1)
            else:
                lk = getattr(r, f"in_{PORTS[p]}")
                ctx.set(lk.flit, fl)
                ctx.set(lk.valid, 1)
            seen = {}
            for cyc in range(8):
                for o in range(4):
                    lk = getattr(r, f"out_{PORTS[o]}")
                    ctx.set(lk.credit, ctx.get(lk.valid))
                    if ctx.get(lk.valid):
                        seen[o] = (cyc, ctx.get(lk.flit.payload))
                if ctx.get(r.local_out.valid):
                    seen[L] = (cyc - 1, ctx.get(r.local_out.payload.payload))
                await ctx.tick()
                ctx.set(r.local_in.valid, 0)
                for o in range(4):
                    ctx.set(getattr(r, f"in_{PORTS[o]}").valid, 0)
            got.append(seen)
        assert ctx.get(r.errors) == 0

    sim = Simulator(r)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    for (p, src, dests, mc), seen in zip(cases, got):
        want = golden_outputs(src, dests)
        assert set(seen) == want, (PORTS[p] if p < 4 else "l", dests, sorted(seen), sorted(want))
        for o, (cyc, pl) in seen.items():
            assert pl == cases.index((p, src, dests, mc))
            s, a = _mode(sa)
            want_cyc = G.router_cost(1, mc, G.router_cycles_of(s, a), G.mcast_tail_cycles_of(s, a))
            assert cyc == want_cyc, (p, dests, o, cyc)


def _sim(r, body):
    sim = Simulator(r)
    sim.add_clock(1e-8)
    sim.add_testbench(body)
    sim.run()


def _flit(r, head, tail, dest, mc=False, pl=0, src=(0, 1)):
    d = ({"mcast": {"nodes": G.coords_to_mask(dest, 3), "chiplets": 1}} if mc else
         {"ucast": {"node": {"x": dest[0], "y": dest[1]}}})
    return r.cfg.flit.const({"head": head, "tail": tail, "mclass": 0, "mcast": int(mc),
                             "dest": d, "src": {"node": {"x": src[0], "y": src[1]}},
                             "payload": pl})


@SA
def test_single_flow_one_flit_per_cycle(sa):
    """W -> E stream of 4-flit packets with credits returned at once: the router passes one
    flit every cycle (the buffer front refills in the cycle it is popped)."""
    r = _router(sa)
    n_out = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        lk_in, lk_out = r.in_w, r.out_e
        cred, k, outs = 4, 0, 0
        for cyc in range(120):
            if cred:
                ctx.set(lk_in.flit, _flit(r, k % 4 == 0, k % 4 == 3, (2, 1), pl=k % 256))
                ctx.set(lk_in.valid, 1)
                cred -= 1
                k += 1
            else:
                ctx.set(lk_in.valid, 0)
            v = ctx.get(lk_out.valid)
            ctx.set(lk_out.credit, v)
            outs += (cyc >= 20) * v
            await ctx.tick()
            cred += ctx.get(lk_in.credit)
        n_out.append(outs)

    _sim(r, tb)
    assert n_out[0] >= 100 - 1, n_out


@SA
def test_multicast_waits_for_a_whole_packet_of_credits(sa):
    """Cut-through: with east's downstream VC holding 2 of 4 flits, a 4-flit multicast to east
    and south may not start on any branch; it starts once east has room for 4 flits."""
    r = _router(sa)
    log = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        ctx.set(r.local_out.ready, 1)
        seq = [_flit(r, 1, 1, (2, 1), pl=1), _flit(r, 1, 1, (2, 1), pl=2)] + \
              [_flit(r, i == 0, i == 3, [(2, 1), (1, 2)], mc=True, pl=10 + i, src=(1, 1))
               for i in range(4)]
        held = 0
        for cyc in range(40):
            if seq:
                ctx.set(r.local_in.payload, seq[0])
                ctx.set(r.local_in.valid, 1)
            else:
                ctx.set(r.local_in.valid, 0)
            ve, vs = ctx.get(r.out_e.valid), ctx.get(r.out_s.valid)
            if ve:
                log.append((cyc, "e", ctx.get(r.out_e.flit.payload)))
            if vs:
                log.append((cyc, "s", ctx.get(r.out_s.flit.payload)))
            held += ve
            ctx.set(r.out_s.credit, vs)
            # east's downstream keeps its flits until cycle 25, then returns them all
            ctx.set(r.out_e.credit, 1 if cyc >= 25 and held else 0)
            held -= 1 if cyc >= 25 and held else 0
            rdy = ctx.get(r.local_in.ready)
            await ctx.tick()
            if seq and rdy:
                seq.pop(0)

    _sim(r, tb)
    mc = [(c, o) for c, o, pl in log if pl >= 10]
    assert mc, log
    first = min(c for c, _ in mc)
    assert first > 25, f"multicast started at cycle {first} with 2 east credits: {log}"
    assert sorted(o for _, o in mc) == ["e"] * 4 + ["s"] * 4


@SA
def test_local_output_backpressure_loses_nothing(sa):
    """The local sink stalls for 15 cycles while 6 packets arrive for it: they wait in the
    router (ejection queue, then input buffer, then upstream credits) and all come out in
    order once the sink is ready."""
    r = _router(sa)
    got = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        cred, k = 4, 0
        for cyc in range(60):
            if cred and k < 6:
                ctx.set(r.in_w.flit, _flit(r, 1, 1, (1, 1), pl=k))
                ctx.set(r.in_w.valid, 1)
                cred -= 1
                k += 1
            else:
                ctx.set(r.in_w.valid, 0)
            ctx.set(r.local_out.ready, cyc >= 15)
            if ctx.get(r.local_out.valid) and cyc >= 15:
                got.append(ctx.get(r.local_out.payload.payload))
            await ctx.tick()
            cred += ctx.get(r.in_w.credit)

    _sim(r, tb)
    assert got == list(range(6)), got


@SA
def test_head_flits_keep_their_header(sa):
    """Headers are stored once per packet (not per flit): a W -> E stream of back-to-back
    packets of 1..4 flits, each with its own source field, must leave with every head flit
    carrying its own packet's header and every flit its payload, in order."""
    r = _router(sa)
    lens = [1, 3, 2, 4, 1, 1, 4, 2, 3, 1] * 2
    sent, got = [], []
    for n, ln in enumerate(lens):
        for i in range(ln):
            sent.append((i == 0, i == ln - 1, (n % 4, n // 4 % 4), len(sent) % 256))

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        todo, cred = list(sent), 4
        for cyc in range(len(sent) + 40):
            if cred and todo:
                hd, tl, src, pl = todo.pop(0)
                ctx.set(r.in_w.flit, _flit(r, hd, tl, (2, 1), pl=pl,
                                           src=src if hd else (3, 3)))
                ctx.set(r.in_w.valid, 1)
                cred -= 1
            else:
                ctx.set(r.in_w.valid, 0)
            v = ctx.get(r.out_e.valid)
            ctx.set(r.out_e.credit, v)
            if v:
                fl = ctx.get(r.out_e.flit)
                got.append((fl.head, fl.tail, (fl.src.node.x, fl.src.node.y), fl.payload))
            await ctx.tick()
            cred += ctx.get(r.in_w.credit)

    _sim(r, tb)
    assert len(got) == len(sent), (len(got), len(sent))
    for g, s in zip(got, sent):
        assert g[0] == s[0] and g[1] == s[1] and g[3] == s[3], (g, s)
        if s[0]:
            assert g[2] == s[2], (g, s)


@SA
def test_multicast_token_passes_after_a_multi_flit_multicast(sa):
    """Two 4-flit multicasts from different inputs (local, then west) to east and south: the
    one-multicast-per-cycle token must pass to the west port once the local packet's tail has
    left (a token stuck at a finished packet hangs the router)."""
    r = _router(sa)
    got = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        loc = [_flit(r, i == 0, i == 3, [(2, 1), (1, 2)], mc=True, pl=i, src=(1, 1))
               for i in range(4)]
        west = [_flit(r, i == 0, i == 3, [(2, 1), (1, 2)], mc=True, pl=10 + i, src=(0, 1))
                for i in range(4)]
        cred = 4
        for cyc in range(60):
            ctx.set(r.local_in.valid, bool(loc))
            if loc:
                ctx.set(r.local_in.payload, loc[0])
            wv = bool(west) and cyc >= 6 and cred > 0
            ctx.set(r.in_w.valid, wv)
            if wv:
                ctx.set(r.in_w.flit, west.pop(0))
                cred -= 1
            for o in (r.out_e, r.out_s):
                v = ctx.get(o.valid)
                ctx.set(o.credit, v)
                if v:
                    got.append(ctx.get(o.flit.payload))
            rdy = ctx.get(r.local_in.ready)
            await ctx.tick()
            cred += ctx.get(r.in_w.credit)
            if loc and rdy:
                loc.pop(0)

    _sim(r, tb)
    assert sorted(got) == sorted([0, 1, 2, 3, 10, 11, 12, 13] * 2), got


@SA
def test_blocked_multicast_does_not_hold_up_a_ready_one(sa):
    """The local port's 4-flit multicast to east and south is blocked (east's downstream VC
    keeps 2 of its 4 flits and never frees them); a 1-flit multicast from the west port to
    south and local must still go (the token passes on; across routers such waits could
    close a cycle and deadlock)."""
    r = _router(sa)
    got = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        ctx.set(r.local_out.ready, 1)
        loc = [_flit(r, 1, 1, (2, 1), pl=1), _flit(r, 1, 1, (2, 1), pl=2)] + \
              [_flit(r, i == 0, i == 3, [(2, 1), (1, 2)], mc=True, pl=10 + i, src=(1, 1))
               for i in range(4)]
        for cyc in range(40):
            ctx.set(r.local_in.valid, bool(loc))
            if loc:
                ctx.set(r.local_in.payload, loc[0])
            wv = cyc == 10
            ctx.set(r.in_w.valid, wv)
            if wv:
                ctx.set(r.in_w.flit, _flit(r, 1, 1, [(1, 2), (1, 1)], mc=True, pl=50,
                                           src=(0, 1)))
            vs = ctx.get(r.out_s.valid)
            ctx.set(r.out_s.credit, vs)
            ctx.set(r.out_e.credit, 0)
            if vs:
                got.append(("s", ctx.get(r.out_s.flit.payload)))
            if ctx.get(r.local_out.valid):
                got.append(("l", ctx.get(r.local_out.payload.payload)))
            rdy = ctx.get(r.local_in.ready)
            await ctx.tick()
            if loc and rdy:
                loc.pop(0)

    _sim(r, tb)
    assert ("s", 50) in got and ("l", 50) in got, got
    assert not any(pl >= 10 and pl < 50 for _, pl in got), got


@SA
def test_two_vcs_do_not_interleave_packets_on_an_output_vc(sa):
    """2 VCs: inputs W and E each send 4-flit packets on VC 0 and input N on VC 1, all to the
    south output (downstream returns every credit at once).  An output VC is held from head
    to tail, so on each VC of the south link the flits of one packet are contiguous (the
    head-of-line request on the other VC makes the two-cycle allocation's ownership look-ahead
    conservative: mutation noc_sa2_owner_lookahead_ignores_grant)."""
    r = _router(sa, vcs=2, classes=1)
    D = r.cfg.depth
    srcs = {3: ((0, 1), 0), 1: ((2, 1), 0), 0: ((1, 0), 1)}       # port -> (source node, VC)
    npk = 4
    log = []

    async def tb(ctx):
        ctx.set(r.my, r.cfg.addr.const({"node": {"x": 1, "y": 1}}))
        ctx.set(r.local_out.ready, 1)
        cred = {p: D for p in srcs}
        k = {p: 0 for p in srcs}
        lk_in = {p: getattr(r, f"in_{PORTS[p]}") for p in srcs}
        for cyc in range(200):
            for p, (sn, vc) in srcs.items():
                if cred[p] and k[p] < 4 * npk:
                    i = k[p]
                    ctx.set(lk_in[p].flit, _flit(r, i % 4 == 0, i % 4 == 3, (1, 2),
                                                 pl=16 * p + i, src=sn))
                    ctx.set(lk_in[p].vc, vc)
                    ctx.set(lk_in[p].valid, 1)
                    cred[p] -= 1
                    k[p] += 1
                else:
                    ctx.set(lk_in[p].valid, 0)
            v = ctx.get(r.out_s.valid)
            vc = ctx.get(r.out_s.vc)
            if v:
                log.append((vc, ctx.get(r.out_s.flit.head), ctx.get(r.out_s.flit.tail),
                            ctx.get(r.out_s.flit.payload)))
            ctx.set(r.out_s.credit, (1 << vc) if v else 0)
            back = {p: (ctx.get(lk_in[p].credit) >> srcs[p][1]) & 1 for p in srcs}
            await ctx.tick()
            for p in srcs:
                cred[p] += back[p]        # (a freed slot can be written from the next cycle)
        assert ctx.get(r.errors) == 0

    _sim(r, tb)
    assert len(log) == 4 * npk * len(srcs), log
    for vc in (0, 1):
        seq = [(h, t, pl) for c, h, t, pl in log if c == vc]
        for j in range(0, len(seq), 4):
            pk = seq[j:j + 4]
            # one packet: head, 2 bodies, tail, all from one input, in order
            assert [(h, t) for h, t, _ in pk] == [(1, 0), (0, 0), (0, 0), (0, 1)], (vc, seq)
            assert len({pl // 16 for _, _, pl in pk}) == 1, (vc, seq)
            assert [pl % 16 for _, _, pl in pk] == list(range(pk[0][2] % 16, pk[0][2] % 16 + 4)), (vc, seq)
