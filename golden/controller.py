"""Golden model of the chiplet controller, written from its instruction-set table
and timing contract (the docstring of :mod:`tessera.hdl.chiplet.controller`).

Simba §3.1 (the per-chiplet controller).  Program in -> the packets and
Global PE commands the controller sends (with the cycle each is accepted)
and its final status, given the environment: the cycles at which nodes'
DONE packets arrive, when ``net_out`` / ``gpe_cmd`` / ``barrier_ack`` are
ready, and each Global PE command's completion latency and status.  It
walks the program one instruction at a time (no state machine of the RTL):
an instruction fetched in cycle t is decoded in t + 1 and executes from t + 2; an accepted output or
a completed wait at cycle c lets the next instruction be fetched at c + 1.

Shares only data definitions (:mod:`tessera.hdl.chiplet.isa`).  Left out:
malformed / stray input flits (they change only the ``stray`` flag, which the
tests check directly) and the ``clear`` input.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dfield
from typing import Callable

from tessera.hdl.chiplet import isa


@dataclass
class Result:
    status: str                      # "done" or "error"
    err_code: int = isa.ERR_NONE
    err_pc: int = 0
    timeout: bool = False
    end_cycle: int = -1              # cycle of END's execution / of the error (-1: at start)
    packets: list = dfield(default_factory=list)    # (cycle, x, y, reg, value)
    commands: list = dfield(default_factory=list)   # (cycle, command word)
    barriers: list = dfield(default_factory=list)   # (cycle, id) acknowledged


def _always(_c):
    return True


def run(words, *, prog_depth=256, node_mesh=(4, 5), timeout_bits=24, cmd_chunks=14,
        cmd_bits=None, done_at=(), net_ready: Callable = _always, cmd_ready: Callable = _always,
        bar_ack: Callable = _always, cpl: Callable = lambda i, c: (1, 0),
        max_cycles=1 << 20) -> Result:
    """``done_at``: iterable of (cycle, x, y) DONE arrivals (cycle >= 0 counts);
    ``cpl(i, accept_cycle) -> (latency >= 1, status)`` for the i-th command; the
    Global PE returns completions in order, at most one per cycle."""
    nx, ny = node_mesh
    nodes = nx * ny
    if cmd_bits is None:
        cmd_bits = cmd_chunks * isa.CMD_CHUNK
    if len(words) > prog_depth:
        return Result("error", isa.ERR_LOAD, 0, False, -1)
    arrivals = {}                     # node index -> sorted arrival cycles
    for c, x, y in done_at:
        if c >= 0 and 0 <= x < nx and 0 <= y < ny:
            arrivals.setdefault(y * nx + x, []).append(c)
    consumed_before = [0] * nodes     # arrivals at cycles >= this are unconsumed
    accepts, completions = [], []     # command accept cycles, (completion cycle, status)
    tmo = (1 << timeout_bits) - 1
    cmdreg = 0
    res = Result("done")

    def stop(code, pc, cycle, to=False):
        res.status, res.err_code, res.err_pc, res.timeout, res.end_cycle = \
            "error", code, pc, to, cycle
        return res

    def seen(n, c):
        return any(consumed_before[n] <= a < c for a in arrivals.get(n, ()))

    def inflight(c):
        return sum(a < c for a in accepts) - sum(t < c for t, _ in completions)

    def gpe_bad(c):
        return any(t < c and s != 0 for t, s in completions)

    def first(pred, c):
        while not pred(c):
            c += 1
            if c > max_cycles:
                raise RuntimeError("golden controller: output never accepted")
        return c

    pc, t = 0, 0                      # t = fetch cycle of instruction pc
    while True:
        if pc >= len(words):
            return stop(isa.ERR_PC, pc, t)
        w, e = words[pc], t + 2
        op = isa.field(w, "op")
        imm = isa.field(w, "imm")
        if op == isa.OP_END:
            res.end_cycle = e
            return res
        if op == isa.OP_CFG:
            x, y = isa.field(w, "x"), isa.field(w, "y")
            if x >= nx or y >= ny:
                return stop(isa.ERR_NODE, pc, e)
            c = first(net_ready, e)
            res.packets.append((c, x, y, isa.field(w, "reg"), imm))
        elif op == isa.OP_CMDW:
            k = isa.field(w, "k")
            if k >= cmd_chunks:
                return stop(isa.ERR_ARG, pc, e)
            sh = isa.CMD_CHUNK * k
            cmdreg = (cmdreg & ~(0xFFFF << sh)) | ((imm & 0xFFFF) << sh)
            c = e
        elif op == isa.OP_CMD:
            c = first(cmd_ready, e)
            i = len(accepts)
            accepts.append(c)
            lat, status = cpl(i, c)
            tc = max(c + max(1, lat), completions[-1][0] + 1 if completions else 0)
            completions.append((tc, status))
            res.commands.append((c, cmdreg & ((1 << cmd_bits) - 1)))
        elif op in (isa.OP_WAIT, isa.OP_BAR):
            g = isa.field(w, "g")
            want = [n for n in range(32) if imm >> n & 1]
            c = e
            while True:
                if op == isa.OP_WAIT:
                    ok = (all(n < nodes and seen(n, c) for n in want)
                          and (not g or inflight(c) == 0))
                else:
                    ok = bar_ack(c)
                if ok:
                    break
                if c - e == tmo:
                    return stop(isa.ERR_TIMEOUT, pc, c, True)
                c += 1
            if op == isa.OP_WAIT:
                if g and gpe_bad(c):
                    return stop(isa.ERR_GPE, pc, c)
                for n in want:
                    consumed_before[n] = c
            else:
                res.barriers.append((c, imm & 0xFF))
        elif op == isa.OP_TMO:
            if imm >> timeout_bits:
                return stop(isa.ERR_ARG, pc, e)
            tmo = imm
            c = e
        else:
            return stop(isa.ERR_OP, pc, e)
        pc, t = pc + 1, c + 1
