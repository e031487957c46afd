"""Registered signed multiplier cell of the PE's MAC array (Simba §3.1, the
vector MAC's multipliers) with a technology choice, as FPGA/ASIC IP does it.

``RegMult``: operand registers -> multiply -> product register, latency 2,
``p = a * b`` (signed, ``width`` <= 18 bits each, exact).  Both registers
reset synchronously to 0 with the domain's reset and load every cycle.

``impl`` (PE parameter ``mult_impl``, :data:`MULT_IMPLS`):

* ``"generic"``: behavioural Amaranth (fabric registers and ``*``).  The
  reference: amaranth.sim, Verilator and an ASIC flow use it.
* ``"ecp5"``: one Lattice ECP5 ``MULT18X18D`` instantiated with its own input
  registers (``REG_INPUTA_CLK``/``REG_INPUTB_CLK``) and output register
  (``REG_OUTPUT_CLK``), clock ``CLK0``, ``CE0`` = 1, ``RST0`` = the domain's
  reset (``RESETMODE`` SYNC): the same registers as ``"generic"``, inside the
  DSP.  ``synth_ecp5`` never packs fabric registers into a MULT18X18D, so
  without the primitive the operand and product registers sit in slices and
  the multiplier's 3.9 ns is framed by ~3-5 ns of routing on either side
  (measured, mac_array.py).  ``tessera.synth`` (the ECP5 flow) selects it
  (:data:`tessera.synth.TECH_PARAMS`, the one place of the choice); every
  other flow keeps the default ``"generic"``.  Measured (``python -m
  tessera.synth pe --grades 6``, ECP5-85k grade 6): the DSP path left the
  critical path (generic cells: 84.9-89.0 MHz, operand register -> 3.6-5.0 ns
  routing -> 3.9 ns MULT18X18D -> product register); with ``ecp5`` 97.1 MHz
  (start-decision control path), 103.4 MHz once that was registered (pe.py;
  critical path then the PPU's pool compare), 6,679 FF instead of 8,017.

Simulation of ``"ecp5"``: Yosys's ``ecp5/cells_sim.v`` has no MULT18X18D
model (only a black box in ``cells_bb.v``), so :data:`SIM_MODELS` lists a
behavioural one, ``ecp5_mult18x18d_sim.v`` in this folder; add it to the
Verilator/simulator sources (never to synthesis, where the primitive is the
vendor's).  amaranth.sim cannot simulate the ``Instance``.
``ecp5_mult``: the same primitive as a function for multipliers that stall
(the PPU's scale products, ``ppu.py``): input registers and, optionally, the
output register, all loading on ``en`` (``CE0``), reset as above; operands
of up to 18 bits, each signed or unsigned by its own shape.

Left out: the DSP's pipeline register, cascade/ALU54B, clock enables and
other vendors' primitives (add an ``impl`` and its model here).
"""
from __future__ import annotations

from pathlib import Path

from amaranth import ClockSignal, Module, ResetSignal, Signal, signed
from amaranth.hdl import Instance
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

MULT_IMPLS = ("generic", "ecp5")
# behavioural simulation models of the vendor primitives an ``impl`` instantiates
SIM_MODELS = {"generic": [], "ecp5": [Path(__file__).with_name("ecp5_mult18x18d_sim.v")]}
LATENCY = 2                                   # operand register + product register


def check_impl(impl: str) -> None:
    if impl not in MULT_IMPLS:
        raise ValueError(f"mult_impl must be one of {', '.join(MULT_IMPLS)}, got {impl!r}")


def ecp5_mult(m: Module, a, b, en, name: str, reg_out: bool = True) -> Signal:
    """One ECP5 ``MULT18X18D`` computing ``a * b`` (exact, 36 bits, two's complement)
    with its input registers and (``reg_out``) its output register, clock enable
    ``en``: latency 1 + ``reg_out``, like fabric registers loaded under ``en``.
    ``a``/``b``: at most 18 bits each (an unsigned operand of 18 bits cannot be
    represented: at most 17)."""
    for v, n in ((a, "a"), (b, "b")):
        w = len(v) + (0 if v.shape().signed else 1)
        if w > 18:
            raise ValueError(f"ecp5_mult {name}: operand {n} needs {w} signed bits, at most 18")
    a18, b18 = Signal(signed(18), name=f"{name}_a"), Signal(signed(18), name=f"{name}_b")
    p36 = Signal(signed(36), name=f"{name}_p")
    m.d.comb += [a18.eq(a), b18.eq(b)]
    ports = {"p_REG_INPUTA_CLK": "CLK0", "p_REG_INPUTB_CLK": "CLK0",
             "p_REG_OUTPUT_CLK": "CLK0" if reg_out else "NONE", "p_RESETMODE": "SYNC",
             "i_CLK0": ClockSignal(), "i_CE0": en, "i_RST0": ResetSignal(),
             "i_SIGNEDA": 1, "i_SIGNEDB": 1, "i_SOURCEA": 0, "i_SOURCEB": 0}
    for i in range(18):
        ports[f"i_A{i}"] = a18[i]
        ports[f"i_B{i}"] = b18[i]
        ports[f"i_C{i}"] = 0
    for i in range(36):
        ports[f"o_P{i}"] = p36[i]
    m.submodules[name] = Instance("MULT18X18D", **ports)
    return p36


class RegMult(wiring.Component):
    def __init__(self, width: int = 8, impl: str = "generic"):
        check_impl(impl)
        if not 1 <= width <= 18:
            raise ValueError(f"RegMult: width must be in 1..18, got {width}")
        self.width, self.impl = width, impl
        super().__init__({"a": In(signed(width)), "b": In(signed(width)),
                          "p": Out(signed(2 * width))})

    def elaborate(self, platform):
        m = Module()
        W = self.width
        if self.impl == "generic":
            aq, bq = Signal(signed(W)), Signal(signed(W))
            pq = Signal(signed(2 * W))
            m.d.sync += [aq.eq(self.a), bq.eq(self.b), pq.eq(aq * bq)]
            m.d.comb += self.p.eq(pq)
            return m
        # ecp5: MULT18X18D, inputs sign-extended to 18 bits, P[0:2W] is the exact product
        p36 = ecp5_mult(m, self.a, self.b, 1, "dsp")
        m.d.comb += self.p.eq(p36[:2 * W])
        return m
