"""cocotb (Verilator) test of the exported pe_node against the golden model.

Seeded random scenarios of :mod:`.pe_node_env` (roles ONLY/FIRST/MIDDLE/LAST,
1x1 and 3x3 stride 1/2 tiles, several tiles and runs, random gaps on
``net_in``, random back-pressure on ``net_out``, PCREDITs returned after a
random delay) run back to back on one build; every packet the node sends is
compared per destination and kind with :class:`tessera.golden.pe_node.PeNodeModel`,
and the sticky error flags must stay clear.  ``PN_SEEDS`` = number of scenarios.
"""
from __future__ import annotations

import os

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from tessera.hdl.chiplet.packets import PeNodeConfig
from tessera.hdl.global_pe.packets import GpeConfig, node_address_layout
from tessera.tb.chiplet import pe_node_env as E
from tessera.tb.common import TBBase


async def run_env(tb, env, max_cycles=60000):
    dut = tb.dut
    for _ in range(max_cycles):
        await FallingEdge(tb.clk)
        v, fl, rdy = env.drive()
        dut.net_in__valid.value = v
        dut.net_in__payload.value = fl
        dut.net_out__ready.value = rdy
        await ReadOnly()
        taken = v and int(dut.net_in__ready.value)
        fire = int(dut.net_out__valid.value) and rdy
        of = int(dut.net_out__payload.value) if fire else 0
        env.sample(taken, fire, of)
        if env.finished():
            break
    await FallingEdge(tb.clk)
    dut.net_in__valid.value = 0
    tb.check(env.finished(), f"scenario not finished after {env.cycle} cycles")
    errs = env.check()
    tb.check(not errs, "\n".join(errs[:5]))
    tb.check_equal(int(dut.err.value), 0, "sticky error flags")
    tb.check_equal(int(dut.running.value), 0, "running")
    tb.cycles += env.cycle


@cocotb.test()
async def random_scenarios(dut):
    tb = TBBase(dut)
    c = PeNodeConfig(**{k: v for k, v in tb.params.items() if k in PeNodeConfig.__dataclass_fields__})
    g = GpeConfig(word_bits=c.word_bits, node_mesh_x=c.node_mesh_x, node_mesh_y=c.node_mesh_y,
                  chiplet_mesh_x=c.chiplet_mesh_x, chiplet_mesh_y=c.chiplet_mesh_y)
    dut.node_id.value = node_address_layout(g).const({"node": {"x": E.ME[0], "y": E.ME[1]}}).as_bits()
    dut.net_in__valid.value = 0
    dut.net_out__ready.value = 0
    await tb.reset()
    for k in range(int(os.environ.get("PN_SEEDS", "6"))):
        seed = tb.seed * 100 + k
        env = E.Env(c, E.scenario(c, seed), seed=seed, in_gap=0.1 + 0.1 * (k % 4),
                    out_stall=0.2 * (k % 4))
        await run_env(tb, env)
    tb.report("random_scenarios")
