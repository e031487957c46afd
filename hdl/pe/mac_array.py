"""Vector-MAC array of the Simba PE (Simba §3.1, Fig 1(c)): K0 vector MACs,
each a C0-lane int8 dot product, sharing one broadcast input vector.

``dot[k0] = sum_c0 w[k0][c0] * x[c0]``, exact (16 + log2(C0) bits, no
rounding), ``stages`` cycles after ``w``/``x`` (1: products and adder tree in
one cycle; 2: products registered, then the tree; more: registers spread over
the tree levels, and beyond 1 + log2(C0) delay registers after the tree).  The first ``dsps`` of the K0*C0 multipliers (row-major
k0, c0) are ``*`` (FPGA DSP blocks); the rest are shift-and-add in LUTs
(an ECP5-85k has 156 18x18 DSPs, fewer than three PEs' 192 MACs).
Accumulation is done by the PE around it.
Left out: clock gating of idle lanes, operand isolation, packing two int8
products into one DSP.
"""
from __future__ import annotations

from amaranth import Module, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .arith import partial_products, tree_sum


class MacArray(wiring.Component):
    def __init__(self, K0: int, C0: int, dsps: int | None = None, stages: int = 1):
        self.K0, self.C0 = K0, C0
        self.dsps = K0 * C0 if dsps is None else dsps
        self.stages = stages
        self.dot_width = 16 + max(1, (C0 - 1).bit_length()) + 1
        super().__init__({
            "w": In(data.ArrayLayout(data.ArrayLayout(signed(8), C0), K0)),
            "x": In(data.ArrayLayout(signed(8), C0)),
            "dot": Out(data.ArrayLayout(signed(self.dot_width), K0)),
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
                if k * self.C0 + c < self.dsps:
                    prod = w * x
                else:
                    prod = tree_sum(m, partial_products(w, x), 0, f"lm{k}_{c}")
                if self.stages >= 2:                     # product register
                    reg = Signal(signed(16), name=f"prod{k}_{c}")
                    m.d.sync += reg.eq(prod)
                    prod = reg
                prods.append(prod)
            tree_stages = self.stages - 1 if self.stages >= 2 else 1
            m.d.comb += self.dot[k].eq(tree_sum(m, prods, tree_stages, f"tree{k}"))
        return m
