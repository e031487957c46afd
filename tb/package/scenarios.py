"""Directed package scenarios shared by the amaranth.sim and cocotb tests (issue 18).

Programs are hand-built with :mod:`tessera.hdl.chiplet.asm` (one per chiplet); addresses
are hierarchical.  Each ``run_*`` coroutine drives a set-up :class:`.package.PackageTB`
and returns plain data; the ``check_*`` functions hold the assertions (both simulators).
"""
from __future__ import annotations

from tessera.hdl.chiplet.asm import Program
from tessera.hdl.chiplet.config import node_map
from tessera.hdl.global_pe.packets import (OP_GROUP, OP_RECV, OP_SEND, command_layout,
                                           mask_layout, node_address_layout, out_header_layout,
                                           unpack_fields)
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


# ---- cross-chiplet layer traffic: multicast, psum chain over the NoP, remote OUT ----------
#: placement of the cross-chiplet scenario (chiplet (x, y), node (x, y)) on a 2x2 package
XC_GPE_IN = (0, 0)                           # chiplet whose Global PE holds the inputs
XC_GPE_OUT = (1, 1)                          # chiplet whose Global PE receives every OUT
XC_MCAST = [(0, 0), (1, 0), (1, 1)]          # chiplets of the multicast PEs, node (0, 0)
XC_FIRST = ((1, 0), (1, 0))                  # psum chain: FIRST on chiplet (1, 0) ...
XC_LAST = ((0, 1), (1, 0))                   # ... -> LAST on chiplet (0, 1)


def xchip_scenario(pcfg: PackageConfig, seed: int, ntiles: int = 2):
    """Programs, host packets and the golden output of a cross-chiplet pass:

    * chiplet XC_GPE_IN's Global PE multicasts run A's input tiles (one SEND, group =
      chiplets XC_MCAST x node (0, 0)) to a PE on three chiplets, each with its own
      weights (role ONLY);
    * it unicasts run F's input to the FIRST PE of a psum chain on chiplet (1, 0) and run
      L's to the LAST PE on chiplet (0, 1): the partial sums cross the NoP (hierarchical
      ``psum_dest``, PCREDITs back);
    * every OUT packet goes to chiplet XC_GPE_OUT's Global PE (hierarchical ``out_dest``),
      which sends the whole output window to the host at the end.
    Barriers: 1 = every input window open (host cue: stream the inputs), 2 = every PE
    configured, 3 = every PE done.  Golden: :class:`tessera.golden.pe_node.PeNodeModel`
    per PE (FIRST's PSUM packets feed LAST's model)."""
    import numpy as np
    from dataclasses import replace

    from tessera.golden.pe_node import PeNodeModel
    from tessera.hdl.chiplet import packets as P
    from tessera.hdl.pe.config import Role
    from tessera.tb.chiplet.pe_node_env import build_run

    ccfg = pcfg.chiplet_cfg()
    nm = node_map(ccfg)
    nc = P.PeNodeConfig(**ccfg.pe_node_params())
    rng = np.random.default_rng(seed)
    runA = build_run(nc, rng, role=Role.ONLY, R=1, stride=1, ntiles=ntiles)
    cfgA = runA["cfg"]
    runsA = [runA] + [build_run(nc, rng, cfg=cfgA, ntiles=ntiles) for _ in XC_MCAST[1:]]
    runF = build_run(nc, rng, role=Role.FIRST, R=1, stride=1, ntiles=ntiles)
    runL = build_run(nc, rng, cfg=replace(runF["cfg"], role=int(Role.LAST)), ntiles=ntiles)

    def words(run):
        return [w for _n, _s, pk in run["data"] for w in pk[1:]]
    inA, inF, inL = words(runA), words(runF), words(runL)
    base = {"A": 0, "F": len(inA), "L": len(inA) + len(inF)}
    n_in = len(inA) + len(inF) + len(inL)

    # output window on XC_GPE_OUT: one region per producing PE
    def beats(cfg):
        return cfg.K1 * cfg.P1 * cfg.Q1
    obase, cur, regions = 0, 0, {}
    for cxy in XC_MCAST:
        regions[(cxy, (0, 0))] = (cur, beats(cfgA))
        cur += ntiles * beats(cfgA)
    regions[XC_LAST] = (cur, beats(runL["cfg"]))
    cur += ntiles * beats(runL["cfg"])
    n_out = cur
    gout = (XC_GPE_OUT, nm.gpe)

    def regs(run, where, psum_dest=(0, 0)):
        ob, stride = regions.get(where, (0, 0))
        return P.pe_node_registers(run["cfg"], ntiles, psum_dest=psum_dest, out_dest=gout,
                                   out_base=obase + ob, out_tile_stride=stride,
                                   done_dest=nm.ctrl)
    cfg_writes = {}                       # chiplet -> [(node, regs)]
    for cxy, run in zip(XC_MCAST, runsA):
        cfg_writes.setdefault(cxy, []).append(((0, 0), regs(run, (cxy, (0, 0)))))
    cfg_writes.setdefault(XC_LAST[0], []).append((XC_LAST[1], regs(runL, XC_LAST)))
    cfg_writes.setdefault(XC_FIRST[0], []).append((XC_FIRST[1], regs(runF, XC_FIRST,
                                                                      psum_dest=XC_LAST)))

    # host preload: WLOAD / PLOAD to every PE (hierarchical)
    preload = []
    for (cxy, node), run in [((c, (0, 0)), r) for c, r in zip(XC_MCAST, runsA)] + \
            [(XC_FIRST, runF), (XC_LAST, runL)]:
        for name, _src, pk in run["ctrl"]:
            if name in ("WLOAD", "PLOAD"):
                preload.append(((cxy, node), pk, P.node_class(name, ccfg.classes)))

    # programs
    hc, hn = pcfg.host_addr
    tmo = (1 << ccfg.timeout_bits) - 1
    progs = []
    allc = pcfg.chiplets()
    for cxy in allc:
        p = program(pcfg).tmo(tmo)
        if cxy == XC_GPE_IN:
            p.cmd(op=OP_RECV, tag=1, a=0, cnt0=n_in, mask=gpe_mask(pcfg, [hc], [hn]))
        if cxy == XC_GPE_OUT:
            p.cmd(op=OP_RECV, tag=2, a=obase, cnt0=n_out,
                  mask=gpe_mask(pcfg, allc, [(0, 0), XC_LAST[1]]))
        p.bar(1)
        mine = cfg_writes.get(cxy, [])
        for node, rr in mine:
            for reg, val in rr:
                p.cfg(node[0], node[1], reg=reg, value=val)
        if cxy == XC_GPE_IN:
            p.wait(gpe=True)                  # inputs landed (RECV done)
        p.bar(2)
        if cxy == XC_GPE_IN:
            p.cmd(op=OP_GROUP, tag=3, gidx=0, mask=gpe_mask(pcfg, XC_MCAST, [(0, 0)]))
            for key, n, dest in (("A", len(inA), None), ("F", len(inF), XC_FIRST),
                                 ("L", len(inL), XC_LAST)):
                p.cmd(op=OP_SEND, tag=4, a=base[key], cnt0=n, cnt1=1, cnt2=1, stride0=1,
                      stride1=0, stride2=0, tile=ccfg.max_tile, groups=int(dest is None),
                      ucast=int(dest is not None),
                      uaddr=addr_int(pcfg, *dest) if dest is not None else 0)
        p.wait([node for node, _r in mine], gpe=cxy in (XC_GPE_IN, XC_GPE_OUT))
        p.bar(3)
        if cxy == XC_GPE_OUT:
            p.cmd(op=OP_SEND, tag=5, a=obase, cnt0=n_out, cnt1=1, cnt2=1, stride0=1,
                  stride1=0, stride2=0, tile=ccfg.max_tile, groups=0, ucast=1,
                  uaddr=addr_int(pcfg, hc, hn))
            p.wait(gpe=True)
        p.end()
        progs.append(p.words)

    # golden
    def model(node, run, regs_, data_run):
        mdl = PeNodeModel(nc, node)
        for name, src, pk in run["ctrl"]:
            if name in ("WLOAD", "PLOAD"):
                mdl.receive(src, pk)
        for reg, val in regs_:
            mdl.receive(nm.ctrl, [P.cfg_payload(reg, val)])
        for _n, src, pk in data_run["data"]:
            mdl.receive(src, pk)
        return mdl
    mem = {}

    def outs(sent):
        for (dest, kind), pkts in sent.items():
            if kind == "OUT":
                for pk in pkts:
                    h = unpack_fields(out_header_layout(), pk[0])
                    for i, w in enumerate(pk[1:]):
                        mem[h["addr"] + i] = w
    for cxy, run in zip(XC_MCAST, runsA):
        outs(model((0, 0), run, regs(run, (cxy, (0, 0))), runA).finish())
    mF = model(XC_FIRST[1], runF, regs(runF, XC_FIRST, psum_dest=XC_LAST), runF)
    sF = mF.finish()
    mL = model(XC_LAST[1], runL, regs(runL, XC_LAST), runL)
    for (dest, kind), pkts in sF.items():
        if kind == "PSUM":
            for pk in pkts:
                mL.receive(XC_FIRST[1], pk)
    outs(mL.finish())
    expect = [mem.get(obase + i) for i in range(n_out)]
    return {"programs": progs, "preload": preload, "inputs": inA + inF + inL,
            "n_in": n_in, "n_out": n_out, "expect": expect}


async def run_xchip(tb, sc, max_cycles=200_000) -> dict:
    """Drive a :func:`xchip_scenario` on a set-up PackageTB; returns plain data."""
    tb.new_run()
    for c, w in enumerate(sc["programs"]):
        tb.load_program(w, c)
    for dest, pk, cls in sc["preload"]:
        tb.send_packet(tb.packet(dest, pk, cls))
    while tb.tx or tb.cur is not None or tb.prog_q:      # weights land before start
        await tb.step()
    for _ in range(64):
        await tb.step()
    tb.on_barrier(1, lambda t: t.send_packets(t.out_packets(sc["inputs"], 0,
                                                            chiplet=XC_GPE_IN)))
    tb.start()
    await tb.run(max_cycles=max_cycles, until=lambda t: t.data_words() >= sc["n_out"])
    got = [int(w) for _h, ws in tb.data_packets() for w in ws]
    return {"words": got, "status": dict(tb.status),
            "bar_cost": {b: tb.barrier_cost(b) for b in (1, 2, 3)},
            "bar_events": {b: {k: {str(c): v for c, v in d.items()} for k, d in ev.items()}
                           for b, ev in tb.bar_events.items()}}


def check_xchip(r, sc):
    st = r["status"]
    assert st["error"] == 0 and st["timeout"] == 0, st
    assert st["done"] == (1 << len(st["done_cycle"])) - 1, st
    assert not any(st["noc_err"]) and st["nop_err"] == 0 and st["bar_err"] == 0, st
    assert not any(st["pe_error"]) and not any(st["gpe_status"]), st
    assert None not in sc["expect"], "golden left a hole in the output window"
    assert len(r["words"]) == sc["n_out"], (len(r["words"]), sc["n_out"])
    bad = [i for i, (a, b) in enumerate(zip(r["words"], sc["expect"])) if a != b]
    assert not bad, f"{len(bad)} output words differ, first at {bad[0]}"
    assert st["nop_flits"] > 0


# ---- round trip + late chiplet -------------------------------------------------------------
async def run_round_trip(tb, home=(1, 1), n=20, base=16, late=None, seed=1, max_cycles=50_000):
    """Host -> chiplet ``home``'s Global PE -> host, barriers 1 and 2 (``late``: chiplet
    index -> extra cycles/3 before BAR 2)."""
    import random
    rng = random.Random(seed)
    words = [rng.getrandbits(64) for _ in range(n)]
    progs = round_trip_programs(tb.pcfg, home, n, base, late=late)
    tb.new_run()
    for c, w in enumerate(progs):
        tb.load_program(w, c)
    tb.on_barrier(1, lambda t: t.send_packets(t.out_packets(words, base, chiplet=home)))
    tb.start()
    await tb.run(max_cycles=max_cycles, until=lambda t: t.data_words() >= n)
    got = [int(w) for _h, ws in tb.data_packets() for w in ws]
    return {"words": got, "expect": words, "status": dict(tb.status), "late": late or {},
            "bar_events": {b: {k: dict(d) for k, d in ev.items()}
                           for b, ev in tb.bar_events.items()},
            "bar_cost": {b: tb.barrier_cost(b) for b in tb.bar_events}}


def check_round_trip(r):
    st = r["status"]
    assert st["error"] == 0 and st["done"] == (1 << len(st["done_cycle"])) - 1, st
    assert not any(st["noc_err"]) and st["nop_err"] == 0 and st["bar_err"] == 0, st
    assert r["words"] == r["expect"], "round trip words differ"
    ev = r["bar_events"][2]
    arr, rel = ev["arrive"], ev["release"]
    last = max(arr.values())
    for c in r["late"]:
        # the late chiplet arrives last; nobody is released before it arrived, and every
        # other chiplet waited in BAR 2 from its arrival to its release (holds only that)
        assert arr[c] == last, ev
    assert min(rel.values()) > last, ev
    assert sorted(arr) == sorted(rel) == list(range(len(st["done_cycle"]))), ev


# ---- programs that must end in an error, never a hang --------------------------------------
def bad_programs(pcfg: PackageConfig, tmo=400):
    """{name: (programs, expected per-chiplet (error, timeout, err_code))}.

    * ``bad_chiplet``: chiplet 1 starts a PE whose ``done_dest`` is a bad cross-chiplet
      address (the gateway node of the last chiplet: the routers drop the DONE,
      ``noc_err``) and WAITs for it -> TIMEOUT; the others END.
    * ``bar_never``: chiplet 2 never reaches the barrier the others wait in -> each of
      them ends in TIMEOUT, chiplet 2 ends done.
    """
    from tessera.hdl.chiplet import isa
    from tessera.hdl.chiplet import packets as P
    ccfg = pcfg.chiplet_cfg()
    nm = node_map(ccfg)
    C = pcfg.nchiplets
    out = {}
    progs = []
    for c in range(C):
        p = program(pcfg).tmo(tmo)
        if c == 1:
            # a coordinate past ckx wraps in the flit's chiplet field when ckx is a power
            # of two, so the bad address is the NoP gateway node of another chiplet (not a
            # destination: dropped by the router, counted in noc_err)
            bad = P.dest_value(nm.gateway, (pcfg.ckx - 1, pcfg.cky - 1))
            p.cfg(*nm.pes[0], reg=P.REGS["ntiles"], value=0)
            p.cfg(*nm.pes[0], reg=P.REGS["done_dest"], value=bad)
            p.cfg(*nm.pes[0], reg=P.REGS["start"], value=1)
            p.wait([nm.pes[0]])
        progs.append(p.end().words)
    exp = [(0, 0, 0)] * C
    exp[1] = (1, 1, isa.ERR_TIMEOUT)
    out["bad_chiplet"] = (progs, exp)
    progs = []
    for c in range(C):
        p = program(pcfg).tmo(tmo)
        if c != 2:
            p.bar(7)
        progs.append(p.end().words)
    exp = [(1, 1, isa.ERR_TIMEOUT)] * C
    exp[2] = (0, 0, 0)
    out["bar_never"] = (progs, exp)
    return out


async def run_bad(tb, progs, max_cycles=20_000) -> dict:
    tb.new_run()
    for c, w in enumerate(progs):
        tb.load_program(w, c)
    tb.start()
    await tb.run(max_cycles=max_cycles)
    return dict(tb.status)


def check_bad(st, exp, name):
    for c, (e, t, code) in enumerate(exp):
        got = ((st["error"] >> c) & 1, (st["timeout"] >> c) & 1, st["err_code"][c] if e else 0)
        assert got == (e, t, code), (name, c, got, (e, t, code), st)
        assert (st["done"] >> c & 1) == (1 - e), (name, c, st)
    if name == "bad_chiplet":
        assert any(st["noc_err"]), st     # the DONE to a chiplet outside was dropped
