"""Global PE on the real NoC: the Global PE RTL at node (0, 0) of a 3x3 router mesh
(``hdl/noc/mesh.py``, the same flit layout), consumer / producer nodes modelled at the
other local ports.  amaranth.sim (a short run; the Global PE's verification of record
is the cocotb suite in tests/test_global_pe.py).

Checks: DATA packets reach every member of a multicast group through the routers'
XY-tree multicast and every unicast destination, as the golden model's per-destination
streams; CREDIT packets travel back through the mesh on the other message class; the
Global PE never sends a consumer a tile beyond its credit window (counted at the
Global PE's own ports); OUT packets of producers land in the buffer (RECV); all
completions arrive; no router reports an error.
"""
import random

from amaranth.hdl import Module
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from tessera.golden.global_pe import Command, GlobalPEModel, Tile
from tessera.hdl.global_pe.global_pe import GlobalPE
from tessera.hdl.global_pe.packets import (KIND_CREDIT, KIND_DATA, KIND_OUT, OP_EWISE, OP_GROUP,
                                           OP_RECV, OP_SEND, EW_ADD, GpeConfig, credit_layout,
                                           data_header_layout, out_header_layout, pack_fields,
                                           unpack_fields)
from tessera.hdl.noc.mesh import Mesh
from tessera.tb.global_pe.checks import interleaving

K = 3                       # 3x3 mesh, one chiplet
GPE = dict(words=256, word_bits=64, banks=2, node_mesh_x=K, node_mesh_y=K, chiplet_mesh_x=1,
           chiplet_mesh_y=1, groups=2, credit_window=2, max_tile=4, classes=2, recv_slots=1,
           send_slots=3, ucast_lanes=2)
CREDIT_CLASS = 1            # DATA packets use class 0; credits and OUT packets class 1


def _node(i):
    return {"x": i % K, "y": i // K}


from tessera.tb.global_pe.checks import nest as _nest


def _flit(lay, head, tail, mclass, src, payload, dest=0):
    f = {"head": head, "tail": tail, "mclass": mclass, "mcast": 0,
         "dest": {"ucast": {"node": _node(dest), "chiplet": {"x": 0, "y": 0}}},
         "src": {"node": _node(src), "chiplet": {"x": 0, "y": 0}}, "payload": payload}
    return lay.const(f)


def test_global_pe_through_router_mesh():
    cfg = GpeConfig(**GPE)
    rng = random.Random(7)
    gpe = GlobalPE(**GPE)
    mesh = Mesh(kx=K, ky=K, vcs=2, buffer_flits=GPE["max_tile"] + 1, max_packet_flits=GPE["max_tile"] + 1,
                payload_width=GPE["word_bits"], classes=2, max_node=K, sim=True)
    top = Module()
    top.submodules.gpe, top.submodules.mesh = gpe, mesh
    connect(top, gpe.net_out, mesh.local_in[0])
    connect(top, mesh.local_out[0], gpe.net_in)
    lay = mesh.cfg.flit
    assert lay == gpe.net_out.payload.shape(), "Global PE and mesh flit layouts differ"

    word = lambda: rng.getrandbits(GPE["word_bits"])          # noqa: E731
    producers = [4, 7]
    arrivals = []
    for a in range(0, 32, 4):
        arrivals.append((rng.choice(producers), a, [word() for _ in range(4)]))
    rng.shuffle(arrivals)
    cmds = [Command(OP_GROUP, tag=1, gidx=0, mask=(1, 0b100110110)),     # nodes 1,2,4,5,8
            Command(OP_GROUP, tag=2, gidx=1, mask=(1, 0b011001000)),     # nodes 3,6,7
            Command(OP_RECV, tag=3, a=0, cnt=(32, 1, 1), mask=(1, 1 << 4 | 1 << 7),
                    arrivals=arrivals),
            Command(OP_SEND, tag=10, a=0, cnt=(8, 2, 1), stride=(1, 8, 0), tile=3,
                    groups=0b11, ucast=True, uaddr=((0, 0), (2, 2))),
            Command(OP_SEND, tag=11, a=16, cnt=(12, 1, 1), stride=(1, 0, 0), tile=4,
                    groups=0b01),
            Command(OP_SEND, tag=12, a=4, cnt=(6, 1, 1), stride=(1, 0, 0), tile=2,
                    ucast=True, uaddr=((0, 0), (1, 0))),
            Command(OP_EWISE, tag=13, a=0, b=8, c=40, cnt=(8, 1, 1), sub=EW_ADD, shift=1),
            Command(OP_SEND, tag=14, a=0, cnt=(48, 1, 1), stride=(1, 0, 0), tile=4,
                    ucast=True, uaddr=((0, 0), (2, 2)))]
    model = GlobalPEModel(cfg)
    for c in cmds:
        model.step(c)
    delay = {i: ((40, 90) if i == 7 else (1, 12)) for i in range(1, K * K)}   # node 7 slow

    hdr_l, cr_l, out_l = data_header_layout(), credit_layout(), out_header_layout()
    W = GPE["credit_window"]
    res = {"received": {i: [] for i in range(K * K)}, "cpl": [], "sent": [0] * (K * K),
           "accepted": [0] * (K * K)}
    recv_tag = next(c.tag for c in cmds if c.op == OP_RECV)

    async def bench(ctx):
        cmd_q = list(cmds)
        cmd_lay = gpe.cmd.payload.shape()
        inq = {i: [] for i in range(1, K * K)}            # flits to inject per port
        pending = []                                       # (cycle, port) credit returns
        cur = {i: None for i in range(1, K * K)}
        recv_sent = False
        quiet = 0
        ctx.set(gpe.cpl.ready, 1)
        for cycle in range(20000):
            # commands: the RECV's producers start once it has been taken
            # (the controller's rule: nothing touches an open RECV window until it completes)
            hold = recv_sent and recv_tag not in [t for t, _ in res["cpl"]]
            if cmd_q and not hold:
                ctx.set(gpe.cmd.valid, 1)
                ctx.set(gpe.cmd.payload, cmd_lay.const(_nest(cmd_q[0].fields())))
            else:
                ctx.set(gpe.cmd.valid, 0)
            cmd_taken = bool(cmd_q) and not hold and ctx.get(gpe.cmd.ready)
            # consumers / producers at ports 1..8
            for cyc, port in [p for p in pending if p[0] <= cycle]:
                pending.remove((cyc, port))
                inq[port].append(_flit(lay, 1, 1, CREDIT_CLASS, port,
                                       pack_fields(cr_l, kind=KIND_CREDIT, count=1)))
            taken_in, taken_out = {}, {}
            for i in range(1, K * K):
                li, lo = mesh.local_in[i], mesh.local_out[i]
                ctx.set(li.valid, bool(inq[i]))
                if inq[i]:
                    ctx.set(li.payload, inq[i][0])
                r = rng.random() < 0.8
                ctx.set(lo.ready, r)
            for i in range(1, K * K):
                li, lo = mesh.local_in[i], mesh.local_out[i]
                if inq[i] and ctx.get(li.ready):
                    taken_in[i] = True
                if ctx.get(lo.valid) and ctx.get(lo.ready):
                    taken_out[i] = ctx.get(lo.payload)
            # the Global PE's own ports: tiles sent per consumer, credits accepted
            go = ctx.get(gpe.net_out.valid) and ctx.get(mesh.local_in[0].ready)
            out_flit = ctx.get(gpe.net_out.payload) if go else None
            gi = ctx.get(gpe.net_in.valid) and ctx.get(gpe.net_in.ready)
            in_flit = ctx.get(gpe.net_in.payload) if gi else None
            cpl = (ctx.get(gpe.cpl.payload.tag), ctx.get(gpe.cpl.payload.status)) \
                if ctx.get(gpe.cpl.valid) else None
            assert not any(ctx.get(e) for e in mesh.errors), f"router error at cycle {cycle}"
            await ctx.tick()
            if cmd_taken:
                if cmd_q.pop(0).op == OP_RECV:
                    recv_sent = True
                    for src, a, ws in arrivals:
                        p = pack_fields(out_l, kind=KIND_OUT, addr=a, nwords=len(ws))
                        inq[src].append(_flit(lay, 1, 0, CREDIT_CLASS, src, p))
                        for k, w in enumerate(ws):
                            inq[src].append(_flit(lay, 0, k == len(ws) - 1, CREDIT_CLASS, src,
                                                  w))
            if cpl is not None:
                res["cpl"].append(cpl)
            for i in taken_in:
                inq[i].pop(0)
            if out_flit is not None and out_flit.head:
                if out_flit.mcast:
                    nodes = out_flit.dest.mcast.nodes
                    dests = [n for n in range(K * K) if nodes >> n & 1]
                else:
                    u = out_flit.dest.ucast.node
                    dests = [u.y * K + u.x]
                for n in dests:
                    res["sent"][n] += 1
                    assert res["sent"][n] - res["accepted"][n] <= W, (
                        f"cycle {cycle}: tile {res['sent'][n]} to node {n} with "
                        f"{res['accepted'][n]} credits accepted (window {W})")
            if in_flit is not None and in_flit.head:
                p = unpack_fields(cr_l, in_flit.payload)
                if p["kind"] == KIND_CREDIT:
                    s = in_flit.src.node
                    res["accepted"][s.y * K + s.x] += p["count"]
            for i, f in taken_out.items():
                word_v = f.payload
                if f.head:
                    assert cur[i] is None, f"port {i}: head inside a packet"
                    h = unpack_fields(hdr_l, word_v)
                    assert h["kind"] == KIND_DATA
                    assert f.mclass == 0, "DATA on its class"
                    cur[i] = (h, [])
                else:
                    assert cur[i] is not None, f"port {i}: body without head"
                    cur[i][1].append(word_v)
                    if f.tail:
                        h, ws = cur[i]
                        cur[i] = None
                        assert len(ws) == h["nwords"]
                        res["received"][i].append(Tile(h["tag"], h["seq"], tuple(ws)))
                        pending.append((cycle + rng.randint(*delay[i]), i))
            if len(res["cpl"]) == len(cmds) and not pending and not any(inq.values()):
                quiet += 1                 # completions are at the Global PE's port:
                if quiet == 100:           # let the last flits cross the mesh
                    break
            else:
                quiet = 0

    sim = Simulator(top)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()

    assert sorted(res["cpl"]) == sorted(model.completions), res["cpl"]
    expected = model.packets
    for i in range(1, K * K):
        lanes = expected.get(i, [])
        got = res["received"][i]
        assert len(got) == sum(map(len, lanes)), f"node {i}: {len(got)} tiles"
        assert interleaving(got, lanes) is None, f"node {i}: tiles out of order or wrong"
    assert sum(len(v) for v in res["received"].values()) > 40
    assert res["sent"][7] > W, "the slow node took more than one window"
