"""A chain of N Simba PEs doing cross-PE reduction (Simba §3.1: partial sums
flow PE to PE over the NoC; Listing 1's C2 spatial loop over PEs).

All PEs get the same tile configuration; the chain sets the roles by position
(first PE FIRST, then MIDDLE, the last one LAST; ONLY for N = 1) and
broadcasts ``start``.  PE i's ``psum_out`` feeds PE i+1's ``psum_in`` directly
(the NoC hop is left out), so the N PEs compute concurrently and the
reduction streams through at one beat per cycle.  Loads carry the target PE
index; PPU parameters and the output stream belong to the last PE.

Export: the PE is emitted once as module ``pe`` and instantiated N times
(``Instance``), not duplicated as text.  The chain starts only as a whole
(every PE idle and every PE accepting the configuration, checked through the
PEs' ``cfg_cause``); load beats to a PE index >= N are dropped and counted in
``bad_loads``.  Left out: NoC transport between the PEs, per-PE tile
configurations.

Fit on an ECP5-85k (``python -m tessera.synth pe_chain --grades none``: Yosys
``synth_ecp5`` at the defaults, N = 3, ``mac_dsps`` = 32, ``mult_impl=ecp5``):
32,866 LUT4 (39 % of 83,640), 15,577 FF, 78 DP16KD (of 208), 112 MULT18X18D
(of 156: 3 x 32 MACs + the last PE's 16 PPU multipliers; the first two PEs'
PPUs have no output and are removed) -- it fits by cell counts (originally
244 MULT18X18D: address arithmetic on DSPs).  It places and routes (issue 20).
Timing: the start decision reads the PEs' combined ``cfg_cause`` from a
register (``cause_q``), so no PE's configuration check is in front of another
PE's start/sequencer (that path, ``pe1.chk_i_l4_0`` -> ``pe2.seq.c1``, held the
chain at 68.6 MHz); to keep the cycles, the PEs see the live ``cfg`` in the
start's cycle and ``cfg_q`` while the start is pending.  Measured (grade 6):
68.6 -> 73.2 MHz with the cause register alone (path then: the cfg select on
the combinational ``busy`` -> pe1 ``start_ready`` -> ``seq.c1``); the select
from the ``pend`` register and ``ibuf_half`` from ``cfg_q`` that cut it are not
measured yet.
With them (stop 30): 82.8 MHz, the path a MULT18X18D's output register -> 7.4 ns
routing -> the MAC's adder tree (the placer spreads the 3 PEs; the DSPs sit in
fixed rows).  The PE's ``mac_stages=4`` puts a fabric register on every product
before the tree (mac_array.py ``pq``): one MAC cycle more per tile, so it is an
option (``--param mac_stages=4``), the default stays 3.
"""
from __future__ import annotations

from amaranth import Cat, ClockSignal, Module, Mux, ResetSignal, Signal
from amaranth.back import verilog
from amaranth.hdl import Instance
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tessera.params import ParamError

from .config import Role
from .layouts import act_layout, bits_for, cfg_layout, iload_layout, pload_layout, wload_layout
from .pe import CHECK_LATENCY, SimbaPE

LEAF = "pe"


def _ports(sig, iface):
    """(verilog port name, is_input, value) of every port of a component interface."""
    for path, member, value in sig.flatten(iface):
        yield "__".join(str(p) for p in path), member.flow is In, value


class PEChain(wiring.Component):
    def __init__(self, n=3, **pe_params):
        if not 1 <= n <= 16:
            raise ParamError("n", f"must be in 1..16, got {n}")
        self.n = n
        pe_params.setdefault("mac_dsps", 32)        # 3 PEs x (32 + 16 PPU) <= an ECP5-85k's 156 DSPs
        self.leaf = SimbaPE(**pe_params)            # validates the PE parameters
        p = self.leaf.params
        sel = bits_for(n)
        super().__init__({
            "w_load": In(stream.Signature(data.StructLayout({"pe": sel, "beat": wload_layout(p)}))),
            "i_load": In(stream.Signature(data.StructLayout({"pe": sel, "beat": iload_layout(p)}))),
            "p_load": In(stream.Signature(pload_layout(p))),
            "out": Out(stream.Signature(act_layout(p))),
            "cfg": In(cfg_layout()),
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
            "error_cause": Out(4),
            "bad_loads": Out(16),      # load beats addressed to a PE index >= n (dropped)
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n
        sig = self.leaf.signature
        pes = [sig.create(path=(f"pe{i}",)) for i in range(n)]
        cfg_q = Signal(cfg_layout())        # the configuration of the last accepted start
        pend = Signal()                     # a start accepted, not yet decided
        for i, pe in enumerate(pes):
            kw = {"i_clk": ClockSignal(), "i_rst": ResetSignal()}
            for name, is_in, value in _ports(sig, pe):
                kw[("i_" if is_in else "o_") + name] = value
            m.submodules[f"pe{i}"] = Instance(LEAF, **kw)
            role = Role.ONLY if n == 1 else Role.FIRST if i == 0 else \
                Role.LAST if i == n - 1 else Role.MIDDLE
            # the live cfg but while a start is pending (so the PEs' check sees the
            # accepted cfg in the cycle of the start), the held one from the cycle after
            # until the start is decided; the PEs read cfg only there (their start is
            # decided the cycle after ``go``, from registers).  Select = ``pend``, a
            # register (timing: not the comb ``busy``); ``ibuf_half`` (checked live, not
            # delayed) always from cfg_q, so no select is in front of a PE's start_ready
            m.d.comb += [pe.cfg.eq(Mux(pend, cfg_q, self.cfg)), pe.cfg.role.eq(role),
                         pe.cfg.ibuf_half.eq(cfg_q.ibuf_half)]
            # loads addressed to this PE
            for name in ("w_load", "i_load"):
                src, dst = getattr(self, name), getattr(pe, name)
                hit = src.payload.pe == i
                m.d.comb += [dst.valid.eq(src.valid & hit), dst.payload.eq(src.payload.beat)]
            if i + 1 < n:
                wiring.connect(m, pe.psum_out, pes[i + 1].psum_in)
                m.d.comb += pe.out.ready.eq(0)          # FIRST/MIDDLE never emit on out
        m.d.comb += [pes[0].psum_in.valid.eq(0), pes[-1].psum_out.ready.eq(0)]
        bad = Signal(2)
        for j, name in enumerate(("w_load", "i_load")):
            src = getattr(self, name)
            out_of_range = src.payload.pe >= n
            m.d.comb += [src.ready.eq(Cat(*[getattr(pe, name).ready & (src.payload.pe == i)
                                            for i, pe in enumerate(pes)]).any() | out_of_range),
                         bad[j].eq(src.valid & out_of_range)]
        # beats to a PE that does not exist are accepted, dropped and counted (saturating)
        with m.If(bad.any() & (self.bad_loads < 0xFFFE)):
            m.d.sync += self.bad_loads.eq(self.bad_loads + bad[0] + bad[1])
        for pe in pes[:-1]:
            m.d.comb += [pe.p_load.valid.eq(0)]
        wiring.connect(m, wiring.flipped(self.p_load), pes[-1].p_load)
        wiring.connect(m, pes[-1].out, wiring.flipped(self.out))
        # the chain starts only as a whole: when every PE is idle and every PE
        # accepts the configuration; otherwise nothing starts and the first
        # PE's cause is reported (start while busy is ignored).  The PEs' check
        # is pipelined (``cfg_cause`` follows ``cfg`` after CHECK_LATENCY cycles):
        # the PEs see the start's cfg in its cycle (live cfg while idle, then cfg_q),
        # the chain registers the combined cause (``cause_q``, CHECK_LATENCY + 1
        # cycles after the start it belongs to) and starts every PE from registers
        # alone (timing: no PE's check logic in front of another PE's start; the
        # cycles are those of the comb cause one cycle later)
        cause = Signal(4)
        cause_q = Signal(4)
        c = 0
        for pe in reversed(pes):                       # first PE's cause wins
            c = Mux(pe.cfg_cause != 0, pe.cfg_cause, c)
        m.d.comb += cause.eq(c)
        m.d.sync += cause_q.eq(cause)
        wait = Signal(range(CHECK_LATENCY + 1))
        accept = self.start & ~self.busy
        go = pend & (wait == 0)
        for pe in pes:
            m.d.comb += pe.start.eq(go & (cause_q == 0))
        with m.If(accept):
            m.d.sync += [cfg_q.eq(self.cfg), pend.eq(1), wait.eq(CHECK_LATENCY),
                         self.error.eq(0), self.error_cause.eq(0)]
        with m.If(pend):
            m.d.sync += wait.eq(wait - 1)
            with m.If(go):
                m.d.sync += [pend.eq(0), self.error.eq(cause_q != 0),
                             self.error_cause.eq(cause_q)]
        m.d.comb += [self.busy.eq(Cat(*[pe.busy for pe in pes]).any() | pend),
                     self.done.eq(pes[-1].done)]
        return m


def chain_verilog(params: dict):
    """Leaf PE module once + the chain top that instantiates it."""
    top = PEChain(**params)
    leaf_text = verilog.convert(top.leaf, name=LEAF, emit_src=False)
    top_text = verilog.convert(top, name="pe_chain", emit_src=False)
    return leaf_text + "\n" + top_text, top
