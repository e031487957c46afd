"""cocotb testbench of the Simba chiplet controller (issue 17)."""
