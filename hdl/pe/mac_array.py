"""Vector-MAC array of the Simba PE (Simba §3.1, Fig 1(c)): K0 vector MACs,
each a C0-lane int8 dot product, sharing one broadcast input vector.

``dot[k0] = sum_c0 w[k0][c0] * x[c0]``, exact (16 + log2(C0) bits, no
rounding), ``stages`` cycles after ``w``/``x``.

Without ``operand_reg`` (1: products and adder tree in one cycle; 2: products
registered, then the tree; more: registers spread over the tree levels, and
beyond 1 + log2(C0) delay registers after the tree), ``dot`` is registered.

With ``operand_reg`` (``stages`` >= 2; PE parameter ``mac_operand_reg``, on by
default): each DSP multiplier is a :class:`~tessera.hdl.pe.mult.RegMult` cell
(operand registers -> multiply -> product register; ``impl`` = PE parameter
``mult_impl``: ``generic`` fabric registers, or ``ecp5`` the MULT18X18D's own
input/output registers, which the ECP5 flow selects), LUT lanes get the same
registers in fabric; then the tree in two halves: ``half[k0][0/1]`` are the
sums of lanes [0, ceil(C0/2)) and the rest, registered after ``stages``
cycles; with ``stages`` = 3 (default) the one register after the product
register ends the half trees; with ``stages`` >= 4 each product is first
registered again in fabric (``pq{k}_{c}``, no logic between the DSP's output
register and it) and the other ``stages - 4`` registers + the half registers
are spread over the tree levels; ``dot`` is their (combinational) sum.  The
``pq`` register is for the multi-PE chain: with 3 PEs the placer spreads the
PEs over the device and the route from a MULT18X18D to its adder tree took
7.4 of the 12.1 ns critical path of ``pe_chain`` (82.8 MHz, stop 30).  The
last adder level moves out of the array into the PE's accumulate cycle
(three-input add as one carry chain), so the latency to the accumulator is
the same as without the operand register.

The first ``dsps`` of the K0*C0 multipliers (row-major k0, c0) are ``*``
(FPGA DSP blocks); the rest are shift-and-add in LUTs (an ECP5-85k has 156
18x18 DSPs, fewer than three PEs' 192 MACs).  Accumulation is done by the PE
around it.
Measured (``python -m tessera.synth pe``, ECP5-85k grade 6), generic cells:
with operand registers in fabric 89.0 MHz, critical path x operand register
-> 3.64 ns routing -> 3.93 ns inside MULT18X18D -> 3.15 ns routing -> product
register (nextpnr places the registers between the DSP column and the logic
they also connect to, and Yosys merges the K0 copies of each x operand
register); without them 84.9 MHz (76-93 MHz over runs: placement variance).
``synth_ecp5`` does not pack fabric registers into ECP5 DSPs, hence the
``ecp5`` cell (mult.py) for the ECP5 flow.
Left out: clock gating of idle lanes, operand isolation, packing two int8
products into one DSP.
"""
from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .arith import partial_products, tree_sum
from .mult import RegMult, check_impl


class MacArray(wiring.Component):
    def __init__(self, K0: int, C0: int, dsps: int | None = None, stages: int = 1,
                 operand_reg: bool = False, impl: str = "generic"):
        check_impl(impl)
        self.K0, self.C0 = K0, C0
        self.impl = impl
        self.dsps = K0 * C0 if dsps is None else dsps
        self.stages = stages
        self.operand_reg = bool(operand_reg)
        if self.operand_reg and stages < 2:
            raise ValueError("MacArray: operand_reg needs stages >= 2")
        if impl != "generic" and not self.operand_reg:
            raise ValueError(f"MacArray: impl {impl!r} needs operand_reg (the DSP's registers)")
        self.dot_width = 16 + max(1, (C0 - 1).bit_length()) + 1
        super().__init__({
            "w": In(data.ArrayLayout(data.ArrayLayout(signed(8), C0), K0)),
            "x": In(data.ArrayLayout(signed(8), C0)),
            "dot": Out(data.ArrayLayout(signed(self.dot_width), K0)),
            # operand_reg only: the two registered partial sums of each dot product
            "half": Out(data.ArrayLayout(data.ArrayLayout(signed(self.dot_width), 2), K0)),
        })

    @staticmethod
    def max_stages(C0: int) -> int:
        return 1 + max(1, (C0 - 1).bit_length())

    def elaborate(self, platform):
        m = Module()
        for k in range(self.K0):
            prods = []
            for c in range(self.C0):
                w, x = self.w[k][c], self.x[c]
                if self.operand_reg and k * self.C0 + c < self.dsps:
                    # operand register, multiply, product register: one RegMult cell
                    # (generic, or the DSP's own registers: mult.py)
                    cell = RegMult(8, self.impl)
                    m.submodules[f"mul{k}_{c}"] = cell
                    m.d.comb += [cell.a.eq(w), cell.b.eq(x)]
                    prods.append(cell.p)
                    continue
                if self.operand_reg:                     # operand registers by the multiplier
                    wq = Signal(signed(8), name=f"wop{k}_{c}")
                    xq = Signal(signed(8), name=f"xop{k}_{c}")
                    m.d.sync += [wq.eq(w), xq.eq(x)]
                    w, x = wq, xq
                if k * self.C0 + c < self.dsps:
                    prod = w * x
                else:
                    prod = tree_sum(m, partial_products(w, x), 0, f"lm{k}_{c}")
                if self.stages >= 2:                     # product register
                    reg = Signal(signed(16), name=f"prod{k}_{c}")
                    m.d.sync += reg.eq(prod)
                    prod = reg
                prods.append(prod)
            if self.operand_reg:
                tstages = self.stages - 2
                if self.stages >= 4:
                    # a fabric register on each product with no logic before it: the route
                    # from the DSP (fixed DSP rows) to the tree gets a cycle of its own
                    pq = []
                    for c, prod in enumerate(prods):
                        r = Signal(signed(16), name=f"pq{k}_{c}")
                        m.d.sync += r.eq(prod)
                        pq.append(r)
                    prods, tstages = pq, self.stages - 3
                n0 = (len(prods) + 1) // 2
                halves = [tree_sum(m, prods[:n0], tstages, f"tree{k}a"),
                          tree_sum(m, prods[n0:], tstages, f"tree{k}b")
                          if len(prods) > 1 else 0]
                for j, h in enumerate(halves):
                    m.d.comb += self.half[k][j].eq(h)
                m.d.comb += self.dot[k].eq(self.half[k][0] + self.half[k][1])
            else:
                tree_stages = self.stages - 1 if self.stages >= 2 else 1
                m.d.comb += self.dot[k].eq(tree_sum(m, prods, tree_stages, f"tree{k}"))
        return m
