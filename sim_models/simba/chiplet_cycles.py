"""Cycle model of one compiled chiplet pass (Simba §3.1 chiplet: PEs, Global PE, NoC,
controller; §3.3 mapping) and the mapper adapter for one chiplet.

Predicts the cycles from the controller's ``start`` to its ``done`` (what the RTL bench
measures, contract item 6) of a pass produced by ``hdl/chiplet/compiler.py``.  Every term,
with its source (to be calibrated against the RTL chiplet when it runs):

* ``prologue``: TMO + RECV-input + BAR (host cue) + WAIT instructions (``instr_cycles`` = 3 per instruction: the
  controller docstring's fetch/decode/execute) + the Global PE decoder (``gpe_cmd_cycles`` = 5,
  hdl/global_pe/README "a command reaches its unit 5 cycles after it enters the register") +
  the host's input packets (in_words + one head per ``max_tile`` words) at
  ``host_flits_per_cycle`` = 1 (assumption: one flit per cycle on ``host_in``) + NoC latency
  gateway -> Global PE (XY hops x ``hop_cycles``, arch ``noc_hop_cycles``: RTL bench
  ``noc_throughput.json`` when present) + a WAIT.
* ``config``: the CFG / GROUP / RECV-output instructions, ``instr_cycles`` each (the
  controller sends one CFG flit per instruction; the NoC is idle then).
* ``first_delivery``: the first tile of every multicast set, sent one after the other by the
  Global PE at ``send_flits_per_cycle`` = 1 flit/cycle over all lanes (its one injection port;
  README/bench gpe_bandwidth: 1.00 flits/cycle unicast and multicast, head flits included; a
  multicast packet is injected once and replicated by the routers) + the farthest PE's hops.
* ``steady``: (tiles - 1) x ``period``; period = the slowest of
  - PE tile: ``pe_cycles.tile_cycles`` (RTL-measured visited MACs + fill/drain per role) of
    the pass's PEConfig, or the PE's result stream if slower (a non-LAST PE's K1 P1 Q1 psum
    beats as ``psum_flits`` = 3 flits each + a head per ``psum_beats`` beats; a LAST PE's
    beats + a head per ``out_words``: one flit per cycle on its NoC port);
  - Global PE injection: flits of one tile of every set (one round) at 1 flit/cycle, or one
    set's tile at its lane's credit-loop rate if slower: a multicast tile (one packet per
    row of W_in words) leaves only when every member holds a credit, so a lane carries at
    most ``credit_window`` packets per round trip of its farthest member (:func:`credit_rtt`:
    hops both ways x ``hop_cycles`` + the packet's flits + its words into the PE +
    ``credit_fixed_cycles`` + the wait for the rest of a coalesced credit batch), or the
    routers' multicast rule if slower (:func:`mcast_packet_cycles`: with buffers too small
    for a max packet beside a packet still there, 2 x pkt_flits + 2 x link_latency per
    multicast packet, all sets' packets in turn: they share the Global PE router's DATA VC;
    derived from hdl/noc/router.py and checked on the bare mesh by bench/noc_mcast.py);
  - Global PE ejection (its router's local output, 1 flit/cycle): one CREDIT flit per
    ``credit_batch`` DATA packets per member + the round's OUT words (+ heads) at
    ``recv_words_per_cycle`` = 0.94 (README RECV bench 0.9377 words/cycle);
  - controller issue: instructions per round (CMDW + CMD per SEND, GROUP re-writes) x
    max(``instr_cycles``, ``gpe_cmd_cycles`` per command).
* ``last_tile``: one tile of the slowest PE, + the reduction chain: (cp - 1) x (hop latency +
  one k1 burst of psums, P1 Q1 beats x 3 flits) + the LAST PE's OUT packet to the Global PE.
* ``epilogue``: WAIT (DONEs), the readback SEND (out_words + heads at 1 flit/cycle, + hops to
  the gateway), its completion, WAIT, END (instructions x ``instr_cycles``).

Calibration status (RTL runs, cocotb/Verilator; figures in build/bench/chiplet_layer.json).
No term is fitted on a 16-PE entry: the multicast rule and store-and-forward latency are the
router's (hdl/noc/router.py; bench/noc_mcast.py on the bare mesh), the ejection bound is one
flit per cycle at the Global PE's router, ``credit_fixed_cycles`` = 8 is the earlier estimate
(unchanged), ``tile_start_cycles`` and ``send_overhead_cycles`` were fitted on the 2x2 runs.
History of the 16-PE res3b_branch2b pass 0 (one multicast set of 16): the 2-row slice ran
27382 cycles with router buffers of 17 flits and one CREDIT per packet (29.4 % utilisation,
period 851 cycles per 240-flit tile) and 27363 with 32-flit buffers: not the buffers but the
Global PE's ejection port (16 CREDIT flits per 5-flit packet: 768 + OUT flits per round;
model 26330, -3.8 %).  With credits coalesced by 4 (pe_node ``credit_batch``) the whole pass
runs 47568 cycles (59.3 %), period 398: now the DATA credit loop (16 packets of window, 3 of
them waiting for their batch; 8 routers x 7 cycles to the farthest PE for a 5-flit
multicast packet), which the model, PE-bound before the store-and-forward term, put at 292.
With ``credit_window`` 32 (the default since): 37959 cycles, 74.4 %, PE-bound, model 37535
(-1.1 %); the seven default-plan entries of bench/chiplet_layer.py (3x3/1, 3x3/2, 1x1, 7x7/2,
K-sliced; one and two multicast sets; reduction chains) are all within -1.0 .. -4.7 %.  The
2x2 small-buffer passes (``--small``, credit_window 16 then): -8.9 .. +11.6 %, stride 2 -1.9 ..
-5.9 % (was -25/-27 % with 9-flit router buffers, where 6-flit multicast packets went one
at a time per hop, 14 cycles each, and tiles waited for data).
Flits: the model counts CREDITs as full batches (a lower bound: the NI's idle flush may send
a partial count); exact with ``credit_batch`` 1 (tests/test_run_layer_rtl.py).
Left out: NoC link contention other than the Global PE's own ports (e.g. psum and DATA sharing a
link), bank conflicts, the PSUM credit loop beyond ``pcredit_rtt_cycles``, the host's reaction
time after the input RECV opens.  Utilisation = useful MACs / (cycles x K0 C0 x PEs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .pe_cycles import PECycles, load_pe_cycles, tile_cycles


@dataclass(frozen=True)
class ChipletCycles:
    instr_cycles: float = 3.0          # controller: fetch, decode, execute (hdl/chiplet/controller.py)
    gpe_cmd_cycles: float = 5.0        # Global PE decoder: one command per 5 cycles (README)
    send_flits_per_cycle: float = 1.0  # Global PE SEND (bench gpe_bandwidth: 1.00)
    recv_words_per_cycle: float = 0.94 # Global PE RECV (bench gpe_bandwidth: 0.9377)
    host_flits_per_cycle: float = 1.0  # host_in port (assumption)
    hop_cycles: float = 2.0            # NoC router + link per hop (arch noc_hop_cycles)
    psum_flits: int = 3                # K0 x acc_width = 192 bits in 64-bit flits (contract item 1)
    psum_beats: int = 5                # beats per PSUM packet (PeNodeConfig.psum_beats)
    out_words: int = 16                # beats per OUT packet (PeNodeConfig.out_words)
    pcredit_rtt_cycles: float = 10.0   # PCREDIT round trip between chain neighbours (assumption)
    tile_start_cycles: float = 4.0     # PE node per tile: region full -> PE start, done -> next (fitted)
    send_overhead_cycles: float = 0.0  # Global PE per SEND on the round's critical path (fitted)
    credit_fixed_cycles: float = 8.0   # DATA credit loop beyond hops and packet length (fitted)
    source: str = ""


def default_constants(bench_dir=None) -> tuple[ChipletCycles, PECycles]:
    """Constants (NoC hop from the RTL bench when present) and the PE tile constants."""
    from .arch import load_arch
    arch = load_arch(bench_dir=bench_dir)
    try:
        from tessera.hdl.chiplet.packets import PeNodeConfig
        n = PeNodeConfig()
        extra = dict(psum_flits=n.psum_flits, psum_beats=n.psum_beats, out_words=n.out_words)
    except ImportError:                                           # pragma: no cover
        extra = {}
    cc = ChipletCycles(hop_cycles=float(arch.noc_hop_cycles),
                       source=f"noc_hop_cycles: {arch.provenance.get('noc_hop_cycles', 'arch')}", **extra)
    return cc, load_pe_cycles(bench_dir)


def cfg_get(cfg, name, default):
    return getattr(cfg, name, default)


def ibuf_slots(cfg, tile_words: int) -> int:
    """Input regions the PE node fills ahead: the NI's ``ibuf_slots`` when it has one (1: the
    PE's single buffer), else 2 when a tile fits half the input buffer (double buffer)."""
    try:
        from tessera.hdl.chiplet import pe_node
    except ImportError:                                          # pragma: no cover
        pe_node = None
    f = getattr(pe_node, "ibuf_slots", None)
    if f is not None:
        return int(f(cfg.pe))
    return 2 if tile_words <= cfg.pe.ibuf_words // 2 else 1


def _hops(a, b) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def pass_cycles(ps, cfg, cc: ChipletCycles | None = None, pc: PECycles | None = None,
                slots: int | None = None) -> dict:
    """Predicted cycles of a compiled pass, term by term (see the module docstring).
    ``slots``: input regions per PE node (default :func:`ibuf_slots`; 1 = the experiment
    without input/compute overlap)."""
    from tessera.hdl.chiplet.config import node_map
    if cc is None or pc is None:
        d_cc, d_pc = default_constants()
        cc, pc = cc or d_cc, pc or d_pc
    nm = node_map(cfg)
    mt = cfg.max_tile
    cc = replace(cc, psum_beats=cfg_get(cfg, "psum_beats", cc.psum_beats),
                 out_words=cfg_get(cfg, "out_words", cc.out_words),
                 psum_flits=-(-cfg.pe.K0 * cfg.pe.acc_width // cfg.word_bits))
    ins = lambda n: n * cc.instr_cycles
    # instruction counts per phase, from the assembled program (CMD = one command)
    words = ps.program.words
    ops = ps.ops
    # phases by op index: prologue = up to the first "wait"; config = until the first SEND;
    # steady = SENDs; epilogue = rest.  Instructions are counted from the assembled words of
    # each op (the controller's one assembly, hdl/chiplet/asm.py assemble_ops).
    from tessera.hdl.chiplet.asm import assemble_ops
    from tessera.hdl.chiplet.compiler import TAG_SEND
    op_words = assemble_ops(ops, cfg).op_words
    counts = {"prologue": 0, "config": 0, "send": 0, "epilogue": 0}
    ncmd = {"prologue": 0, "config": 0, "send": 0, "epilogue": 0}
    phase, seen_wait = "prologue", False
    for op, n in zip(ops, op_words):
        k = op[0]
        if phase == "prologue" and seen_wait:
            phase = "config"
        if k == "send" and op[1].tag == TAG_SEND:
            phase = "send"
        if phase == "send" and k == "wait":
            phase = "epilogue"
        if k == "wait":
            seen_wait = True
        elif k in ("recv", "send", "group"):
            ncmd[phase] += 1
        counts[phase] += n
    assert sum(op_words) == len(words)
    g0 = ps.jobs[0].cfg
    rounds = max(j.ntiles for j in ps.jobs)
    # per-round flits at the Global PE
    tile_words = g0.C1 * g0.H_in * g0.W_in
    tile_flits = tile_words + g0.C1 * g0.H_in * math.ceil(g0.W_in / min(mt, g0.W_in))
    n_sets = len(ps.sets)
    inj_round = n_sets * (tile_flits / cc.send_flits_per_cycle + cc.send_overhead_cycles)
    # credit loop: a multicast tile leaves only when every member has a credit; a member's
    # credit comes back one round trip after its packet left (hops both ways, the packet's
    # flits in, its words out of the NI FIFO into the PE, the CREDIT packet), so a set's lane
    # carries at most credit_window packets per round trip of its farthest member
    rtt = credit_rtt(ps, cfg, cc)
    pkt_flits = tile_flits / (g0.C1 * g0.H_in * math.ceil(g0.W_in / min(mt, g0.W_in)))
    # coalesced credits (credit_batch b): up to b - 1 completed packets wait for their CREDIT,
    # so b - 1 packets of the window are not in flight
    w_eff = max(1, cfg.credit_window - (cfg_get(cfg, "node_credit_batch", 1) - 1))
    lane_rate = min(1.0, w_eff * pkt_flits / rtt) if rtt > 0 else 1.0
    inj_round = max(inj_round, tile_flits / (lane_rate * cc.send_flits_per_cycle))
    # multicast is cut-through in the routers: a packet moves on only once it is whole in the
    # input buffer (its head is allocated the cycle after its tail was written) and every
    # branch's downstream VC has room for a max-length packet (hdl/noc/router.py).  When a
    # buffer cannot hold a max packet beside the previous packet (router_buffer_flits <
    # max_packet_flits + pkt_flits), the next packet waits until the previous one has left
    # the downstream buffer (down to B - max_packet_flits flits) and its credit is back:
    # pkt_flits to send + the drain + the link both ways (2 x link_latency) per packet
    # (:func:`mcast_packet_cycles`; bare 4x5 mesh, amaranth.sim: 12.0 cycles per 5-flit
    # packet at 17 flits, bench/noc_mcast.py)
    # All DATA packets enter the NoC through the same input VC of the Global PE's router
    # (DATA class -> one VC), so the rule serialises every multicast packet of the round,
    # whichever set it belongs to.
    n_pk = g0.C1 * g0.H_in * math.ceil(g0.W_in / min(mt, g0.W_in))
    n_mc = sum(1 for st in ps.sets if len(st.members) > 1)
    if n_mc:
        inj_round = max(inj_round, n_mc * n_pk * mcast_packet_cycles(cfg, pkt_flits)
                        + (n_sets - n_mc) * tile_flits)
    # the Global PE's NoC ejection port (the router's local output, one flit per cycle) takes
    # one CREDIT flit per DATA packet per member (contract item 3) and the round's OUT
    # packets (words + heads) at the RECV rate: a 16-member multicast of 5-flit packets
    # returns 16 credit flits per 5 flits sent
    beats = g0.K1 * g0.P1 * g0.Q1
    lasts = [j for j in ps.jobs if int(j.cfg.role) in (2, 3)]
    cred_round = sum(len(st.members) for st in ps.sets) * n_pk / cfg_get(cfg, "node_credit_batch", 1)
    out_round = len(lasts) * (beats + math.ceil(beats / cc.out_words)) / cc.recv_words_per_cycle
    ej_round = cred_round + out_round
    # PE tile (slowest role present): compute, stretched by a slower result stream; with one
    # input region (no double buffer) the next tile's words load while the PE is idle
    slots = ibuf_slots(cfg, tile_words) if slots is None else slots
    cp = ps.mapping.cp
    psum_link = beats * cc.psum_flits + math.ceil(beats / cc.psum_beats)
    t_pe = 0.0
    for j in ps.jobs:
        t = tile_cycles(j.cfg.as_dict(), pc)
        if cp > 1:
            # a chain member's drain runs at the psum link's pace (3 flits per beat); when the
            # receiver's psum FIFO (psum_window packets) holds less than a tile, the producer
            # also waits for PCREDITs from the receiver's drain (one round trip)
            t += psum_link - beats
            if beats > cfg_get(cfg, "psum_window", 2) * cc.psum_beats:
                t += cc.pcredit_rtt_cycles
        else:
            t = max(t, beats + math.ceil(beats / cc.out_words))
        t += cc.tile_start_cycles
        if slots == 1:
            t += tile_words
        t_pe = max(t_pe, t)
    ctrl_round = (counts["send"] * cc.instr_cycles) / rounds
    ctrl_round = max(ctrl_round, ncmd["send"] / rounds * cc.gpe_cmd_cycles)
    period = max(t_pe, inj_round, ej_round, ctrl_round)
    far = max(_hops(nm.gpe, j.node) for j in ps.jobs)
    chain = (cp - 1) * (cc.hop_cycles * 1 + g0.P1 * g0.Q1 * cc.psum_flits) if cp > 1 else 0.0
    out_lat = (max(_hops(j.node, nm.gpe) for j in lasts) * cc.hop_cycles + min(beats, cc.out_words)
               if lasts else 0.0)                         # package: a chain-middle chiplet
    in_flits = ps.in_words + math.ceil(ps.in_words / mt)
    out_flits = ps.out_words + math.ceil(ps.out_words / mt)
    terms = {
        "prologue": ins(counts["prologue"]) + cc.gpe_cmd_cycles + in_flits / cc.host_flits_per_cycle
        + _hops(nm.gateway, nm.gpe) * cc.hop_cycles,
        "config": ins(counts["config"]),
        "first_delivery": inj_round + (far * cc.hop_cycles if not n_mc else       # multicast: whole
                                       (far + 1) * (pkt_flits + cc.hop_cycles) - pkt_flits),  # packet per router
        "steady": (rounds - 1) * period,
        "last_tile": t_pe + chain + max(out_lat, out_round),
        "epilogue": ins(counts["epilogue"]) + cc.gpe_cmd_cycles + out_flits / cc.send_flits_per_cycle
        + _hops(nm.gpe, nm.gateway) * cc.hop_cycles,
    }
    total = sum(terms.values())
    bound = {"pe_tile": t_pe, "gpe_send": inj_round, "gpe_eject": ej_round, "controller": ctrl_round}
    macs_total = cfg.npes * cfg.pe.K0 * cfg.pe.C0
    return {"cycles": total, "terms": terms, "period": period, "period_bound": max(bound, key=bound.get),
            "period_terms": bound, "rounds": rounds,
            "utilization": ps.useful_macs / (total * macs_total),
            "compute_utilization": ps.useful_macs / ((terms["first_delivery"] + terms["steady"]
                                                       + terms["last_tile"]) * macs_total),
            "noc_flits": noc_flits(ps, cfg, cc), "ibuf_slots": slots}


def mcast_packet_cycles(cfg, pkt_flits: float) -> float:
    """Cycles per multicast packet on the routers' tree (router rule, hdl/noc/router.py): a
    packet starts on a hop only with room for a max-length packet downstream; if the buffer
    cannot hold that beside a packet still there, the next packet waits until the previous
    one has drained down to ``B - max_packet_flits`` flits: send (pkt_flits) + drain
    downstream (pkt_flits - (B - max_packet_flits)) + credit/link both ways (2 x
    link_latency); else one flit per cycle (:func:`mcast_hop_cycles`)."""
    return mcast_hop_cycles(cfg.router_buffer_flits, cfg.max_packet_flits, cfg.link_latency, pkt_flits)


def mcast_hop_cycles(buffer_flits, max_packet_flits, link_latency, pkt_flits, flit_cycles=1) -> float:
    """The router rule per multicast packet and hop (NoC or NoP router): bare 4x5 mesh in
    amaranth.sim (bench/noc_mcast.py, bench/package_mcast_rule.py): B=17, max 17, 5-flit
    packets 12.00 cycles (5 + 5 + 2); B=16, max 9, 8-flit packets 11.00 (8 + 1 + 2); B=32,
    max 17, 5 flits 5.00.  ``flit_cycles``: a serialised link (NoP GRS) sends a flit per that
    many cycles."""
    free = buffer_flits - max_packet_flits
    if pkt_flits > free:
        return (pkt_flits + (pkt_flits - free)) * flit_cycles + 2 * link_latency
    return pkt_flits * flit_cycles


def credit_rtt(ps, cfg, cc: ChipletCycles) -> float:
    """DATA credit round trip of the pass's farthest member (cycles): the packet to the member
    + its words out of the NI FIFO into the PE (one per cycle) + the CREDIT back (hops) +
    ``credit_fixed_cycles``.  To the member: unicast is wormhole (hops + the packet's flits);
    a multicast packet moves on only once it is whole in each router's input buffer (router
    rule), so every router on the way (hops + 1) costs the packet's flits + ``hop_cycles``
    (bare 4x5 mesh, bench/noc_mcast.py: the first 5-flit packet's tail reaches the PE 7 hops
    away 61 cycles after its head left = 5 + 8 x 7)."""
    from tessera.hdl.chiplet.config import node_map
    nm = node_map(cfg)
    g0 = ps.jobs[0].cfg
    w = min(cfg.max_tile, g0.W_in)
    far = max(_hops(nm.gpe, j.node) for j in ps.jobs)
    if any(len(st.members) > 1 for st in ps.sets):
        fwd = (far + 1) * (w + 1 + cc.hop_cycles)
    else:
        fwd = far * cc.hop_cycles + (w + 1)
    return fwd + w + far * cc.hop_cycles + cc.credit_fixed_cycles


def noc_flits(ps, cfg, cc: ChipletCycles) -> int:
    """Flits injected into the NoC during the pass (host input + CFG + DATA (multicast counted
    once) + CREDIT + PSUM + PCREDIT + OUT + DONE + readback + its CREDITs)."""
    mt = cfg.max_tile
    g0 = ps.jobs[0].cfg
    beats = g0.K1 * g0.P1 * g0.Q1
    n = ps.in_words + math.ceil(ps.in_words / mt)
    n += sum(1 for op in ps.ops if op[0] == "cfg")
    for s in ps.sets:
        pk_tile = g0.C1 * g0.H_in * math.ceil(g0.W_in / min(mt, g0.W_in))
        n += len(s.tiles) * (g0.C1 * g0.H_in * g0.W_in + pk_tile)
        # one CREDIT per credit_batch packets per member (pe_node coalescing; with
        # credit_batch > 1 a lower bound: the NI's idle flush may send a partial count)
        n += math.ceil(len(s.tiles) * pk_tile / cfg_get(cfg, "node_credit_batch", 1)) * len(s.members)
    for j in ps.jobs:
        if int(j.cfg.role) in (0, 1):
            pk = math.ceil(beats / cc.psum_beats)
            n += j.ntiles * (beats * cc.psum_flits + pk + pk)   # PSUM + PCREDIT
        else:
            n += j.ntiles * (beats + math.ceil(beats / cc.out_words))
        n += 1                                                   # DONE
    n += 2 * math.ceil(ps.out_words / mt) + ps.out_words         # readback + host CREDITs
    return int(n)


# ---------------------------------------------------------------------- mapper adapter
#: The stop-21 RTL terms of the Simba system model (simba_arch.json) at their pre-stop-21
#: values (all off).  The archs the chiplet / package RTL benches map with
#: (``chiplet_arch`` / ``package_cycles.package_arch`` default, hence ``map_for_chiplet`` /
#: ``map_for_package``, bench/chiplet_layer.py, bench/package_layer.py, tessera run-layer /
#: run-package) use these values, because the resolved RTL tables of issues 17 and 18 were
#: produced with the mappings the mapper chose without the terms; with them on it picks other
#: mappings (e.g. res3b_branch2b P1=3 Q1=4, 5 passes instead of P1=1 Q1=2, 4 passes) whose RTL
#: cycles were never measured.  Next step: re-run those RTL benches with ``rtl_terms=True``
#: mappings (16-PE Verilator builds, ~25 min each) and then drop this switch.
#: tests/test_simba_rtl_terms.py pins the bench mapping to the pre-stop-21 choice.
PRE_STOP21_TERMS = dict(barrier_cycles=0.0, pe_tile_start_cycles=0.0, psum_drain_in_tile=0,
                        mcast_cut_through=0, credit_window_packets=0, psum_window_packets=0,
                        packet_heads=0, credit_batch=0)


#: the project's RTL chiplet has its own controller (hdl/chiplet/controller.py: ctrl_instr_cycles per
#: word, a SEND per tile, the RTL package barrier), not the Simba runtime's RISC-V (rtcontrol.py):
#: every arch built for the RTL benches keeps the RTL controller, whatever simba_arch.json's default
RTL_CONTROLLER = dict(ctrl_mmio_config=0, ctrl_gpe_autonomous=0, ctrl_irq_done=0, ctrl_irq_barrier=0,
                      host_layer_ns=0.0)


def chiplet_arch(cfg, bench_dir=None, rtl_terms: bool = False):
    """The package model's Arch for one chiplet of ``cfg``: its PE count, PE buffers, 64-bit
    NoC flits (8 B per cycle), DATA packet size, PSUM packet beats and both credit windows;
    the Global PE capacity is not a mapper constraint (the compiler
    splits a layer into passes that fit it).  ``rtl_terms=False`` (the RTL benches' mapping
    arch): the stop-21 terms at ``PRE_STOP21_TERMS``; True: simba_arch.json's values."""
    from .arch import load_arch
    pe = cfg.pe
    a = load_arch(bench_dir=bench_dir, pes_per_chiplet=cfg.npes, k0=pe.K0, c0=pe.C0,
                  weight_buffer_bytes=pe.wbuf_bytes, input_buffer_bytes=pe.ibuf_bytes,
                  accum_entries=pe.abuf_entries, gpe_buffer_bytes=1 << 40,
                  noc_link_bytes_per_cycle=cfg.word_bits // 8, max_tile_words=cfg.max_tile,
                  psum_packet_beats=cfg.psum_beats, credit_window_packets=cfg.credit_window,
                  psum_window_packets=cfg.psum_window, **RTL_CONTROLLER)
    return a if rtl_terms else a.with_(**PRE_STOP21_TERMS)


def map_for_chiplet(layer, cfg, samples: int = 300, seed: int = 0, bench_dir=None):
    """Best single-chiplet mapping from the Simba mapper (sim_models/simba/mapper.py).  When
    the layer's weights do not fit the chiplet's PEs (the mapper has no K tiling above the PE),
    the mapper maps a K slice (K/n: n from the weight volume over the PEs' weight buffers, then
    n + 1, ... until a mapping is valid), the compiler then runs n or more passes over
    K.  Returns (LayerResult of the mapped (sub)layer, n)."""
    from .mapper import search
    from .model import MappingError
    arch = chiplet_arch(cfg, bench_dir)
    K0 = cfg.pe.K0
    # first guess: the layer's weights over the chiplet's weight buffers, then one more slice
    # at a time until the mapper finds a valid mapping
    n = max(1, -(-layer.R * layer.S * layer.C * layer.K // (cfg.npes * cfg.pe.wbuf_bytes)))
    while True:
        kb = -(-(-(-layer.K // n)) // K0) * K0
        sub = replace(layer, K=min(layer.K, kb))
        try:
            return search(sub, arch, 1, samples=samples, seed=seed), n
        except MappingError:
            if kb <= K0:
                raise
            n += 1
