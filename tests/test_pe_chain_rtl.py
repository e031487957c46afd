"""A real 3-PE reduction chain (pe_chain, PE module instantiated 3x) on Verilator
against the golden model; the cases run in one simulator process (tessera.tb.runner.run_case),
each reported by name."""
import pytest

from tessera.tb.runner import run_case


@pytest.mark.cocotb
@pytest.mark.xdist_group("pe_chain-3")
@pytest.mark.parametrize("testcase", ["random_chain", "concurrent",
                                      "chain_ppu_overflow", "chain_start_while_busy",
                                      "chain_bad_pe_index", "chain_cfg_only_in_start_cycle"])
def test_pe_chain(request, testcase):
    run_case(request, "pe_chain", {"n": 3}, "tessera.tb.pe.test_pe_chain", testcase, seed=5)
