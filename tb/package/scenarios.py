"""Directed package scenarios shared by the amaranth.sim and cocotb tests (issue 18).

Programs are hand-built with :mod:`tessera.hdl.chiplet.asm` (one per chiplet); addresses
are hierarchical.  Each ``run_*`` coroutine drives a set-up :class:`.package.PackageTB`
and returns plain data; the ``check_*`` functions hold the assertions (both simulators).
"""
from __future__ import annotations

from tessera.hdl.chiplet.asm import Program
from tessera.hdl.chiplet.config import node_map
from tessera.hdl.global_pe.packets import (OP_GROUP, OP_RECV, OP_SEND, command_layout,
                                           mask_layout, node_address_layout)
from tessera.hdl.package.config import PackageConfig


def program(pcfg: PackageConfig) -> Program:
    ccfg = pcfg.chiplet_cfg()
    return Program(node_map(ccfg).mesh, command_layout(ccfg.gpe))


def addr_int(pcfg: PackageConfig, chiplet, node) -> int:
    """A hierarchical node address packed as the Global PE's ``uaddr`` field."""
    lay = node_address_layout(pcfg.chiplet_cfg().gpe)
    return lay.const({"chiplet": {"x": chiplet[0], "y": chiplet[1]},
                      "node": {"x": node[0], "y": node[1]}}).as_value().value


def gpe_mask(pcfg: PackageConfig, chiplets, nodes) -> int:
    """A Global PE ``mask`` field: chiplet set x node set."""
    ccfg = pcfg.chiplet_cfg()
    lay = mask_layout(ccfg.gpe)
    cm = sum(1 << pcfg.index(c) for c in chiplets)
    nm = node_map(ccfg).mask(nodes)
    return lay.const({"chiplets": cm, "nodes": nm}).as_value().value


def round_trip_programs(pcfg: PackageConfig, home, n: int, base: int, tmo=20_000,
                        late: dict | None = None):
    """Chiplet ``home``'s Global PE opens a RECV window of n words from the host, every
    chiplet meets at ``BAR 1`` (the host cue), home WAITs for the words, SENDs them to the
    host (unicast to host_addr), everyone meets at ``BAR 2``, END.  ``late`` = {chiplet
    index: cycles}: that chiplet burns that many cycles (a WAIT on nothing with TMO... no:
    CMDW no-ops) before BAR 2 -- it arrives late."""
    ccfg = pcfg.chiplet_cfg()
    nm = node_map(ccfg)
    hc, hn = pcfg.host_addr
    progs = []
    for c, cxy in enumerate(pcfg.chiplets()):
        p = program(pcfg).tmo(tmo)
        if cxy == tuple(home):
            p.cmd(op=OP_RECV, tag=1, a=base, cnt0=n, mask=gpe_mask(pcfg, [hc], [hn]))
        p.bar(1)
        if cxy == tuple(home):
            p.wait(gpe=True)
            p.cmd(op=OP_SEND, tag=2, a=base, cnt0=n, cnt1=1, cnt2=1, stride0=1, stride1=0,
                  stride2=0, tile=ccfg.max_tile, groups=0, ucast=1,
                  uaddr=addr_int(pcfg, hc, hn))
            p.wait(gpe=True)
        for _ in range((late or {}).get(c, 0)):
            p.cmdw(0, 0)                      # 3 cycles each: a chiplet that is late
        p.bar(2)
        p.end()
        progs.append(p.words)
    return progs
