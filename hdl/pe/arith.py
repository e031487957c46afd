"""Arithmetic building blocks of the Simba PE: shift-and-add (LUT) multipliers
and pipelined adder trees.

A ``*`` in Amaranth becomes a Yosys ``$mul`` cell, which ``synth_ecp5`` maps to
an 18x18 DSP whatever its width.  The PE keeps DSPs for the int8 MACs and
writes the other products (per-tile constants, configuration checks, MAC
lanes beyond ``mac_dsps``) as explicit partial products, so that the
synthesis result does not depend on the tool's DSP inference.
Left out: Booth recoding, carry-save compression.
"""
from __future__ import annotations

from amaranth import Module, Mux, Signal, unsigned
from amaranth.hdl import Value


def partial_products(a: Value, b: Value, width: int | None = None) -> list[Value]:
    """Terms whose sum is ``a * b`` (``b``'s sign bit weighted negative when
    ``b`` is signed).  ``width``: keep only the low ``width`` bits of each term
    (a product modulo 2**width; the terms are then unsigned)."""
    n = len(b)
    signed_b = b.shape().signed
    terms = []
    for i in range(n if width is None else min(n, width)):
        t = Mux(b[i], a, 0) << i
        if signed_b and i == n - 1:
            t = -t
        terms.append(t if width is None else t.as_unsigned()[:width])
    return terms


def tree_sum(m: Module, terms: list[Value], stages: int, name: str,
             width: int | None = None, en: Value | None = None) -> Value:
    """Sum ``terms`` in a balanced adder tree with ``stages`` register levels
    spread over the ceil(log2(len)) adder levels (the last level is always
    registered when ``stages`` >= 1).  ``width``: wrap the sum to ``width``
    unsigned bits (modular arithmetic).  Latency: ``stages`` cycles; ``en``:
    the registers load only while ``en`` is high (a stalling pipeline)."""
    levels = max(1, (len(terms) - 1).bit_length())
    if stages > levels:                  # more stages than adder levels: delay the sum
        out = tree_sum(m, terms, levels, name, width, en)
        for i in range(stages - levels):
            d = Signal(out.shape(), name=f"{name}_d{i}")
            if en is None:
                m.d.sync += d.eq(out)
            else:
                with m.If(en):
                    m.d.sync += d.eq(out)
            out = d
        return out
    # register after level l (1-based) when it ends a group of the split
    reg_after = {round(levels * (i + 1) / stages) for i in range(stages)} if stages else set()
    level = 0
    if len(terms) == 1:
        terms = [terms[0]]
    while True:
        if len(terms) > 1:
            terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i]
                     for i in range(0, len(terms), 2)]
        level += 1
        if width is not None:
            terms = [t.as_unsigned()[:width] for t in terms]
        if level in reg_after:
            regs = []
            for j, t in enumerate(terms):
                r = Signal(unsigned(width) if width is not None else t.shape(),
                           name=f"{name}_l{level}_{j}")
                if en is None:
                    m.d.sync += r.eq(t)
                else:
                    with m.If(en):
                        m.d.sync += r.eq(t)
                regs.append(r)
            terms = regs
        if level >= levels:
            return terms[0]


def lut_mul(m: Module, a: Value, b: Value, stages: int, name: str,
            width: int | None = None, en: Value | None = None) -> Value:
    """``a * b`` in LUTs with ``stages`` cycles of latency (0: combinational);
    ``width``: modulo 2**width."""
    return tree_sum(m, partial_products(a, b, width), stages, name, width, en)
