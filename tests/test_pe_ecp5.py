"""``mult_impl="ecp5"`` (MAC multipliers as MULT18X18D primitives with their own
registers, the ECP5 synthesis flow's choice) is bit- and cycle-identical to the
generic reference: the multiplier cell at its boundary (both side by side, every
cycle, with resets), and a small PE (Verilator, with the primitive's behavioural
model) through the PE testbench's exact-cycle and golden-model checks (make soak)."""
import pytest

from tessera.tb.pe.vendor import mult_pair_verilog, run_pe, run_text

# small PE: 6 of 8 multipliers on DSPs (ecp5 cells), 2 in LUTs, operand registers
SMALL = {"K0": 4, "C0": 2, "acc_width": 20, "wbuf_bytes": 512, "ibuf_bytes": 256,
         "abuf_entries": 64, "ppu_depth": 4, "mac_dsps": 6, "mac_stages": 3,
         "ppu_mul_stages": 2, "mult_impl": "ecp5"}


@pytest.mark.cocotb
def test_ecp5_mult_cell_matches_generic():
    run_text("mult_pair", mult_pair_verilog(8, "ecp5"), "mult_pair", "tessera.tb.pe.test_mult",
             testcase="pair_random", env={"TESSERA_SEED": "5"})


# make test budget: the PE with ecp5 cells is a second small-PE Verilator build (~30 CPU-s);
# make test keeps the cell-level check above (ecp5 vs generic, every cycle, with resets) and
# runs the PE-level one in make soak.
@pytest.mark.slow
@pytest.mark.cocotb
@pytest.mark.parametrize("testcase", ["latency", "random_tiles", "reset_mid_tile", "back_to_back"])
def test_ecp5_pe_cycle_exact(testcase):
    run_pe(SMALL, "tessera.tb.pe.test_pe", testcase=testcase, seed=23)
