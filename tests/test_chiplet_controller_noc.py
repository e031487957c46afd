"""Chiplet controller on the real NoC: the controller RTL at node (0, 0) of a 3x3
router mesh (``hdl/noc/mesh.py``, same flit layout), simple node models at the other
local ports (amaranth.sim, a few seconds).

Each node model takes CFG packets (register writes) and, after a random delay from
a write to register 0 ("go"), sends a DONE packet to the controller.  Checks: every
node receives exactly its CFG writes, in program order, on the control message class;
the controller's WAIT completes on the DONEs that crossed the mesh and ends ``done``;
a node that never answers makes the same program end in TIMEOUT; no router error.
"""
import random

from amaranth.hdl import Module
from amaranth.lib.wiring import connect
from amaranth.sim import Simulator

from tessera.hdl.chiplet import isa
from tessera.hdl.chiplet.asm import Program
from tessera.hdl.chiplet.controller import Controller
from tessera.hdl.chiplet.packets import (EXT_CFG, EXT_DONE, KIND_EXT, cfg_layout, ctrl_class,
                                         done_layout)
from tessera.hdl.global_pe.packets import pack_fields, unpack_fields
from tessera.hdl.noc.mesh import Mesh

K = 3
P = dict(prog_depth=64, node_mesh_x=K, node_mesh_y=K, chiplet_mesh_x=1, chiplet_mesh_y=1,
         word_bits=64, classes=2, groups=2, timeout_bits=12)


def _node(i):
    return {"x": i % K, "y": i // K}


def run_mesh(silent=None, seed=1):
    rng = random.Random(seed)
    ctrl = Controller(**P)
    mesh = Mesh(kx=K, ky=K, vcs=2, buffer_flits=4, max_packet_flits=4, payload_width=64,
                classes=2, max_node=K, sim=True)
    top = Module()
    top.submodules.ctrl, top.submodules.mesh = ctrl, mesh
    connect(top, ctrl.net_out, mesh.local_in[0])
    connect(top, mesh.local_out[0], ctrl.net_in)
    lay = mesh.cfg.flit
    assert lay == ctrl.net_out.payload.shape(), "controller and mesh flit layouts differ"

    prog = Program((K, K))
    prog.tmo(200)
    writes = {n: [] for n in range(1, K * K)}
    for rep in range(1):
        for n in range(1, K * K):
            reg, val = 1 + rep, rng.getrandbits(32)
            prog.cfg(n % K, n // K, reg, val)
            writes[n].append((reg, val))
    for n in range(1, K * K):
        prog.cfg(n % K, n // K, 0, 1)                      # go
        writes[n].append((0, 1))
    prog.wait([(n % K, n // K) for n in range(1, K * K)]).end()
    got = {n: [] for n in range(1, K * K)}
    res = {}
    dl, cl = done_layout((K, K)), cfg_layout()

    async def bench(ctx):
        ctx.set(ctrl.node_id, {"chiplet": {"x": 0, "y": 0}, "node": _node(0)})
        for w in prog.words:
            ctx.set(ctrl.prog.valid, 1)
            ctx.set(ctrl.prog.payload, w)
            await ctx.tick()
        ctx.set(ctrl.prog.valid, 0)
        ctx.set(ctrl.start, 1)
        await ctx.tick()
        ctx.set(ctrl.start, 0)
        due = {}                                          # node -> cycle to send DONE
        for cycle in range(4000):
            for n in range(1, K * K):
                lo, li = mesh.local_out[n], mesh.local_in[n]
                ctx.set(lo.ready, rng.random() < 0.7)
                send = n in due and due[n] <= cycle
                ctx.set(li.valid, send)
                if send:
                    ctx.set(li.payload, lay.const({
                        "head": 1, "tail": 1, "mclass": ctrl_class(2), "mcast": 0,
                        "dest": {"ucast": {"node": _node(0), "chiplet": {"x": 0, "y": 0}}},
                        "src": {"node": _node(n), "chiplet": {"x": 0, "y": 0}},
                        "payload": pack_fields(dl, kind=KIND_EXT, ext=EXT_DONE,
                                               node=n // K << (K - 1).bit_length() | n % K)}))
            taken = {}
            for n in range(1, K * K):
                lo, li = mesh.local_out[n], mesh.local_in[n]
                if ctx.get(lo.valid) and ctx.get(lo.ready):
                    taken[n] = ctx.get(lo.payload)
                if n in due and due[n] <= cycle and ctx.get(li.ready):
                    del due[n]
            assert not any(ctx.get(e) for e in mesh.errors), f"router error at cycle {cycle}"
            busy = ctx.get(ctrl.busy)
            await ctx.tick()
            for n, f in taken.items():
                assert f.head and f.tail and f.mclass == ctrl_class(2)
                assert (f.dest.ucast.node.x, f.dest.ucast.node.y) == (n % K, n // K)
                pk = unpack_fields(cl, f.payload)
                assert (pk["kind"], pk["ext"]) == (KIND_EXT, EXT_CFG)
                got[n].append((pk["reg"], pk["value"]))
                if pk["reg"] == 0 and n != silent:
                    due[n] = cycle + rng.randrange(1, 60)
            if not busy and cycle > 2:
                break
        else:
            raise AssertionError("controller still busy (hang)")
        res.update(done=ctx.get(ctrl.done), error=ctx.get(ctrl.error),
                   code=ctx.get(ctrl.err_code), timeout=ctx.get(ctrl.timeout))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got, writes, res


def test_cfg_and_done_through_mesh():
    got, writes, res = run_mesh()
    assert got == writes
    assert res == {"done": 1, "error": 0, "code": 0, "timeout": 0}


def test_silent_node_times_out_through_mesh():
    got, writes, res = run_mesh(silent=5)
    assert got == writes
    assert res == {"done": 0, "error": 1, "code": isa.ERR_TIMEOUT, "timeout": 1}
