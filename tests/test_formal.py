"""SymbiYosys proofs: every ``fast`` proof of every block (``make formal`` runs all),
and a self-check that the runner reports a false property as a failure."""
from pathlib import Path

import pytest
from amaranth.hdl import Assert, Assume, Module, ResetSignal, Signal
from amaranth.lib import wiring

from tessera.formal import Proof, proofs, run_proof

FAST = sorted(n for n, p in proofs().items() if p.fast)


class _Counter(wiring.Component):
    """Harness for the runner self-check: a mod-5 counter, reset in cycle 0."""

    def __init__(self, bound):
        self.bound = bound
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        init = Signal(reset_less=True)          # 0 in cycle 0 only: reset then
        cnt = Signal(3)
        m.d.sync += init.eq(1)
        m.d.comb += Assume(ResetSignal() == ~init)
        m.d.sync += cnt.eq(cnt + 1)
        with m.If(cnt == 4):
            m.d.sync += cnt.eq(0)
        with m.If(init):
            m.d.comb += Assert(cnt < self.bound)
        return m


@pytest.mark.parametrize("bound,expect", [(5, "pass"), (4, "FAIL")])
def test_runner_reports_pass_and_fail(tmp_path: Path, bound, expect):
    r = run_proof(Proof(name=f"counter_lt{bound}", build=lambda: _Counter(bound),
                        doc="self-check", depth=8, mode="prove"), tmp_path)
    assert r["status"] == expect, r


@pytest.mark.parametrize("name", FAST)
def test_fast_proof(tmp_path: Path, name):
    r = run_proof(proofs()[name], tmp_path)
    assert r["status"] == "pass", f"{name}: {r['status']} ({r['log']}): {r['detail']}"
