"""A real 3-PE reduction chain (pe_chain, PE module instantiated 3x) on Verilator
against the golden model."""
import pytest

from tessera.tb.runner import run


@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", ["random_chain", "concurrent",
                                      "chain_ppu_overflow", "chain_start_while_busy",
                                      "chain_bad_pe_index", "chain_cfg_only_in_start_cycle"])
def test_pe_chain(testcase):
    run("pe_chain", {"n": 3}, "tessera.tb.pe.test_pe_chain", testcase=testcase, seed=5)
