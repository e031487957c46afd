"""Barrier agent (hdl/package/barrier.py) in amaranth.sim, standing alone: the master
collects ARRIVE flits and sends one RELEASE multicast only when every chiplet of the mask
has arrived; a non-master agent sends one ARRIVE per BAR and acks on the matching
RELEASE; a wrong id sets ``err``; the controller's flits pass through (merge + demux)."""
from amaranth.hdl import Value
from amaranth.sim import Simulator

from tessera.export import _layout_fields
from tessera.hdl.chiplet.config import ChipletConfig, node_map
from tessera.hdl.chiplet.packets import (BAR_ARRIVE, BAR_RELEASE, EXT_BARRIER, KIND_EXT,
                                         barrier_layout, cfg_payload)
from tessera.hdl.global_pe.packets import pack_fields, unpack_fields
from tessera.hdl.package.barrier import BarrierAgent
from tessera.tb.common import pack, unpack

CC = ChipletConfig(nx=2, ny=2, hier=True, chiplet_mesh_x=2, chiplet_mesh_y=2)
NM = node_map(CC)
BL = barrier_layout((2, 2))


def bar_flit(fields, op, bid, chiplet):
    return pack(fields, {"head": 1, "tail": 1, "mclass": 1, "mcast": 0,
                         "payload": pack_fields(BL, kind=KIND_EXT, ext=EXT_BARRIER, op=op,
                                                id=bid, chiplet=chiplet[0] | chiplet[1] << 1)})


def run(me, script, cycles=40):
    """``script(cycle) -> dict`` of inputs per cycle; returns the per-cycle outputs."""
    dut = BarrierAgent(CC)
    fields = _layout_fields(CC.flit_layout())
    log = []

    async def bench(ctx):
        ctx.set(dut.node_id.chiplet.x, me[0])
        ctx.set(dut.node_id.chiplet.y, me[1])
        ctx.set(dut.node_id.node.x, NM.ctrl[0])
        ctx.set(dut.node_id.node.y, NM.ctrl[1])
        ctx.set(dut.net_out.ready, 1)
        ctx.set(dut.ctrl_in.ready, 1)
        for c in range(cycles):
            ins = script(c, fields)
            ctx.set(dut.barrier_req, ins.get("req", 0))
            ctx.set(dut.barrier_id, ins.get("id", 0))
            ctx.set(dut.net_in.valid, "in" in ins)
            ctx.set(Value.cast(dut.net_in.payload), ins.get("in", 0))
            ctx.set(dut.ctrl_out.valid, "ctrl" in ins)
            ctx.set(Value.cast(dut.ctrl_out.payload), ins.get("ctrl", 0))
            out = None
            if ctx.get(dut.net_out.valid):
                out = unpack(fields, ctx.get(Value.cast(dut.net_out.payload)))
            log.append({"out": out, "ack": ctx.get(dut.barrier_ack), "err": ctx.get(dut.err),
                        "ctrl_in": ctx.get(dut.ctrl_in.valid),
                        "ctrl_ready": ctx.get(dut.ctrl_out.ready)})
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return log


def _bar(out):
    return unpack_fields(BL, out["payload"])


def test_master_releases_only_when_all_arrived():
    # master (chiplet 0): arrivals from chiplets 0, 1, 3 at cycles 2, 4, 6, chiplet 2 at 20
    arrivals = {2: (0, 0), 4: (1, 0), 6: (1, 1), 20: (0, 1)}

    def script(c, f):
        d = {"req": int(c >= 1), "id": 5}
        if c in arrivals:
            d["in"] = bar_flit(f, BAR_ARRIVE, 5, arrivals[c])
        return d
    log = run((0, 0), script, cycles=40)
    outs = [(c, e["out"]) for c, e in enumerate(log) if e["out"]]
    arrive = [(c, o) for c, o in outs if _bar(o)["op"] == BAR_ARRIVE]
    release = [(c, o) for c, o in outs if _bar(o)["op"] == BAR_RELEASE]
    assert len(arrive) == 1 and arrive[0][1]["dest.ucast.node.x"] == NM.ctrl[0]
    assert len(release) == 1, outs
    c, o = release[0]
    assert c > 20, "released before the last chiplet arrived"
    assert o["mcast"] == 1 and o["dest.mcast.chiplets"] == 0b1111
    assert o["dest.mcast.nodes"] == 1 << NM.index(NM.ctrl) and _bar(o)["id"] == 5
    assert not any(e["err"] for e in log)


def test_agent_acks_matching_release_and_flags_wrong_id():
    def script(c, f):
        d = {"req": int(3 <= c < 17), "id": 9}      # the controller drops req after ack
        if c == 10:
            d["in"] = bar_flit(f, BAR_RELEASE, 8, (0, 0))      # wrong id: error, no ack
        if c == 15:
            d["in"] = bar_flit(f, BAR_RELEASE, 9, (0, 0))
        if c == 12:
            d["ctrl"] = pack(f, {"head": 1, "tail": 1, "mclass": 1,
                                 "payload": cfg_payload(1, 2)})
        return d
    log = run((1, 1), script, cycles=35)
    outs = [e["out"] for e in log if e["out"]]
    assert [_bar(o)["op"] for o in outs if _bar(o)["ext"] == EXT_BARRIER] == [BAR_ARRIVE]
    assert sum(1 for o in outs if o["payload"] == cfg_payload(1, 2)) == 1   # pass-through
    acks = [c for c, e in enumerate(log) if e["ack"]]
    assert acks and acks[0] == 16, acks
    assert log[11]["err"] == 1
