"""Cycle model of one compiled package pass (Simba §3.1 package: chiplets on a NoP mesh; §4.3
Fig. 7 NoP latency; §5.1 non-uniform completion times) and the package-level mapper adapter.

Predicts, for a pass of ``hdl/package/compiler.py``, each chiplet's ``done_cycle`` (start ->
its controller's ``done``, what the package RTL reports per chiplet) and the layer's cycles
(the last chiplet).  The chiplet part is ``chiplet_cycles.py``'s model of the chiplet's own
sub-pass (PE tile, Global PE injection / ejection and controller-issue bounds of the tile
period, the intra-chiplet chain and OUT latencies); this module adds what the package adds,
timeline per chiplet (program order of the compiler's docstring):

* ``bar1``: prologue instructions (``instr_cycles`` each, + the Global PE decoder for the
  input RECV) -> ARRIVE; barrier release = the last ARRIVE at the master (+ its latency there)
  + ``barrier_cycles`` + the RELEASE's latency back to each chiplet;
* ``input``: the host sends the input blocks when every chiplet shows ``BAR 1`` (every RECV
  window is open; ``PackageTB.on_barrier``), one after the other (chiplet order) on the one
  host port at ``host_flits_per_cycle``; WAIT G ends when the block has crossed to the home;
* ``bar2``: output RECVs + CFG instructions, then the second barrier (every PE configured);
* ``first``: the home issues GROUPs / first SENDs; the first tile reaches the consumer's
  farthest PE after the round's injection (at the slower of the Global PE's rate and the NoP
  link rate ``1/nop_flit_cycles`` for a remote consumer) + the hierarchical route latency; a
  multicast to another chiplet is cut-through (hdl/noc/router.py: a head goes on 2 cycles
  after its tail arrived), + (packet flits - 1) per router past the home's NoP router
  (``mcast_cut_through``; RTL Fig. 7 4x4: remote PEs end 10 cycles later per NoP hop);
* ``steady``: (tiles - 1) x period, period = the chiplet model's bound (its PE tile with the
  NI's double-buffered input region when a tile fits half the input buffer, ``ibuf_slots``),
  the NoP link rate of a remote input (round flits x ``nop_flit_cycles``), the busiest NoP
  link's load per round (all flows: multicast trees counted once per link, psums, OUT) and,
  for a consumer on another chiplet than its home, the routers' multicast rule on the NoP
  (``nop_mcast``, first tile included: every packet of every set of the round,
  ``chiplet_cycles.mcast_hop_cycles``
  with the NoP routers' buffer and link latency: the NoP buffer, max(max packet, 2 x link
  latency + 2), cannot hold a max packet beside the previous one);
* ``chain``: a reduction chain crossing chiplets finishes one psum hop (route latency + a
  tile's psum flits at the link rate) after its predecessor chiplet, or its own last tile;
* ``out``: the LAST PEs' OUT packets reach the OA home (route latency + a packet);
* ``done``: PE DONEs reach the controller; a home's SEND completes when its last flit enters
  the Global PE's router (hdl/global_pe/send.py, ``send_done_at_gpe``): at injection when the
  route to its NoP router buffers the whole SEND (``route_held`` whole packets), else when its
  farthest consumer took the last tile (back-pressure reaches the Global PE; the ablation
  ``send_done_at_gpe=False`` always); an OA home's RECV when the last OUT arrived; then the read-back of each
  output window to the host: the SEND's assembled instruction words + the decoder, and the
  SEND ends when its last flit has left the Global PE (hdl/global_pe/send.py): the SENDs of
  several chiplets overlap, the one host port takes their flits one after the other, and a
  SEND ends once the host has drained all of it but what its route's buffers hold (router
  input buffers + NoP link stages; a buffer shared by k read-back routes counts 1/k)
  (``readback_arrival=True``, the ablation: it ends when its data reached the host and the
  CREDIT came back, windows one after the other) + END; ``final_barrier``: BAR 3's ARRIVE
  follows the read-back into the host's chiplet.

Route latency (hierarchical XY, ``hdl/noc``): same chiplet: NoC hops x ``noc_hop_cycles``;
else (hops to the gateway + hops from the gateway + 2) x ``noc_hop_cycles`` + NoP hops x
``nop_hop_cycles``.  Constants and their provenance: ``rtl_constants.py``
(``nop_hop_cycles`` and ``barrier_cycles`` are derived while the package RTL has not measured
them: noc_hop_cycles + nop_link_latency + nop_flit_cycles - 1, and 2 instruction times).
Credit loops (DATA CREDITs to a SEND lane, PCREDITs of a chain link across the NoP): route
there and back + :func:`credit_handling`, derived from the RTL's structure (packet in, words
popped into the PE, the chiplet model's ``credit_fixed_cycles``); the package residual
``credit_overhead_cycles`` is 0 (bench/package_layer.py fits it on a named subset of the RTL
runs only as an experiment, with the held-out runs' errors).
Calibration (bench/package_layer.py, RTL with issue 17's chiplet defaults: 16-flit router
buffers at max packet 9, credit_window 32): no term fitted on the package runs; stop 16's
model (whole-packet multicast rule, windows read back one after the other, ibuf_slots 1)
was +19 / +26 % on res2b / res4b; the four structural terms above bring every run within
8 % total / 11 % per chiplet (the bench's ablations take them out one at a time); the
NoP multicast cut-through and the SEND completion at the Global PE (both from the RTL's
structure) bring Fig. 7's 4x4 one-PE runs within 7.2 % total / 8.6 % per chiplet.
Left out: NoC link contention inside a chiplet between flows of different chiplets,
wormhole blocking across the NoP, the PE's own consumption rate inside a credit loop (one word
per cycle assumed), host reaction time, the interleaving of read-back packets at the host
chiplet's routers (round robin per packet: the model serves windows in order).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field


# ---------------------------------------------------------------------- mapper adapter
def package_arch(pcfg, bench_dir=None, rtl_terms: bool = False):
    """The Simba model's Arch for the package: ``ckx x cky`` chiplets of ``pcfg.chiplet``
    (``chiplet_cycles.chiplet_arch`` for one chiplet, package mesh from the config).
    ``rtl_terms=False``: the stop-21 terms off (``chiplet_cycles.PRE_STOP21_TERMS``, why there)."""
    from .chiplet_cycles import chiplet_arch
    return chiplet_arch(pcfg.chiplet, bench_dir, rtl_terms).with_(mesh_rows=pcfg.cky, mesh_cols=pcfg.ckx)


def map_for_package(layer, pcfg, samples: int = 300, seed: int = 0, counts=None,
                    binding="row-major", nonuniform: bool = True, bench_dir=None,
                    spatial_pq: bool = True):
    """Best package mapping from the Simba mapper (``mapper.search`` on the package Arch,
    chiplet counts ``counts``, default all chiplets of the package), then §5.1's non-uniform
    partition (``optim.nonuniform``) when the model finds it faster.  Returns the LayerResult
    (its ``mapping`` may carry ``k_ext`` / ``p_ext``)."""
    from .mapper import search
    from .optim import nonuniform as nonuni
    arch = package_arch(pcfg, bench_dir)
    counts = counts or [pcfg.ckx * pcfg.cky]
    res = search(layer, arch, counts, samples=samples, seed=seed, binding=binding, spatial_pq=spatial_pq)
    if nonuniform:
        nu = nonuni(layer, arch, res)
        if nu.latency_cycles < res.latency_cycles:
            return nu
    return res


# ---------------------------------------------------------------------- constants
@dataclass(frozen=True)
class PackageCycles:
    noc_hop_cycles: float = 3.0
    nop_hop_cycles: float = 8.0
    nop_flit_cycles: float = 1.0
    barrier_cycles: float = 6.0
    instr_cycles: float = 3.0
    gpe_cmd_cycles: float = 5.0
    host_flits_per_cycle: float = 1.0
    send_flits_per_cycle: float = 1.0
    credit_overhead_cycles: float = 0.0
    ibuf_slots: int | None = None      # input regions per PE node: None = the chiplet model's (the NI
                                       # double-buffers a tile that fits half the input buffer); 1: ablation
    serial_sets: bool = False          # ablation: a home's multicast sets wait for credits in turn
    readback_arrival: bool = False     # False: a read-back SEND ends when its last flit left the Global PE
                                       # (hdl/global_pe/send.py); True (ablation): when its data reached
                                       # the host and the CREDIT came back
    credit_structure: bool = True      # ablation False: credit loops = route + credit_overhead_cycles only
    nop_mcast_rule: bool = True        # ablation False: NoP multicast at the link rate (no router rule)
    sends_wait_consumers: bool = True  # a home's input SENDs end when its farthest consumer took the last
                                       # tile; False (experiment): the home does not wait for them
    mcast_cut_through: bool = True     # a multicast packet moves on at each router only once its tail is
                                       # in (hdl/noc/router.py): + (packet flits - 1) per router on the
                                       # route; False (ablation): wormhole route latency
    home_paced_by_nop: bool = False    # experiment: the home's own PEs' first tile paced by the NoP branch
                                       # of the same multicast, ahead only by the fork -> NoP route's packets
    send_done_at_gpe: bool = True      # a home's SEND completes when its last flit enters the Global PE's
                                       # router (hdl/global_pe/send.py), i.e. once all but the packets the
                                       # route to the NoP bottleneck buffers have passed it; False
                                       # (ablation): sends_wait_consumers decides
    provenance: dict = field(default_factory=dict, compare=False)


def default_constants(pcfg, bench_dir="default") -> PackageCycles:
    """Constants from ``rtl_constants.load`` (live RTL bench JSONs first); the NoP hop and the
    barrier cost are derived from the package parameters while unmeasured."""
    from . import rtl_constants as rc
    k = rc.load() if bench_dir == "default" else rc.load(bench_dir)
    prov = dict(k.provenance)
    noc = float(k["noc_hop_cycles"])
    nop = k.get("nop_hop_cycles")
    if nop is None:
        nop = noc + pcfg.nop_link_latency + pcfg.nop_flit_cycles - 1
        prov["nop_hop_cycles"] = (f"derived: noc_hop_cycles {noc} + nop_link_latency "
                                  f"{pcfg.nop_link_latency} + nop_flit_cycles-1 (not RTL-measured yet)")
    bar = k.get("barrier_cycles")
    if bar is None:
        bar = 2 * float(k["instr_cycles"])
        prov["barrier_cycles"] = "assumption: 2 controller instruction times (not RTL-measured yet)"
    prov["nop_flit_cycles"] = "PackageConfig.nop_flit_cycles"
    cr = k.get("credit_overhead_cycles")
    if cr is None:
        cr = 0.0
        prov["credit_overhead_cycles"] = "assumption: 0 (not RTL-fitted yet)"
    prov["ibuf_slots"] = ("input regions per PE node: the chiplet model's chiplet_cycles.ibuf_slots (the "
                          "NI fills a second region while a tile drains when a tile fits half the input "
                          "buffer: 2 on every package bench run); was 1 while the router rule and the "
                          "read-back were mis-modelled (stop 16)")
    return PackageCycles(noc, float(nop), float(pcfg.nop_flit_cycles), float(bar),
                         float(k["instr_cycles"]), float(k["gpe_cmd_cycles"]),
                         float(k["host_flits_per_cycle"]), float(k["send_flits_per_cycle"]),
                         float(cr), None, provenance=prov)


def _hops(a, b) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _op_words(ch, cfg, nm) -> list:
    """Instruction words each op of a chiplet program assembles to (CMDW only on changes)."""
    from tessera.hdl.chiplet.asm import assemble_ops
    return assemble_ops(ch.ops, cfg).op_words


def credit_handling(pkt_flits, pkt_words, cc, pc: PackageCycles) -> float:
    """Cycles of a credit loop beyond its route latency, from the RTL's structure: the packet's
    flits into the receiving NI, its words popped into the PE (the NI's ``_CreditedRx`` returns
    the credit only then), the credit's generation and the sender's update
    (``ChipletCycles.credit_fixed_cycles``, RTL-fitted on a chiplet run) and the package
    residual ``credit_overhead_cycles`` (0: nothing fitted on package runs)."""
    if not pc.credit_structure:
        return pc.credit_overhead_cycles
    return pkt_flits + pkt_words + cc.credit_fixed_cycles + pc.credit_overhead_cycles


def package_cycles(pp, pc: PackageCycles | None = None, chiplet_consts=None, slots=None,
                   pass_model=None) -> dict:
    """Predicted per-chiplet completion and total cycles of a compiled package pass.
    ``pass_model``: replaces ``chiplet_cycles.pass_cycles`` (same signature) for experiments."""
    from tessera.hdl.chiplet.compiler import TAG_READBACK, TAG_RECV_IN
    from tessera.hdl.chiplet.config import node_map
    from tessera.hdl.pe.config import Role
    from .chiplet_cycles import default_constants as chip_defaults, mcast_hop_cycles, pass_cycles
    from .topology import mesh, xy_route
    tg = pp.target
    cfg = tg.chiplet_cfg()
    pc = pc or default_constants(tg)
    nm = node_map(cfg)
    ins = pc.instr_cycles
    ckx = tg.ckx
    xy = tg.chiplets()
    cc, pe_c = chiplet_consts or chip_defaults()
    from dataclasses import replace
    cc = replace(cc, hop_cycles=pc.noc_hop_cycles, instr_cycles=ins, gpe_cmd_cycles=pc.gpe_cmd_cycles,
                 send_flits_per_cycle=pc.send_flits_per_cycle)

    def lat(c1, n1, c2, n2):
        if c1 == c2:
            return _hops(n1, n2) * pc.noc_hop_cycles
        return ((_hops(n1, nm.gateway) + _hops(nm.gateway, n2) + 2) * pc.noc_hop_cycles
                + _hops(xy[c1], xy[c2]) * pc.nop_hop_cycles)

    def mcast_lat(c1, n1, c2, n2, pkt):
        """Route latency of a multicast packet of ``pkt`` flits: cut-through (hdl/noc/router.py:
        the head leaves a router 2 cycles after the tail arrived, where a wormhole head goes on
        at once) adds pkt - 1 per router.  Same chiplet: left to the chiplet model (its first
        tile and credit loop already carry the NoC multicast).  Across the NoP: the routers after the home's NoP router (the NoP routers of the route and the
        consumer chiplet's NoC routers, gateway included) -- up to the home's NoP router the
        packet's time is the multicast rule's (nop_round: send + drain per packet there)."""
        if not pc.mcast_cut_through or c1 == c2:
            return lat(c1, n1, c2, n2)
        routers = _hops(xy[c1], xy[c2]) + (_hops(nm.gateway, n2) + 1)
        return lat(c1, n1, c2, n2) + routers * (pkt - 1)

    hchip = tg.index(tg.host_addr[0])
    hnode = tg.host_addr[1]
    master = tg.index(tg.bar_master)
    chips = pp.chiplets
    N = len(chips)
    words = {ch.chiplet: _op_words(ch, cfg, nm) for ch in chips}

    def seg(c, start_kind, stop_kind, start_n=0, stop_n=0):
        """Instruction words from after the start_n-th op of kind start_kind up to and including
        the stop_n-th op of kind stop_kind (ops as ("bar", id) etc.)."""
        ops, w = chips[c].ops, words[c]
        i0 = 0
        if start_kind is not None:
            i0 = [i for i, o in enumerate(ops) if o[0] == start_kind][start_n] + 1
        i1 = [i for i, o in enumerate(ops) if o[0] == stop_kind][stop_n]
        return sum(w[i0:i1 + 1])

    def barrier(arrive):
        last = max(arrive[c] + lat(c, nm.ctrl, master, nm.ctrl) for c in range(N))
        rel = last + pc.barrier_cycles
        return {c: rel + lat(master, nm.ctrl, c, nm.ctrl) for c in range(N)}, last
    # ---- bar 1 + input ------------------------------------------------------------
    has_in = {c.chiplet: any(o[0] == "recv" and o[1].tag == TAG_RECV_IN for o in c.ops) for c in chips}
    a1 = {c: seg(c, None, "bar") * ins + (pc.gpe_cmd_cycles if has_in[c] else 0) for c in range(N)}
    r1, _ = barrier(a1)
    t_host = max(a1.values())                # the host's cue: every chiplet shows BAR 1
    in_done = {}
    for c in sorted(c for c in range(N) if has_in[c]):
        words_in = sum(len(p) for p in chips[c].preload_input)
        if not chips[c].preload_input:
            src = [x for x in chips if x.ps is not None and x.chiplet in chips[c].consumers][0].ps
            words_in = src.in_words + math.ceil(src.in_words / cfg.max_tile)
        t_host = max(t_host, a1[c]) + words_in / pc.host_flits_per_cycle
        in_done[c] = t_host + lat(hchip, hnode, c, nm.gpe)
    # ---- bar 2 --------------------------------------------------------------------
    a2 = {}
    for c in range(N):
        ops, w = chips[c].ops, words[c]
        bars = [i for i, o in enumerate(ops) if o[0] == "bar"]
        t = r1[c]
        i = bars[0] + 1
        if has_in[c]:                                  # WAIT G: the input block has landed
            t = max(t + w[i] * ins, in_done[c] + pc.gpe_cmd_cycles)
            i += 1
        a2[c] = t + sum(w[i:bars[1] + 1]) * ins
    r2, last2 = barrier(a2)
    # ---- per-chiplet sub-pass model -----------------------------------------------
    slots = pc.ibuf_slots if slots is None else slots
    pass_model = pass_model or pass_cycles
    pm = {ch.chiplet: pass_model(ch.ps, cfg, cc, pe_c, slots=slots) for ch in chips if ch.ps is not None}
    home_of = {}
    for ch in chips:
        for d in ch.consumers:
            home_of[d] = ch.chiplet
    # NoP link loads per round (flits): input multicast trees, psums, OUT packets
    m = mesh(tg.cky, tg.ckx)
    load = {}

    def add(src, dsts, flits):
        links = set()
        for d in dsts:
            links |= set(xy_route(ckx, src, d))
        for l in links:
            load[l] = load.get(l, 0.0) + flits
    for ch in chips:
        if ch.consumers:
            src = chips[ch.consumers[0]].ps
            g0 = src.jobs[0].cfg
            tile_flits = g0.C1 * g0.H_in * (g0.W_in + math.ceil(g0.W_in / min(cfg.max_tile, g0.W_in)))
            add(ch.chiplet, [d for d in ch.consumers if d != ch.chiplet], tile_flits * len(src.sets))
    psum_flits_tile = {}
    for ch in chips:
        if ch.ps is None:
            continue
        g0 = ch.ps.jobs[0].cfg
        beats = g0.K1 * g0.P1 * g0.Q1
        pf = beats * cfg.psum_flits + math.ceil(beats / cfg.psum_beats)
        psum_flits_tile[ch.chiplet] = pf
        for j in ch.ps.jobs:
            pchip = getattr(j, "psum_chip", None)
            if pchip is not None and tg.index(pchip) != ch.chiplet:
                add(ch.chiplet, [tg.index(pchip)], pf)
            oc = getattr(j, "out_chip", None)
            if oc is not None and tg.index(oc) != ch.chiplet and j.role in (Role.LAST, Role.ONLY):
                add(ch.chiplet, [tg.index(oc)], beats + math.ceil(beats / cfg.out_words))
    link_bound = {}
    for c in pm:
        h = home_of[c]
        route = set(xy_route(ckx, h, c))
        link_bound[c] = max([load[l] for l in route], default=0.0) * pc.nop_flit_cycles
    def route_held(pkt, fork=False):
        """Whole multicast packets the route from the Global PE to the NoP router buffers
        (hdl/noc/router.py): the Global PE's router takes flits while its input buffer has room
        (floor(B / pkt)); a router upstream forwards a multicast packet only when the next input
        buffer has room for a max-length packet (floor((B - max) / pkt) + 1 each: the NoC routers
        to the gateway, then the NoP router's local input)."""
        B, M = cfg.router_buffer_flits, cfg.max_packet_flits
        n = (0 if fork else B // pkt) + _hops(nm.gpe, nm.gateway) * ((B - M) // pkt + 1)
        return n + max(tg.nop_router_buffer_flits - M, 0) // pkt + 1

    # ---- first tile, steady state, own finish ----------------------------------------
    send_start, fin, first = {}, {}, {}
    for ch in chips:
        if ch.consumers:
            c = ch.chiplet
            i_bar2 = [i for i, o in enumerate(ch.ops) if o[0] == "bar"][1]
            i_send = [i for i, o in enumerate(ch.ops) if o[0] == "send"][0]
            send_start[c] = r2[c] + sum(words[c][i_bar2 + 1:i_send + 1]) * ins + pc.gpe_cmd_cycles
    # credit window: a SEND lane keeps credit_window DATA packets in flight per destination; a
    # multicast waits for its slowest member's CREDIT: route there and back + the credit
    # handling of the RTL's loop (credit_handling: the packet's flits into the NI, its words
    # popped into the PE -- the NI returns the CREDIT only then, pe_node._CreditedRx -- and the
    # chiplet model's credit_fixed_cycles for CREDIT generation / Global PE update, fitted on a
    # chiplet run, not on package runs) + credit_overhead_cycles (package residual, 0): per
    # round, each set's tile needs ceil(packets / credit_window) round trips to its farthest
    # member (sets on parallel lanes)
    credit_round = {}
    for ch in chips:
        if not ch.consumers:
            continue
        h = ch.chiplet
        src = chips[ch.consumers[0]].ps
        g0 = src.jobs[0].cfg
        pkts = g0.C1 * g0.H_in * math.ceil(g0.W_in / min(cfg.max_tile, g0.W_in))
        w = min(cfg.max_tile, g0.W_in)
        rtt = max(lat(h, nm.gpe, d, n) + lat(d, n, h, nm.gpe) for d in ch.consumers
                  for n in (j.node for j in chips[d].ps.jobs)) + credit_handling(w + 1, w, cc, pc)
        credit_round[h] = math.ceil(pkts / cfg.credit_window) * rtt * (len(src.sets) if pc.serial_sets else 1)
    # NoP multicast: a home's input packets to consumers on other chiplets cross NoP routers,
    # whose buffers (nop_router_buffer_flits) cannot hold a max-length packet beside the
    # previous one: the router rule (chiplet_cycles.mcast_hop_cycles, the same hdl/noc/router.py
    # rule as on the NoC: send + drain to B - max_packet_flits + the NoP link both ways) paces
    # every packet of every set of the round (one DATA VC) to the consumers on other chiplets,
    # their first tile included; the home's own PEs, before the NoP, run ahead within the
    # buffers (RTL, Fig. 7 4x4 adjacent run: home PEs done at 372, remote ones at 508-518)
    nop_round = {}
    for ch in chips:
        if not ch.consumers or all(d == ch.chiplet for d in ch.consumers):
            continue
        src = chips[ch.consumers[0]].ps
        g0 = src.jobs[0].cfg
        pkts = g0.C1 * g0.H_in * math.ceil(g0.W_in / min(cfg.max_tile, g0.W_in))
        pkt = min(cfg.max_tile, g0.W_in) + 1
        nop_round[ch.chiplet] = len(src.sets) * pkts * (mcast_hop_cycles(
            tg.nop_router_buffer_flits, cfg.max_packet_flits, tg.nop_link_latency, pkt,
            tg.nop_flit_cycles) if pc.nop_mcast_rule else pkt * tg.nop_flit_cycles)
    # psum window: a chain link keeps psum_window PSUM packets in flight; each further window
    # waits for the PCREDIT round trip (route there and back + credit handling of a PSUM
    # packet: psum_beats x psum_flits + 1 flits in, psum_beats beats popped) -- across the NoP
    # this bounds the period of both chiplets of the link
    psum_round = {}
    for ch in chips:
        if ch.ps is None:
            continue
        g0 = ch.ps.jobs[0].cfg
        beats = g0.K1 * g0.P1 * g0.Q1
        npk = math.ceil(beats / cfg.psum_beats)
        for j in ch.ps.jobs:
            pchip = getattr(j, "psum_chip", None)
            if pchip is None:
                continue
            d = tg.index(pchip)
            rtt = lat(ch.chiplet, j.node, d, j.psum_dest) + lat(d, j.psum_dest, ch.chiplet, j.node) \
                + credit_handling(cfg.psum_beats * cfg.psum_flits + 1, cfg.psum_beats, cc, pc)
            t = math.ceil(npk / cfg.psum_window) * rtt
            for x in (ch.chiplet, d):
                psum_round[x] = max(psum_round.get(x, 0.0), t)
    terms = {}
    for c, r in pm.items():
        ps = chips[c].ps
        h = home_of[c]
        inj = r["period_terms"]["gpe_send"]
        remote = h != c
        if remote:
            inj = max(inj, inj * pc.nop_flit_cycles)
        g_in = ps.jobs[0].cfg
        pkt_in = min(cfg.max_tile, g_in.W_in) + 1
        mc = len(chips[h].consumers) > 1 or any(len(st.members) > 1 for st in ps.sets)
        far = max((mcast_lat if mc else (lambda a, b, x, y, _p: lat(a, b, x, y)))(h, nm.gpe, c, j.node, pkt_in)
                  for j in ps.jobs)
        nop_mc = nop_round.get(h, 0.0) if remote else 0.0
        if not remote and h in nop_round and pc.home_paced_by_nop:
            # the home's own PEs share each multicast packet with the NoP branch (all branches
            # take a flit in the same cycle, hdl/noc/router.py): they run ahead of the NoP
            # router's rule only by the whole packets the fork -> NoP router route holds
            src = chips[h].ps
            g0 = src.jobs[0].cfg
            pkt = min(cfg.max_tile, g0.W_in) + 1
            npk = len(src.sets) * g0.C1 * g0.H_in * math.ceil(g0.W_in / min(cfg.max_tile, g0.W_in))
            nop_mc = max(0, npk - route_held(pkt, fork=True)) * nop_round[h] / npk
            first[c] = send_start[h] + max(inj, nop_mc) + far
        else:
            first[c] = send_start[h] + max(inj, credit_round[h] - far, nop_mc) + far
        period = max(r["period"], inj if remote else 0.0, link_bound[c], credit_round[h],
                     psum_round.get(c, 0.0), nop_mc)
        g0 = ps.jobs[0].cfg
        beats = g0.K1 * g0.P1 * g0.Q1
        cp = ps.mapping.cp
        t_pe = r["period_terms"]["pe_tile"]
        chain = (cp - 1) * (pc.noc_hop_cycles + g0.P1 * g0.Q1 * cfg.psum_flits) if cp > 1 else 0.0
        fin[c] = first[c] + (r["rounds"] - 1) * period + t_pe + chain
        terms[c] = {"bar1_release": r1[c], "bar2_release": r2[c], "first_tile": first[c],
                    "period": period, "rounds": r["rounds"], "period_bound":
                    max({**r["period_terms"], "nop_rate": inj if remote else 0.0,
                         "nop_link": link_bound[c], "credit_window": credit_round[h],
                         "psum_window": psum_round.get(c, 0.0), "nop_mcast": nop_mc}.items(),
                        key=lambda kv: kv[1])[0]}
    # chains across chiplets (chain position = ch.chain[0])
    for c in sorted(pm, key=lambda c: chips[c].chain[0]):
        ps = chips[c].ps
        for j in ps.jobs:
            pchip = getattr(j, "psum_chip", None)
            if pchip is not None and tg.index(pchip) != c:
                d = tg.index(pchip)
                hop = lat(c, j.node, d, j.psum_dest) + psum_flits_tile[c] * pc.nop_flit_cycles
                fin[d] = max(fin[d], fin[c] + hop)
    # ---- OUT to the OA homes, DONEs, SEND completions, read-back ------------------------
    out_arrive = {}
    for c in pm:
        ps = chips[c].ps
        g0 = ps.jobs[0].cfg
        beats = g0.K1 * g0.P1 * g0.Q1
        for j in ps.jobs:
            oc = getattr(j, "out_chip", None)
            if oc is not None and j.role in (Role.LAST, Role.ONLY):
                h = tg.index(oc)
                t = fin[c] + lat(c, j.node, h, nm.gpe) + min(beats, cfg.out_words)
                out_arrive[h] = max(out_arrive.get(h, 0.0), t)
    pe_done = {c: fin[c] + max(lat(c, j.node, c, nm.ctrl) for j in chips[c].ps.jobs)
               + (min(chips[c].ps.jobs[0].cfg.K1 * chips[c].ps.jobs[0].cfg.P1 * chips[c].ps.jobs[0].cfg.Q1,
                      cfg.out_words) if any(j.role in (Role.LAST, Role.ONLY) for j in chips[c].ps.jobs) else 0)
               for c in pm}
    sends_done = {}
    for ch in chips:
        if ch.consumers:
            h = ch.chiplet
            if not pc.send_done_at_gpe:
                sends_done[h] = max(fin[d] - pm[d]["period_terms"]["pe_tile"] + lat(d, nm.pes[0], h, nm.gpe)
                                    for d in ch.consumers)
                continue
            # send.py: the SEND completes when its last flit leaves the engine into the Global
            # PE's router.  Toward a remote consumer: when the route to the NoP bottleneck
            # (route_held) buffers the whole SEND, the last flit is in at injection (it still has
            # its multicast route and the packets ahead of it to go); otherwise back-pressure
            # reaches the Global PE and the last flit enters as the consumer takes the last tile
            # in (stop 16's rule); the home's own PEs: when they took the last tile in
            t = []
            for d in ch.consumers:
                took = fin[d] - pm[d]["period_terms"]["pe_tile"] + lat(d, nm.pes[0], h, nm.gpe)
                src = chips[d].ps
                g0 = src.jobs[0].cfg
                pkt = min(cfg.max_tile, g0.W_in) + 1
                npk = terms[d]["rounds"] * len(src.sets) * g0.C1 * g0.H_in * math.ceil(
                    g0.W_in / min(cfg.max_tile, g0.W_in))
                if d != h and npk <= route_held(pkt):
                    t.append(send_start[h] + npk * pkt / pc.send_flits_per_cycle)
                else:
                    t.append(took)
            sends_done[h] = max(t)
    done, readq = {}, []
    for c in range(N):
        t = r2[c]
        i_bar2 = [i for i, o in enumerate(chips[c].ops) if o[0] == "bar"][1]
        i_wait = [i for i, o in enumerate(chips[c].ops) if o[0] == "wait"]
        i_wait = [i for i in i_wait if i > i_bar2]
        t += sum(words[c][i_bar2 + 1:(i_wait[0] if i_wait else len(words[c]))]) * ins
        for x in (pe_done.get(c), sends_done.get(c) if pc.sends_wait_consumers else None, out_arrive.get(c)):
            if x is not None:
                t = max(t, x)
        t += ins                                             # the WAIT completes
        done[c] = t
        if chips[c].windows:
            readq.append(c)
    # read-back to the host: one host port, windows queue in chiplet order of readiness; the
    # SEND (and the WAIT G after it) ends when the data reached the host + the CREDIT back, or
    # (readback_arrival=False) when its last flit has left the Global PE, i.e. once the host
    # has drained all but what the route buffers hold (router input buffers + NoP link stages)
    # buffers a read-back route holds: its own chiplet's NoC hops (Global PE -> gateway), the NoP
    # links (router buffer + link stages) and the host chiplet's NoC (gateway -> host node); a
    # buffer on the routes of k read-back windows is shared (1/k to each)
    def rb_route(c):
        if c == hchip:
            return [(("noc", c), _hops(nm.gpe, hnode) * cfg.router_buffer_flits)]
        res = [(("noc", c), _hops(nm.gpe, nm.gateway) * cfg.router_buffer_flits),
               (("noc_host",), _hops(nm.gateway, hnode) * cfg.router_buffer_flits)]
        res += [(("nop",) + tuple(l), tg.nop_router_buffer_flits + tg.nop_link_latency)
                for l in xy_route(ckx, c, hchip)]
        return res
    share = {}
    for c in readq:
        for r, _cap in rb_route(c):
            share[r] = share.get(r, 0) + 1

    def route_buffer(c):
        return sum(cap / share[r] for r, cap in rb_route(c))
    timeline = {c: {"pe_fin": fin.get(c), "pe_done": pe_done.get(c), "sends_done": sends_done.get(c),
                    "out_arrive": out_arrive.get(c), "wait_done": done[c]} for c in range(N)}
    host_t, rb_at_host = 0.0, {}
    for c in sorted(readq, key=lambda c: (done[c], c)):
        t = done[c]
        rb_ops = [i for i, o in enumerate(chips[c].ops) if o[0] == "send" and o[1].tag == TAG_READBACK]
        for k, w in enumerate(chips[c].windows):
            flits = w.n + math.ceil(w.n / cfg.max_tile)
            # the read-back SEND's instruction words (CMDW per changed register + CMD), then the
            # Global PE decoder
            t += (words[c][rb_ops[k]] if k < len(rb_ops) else 2) * ins + pc.gpe_cmd_cycles
            lc = lat(c, nm.gpe, hchip, hnode)
            send = flits / pc.send_flits_per_cycle
            if pc.readback_arrival:
                start = max(t, host_t - lc)
                arrive = start + send + lc
                host_t = rb_at_host[c] = arrive
                t = arrive + lat(hchip, hnode, c, nm.gpe) + ins
            else:
                # the SEND starts at once; the host port takes the windows' flits one after the
                # other (arrival order), and the SEND ends when its last flit has left the
                # Global PE: once the host has drained all of it but what the route holds
                arrive = max(t + lc, host_t) + send
                host_t = rb_at_host[c] = arrive
                t = max(t + send, arrive - lc - route_buffer(c)) + ins
        done[c] = t
    for c in range(N):
        done[c] += sum(1 for o in chips[c].ops[-1:] if o[0] == "end") * ins
    if pp.final_barrier:
        # BAR 3's ARRIVE follows the chiplet's read-back on the same route into the host's
        # chiplet, so it reaches there no earlier than that data reached the host
        r3, _ = barrier({c: max(done[c] - ins, rb_at_host.get(c, 0.0) - lat(c, nm.ctrl, master, nm.ctrl))
                         for c in range(N)})
        done = {c: r3[c] + ins for c in range(N)}
    per = [round(done[c], 1) for c in range(N)]
    return {"cycles": max(per), "chiplet_cycles": per, "terms": terms, "timeline": timeline,
            "bar2_last_arrival": last2, "nop_link_load": {f"{a}->{b}": v for (a, b), v in load.items()},
            "constants": {**{k: getattr(pc, k) for k in ("noc_hop_cycles", "nop_hop_cycles", "nop_flit_cycles",
                                                           "barrier_cycles", "instr_cycles", "gpe_cmd_cycles",
                                                           "host_flits_per_cycle", "send_flits_per_cycle",
                                                           "credit_overhead_cycles", "ibuf_slots")},
                          "credit_fixed_cycles": cc.credit_fixed_cycles},
            "provenance": {**pc.provenance, "credit_fixed_cycles": (
                "chiplet_cycles.ChipletCycles.credit_fixed_cycles (RTL-fitted on the 16-PE chiplet "
                "res3b_branch2b run, bench/chiplet_layer.py; no package run)")},
            "nop_flits": nop_flits(pp)}


def nop_flits(pp) -> int:
    """Flits on NoP links (one per flit per link hop, what the RTL's ``nop_flits`` counts)
    predicted from the compiled pass: host input to remote homes, input multicast trees, their
    CREDITs, psums + PCREDITs, remote OUT packets, DONE never (same chiplet), barrier ARRIVE /
    RELEASE flits, read-back to the host + its CREDITs."""
    from tessera.hdl.pe.config import Role
    from .topology import xy_route
    tg = pp.target
    cfg = tg.chiplet_cfg()
    ckx = tg.ckx
    chips = pp.chiplets
    N = len(chips)
    hops = lambda a, b: len(xy_route(ckx, a, b))
    tree = lambda a, ds: len({l for d in ds for l in xy_route(ckx, a, d)})
    hchip = tg.index(tg.host_addr[0])
    master = tg.index(tg.bar_master)
    mt = cfg.max_tile
    n = 0
    for ch in chips:
        if ch.consumers:
            src = chips[ch.consumers[0]].ps
            n += hops(hchip, ch.chiplet) * (src.in_words + math.ceil(src.in_words / mt))
            g0 = src.jobs[0].cfg
            pk_tile = g0.C1 * g0.H_in * math.ceil(g0.W_in / min(mt, g0.W_in))
            for s in src.sets:
                n += tree(ch.chiplet, ch.consumers) * len(s.tiles) * (g0.C1 * g0.H_in * g0.W_in + pk_tile)
                for d in ch.consumers:                        # one CREDIT per packet per member
                    n += hops(d, ch.chiplet) * len(s.tiles) * pk_tile * len(s.members)
    for ch in chips:
        if ch.ps is None:
            continue
        g0 = ch.ps.jobs[0].cfg
        beats = g0.K1 * g0.P1 * g0.Q1
        for j in ch.ps.jobs:
            pchip = getattr(j, "psum_chip", None)
            if pchip is not None and tg.index(pchip) != ch.chiplet:
                npk = math.ceil(beats / cfg.psum_beats)
                n += hops(ch.chiplet, tg.index(pchip)) * j.ntiles * (beats * cfg.psum_flits + 2 * npk)
            oc = getattr(j, "out_chip", None)
            if oc is not None and j.role in (Role.LAST, Role.ONLY):
                n += hops(ch.chiplet, tg.index(oc)) * j.ntiles * (beats + math.ceil(beats / cfg.out_words))
        for w in ch.windows:
            pass
    for ch in chips:
        for w in ch.windows:
            npk = math.ceil(w.n / mt)
            n += hops(ch.chiplet, hchip) * (w.n + 2 * npk)
    nbar = sum(1 for o in chips[0].ops if o[0] == "bar")
    n += nbar * (sum(hops(c, master) for c in range(N)) + tree(master, range(N)))
    return int(n)
