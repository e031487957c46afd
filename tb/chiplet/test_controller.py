"""cocotb (Verilator) test of the exported chiplet controller against the golden model.

Loads a seeded random program (:mod:`.scenarios`) through the ``prog`` stream,
pulses ``start``, drives the environment cycle by cycle (DONE flits on
``net_in``, random ready on ``net_out`` / ``gpe_cmd``, a fake Global PE
returning completions in order, barrier acknowledges) and compares every
accepted packet, command and barrier (with its cycle) and the final status with
:func:`tessera.golden.controller.run`.  ``CTRL_SEEDS`` = number of programs.
"""
from __future__ import annotations

import os

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from tessera.hdl.chiplet.controller import gpe_config
from tessera.hdl.chiplet.packets import EXT_DONE, KIND_EXT, cfg_layout, done_layout
from tessera.hdl.global_pe.packets import (net_flit_layout, node_address_layout,
                                           unpack_fields)
from tessera.tb.chiplet import scenarios as sc
from tessera.tb.common import TBBase

ME = {"chiplet": {"x": 1, "y": 0}, "node": {"x": 2, "y": 1}}


def _int(layout, value) -> int:
    return layout.const(value).as_value().value


async def run_one(tb, words, env, p):
    dut = tb.dut
    gcfg = gpe_config(p)
    flay, dlay = net_flit_layout(gcfg), done_layout((p["node_mesh_x"], p["node_mesh_y"]))
    done_by = {c: (x, y) for c, x, y in env["done_at"]}
    got = {"packets": [], "commands": [], "barriers": []}
    await FallingEdge(tb.clk)
    dut.clear.value = 1                                # forget an earlier program
    await FallingEdge(tb.clk)
    dut.clear.value = 0
    for w in words:
        dut.prog__valid.value = 1
        dut.prog__payload.value = w
        await FallingEdge(tb.clk)
    dut.prog__valid.value = 0
    dut.start.value = 1
    await FallingEdge(tb.clk)
    dut.start.value = 0
    cplq, ncmd, end = [], 0, None
    for c in range(5000):
        dut.net_out__ready.value = int(env["net_ready"](c))
        dut.gpe_cmd__ready.value = int(env["cmd_ready"](c))
        dut.barrier_ack.value = int(env["bar_ack"](c))
        if c in done_by:
            x, y = done_by[c]
            pay = _int(dlay, {"kind": KIND_EXT, "ext": EXT_DONE, "node": {"x": x, "y": y}})
            dut.net_in__payload.value = _int(flay, {
                "head": 1, "tail": 1, "mclass": 1, "dest": {"ucast": ME},
                "src": {"chiplet": ME["chiplet"], "node": {"x": x, "y": y}}, "payload": pay})
            dut.net_in__valid.value = 1
        else:
            dut.net_in__valid.value = 0
        if cplq and cplq[0][0] <= c:
            dut.gpe_cpl__payload.value = cplq.pop(0)[1] << 8          # {tag[7:0], status}
            dut.gpe_cpl__valid.value = 1
        else:
            dut.gpe_cpl__valid.value = 0
        await ReadOnly()
        if not int(dut.busy.value):
            end = c - 1
            break
        if int(dut.net_out__valid.value) and int(dut.net_out__ready.value):
            f = unpack_fields(flay, int(dut.net_out__payload.value))
            node = unpack_fields(node_address_layout(gcfg), f["dest"])["node"]
            nbits = (p["node_mesh_x"] - 1).bit_length() or 1
            pk = unpack_fields(cfg_layout(), f["payload"])
            got["packets"].append((c, node & ((1 << nbits) - 1), node >> nbits, pk["reg"],
                                   pk["value"]))
        if int(dut.gpe_cmd__valid.value) and int(dut.gpe_cmd__ready.value):
            got["commands"].append((c, int(dut.gpe_cmd__payload.value)))
            lat, status = env["cpl"](ncmd, c)
            ncmd += 1
            cplq.append((c + max(1, lat), status))
        if int(dut.barrier_req.value) and int(dut.barrier_ack.value):
            got["barriers"].append((c, int(dut.barrier_id.value)))
        await FallingEdge(tb.clk)
    assert end is not None, "controller still busy after 5000 cycles (hang)"
    await FallingEdge(tb.clk)
    want = sc.expect(words, p, **env)
    status = "error" if int(dut.error.value) else ("done" if int(dut.done.value) else "?")
    tb.check_equal(status, want.status, "status")
    tb.check_equal(int(dut.err_code.value), want.err_code, "err_code")
    tb.check_equal(int(dut.err_pc.value), want.err_pc, "err_pc")
    tb.check_equal(bool(int(dut.timeout.value)), want.timeout, "timeout")
    tb.check_equal(end, want.end_cycle, "end cycle")
    for k in ("packets", "commands", "barriers"):
        tb.check_equal(got[k], getattr(want, k), k)
    tb.cycles += end + 1


@cocotb.test()
async def random_programs(dut):
    tb = TBBase(dut)
    p = sc.full(tb.params)
    dut.node_id.value = _int(node_address_layout(gpe_config(p)), ME)
    for s in ("prog__valid", "start", "clear", "net_in__valid", "gpe_cpl__valid",
              "net_out__ready", "gpe_cmd__ready", "barrier_ack"):
        getattr(dut, s).value = 0
    await tb.reset()
    for k in range(int(os.environ.get("CTRL_SEEDS", "6"))):
        words, env = sc.random_case(tb.seed * 100 + k, p)
        await run_one(tb, words, env, p)
    tb.report("random_programs")
