"""cocotb testbench of the Simba Global PE (issue 4)."""
