"""Vector-MAC array of the Simba PE (Simba §3.1, Fig 1(c)): K0 vector MACs,
each a C0-lane int8 dot product, sharing one broadcast input vector.

One pipeline stage: ``dot[k0] = sum_c0 w[k0][c0] * x[c0]`` registered, exact
(16 + log2(C0) bits, no rounding).  Accumulation is done by the PE around it.
Left out: clock gating of idle lanes, operand isolation.
"""
from __future__ import annotations

from amaranth import Module, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out


class MacArray(wiring.Component):
    def __init__(self, K0: int, C0: int):
        self.K0, self.C0 = K0, C0
        self.dot_width = 16 + max(1, (C0 - 1).bit_length()) + 1
        super().__init__({
            "w": In(data.ArrayLayout(data.ArrayLayout(signed(8), C0), K0)),
            "x": In(data.ArrayLayout(signed(8), C0)),
            "en": In(1),
            "dot": Out(data.ArrayLayout(signed(self.dot_width), K0)),
        })

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            for k in range(self.K0):
                terms = [self.w[k][c] * self.x[c] for c in range(self.C0)]
                while len(terms) > 1:            # balanced adder tree
                    terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                             for i in range(0, len(terms), 2)]
                m.d.sync += self.dot[k].eq(terms[0])
        return m
