"""pe_nodes as a reduction chain on a real router mesh (amaranth.sim).

A 3x1 mesh (4x1 with a MIDDLE node between) of :class:`~tessera.hdl.noc.router.Router` (``hdl/noc/mesh.py``,
the same flit layout): node 0 is the test's Global PE / controller / host
model, node 1 a FIRST pe_node, node 2 a LAST pe_node.  Node 0 preloads both
(WLOAD/PLOAD/CFG), then sends each its own input tiles as DATA packets under
a per-consumer credit window (released by the CREDIT packets that come back
through the mesh).  FIRST's partial sums travel to LAST over the NoC as PSUM
packets (PCREDITs back); LAST's OUT packets and both DONEs arrive at node 0.
Checked: LAST's OUT packets and both DONEs equal the golden chain (FIRST's
golden PSUM packets fed to LAST's golden model), every credit comes back, the
routers report no error, the nodes' sticky error flags stay clear.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import data
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from tessera.golden.pe_node import PeNodeModel
from tessera.hdl.chiplet import packets as P
from tessera.hdl.chiplet.pe_node import PeNode
from tessera.hdl.noc.mesh import Mesh
from tessera.hdl.pe.config import PEConfig, Role
from tessera.tb.chiplet import pe_node_env as E

HUB = (0, 0)


def _runs(C, chain, rng, cfg, ntiles):
    """Per node: (ctrl packets, data packets) for one run of ``cfg`` with the chain's roles."""
    out = {}
    for i, node in enumerate(chain):
        role = Role.FIRST if i == 0 else Role.LAST if i == len(chain) - 1 else Role.MIDDLE
        nxt = chain[i + 1] if i + 1 < len(chain) else HUB
        c = PEConfig(**{**cfg.as_dict(), "role": role})
        r = E.build_run(C, rng, cfg=c, ntiles=ntiles)
        regs = P.pe_node_registers(c, ntiles, psum_dest=nxt, out_dest=HUB, out_base=100,
                                   out_tile_stride=50, done_dest=HUB)
        ctrl = [x for x in r["ctrl"] if x[0] != "CFG"] + \
            [("CFG", HUB, [P.cfg_payload(a, v)]) for a, v in regs]
        out[node] = (ctrl, r["data"])
    return out


@pytest.mark.parametrize("n", [2, pytest.param(3, marks=pytest.mark.slow)])   # 3 in make soak
def test_chain_through_mesh(n):
    """FIRST -> LAST (n = 2, 3x1 mesh) or FIRST -> MIDDLE -> LAST (n = 3, 4x1 mesh)."""
    k = n + 1
    NODE = {**E.SMALL, "node_mesh_x": k, "node_mesh_y": k}    # flit layout of a max_node=k mesh
    C = P.PeNodeConfig(**NODE)
    chain = [(x, 0) for x in range(1, k)]
    FIRST, LAST = chain[0], chain[-1]
    rng = np.random.default_rng(5)
    cfg = PEConfig(R=3, S=3, C1=1, K1=2, P1=4, Q1=4, H_in=6, W_in=6, stride=1, relu=True,
                   shift=12)
    ntiles = 3
    plan = _runs(C, chain, rng, cfg, ntiles)
    m = Module()
    m.submodules.mesh = mesh = Mesh(kx=k, ky=1, vcs=2, buffer_flits=10, max_packet_flits=10,
                                    payload_width=64, classes=2, max_node=k, sim=True)
    nodes = {}
    for xy in chain:
        nd = PeNode(**NODE)
        m.submodules[f"n{xy[0]}"] = nd
        i = xy[1] * k + xy[0]
        connect(m, nd.net_out, mesh.local_in[i])
        connect(m, mesh.local_out[i], nd.net_in)
        m.d.comb += nd.node_id.node.x.eq(xy[0])
        m.d.comb += nd.node_id.node.y.eq(xy[1])
        nodes[xy] = nd
    lay = mesh.local_in[0].payload.shape()
    assert lay.size == E.flit_layout(C).size
    li, lo = mesh.local_in[0], mesh.local_out[0]

    gold = {xy: PeNodeModel(C, xy) for xy in chain}
    pyrng = random.Random(9)
    ctrl = [(xy, pk) for xy in chain for pk in plan[xy][0]]
    data_q = {xy: list(plan[xy][1]) for xy in chain}
    credit = {xy: C.credit_window for xy in chain}
    got, dones = {}, []
    state = {"done": False, "cycles": 0}

    async def tb(ctx):
        cur = None
        pkt = None
        for cyc in range(40000):
            if cur is None:
                if ctrl:
                    xy, (name, src, pl) = ctrl.pop(0)
                    gold[xy].receive(src, pl)
                    cur = [E.packet_flits(lay, C, name, xy, HUB, pl), 0]
                else:
                    ok = [xy for xy in chain if data_q[xy] and credit[xy] > 0]
                    if ok and pyrng.random() < 0.8:
                        xy = pyrng.choice(ok)
                        name, src, pl = data_q[xy].pop(0)
                        credit[xy] -= 1
                        gold[xy].receive(HUB, pl)
                        cur = [E.packet_flits(lay, C, name, xy, HUB, pl), 0]
            ctx.set(li.valid, cur is not None)
            ctx.set(li.payload.as_value(), cur[0][cur[1]] if cur else 0)
            rdy = pyrng.random() < 0.7
            ctx.set(lo.ready, rdy)
            taken = cur is not None and ctx.get(li.ready)
            fire = ctx.get(lo.valid) and rdy
            fv = ctx.get(lo.payload.as_value()) if fire else None
            await ctx.tick()
            if taken:
                cur[1] += 1
                if cur[1] == len(cur[0]):
                    cur = None
            if fv is not None:
                f = data.Const(lay, fv)
                if f.head:
                    pkt = ((int(f.src.node.x), int(f.src.node.y)), [])
                pkt[1].append(int(f.payload))
                if f.tail:
                    src, pl = pkt
                    kind = E.Env._kind(pl[0])
                    if kind == "CREDIT":
                        credit[src] += 1
                    else:
                        got.setdefault((src, kind), []).append(pl)
                        if kind == "DONE":
                            dones.append(src)
            if (len(dones) == n and not ctrl and cur is None
                    and all(not q for q in data_q.values())
                    and all(v == C.credit_window for v in credit.values())):
                state["done"] = True
                break
        state["cycles"] = cyc
        state["errors"] = [ctx.get(e) for e in mesh.errors]
        state["err"] = {xy: ctx.get(nd.err.as_value()) for xy, nd in nodes.items()}

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert state["done"], f"chain did not finish in {state['cycles']} cycles: dones {dones}"
    assert not any(state["errors"]), state["errors"]
    assert not any(state["err"].values()), state["err"]
    # golden chain: each node's partial sums are the next node's psum input
    exp = {}
    for i, xy in enumerate(chain):
        exp[xy] = gold[xy].finish()
        if i + 1 < n:
            for pl in exp[xy][(chain[i + 1], "PSUM")]:
                gold[chain[i + 1]].receive(xy, pl)
        assert got[(xy, "DONE")] == exp[xy][(HUB, "DONE")]
    assert got[(LAST, "OUT")] == exp[LAST][(HUB, "OUT")]
    assert len(got[(LAST, "OUT")]) == ntiles * -(-cfg.K1 * cfg.P1 * cfg.Q1 // C.out_words)
