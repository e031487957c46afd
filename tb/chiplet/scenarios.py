"""Seeded random controller programs and environments, shared by the amaranth.sim
tests (tests/test_chiplet_controller.py) and the cocotb test (:mod:`.test_controller`).

An environment is what :func:`tessera.golden.controller.run` takes: DONE arrival
cycles (early, late, duplicated), ready patterns of ``net_out`` / ``gpe_cmd``,
barrier acknowledges, and each Global PE command's completion latency and status.
"""
from __future__ import annotations

import random

from tessera.golden import controller as golden
from tessera.hdl.chiplet import asm, isa
from tessera.hdl.chiplet.controller import cmd_chunks, gpe_config
from tessera.hdl.global_pe.packets import ST_BAD_OP, ST_OK, command_layout
from tessera.registry import get


def full(params) -> dict:
    return get("controller").resolve(**params)


def program(params) -> asm.Program:
    p = full(params)
    return asm.Program((p["node_mesh_x"], p["node_mesh_y"]), command_layout(gpe_config(p)))


def random_program(rnd, params, n=24):
    p = full(params)
    nx, ny = p["node_mesh_x"], p["node_mesh_y"]
    P = program(params)
    lay = command_layout(gpe_config(p))
    P.tmo(rnd.choice([60, 150, 300]))
    for _ in range(n):
        r = rnd.random()
        if r < 0.35:
            P.cfg(rnd.randrange(nx), rnd.randrange(ny), rnd.getrandbits(16), rnd.getrandbits(32))
        elif r < 0.55:
            P.cmd(rnd.getrandbits(lay.size))
        elif r < 0.8:
            nodes = [(x, y) for x in range(nx) for y in range(ny) if rnd.random() < 0.3]
            P.wait(nodes, gpe=rnd.random() < 0.5)
        elif r < 0.87:
            P.bar(rnd.getrandbits(8))
        elif r < 0.9:
            P.tmo(rnd.choice([5, 60, 200]))
        elif r < 0.92:                               # occasional bad instruction
            P.raw(rnd.choice([0x7, 0xF, isa.encode(isa.OP_CFG, x=nx, y=0)]))
        else:
            P.cfg(0, 0, 0, 0)
    if rnd.random() < 0.9:
        P.end()
    return P.words


def random_case(seed, params, n=24):
    """(words, env) for one seed; env is keyword arguments of golden.run (and the harnesses)."""
    rnd = random.Random(seed)
    p = full(params)
    nx, ny = p["node_mesh_x"], p["node_mesh_y"]
    words = random_program(rnd, params, n)
    cycles = rnd.sample(range(0, 1500), 200)         # early, late, duplicated DONEs
    done_at = [(c, rnd.randrange(nx), rnd.randrange(ny)) for c in cycles]
    nr = [rnd.random() < 0.6 for _ in range(5000)]
    cr = [rnd.random() < 0.6 for _ in range(5000)]
    ba = [rnd.random() < 0.2 for _ in range(5000)]
    lats = [rnd.randrange(1, 40) for _ in range(1000)]
    sts = [ST_OK if rnd.random() < 0.95 else ST_BAD_OP for _ in range(1000)]
    return words, dict(done_at=done_at, net_ready=lambda c: nr[c], cmd_ready=lambda c: cr[c],
                       bar_ack=lambda c: ba[c], cpl=lambda i, c: (lats[i], sts[i]))


def expect(words, params, **env) -> golden.Result:
    p = full(params)
    return golden.run(list(words), prog_depth=p["prog_depth"],
                      node_mesh=(p["node_mesh_x"], p["node_mesh_y"]),
                      timeout_bits=p["timeout_bits"], cmd_chunks=cmd_chunks(p),
                      cmd_bits=command_layout(gpe_config(p)).size, **env)
