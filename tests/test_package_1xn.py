"""Chiplet addressing in a 1 x N package (issue 18; Simba §3.1 NoP, hierarchical routing).

One hierarchical chiplet in amaranth.sim, standing alone, as chiplet (0, cy) of a 1 x 4
package: a flit arriving from the NoP for this chiplet's host node must leave at that
node (``aux_out``), not bounce back out of the gateway; a flit from the host node for
another chiplet must leave at the gateway (``host_out``).  This is the 1xN hang of stop
16: the routers' chiplet field was assigned from ``chiplet_id`` as flat bits, so with
ckx < cky chiplet (0, 1) routed as (2, 0).  What it leaves out: the NoP itself (the
whole package runs on Verilator: ``bench/package_layer.py`` line of four)."""
import pytest
from amaranth.hdl import Value
from amaranth.sim import Simulator

from tessera.export import _layout_fields
from tessera.hdl.chiplet.chiplet import Chiplet
from tessera.hdl.chiplet.config import ChipletConfig
from tessera.hdl.package.config import PackageConfig
from tessera.tb.common import pack, unpack

PKG = PackageConfig(chiplet=ChipletConfig(nx=2, ny=2), ckx=1, cky=4, nop_link_latency=2)
CC = PKG.chiplet_cfg()
FIELDS = _layout_fields(CC.flit_layout())


def _flit(chiplet, node):
    return pack(FIELDS, {"head": 1, "tail": 1, "mclass": 0, "mcast": 0,
                         "dest.ucast.chiplet.x": chiplet[0], "dest.ucast.chiplet.y": chiplet[1],
                         "dest.ucast.node.x": node[0], "dest.ucast.node.y": node[1],
                         "payload": 0x5A5A})


def run(me, port, flit, cycles=60):
    """Inject ``flit`` on ``port`` (host_in = from the NoP, aux_in = from the host) of
    chiplet ``me``; returns [(cycle, out port, flit dict)] seen on host_out / aux_out."""
    dut = Chiplet(CC, sim=True)
    seen = []

    async def bench(ctx):
        ctx.set(dut.chiplet_id.x, me[0])
        ctx.set(dut.chiplet_id.y, me[1])
        ctx.set(dut.host_out.ready, 1)
        ctx.set(dut.aux_out.ready, 1)
        inp = getattr(dut, port)
        ctx.set(inp.valid, 1)
        ctx.set(Value.cast(inp.payload), flit)
        for c in range(cycles):
            if ctx.get(inp.valid) and ctx.get(inp.ready):
                await ctx.tick()
                ctx.set(inp.valid, 0)
            else:
                await ctx.tick()
            for name in ("host_out", "aux_out"):
                o = getattr(dut, name)
                if ctx.get(o.valid):
                    seen.append((c, name, unpack(FIELDS, ctx.get(Value.cast(o.payload)))))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("cy", [pytest.param(1, marks=pytest.mark.slow), 3])   # make test budget: cy=1 in make soak
def test_1xn_flit_from_nop_reaches_own_host_node(cy):
    seen = run((0, cy), "host_in", _flit((0, cy), PKG.host_node))
    assert [s[1] for s in seen] == ["aux_out"], seen
    assert seen[0][2]["payload"] == 0x5A5A


def test_1xn_flit_to_other_chiplet_leaves_by_gateway():
    seen = run((0, 2), "aux_in", _flit((0, 1), PKG.host_node))
    assert [s[1] for s in seen] == ["host_out"], seen
    assert (seen[0][2]["dest.ucast.chiplet.x"], seen[0][2]["dest.ucast.chiplet.y"]) == (0, 1)
